"""A run's Lean client knows which verifier judges it from the server's first answer (its /health check at
start-up): the stand-in marks every response with X-Lean-Standin, a real kimina-lean-server sends no such header.
The run names that verifier on every answer it publishes, those that reached no verifier included
(RolloutFinished.verified_by)."""

import asyncio
import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from trainer.verification.client import LeanVerifier
from trainer.verification.verdicts import Verifier


class _KiminaHealth(BaseHTTPRequestHandler):
    """A real kimina-lean-server's /health as far as this claim goes (Lean does not run here): 200, no stand-in
    header."""

    def do_GET(self):  # http.server calls the handler of a GET by this name
        body = json.dumps({"status": "ok"}).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format, *args):  # quiet: the test's output is its assertions
        pass


def verifier_after_health(url, helpers):
    async def go():
        verifier = LeanVerifier(helpers.make_config(url).verifier, environment="verifier-test")
        try:
            before = verifier.verified_by
            await verifier.health()
            return before, verifier.verified_by
        finally:
            await verifier.aclose()

    return asyncio.run(go())


def test_the_standins_health_answer_makes_the_verifier_the_standin(fresh_standin, helpers):
    assert verifier_after_health(fresh_standin.url, helpers) == (None, Verifier.STANDIN)


def test_a_server_without_the_standin_header_is_real_lean(helpers):
    server = ThreadingHTTPServer(("127.0.0.1", 0), _KiminaHealth)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        assert verifier_after_health(f"http://127.0.0.1:{server.server_port}", helpers) == (None, Verifier.LEAN)
    finally:
        server.shutdown()
        server.server_close()
