"""ASGI entry point: HTTP through Django, WebSockets through Channels (the run streams)."""

import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings")

from django.core.asgi import get_asgi_application

django_asgi_app = get_asgi_application()

from django.conf import settings  # noqa: E402 - after Django is set up, above

if settings.SERVE_STATIC:
    from django.contrib.staticfiles.handlers import ASGIStaticFilesHandler

    django_asgi_app = ASGIStaticFilesHandler(django_asgi_app)

from channels.auth import AuthMiddlewareStack  # noqa: E402 - after Django is set up, above
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402 - after Django is set up, above
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402 - after Django is set up, above

import runs.routing  # noqa: E402 - after Django is set up, above

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        "websocket": AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter(runs.routing.websocket_urlpatterns))),
    }
)
