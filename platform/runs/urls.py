from django.urls import path

from runs import views

app_name = "runs"
urlpatterns = [
    path("", views.run_list, name="list"),
    path("new/", views.launch, name="new"),
    path("compare/", views.compare, name="compare"),
    path("groups/<int:pk>/", views.group, name="group"),
    path("groups/<int:pk>/cancel/", views.cancel_group, name="cancel_group"),
    path("groups/<int:pk>/seeds/", views.add_group_seed, name="add_group_seed"),
    path("<int:pk>/", views.detail, name="detail"),
    path("<int:pk>/cancel/", views.cancel, name="cancel"),
    path("<int:pk>/rollouts/<str:rollout_key>/", views.live_rollout, name="live_rollout"),
    path("<int:pk>/resume/", views.resume, name="resume"),
    path("<int:pk>/checkpoints/<int:step>/<str:part>.zip", views.download_checkpoint, name="checkpoint"),
]
