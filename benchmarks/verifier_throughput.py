"""Proofs per second through the Lean client, against the stand-in emulating a REPL pool.

The stand-in runs in its own process with a fixed per-proof latency and a concurrency limit
(a pool of REPLs), so the best any client can do is the ceiling, concurrency ÷ latency.
Measured in one run, on the same distinct proofs (no cache hits):

* ours: ``LeanVerifier`` (kimina-client's models over our pooled httpx), max_in_flight = the pool
* kimina-client's sync ``KiminaClient.check()`` with its defaults (batch 8, 5 workers)
* kimina-client's ``AsyncKiminaClient.check()`` sized to the pool (batch 8, pool/8 workers)

Goal: ours at least 90% of the ceiling, and ahead of ``check()``.

Rerun:  .venv/bin/python benchmarks/verifier_throughput.py [--proofs 384 --latency-ms 1000 --concurrency 64 --rounds 2]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import io
import logging
import os
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from trainer.config import RunConfig
from trainer.recipe.problems import Problem
from trainer.verification.checked_code import build_checked_code
from trainer.verification.client import LeanVerifier
from trainer.verification.kimina_compat import AsyncKiminaClient, KiminaClient, Snippet

def distinct_proofs(count: int) -> list[str]:
    """``count`` different checked codes the stand-in decides (valid), so nothing is cached."""
    problem = Problem("bench", "theorem bench : (2 : ℕ) + 2 = 4 := by")
    return [str(build_checked_code(problem, f"\n  norm_num\n  -- attempt {index}")) for index in range(count)]


@contextlib.contextmanager
def standin_process(latency_ms: float, concurrency: int):
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    root = Path(__file__).resolve().parents[1]
    process = subprocess.Popen(
        [sys.executable, "-m", "trainer", "lean-standin", "--port", str(port), "--latency-ms", str(latency_ms),
         "--max-concurrency", str(concurrency), "--max-wait-s", "600"],
        cwd=root, env={**os.environ, "PYTHONPATH": str(root)}, stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                httpx.get(url + "/health", trust_env=False)
                break
            except httpx.TransportError:
                if time.monotonic() > deadline:
                    raise RuntimeError("the stand-in did not start") from None
                time.sleep(0.1)
        yield url
    finally:
        process.terminate()
        process.wait(timeout=10)


def run_ours(url: str, proofs: list[str], concurrency: int) -> tuple[float, int]:
    config = RunConfig.from_preset("h100x8", {"verifier": {"url": url, "max_in_flight": concurrency}})

    async def go():
        verifier = LeanVerifier(config.verifier, environment="bench")
        try:
            # Its line-numbering probe is a start-up cost (a run makes it once, before step 1), not throughput.
            await verifier.line_numbering()
            started = time.perf_counter()
            results = await verifier.verify_many((code, f"r{index}") for index, code in enumerate(proofs))
            return time.perf_counter() - started, sum(result.verdict.value == "valid" for result in results)
        finally:
            await verifier.aclose()

    return asyncio.run(go())


def run_kimina_sync_defaults(url: str, proofs: list[str]) -> tuple[float, int]:
    client = KiminaClient(api_url=url)
    snippets = [Snippet(id=f"k{index}", code=code) for index, code in enumerate(proofs)]
    started = time.perf_counter()
    with contextlib.redirect_stderr(io.StringIO()):  # its progress bar
        response = client.check(snippets)
    elapsed = time.perf_counter() - started
    return elapsed, sum(result.analyze().status.value == "valid" for result in response.results)


def run_kimina_async(url: str, proofs: list[str], concurrency: int) -> tuple[float, int]:
    async def go():
        client = AsyncKiminaClient(api_url=url)
        snippets = [Snippet(id=f"a{index}", code=code) for index, code in enumerate(proofs)]
        try:
            started = time.perf_counter()
            response = await client.check(snippets, batch_size=8, max_workers=max(1, concurrency // 8), show_progress=False)
            return time.perf_counter() - started, sum(r.analyze().status.value == "valid" for r in response.results)
        finally:
            await client.close()

    return asyncio.run(go())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--proofs", type=int, default=384, help="Proofs per contender per round.")
    parser.add_argument("--latency-ms", type=float, default=1000.0, help="The stand-in's fixed time per proof.")
    parser.add_argument("--concurrency", type=int, default=64, help="The stand-in's slots (REPLs).")
    parser.add_argument("--rounds", type=int, default=2, help="Rounds; the median rate is reported.")
    args = parser.parse_args()
    logging.getLogger("kimina-client").setLevel(logging.WARNING)

    ceiling = args.concurrency / (args.latency_ms / 1000.0)
    rates: dict[str, list[float]] = {}
    valid_counts: dict[str, int] = {}
    with standin_process(args.latency_ms, args.concurrency) as url:
        contenders = [
            ("ours: LeanVerifier", lambda proofs: run_ours(url, proofs, args.concurrency)),
            ("kimina-client check() defaults", lambda proofs: run_kimina_sync_defaults(url, proofs)),
            ("kimina-client async check()", lambda proofs: run_kimina_async(url, proofs, args.concurrency)),
        ]
        all_proofs = distinct_proofs(args.proofs * (1 + args.rounds * len(contenders)))
        batches = iter(all_proofs[start : start + args.proofs] for start in range(0, len(all_proofs), args.proofs))
        run_ours(url, next(batches), args.concurrency)  # warm-up, untimed: first connections, imports
        # Rounds interleave the contenders, so a burst of load on the machine hits all of them.
        for _ in range(args.rounds):
            for name, run in contenders:
                elapsed, valid = run(next(batches))
                rates.setdefault(name, []).append(args.proofs / elapsed)
                valid_counts[name] = min(valid, valid_counts.get(name, valid))
    rows = [(name, statistics.median(values), valid_counts[name]) for name, values in rates.items()]

    print(
        f"stand-in: latency {args.latency_ms:.0f} ms, concurrency {args.concurrency}, "
        f"{args.proofs} proofs per contender per round, median of {args.rounds} rounds"
    )
    print(f"ceiling (concurrency / latency): {ceiling:.1f} proofs/s")
    ours = rows[0][1]
    for name, rate, valid in rows:
        print(f"  {name:34s} {rate:8.1f} proofs/s  {rate / ceiling:6.1%} of ceiling  ({valid}/{args.proofs} valid)")
    print(f"ours / check() defaults: {ours / rows[1][1]:.2f}x   ours / async check(): {ours / rows[2][1]:.2f}x")
    print(f"goal: ours ≥ 90% of ceiling: {'met' if ours >= 0.9 * ceiling else 'NOT met'}; "
          f"ahead of check(): {'yes' if ours > rows[1][1] else 'no'}")
    print("rerun: .venv/bin/python benchmarks/verifier_throughput.py "
          f"--proofs {args.proofs} --latency-ms {args.latency_ms:g} --concurrency {args.concurrency} --rounds {args.rounds}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
