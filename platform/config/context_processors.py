from django.conf import settings


def platform(request):
    """Every page says whether Lean verdicts come from the stand-in server."""
    return {"lean_server_is_standin": settings.LEAN_SERVER_IS_STANDIN}
