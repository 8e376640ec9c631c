from ninja.errors import HttpError
from ninja.security import HttpBearer

from accounts.models import ApiToken

SAFE_METHODS = ("GET", "HEAD", "OPTIONS")


class ApiTokenAuth(HttpBearer):
    """`Authorization: Bearer lrl_…` for scripts; the browser uses its session instead.

    The scope is enforced here, once for every route: a read-only token may only read, so a new
    endpoint that changes something cannot forget the check.
    """

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
