from django.urls import path

from promptsets import views

app_name = "promptsets"

urlpatterns = [
    path("", views.promptset_list, name="list"),
    path("upload/", views.promptset_upload, name="upload"),
    path("import/", views.promptset_import, name="import"),
    path("uploads/<int:upload_pk>/", views.upload_status, name="upload_status"),
    path("<int:pk>/", views.promptset_detail, name="detail"),
    path("<int:pk>/versions/<int:number>/", views.version_detail, name="version"),
    path("<int:pk>/versions/<int:number>/curate/", views.curate_version, name="curate"),
    path("<int:pk>/versions/<int:number>/benchmark/", views.mark_benchmark, name="mark_benchmark"),
    path("<int:pk>/versions/<int:number>/export.<str:file_format>", views.export_version, name="export"),
    path("<int:pk>/problems/<int:problem_pk>/", views.problem_detail, name="problem"),
    path("<int:pk>/problems/<int:problem_pk>/variants/", views.problem_variants, name="variants"),
]
