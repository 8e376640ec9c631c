from django.conf import settings
from django.urls import reverse


def platform(request):
    """Every page says whether Lean verdicts come from the stand-in server, and where the docs site is."""
    return {"lean_server_is_standin": settings.LEAN_SERVER_IS_STANDIN, "docs_url": reverse("docs-home")}
