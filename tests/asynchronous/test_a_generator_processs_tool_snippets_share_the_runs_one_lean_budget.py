"""Issue 44: tool calls must not double a run's Lean budget. An asynchronous run's generator process pauses its
answers at their </lean>, but the snippet is checked by the run's own verifier
(trainer/asynchronous/generator_process.py), so the final proofs and the tool snippets share one
``verifier.max_in_flight`` (docs/operations/sizing.md).

Real parts: a generator process with the cpu-smoke tool model (it learnt one answer that asks Lean:
trainer/sft/smoke_model.py), the LeanVerifier and the stand-in Lean server (a stand-in for kimina-lean-server),
whose ``peak_snippets_in_progress`` counts what reached it at once. The run's final proofs keep the one slot
(max_in_flight 1) busy the whole time the answer is written, so a second budget would show as two at once."""

from __future__ import annotations

import asyncio
import threading
from types import SimpleNamespace

import pytest

from trainer.asynchronous.generator_process import GeneratorProcess
from trainer.config import RunConfig
from trainer.recipe.prompts import first_attempt_messages, render_prompt
from trainer.rollout.base import SamplingSettings
from trainer.rollout.lean_tool import checked_snippet
from trainer.sft.smoke_model import SMOKE_HEADER, SMOKE_TOOL_PROBLEMS, with_smoke_model
from trainer.verification.client import LeanVerifier
from trainer.verification.standin_server import StandinServerThread, StandinSettings

pytestmark = pytest.mark.timeout(600)

ASKS_LEAN = SMOKE_TOOL_PROBLEMS[0]
MAX_TOKENS = 160
LEAN_LATENCY_S = 0.3


def final_proof(index: int) -> str:
    """A distinct closed statement each time, so the verdict cache never answers in Lean's place."""
    return checked_snippet(SMOKE_HEADER, f"theorem proof_{index} : ({index} : ℕ) + 1 = {index + 1} := by\n  norm_num")


@pytest.fixture(scope="module")
def loop():
    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, daemon=True).start()
    yield loop
    loop.call_soon_threadsafe(loop.stop)


def test_the_generator_process_s_snippets_wait_for_the_run_s_one_slot(loop):
    from trainer.learning.models import load_policy

    with StandinServerThread(StandinSettings(latency_s=LEAN_LATENCY_S)) as server:
        config = with_smoke_model(RunConfig.from_preset("cpu-smoke", {
            "rollout": {"max_response_tokens": MAX_TOKENS, "lean_tool_calls": 2, "max_staleness": 1,
                        "engine": "transformers"},
            "verifier": {"url": server.url, "max_in_flight": 1}}))
        verifier = LeanVerifier(config.verifier, environment=server.url)
        asked_by_the_child: list[str] = []

        def ask_lean(checked_code, key):
            asked_by_the_child.append(key)
            return asyncio.run_coroutine_threadsafe(verifier.verify(checked_code, key=key), loop)

        model, tokenizer = load_policy(config.model)
        generator = GeneratorProcess(config, tokenizer, seed=0, ask_lean=ask_lean)
        proofs_done = threading.Event()
        try:
            generator.push_weights(model)
            asyncio.run_coroutine_threadsafe(verifier.verify(final_proof(0), key="first"), loop).result()

            async def keep_the_slot_busy() -> int:
                index = 0
                while not proofs_done.is_set():
                    index += 1
                    await verifier.verify(final_proof(index), key=f"proof-{index}")
                return index

            busy = asyncio.run_coroutine_threadsafe(keep_the_slot_busy(), loop)
            prompt = tokenizer(render_prompt(tokenizer, first_attempt_messages(ASKS_LEAN)),
                               add_special_tokens=False)["input_ids"]
            generations = list(generator.generate([prompt], SamplingSettings.greedy(MAX_TOKENS),
                                                  tools=SimpleNamespace(headers=[ASKS_LEAN.header])))
            proofs_done.set()
            proofs_checked = busy.result(timeout=60)
        finally:
            proofs_done.set()
            generator.close()
        peak = server.app.peak_snippets_in_progress

    [generation] = generations
    [call] = generation.tool_calls
    assert call.verdict == "valid" and call.is_standin_verdict and not call.is_refused
    assert len(asked_by_the_child) == 1  # the snippet came back to the run's verifier
    assert proofs_checked >= 2  # the final proofs did run beside it
    assert peak == 1, f"{peak} snippets reached Lean at once with verifier.max_in_flight 1"
