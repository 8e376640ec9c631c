from django.urls import path

from pipelines import views

app_name = "pipelines"
urlpatterns = [
    path("", views.pipeline_list, name="list"),
    path("new/", views.launch, name="new"),
    path("<int:pk>/", views.detail, name="detail"),
    path("<int:pk>/lineage/", views.lineage_page, name="lineage"),
    path("<int:pk>/cancel/", views.cancel, name="cancel"),
    path("<int:pk>/retry/", views.retry, name="retry"),
    path("checkpoints/<int:pk>/", views.checkpoint, name="checkpoint"),
]
