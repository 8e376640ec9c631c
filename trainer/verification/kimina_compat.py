"""The one place that imports ``kimina_client``, with the workaround its 0.2.1 release needs.

kimina-client 0.2.1 declares its REPL models with ``typing.TypedDict``; on Python < 3.12
pydantic refuses those ("Please use `typing_extensions.TypedDict`"), so ``import
kimina_client`` fails on our Python 3.11. The upstream fix was never released. While the
package's modules are first imported we let ``typing`` hand out the ``typing_extensions``
versions, then put ``typing`` back as it was.

``tests/verification/test_kimina_client_workaround.py`` fails once a fixed release imports
cleanly on its own: then delete this shim and import ``kimina_client`` directly.
"""

from __future__ import annotations

import sys
import threading
import typing

import typing_extensions

_import_lock = threading.Lock()


def _import_kimina_client():
    with _import_lock:
        if "kimina_client" in sys.modules:
            return sys.modules["kimina_client"]
        needs_workaround = sys.version_info < (3, 12)
        saved = (typing.TypedDict, typing.NotRequired)
        if needs_workaround:
            typing.TypedDict = typing_extensions.TypedDict
            typing.NotRequired = typing_extensions.NotRequired
        try:
            import kimina_client
        finally:
            typing.TypedDict, typing.NotRequired = saved
        # Its __init__ calls colorama.init(autoreset=True), which wraps sys.stdout and, on a
        # terminal, appends colour resets to every write: our JSON-lines output stays plain.
        import colorama

        colorama.deinit()
        return kimina_client


kimina_client = _import_kimina_client()

AsyncKiminaClient = kimina_client.AsyncKiminaClient
KiminaClient = kimina_client.KiminaClient
CheckRequest = kimina_client.CheckRequest
CheckResponse = kimina_client.CheckResponse
ReplResponse = kimina_client.ReplResponse
Snippet = kimina_client.Snippet
SnippetStatus = kimina_client.SnippetStatus

__all__ = [
    "AsyncKiminaClient",
    "CheckRequest",
    "CheckResponse",
    "KiminaClient",
    "ReplResponse",
    "Snippet",
    "SnippetStatus",
    "kimina_client",
]
