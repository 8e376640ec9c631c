"""``python -m trainer lean-standin``: serve the stand-in Lean server on a port."""

from __future__ import annotations

import argparse
import sys

from trainer.verification.line_numbering import LineNumbering
from trainer.verification.standin_server import StandinSettings, serve


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1", help="Interface to listen on (default: loopback only).")
    parser.add_argument("--port", type=int, default=12332, help="TCP port (default: 12332, verifier.url's default).")
    parser.add_argument(
        "--latency-ms", type=float, default=0.0,
        help="Fixed time each proof holds a slot, to emulate Lean's checking time in benchmarks (default: 0).",
    )
    parser.add_argument(
        "--max-concurrency", type=int, default=64,
        help="Proofs checked at once, like a pool of this many Lean REPLs; the rest queue (default: 64).",
    )
    parser.add_argument(
        "--max-wait-s", type=float, default=60.0,
        help="A proof that waits this long for a free slot fails its request with 429, as the real server does.",
    )
    parser.add_argument("--api-key", default=None, help="Require 'Authorization: Bearer KEY' on every request.")
    parser.add_argument(
        "--line-numbering", choices=["after-header", "as-sent"], default="after-header",
        help="Which kimina-lean-server build to imitate: 'after-header' counts message lines after the import "
             "header it strips (the 2.0.0 image deploy/ pins), 'as-sent' counts lines of the code as sent (the "
             "server since its fix #56 of 2025-10-24). The trainer probes for either (default: after-header).",
    )


def main(args: argparse.Namespace) -> int:
    if args.max_concurrency < 1:
        print(f"--max-concurrency must be at least 1, got {args.max_concurrency}", file=sys.stderr)
        return 2
    if args.latency_ms < 0:
        print(f"--latency-ms must be 0 or more, got {args.latency_ms}", file=sys.stderr)
        return 2
    settings = StandinSettings(
        latency_s=args.latency_ms / 1000.0,
        max_concurrency=args.max_concurrency,
        max_wait_s=args.max_wait_s,
        api_key=args.api_key or None,
        line_numbering=LineNumbering(args.line_numbering),
    )
    print(
        f"stand-in Lean server (not Lean: decides a small arithmetic fragment) on http://{args.host}:{args.port}, "
        f"numbering message lines {args.line_numbering}",
        file=sys.stderr,
        flush=True,
    )
    serve(settings, host=args.host, port=args.port)
    return 0
