"""The JSON API (django-ninja): each app contributes its own router; views and API call the same model methods."""

from ninja import NinjaAPI
from ninja.security import django_auth

from accounts.api_auth import ApiTokenAuth

from promptsets.api import router as promptsets_router
from proofs.api import router as proofs_router
from runs.api import router as runs_router

api = NinjaAPI(title="Lean RL platform", version="1", auth=[ApiTokenAuth(), django_auth])
api.add_router("/promptsets/", promptsets_router)
api.add_router("/runs/", runs_router)
api.add_router("/proofs/", proofs_router)
