from functools import wraps

from django.contrib.auth.views import redirect_to_login
from django.http import JsonResponse
from ninja.errors import HttpError
from ninja.security import HttpBearer

from accounts.models import ApiToken

SAFE_METHODS = ("GET", "HEAD", "OPTIONS")


def _bearer(request) -> str | None:
    """The token of an ``Authorization: Bearer …`` header, or None where the request sends none: the one
    reading of the header, for the API (ApiTokenAuth) and its docs (login_or_token_required) alike."""
    scheme, _, raw = request.headers.get("Authorization", "").partition(" ")
    return raw.strip() if scheme.lower() == "bearer" else None


class ApiTokenAuth(HttpBearer):
    """`Authorization: Bearer lrl_…` for scripts; the browser uses its session instead.

    The scope is enforced here, once for every route: a read-only token may only read, so a new
    endpoint that changes something cannot forget the check.
    """

    def __call__(self, request):
        raw = _bearer(request)
        return None if raw is None else self.authenticate(request, raw)

    def authenticate(self, request, token):
        found = ApiToken.objects.find(token)
        if found is None:
            return None  # unknown, revoked or expired: 401
        if request.method not in SAFE_METHODS and not found.can_write:
            raise HttpError(403, f"the token {found.hint}… is read-only: create a token with the launch scope "
                                 "on the API tokens page to launch, cancel, resume, upload or curate")
        request.user = found.user
        request.api_token = found
        return found.user


def login_or_token_required(view):
    """For the API's docs and schema: a signed-in browser, or a script with a live API token (the
    ``leanrl`` CLI reads the schema); anyone else is sent to the login page."""
    @wraps(view)
    def guarded(request, *args, **kwargs):
        if not request.user.is_authenticated:
            raw = _bearer(request)
            if raw is None:
                return redirect_to_login(request.get_full_path())
            token = ApiToken.objects.find(raw)
            if token is None:  # a script's token that is wrong, revoked or expired: 401, as the API answers
                return JsonResponse({"detail": "Unauthorized"}, status=401)
            request.user = token.user
        return view(request, *args, **kwargs)

    return guarded
