"""The JSON API (django-ninja): each app contributes its own router; views and API call the same model methods."""

from ninja import NinjaAPI
from ninja.security import django_auth

from accounts.api_auth import ApiTokenAuth, login_or_token_required

from pipelines.api import router as pipelines_router
from promptsets.api import router as promptsets_router
from promptsets.benchmarks_api import router as benchmarks_router
from proofs.api import router as proofs_router
from runs.api import router as runs_router

# The docs and the schema need a login (or an API token, for the leanrl CLI) like every page: they
# map the whole attack surface.
api = NinjaAPI(title="Lean RL platform", version="1", auth=[ApiTokenAuth(), django_auth],
               docs_decorator=login_or_token_required)
api.add_router("/promptsets/", promptsets_router)
api.add_router("/runs/", runs_router)
api.add_router("/proofs/", proofs_router)
api.add_router("/benchmarks/", benchmarks_router)
api.add_router("/pipelines/", pipelines_router)
