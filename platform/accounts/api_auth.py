from ninja.security import HttpBearer

from accounts.models import ApiToken


class ApiTokenAuth(HttpBearer):
    """`Authorization: Bearer lrl_…` for scripts; the browser uses its session instead."""

    def authenticate(self, request, token):
        user = ApiToken.objects.authenticate(token)
        if user is not None:
            request.user = user
        return user
