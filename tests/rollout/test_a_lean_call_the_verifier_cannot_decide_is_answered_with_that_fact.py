"""A Lean check asked inside the reasoning that the verifier cannot decide (the stand-in's fragment ends, the server
is down, there is no verifier) is answered with exactly that: no verdict, and why; never a made-up one
(trainer/rollout/lean_tool.py). Real parts: SmolLM2's tokenizer, the LeanVerifier, the stand-in Lean server."""

from __future__ import annotations

import asyncio
import socket
import threading

import pytest

from trainer.config import RunConfig
from trainer.rollout.base import Generation
from trainer.rollout.lean_tool import LeanTool
from trainer.sft.smoke_model import SMOKE_HEADER
from trainer.verification.client import LeanVerifier
from trainer.verification.standin_server import StandinServerThread

OUTSIDE_THE_FRAGMENT = "theorem t (n : ℕ) : n + 0 = n := by\n  simp"
INSIDE_THE_FRAGMENT = "theorem t : (2 : ℕ) + 2 = 5 := by\n  norm_num"


@pytest.fixture(scope="module")
def tokenizer():
    from trainer.learning.models import smollm2_tokenizer

    return smollm2_tokenizer()


@pytest.fixture(scope="module")
def loop():
    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, daemon=True).start()
    yield loop
    loop.call_soon_threadsafe(loop.stop)


def ask(tokenizer, check, snippet: str):
    """One answer that asks about ``snippet``: paused, answered, and finished with nothing more written."""
    tool = LeanTool(2, check, reward_config=RunConfig.from_preset("cpu-smoke").reward)
    session = tool.session([SMOKE_HEADER], tokenizer, 400, 1)
    ids = tokenizer(f"<think>\n<lean>\n{snippet}\n</lean>", add_special_tokens=False)["input_ids"]
    assert session.wants_pause(0, 0, ids)
    session.pause(0, 0, [1, 2, 3], ids, [-0.5] * len(ids), "a1-s1-p0-r0")
    [resumption] = session.ready(block=True)
    assert resumption.prefix_ids[: 3 + len(ids)] == [1, 2, 3, *ids]
    [call] = session.finish(Generation(0, 0, "", [], 0, False, 0.0, [])).tool_calls
    return call


def verifier_of(url: str, loop, **settings):
    config = RunConfig.from_preset("cpu-smoke", {"verifier": {"url": url, **settings}})
    verifier = LeanVerifier(config.verifier, environment=url)
    return lambda code, key: asyncio.run_coroutine_threadsafe(verifier.verify(code, key=key), loop)


def says_it_could_not_check(call) -> bool:
    return (call.verdict == "infra_error" and not call.is_decided
            and "Lean could not check this snippet: no verdict." in call.reply
            and "accepts" not in call.reply and "errors:" not in call.reply)


def test_a_snippet_outside_the_stand_ins_fragment_gets_no_verdict_and_the_reason(tokenizer, loop):
    with StandinServerThread() as server:
        call = ask(tokenizer, verifier_of(server.url, loop), OUTSIDE_THE_FRAGMENT)
    assert says_it_could_not_check(call) and call.is_standin_verdict
    assert "cannot decide" in call.reply and "binders" in call.reply


def test_a_snippet_the_stand_in_decides_gets_lean_s_errors_at_the_snippet_s_lines(tokenizer, loop):
    with StandinServerThread() as server:
        call = ask(tokenizer, verifier_of(server.url, loop), INSIDE_THE_FRAGMENT)
    assert call.verdict == "lean_error" and call.is_decided
    assert "Lean's errors:\nline 1, column" in call.reply  # the statement's line: the snippet's first


def test_a_server_that_does_not_answer_gets_no_verdict(tokenizer, loop):
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        url = f"http://127.0.0.1:{closed.getsockname()[1]}"
    call = ask(tokenizer, verifier_of(url, loop, max_retries=0, retry_backoff_s=0.0), INSIDE_THE_FRAGMENT)
    assert says_it_could_not_check(call)


def test_a_run_without_a_verifier_gets_no_verdict(tokenizer):
    def no_verifier(code, key):
        raise RuntimeError("this run has no Lean verifier of its own")

    call = ask(tokenizer, no_verifier, INSIDE_THE_FRAGMENT)
    assert says_it_could_not_check(call) and "no Lean verifier" in call.reply
