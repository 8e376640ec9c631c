"""ASGI entry point: HTTP through Django, WebSockets through Channels (the run streams)."""

import gc
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

# What start-up made lives as long as the process: frozen out of the collector's reach, so that a full collection
# during a request no longer walks Django's ~130,000 long-lived objects. The compare page of 20 runs × 500 steps
# allocates enough to set one off every few requests: its p95 was 215 ms with them, about 110 ms frozen
# (benchmarks/compare_page_latency.py; docs/benchmarks/history.md).
gc.collect()
gc.freeze()
