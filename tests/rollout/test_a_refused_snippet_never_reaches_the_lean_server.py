"""Issue 44: a Lean snippet the model writes inside its reasoning keeps the rules of a final proof
(trainer/verification/integrity.py ``check_snippet_integrity``). A refused one is answered at once with the refusal,
where Lean's reply would be, marked ``is_refused``, and never reaches the verifier or the Lean server.
Real parts: SmolLM2's tokenizer, the tool session (trainer/rollout/lean_tool.py), the LeanVerifier, and the stand-in
Lean server (trainer/verification/standin_server.py) with its request log ``codes_received``."""

from __future__ import annotations

import asyncio
import threading

import pytest

from trainer.config import RunConfig
from trainer.recipe.format_reward import TOOL_REPLY_CLOSE, TOOL_REPLY_OPEN
from trainer.rollout.base import Generation
from trainer.rollout.lean_tool import LeanTool
from trainer.sft.smoke_model import SMOKE_HEADER
from trainer.verification.client import LeanVerifier
from trainer.verification.integrity import MAX_SNIPPET_CHARACTERS
from trainer.verification.standin_server import StandinServerThread

TRIED = "theorem try_it : (2 : ℕ) + 2 = 4 := by\n  norm_num"

# (construct, snippet, a phrase the refusal says): one row per construct the issue names, and the rules' others.
REFUSED = [
    ("#eval running a shell (the issue's)",
     '#eval IO.Process.run {cmd := "sh", args := #["-c", "id > /tmp/pwned"]}', "string literal"),
    ("#eval", "#eval (2 : ℕ) + 2", "runs a # command"),
    ("#exit", f"{TRIED}\n#exit", "runs a # command"),
    ("#print", f"{TRIED}\n#print axioms try_it", "runs a # command"),
    ("IO", "theorem t : True := by\n  have := IO.getStdout\n  trivial", "runs code (IO)"),
    ("run_cmd", "run_cmd Lean.logInfo m!\u00abhi\u00bb", "runs code (run_cmd)"),
    ("run_tac", "theorem t : True := by\n  run_tac Lean.Elab.Tactic.evalTactic default", "run_tac"),
    ("an import", f"import Mathlib.Tactic\n{TRIED}", "adds an import"),
    ("an axiom", "axiom cheat : False", "declares an axiom"),
    ("unsafe code", "unsafe def f : ℕ := 1", "unsafe"),
    ("an attribute", f"@[simp] {TRIED}", "adds an attribute"),
    ("a kernel option", f"set_option debug.skipKernelTC true in\n{TRIED}", "debug.skipKernelTC"),
    ("a definition", "def f : ℕ := 3", "'def'"),
    ("sorry", "theorem t : (1 : ℕ) = 2 := by\n  sorry", "uses sorry"),
    ("a snippet too long", TRIED + "\n" + "-- padding\n" * (MAX_SNIPPET_CHARACTERS // 10), "characters long"),
]


@pytest.fixture(scope="module")
def tokenizer():
    from trainer.learning.models import smollm2_tokenizer

    return smollm2_tokenizer()


@pytest.fixture(scope="module")
def lean():
    """The stand-in server and a verifier of it on an event loop of its own (as the driver's); every snippet the
    tool hands the verifier is recorded in ``asked``."""
    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, daemon=True).start()
    with StandinServerThread() as server:
        config = RunConfig.from_preset("cpu-smoke", {"verifier": {"url": server.url}})
        verifier = LeanVerifier(config.verifier, environment=server.url)
        asked: list[str] = []

        def check(code, key):
            asked.append(str(code))
            return asyncio.run_coroutine_threadsafe(verifier.verify(code, key=key), loop)

        yield server, check, asked
    loop.call_soon_threadsafe(loop.stop)


def ask(tokenizer, check, snippet: str):
    """One answer that asks about ``snippet``: paused, answered, finished with nothing more written."""
    session = LeanTool(2, check, reward_config=RunConfig.from_preset("cpu-smoke").reward).session(
        [SMOKE_HEADER], tokenizer, 4000, 1)
    ids = tokenizer(f"<think>\n<lean>\n{snippet}\n</lean>", add_special_tokens=False)["input_ids"]
    assert session.wants_pause(0, 0, ids)
    session.pause(0, 0, [1, 2, 3], ids, [-0.5] * len(ids), "a1-s1-p0-r0")
    [resumption] = session.ready(block=True)
    assert resumption.may_call  # one call of two used: the answer may still ask
    return session.finish(Generation(0, 0, "", [], 0, False, 0.0, []))


@pytest.mark.parametrize("construct, snippet, phrase", REFUSED, ids=[row[0] for row in REFUSED])
def test_a_refused_construct_is_answered_with_the_refusal_and_never_reaches_lean(tokenizer, lean, construct,
                                                                                 snippet, phrase):
    server, check, asked = lean
    asked.clear()
    requests_before = server.app.requests_received
    generation = ask(tokenizer, check, snippet)
    [call] = generation.tool_calls
    assert asked == [] and server.app.requests_received == requests_before
    assert not any(snippet.strip() in code for code in server.app.codes_received)
    assert call.is_refused and call.verdict == "rejected" and call.is_decided and not call.is_standin_verdict
    assert call.reply.startswith(f"\n{TOOL_REPLY_OPEN}\nNot sent to Lean: this snippet ")
    assert phrase in call.reply and call.reply.endswith(f"{TOOL_REPLY_CLOSE}\n")
    assert call.reply in generation.text and call.as_dict()["is_refused"] is True


def test_a_snippet_within_the_rules_does_reach_lean(tokenizer, lean):
    """The control: the same path sends a clean snippet to the server, so the refusals above are the rules' doing."""
    server, check, asked = lean
    asked.clear()
    [call] = ask(tokenizer, check, TRIED).tool_calls
    assert len(asked) == 1 and asked[0].endswith(TRIED + "\n")
    assert any(code.endswith(TRIED + "\n") for code in server.app.codes_received)
    assert not call.is_refused and call.verdict == "valid" and "Lean accepts this snippet" in call.reply
