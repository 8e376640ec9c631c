"""The stand-in Lean server on a loopback port, configs pointing at it, and small problems."""

from __future__ import annotations

import asyncio

import pytest

from trainer.config import RunConfig
from trainer.recipe.problems import Problem
from trainer.verification.checked_code import build_checked_code
from trainer.verification.client import LeanVerifier
from trainer.verification.standin_server import StandinServerThread, StandinSettings

MULTI_LINE_HEADER = (
    "import Mathlib\n"
    "import Aesop\n"
    "\n"
    "set_option maxHeartbeats 400000\n"
    "\n"
    "open BigOperators Real Nat Topology Rat\n"
    "\n"
)


@pytest.fixture(scope="module")
def standin():
    """One stand-in server per test module; tests that change its settings put them back."""
    with StandinServerThread(StandinSettings()) as server:
        yield server


@pytest.fixture
def fresh_standin():
    """A stand-in server of this test's own, for tests that inject faults or latency."""
    with StandinServerThread(StandinSettings()) as server:
        yield server


def make_config(url: str, **verifier) -> RunConfig:
    """The cpu-demo preset against ``url``, quick to retry, with the tactics-block format checks off
    (these tests are about Lean, not the reasoning's shape)."""
    overrides = {
        "verifier": {"url": url, "retry_backoff_s": 0.01, "timeout_s": 5.0, "http_timeout_margin_s": 5.0, **verifier},
        "reward": {"min_tactic_blocks": None, "min_tactics_lean4_match": None},
    }
    return RunConfig.from_preset("cpu-demo", overrides)


def problem(statement: str = "theorem two_plus_two : (2 : ℕ) + 2 = 4 := by", header: str = MULTI_LINE_HEADER) -> Problem:
    return Problem("p-" + str(abs(hash(statement)) % 10_000), statement, header=header)


def answer(lean_code: str) -> str:
    return f"<think>\nA short computation.\n</think>\n```lean4\n{lean_code}\n```"


def checked(body: str, statement: str = "theorem two_plus_two : (2 : ℕ) + 2 = 4 := by"):
    return build_checked_code(problem(statement), body)


def verify(url: str, codes, after_probe=None, **verifier):
    """Verdicts for ``codes`` from a fresh LeanVerifier (its stats come back too).

    ``after_probe``, when given, runs once the verifier has asked the server how it numbers lines
    and before the first proof is sent: tests that make the server fail or slow down use it, so
    what they inject reaches the proofs, not the probe."""

    async def go():
        lean = LeanVerifier(make_config(url, **verifier).verifier, environment="standin-test")
        try:
            if after_probe is not None:
                await lean.line_numbering()
                after_probe()
            results = await lean.verify_many([(code, f"k{index}") for index, code in enumerate(codes)])
            return results, lean.stats()
        finally:
            await lean.aclose()

    return asyncio.run(go())


@pytest.fixture
def helpers():
    """The helpers above, for tests (conftest modules are not imported by name)."""

    class Helpers:
        pass

    tools = Helpers()
    tools.make_config = make_config
    tools.problem = problem
    tools.answer = answer
    tools.checked = checked
    tools.verify = verify
    tools.header = MULTI_LINE_HEADER
    return tools
