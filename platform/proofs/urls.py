from django.urls import path

from proofs import views

app_name = "proofs"
urlpatterns = [
    path("<int:pk>/", views.detail, name="detail"),
    path("<int:pk>/group/", views.group, name="group"),
]
