from django.contrib import admin
from django.contrib.auth import views as auth_views
from django.urls import include, path
from django.views.generic import RedirectView

from config import docs
from config.api import api
from runs import observability

urlpatterns = [
    path("", RedirectView.as_view(pattern_name="runs:list", permanent=False)),
    path("login/", auth_views.LoginView.as_view(), name="login"),
    path("logout/", auth_views.LogoutView.as_view(), name="logout"),
    path("account/", include("accounts.urls")),
    path("promptsets/", include("promptsets.urls")),
    path("runs/", include("runs.urls")),
    path("proofs/", include("proofs.urls")),
    path("benchmarks/", include("proofs.benchmark_urls")),
    path("pipelines/", include("pipelines.urls")),
    path("api/", api.urls),
    path("admin/", admin.site.urls),
    path("docs/", docs.page, name="docs-home"),
    path("docs/<path:path>", docs.page, name="docs-page"),
    path("healthz", observability.health, name="health"),
    path("readyz", observability.readiness, name="readiness"),
    path("readyz/<str:dependency>", observability.readiness, name="readiness-of"),
    path("metrics", observability.metrics, name="metrics"),
]
