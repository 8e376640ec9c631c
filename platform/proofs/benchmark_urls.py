"""The benchmark pages: the proofs app's, since a leaderboard reads runs' evaluations and their samples."""

from django.urls import path

from proofs import views

app_name = "benchmarks"
urlpatterns = [
    path("", views.benchmark_list, name="list"),
    path("<int:pk>/", views.benchmark_page, name="detail"),
]
