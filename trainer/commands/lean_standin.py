"""``python -m trainer lean-standin``: serve the stand-in Lean server on a port."""

from __future__ import annotations

import argparse
import sys

from trainer.fields import read_value, split_assignment
from trainer.verification.line_numbering import LineNumbering
from trainer.verification.standin_server import LatencyDistribution, ReplFault, ReplFaults, StandinSettings, serve


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--host", default="127.0.0.1", help="Interface to listen on (default: loopback only).")
    parser.add_argument("--port", type=int, default=12332, help="TCP port (default: 12332, verifier.url's default).")
    parser.add_argument(
        "--latency-ms", type=float, default=0.0,
        help="Time each proof holds a slot, to emulate Lean's checking time in benchmarks: every proof's with "
             "--latency-sigma 0, else the mean of a log-normal (default: 0).",
    )
    parser.add_argument(
        "--latency-sigma", type=float, default=0.0,
        help="Spread of the log-normal latency (the sigma of its logarithm; Lean's times are long-tailed, 1.0 is a "
             "heavy tail); 0 keeps every proof at --latency-ms (default: 0).",
    )
    parser.add_argument(
        "--timeout-share", type=float, default=0.0,
        help="Share of proofs, between 0 and 1, that run to the request's timeout and answer Lean's timeout error, as "
             "proofs Lean gives up on (default: 0).",
    )
    parser.add_argument("--latency-seed", type=int, default=0,
                        help="Seed of the latency draws, so a benchmark's latencies repeat (default: 0).")
    parser.add_argument(
        "--max-concurrency", type=int, default=64,
        help="Proofs checked at once, like a pool of this many Lean REPLs; the rest queue (default: 64).",
    )
    parser.add_argument(
        "--max-wait-s", type=float, default=60.0,
        help="A proof that waits this long for a free slot fails its request with 429, as the real server does.",
    )
    parser.add_argument(
        "--import-latency-ms", type=float, default=0.0,
        help="What starting a REPL for an import header costs, as Lean loading Mathlib; paid again by the next proof "
             "after a timeout killed its REPL, as on the real server (default: 0).",
    )
    parser.add_argument(
        "--fault", action="append", default=[], metavar="KIND=SHARE",
        help="Make a share of the proofs, between 0 and 1, meet a failure of the real server's REPL pool, answered as "
             "it answers it: " + ", ".join(kind.value for kind in ReplFault) + " (see docs/guide/stand-in.md). "
             "Repeat for several kinds. A proof carrying the comment '-- lean-standin fault: KIND' always meets it.",
    )
    parser.add_argument("--fault-seed", type=int, default=0,
                        help="Seed of the fault draws, so a benchmark's faults repeat (default: 0).")
    parser.add_argument("--api-key", default=None,
                        help="Require 'Authorization: Bearer KEY' on every check (GET /health stays open, as on the "
                             "real server).")
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
    try:
        latency = (LatencyDistribution(args.latency_ms / 1000.0, args.latency_sigma, args.timeout_share, args.latency_seed)
                   if args.latency_sigma or args.timeout_share else None)
    except ValueError as error:
        print(f"--latency-sigma/--timeout-share: {error}", file=sys.stderr)
        return 2
    try:
        repl_faults = ReplFaults(_fault_shares(args.fault), args.fault_seed)
    except ValueError as error:
        print(f"--fault: {error}", file=sys.stderr)
        return 2
    if args.import_latency_ms < 0:
        print(f"--import-latency-ms must be 0 or more, got {args.import_latency_ms}", file=sys.stderr)
        return 2
    settings = StandinSettings(
        latency_s=args.latency_ms / 1000.0,
        latency=latency,
        max_concurrency=args.max_concurrency,
        max_wait_s=args.max_wait_s,
        api_key=args.api_key or None,
        line_numbering=LineNumbering(args.line_numbering),
        repl_faults=repl_faults,
        import_latency_s=args.import_latency_ms / 1000.0,
    )
    latency_words = (f"log-normal latency, mean {args.latency_ms:g} ms, sigma {args.latency_sigma:g}, "
                     f"{args.timeout_share:.0%} running to the timeout" if latency else f"latency {args.latency_ms:g} ms")
    fault_words = "".join(f", {share:.1%} {kind.value}" for kind, share in repl_faults.shares.items())
    print(
        f"stand-in Lean server (not Lean: decides a small arithmetic fragment) on http://{args.host}:{args.port}, "
        f"numbering message lines {args.line_numbering}, {latency_words}{fault_words}",
        file=sys.stderr,
        flush=True,
    )
    serve(settings, host=args.host, port=args.port)
    return 0


def _fault_shares(given: list[str]) -> dict[str, float]:
    """``["crash=0.01", …]`` as ``{"crash": 0.01, …}``; raises ValueError naming the bad item and the fix."""
    kinds = ", ".join(kind.value for kind in ReplFault)
    shares: dict[str, float] = {}
    for item in given:
        kind, share = split_assignment(item, shape="KIND=SHARE", example="crash=0.01")
        if kind not in {known.value for known in ReplFault}:
            raise ValueError(f"{kind!r} is not a fault the stand-in knows; give one of {kinds}")
        value = read_value(share)
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ValueError(f"{item!r}: the share {share!r} is not a number; give one between 0 and 1")
        shares[kind] = float(value)
    return shares
