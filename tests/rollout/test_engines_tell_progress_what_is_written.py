"""Both engines tell ``progress`` (trainer/observability/live.py LiveRollouts) each unfinished answer's text as it is written,
so that pieces joined by offset end as the answer the engine yields; without ``progress`` nothing changes."""

from __future__ import annotations

from collections import defaultdict

from tests.rollout.test_vllm_engine_with_a_stand_in import gpu_config
from trainer.observability.live import LiveRollouts
from trainer.rollout.base import SamplingSettings
from trainer.rollout.transformers_engine import TransformersEngine
from trainer.rollout.vllm_engine import VllmEngine


def stream(engine, prompts, sampling):
    pieces = []
    live = LiveRollouts(pieces.append, lambda p, s: (f"p{p}-r{s}", 0, f"problem{p}", "first"),
                        interval_s=0.0, max_rollouts=64)
    generations = []
    for generation in engine.generate(prompts, sampling, progress=live):
        live.finish(generation.prompt_index, generation.sample_index, generation.text, generation.num_tokens)
        generations.append(generation)
    by_key = defaultdict(list)
    for piece in pieces:
        by_key[piece.rollout_key].append(piece)
    return generations, by_key


def assert_pieces_make_each_answer(generations, by_key):
    for generation in generations:
        pieces = by_key[f"p{generation.prompt_index}-r{generation.sample_index}"]
        joined = ""
        for piece in pieces:
            assert piece.offset == len(joined)
            joined += piece.text
        assert joined == generation.text and pieces[-1].is_finished
        assert pieces[-1].tokens == generation.num_tokens


def test_the_transformers_engine_reports_text_at_each_decoding_step(random_llama, tokenizer):
    engine = TransformersEngine(random_llama, tokenizer)
    sampling = SamplingSettings(n=2, temperature=1.0, top_p=1.0, top_k=-1, max_tokens=12, seed=3)
    generations, by_key = stream(engine, ["theorem x + y", "have n := n"], sampling)
    assert len(generations) == 4
    assert_pieces_make_each_answer(generations, by_key)
    assert any(len(pieces) > 2 for pieces in by_key.values()), "text comes while it is written, not only at the end"
    plain = sorted((g.prompt_index, g.sample_index, g.text) for g in engine.generate(["theorem x + y", "have n := n"], sampling))
    assert plain == sorted((g.prompt_index, g.sample_index, g.text) for g in generations), "progress changes no answer"


def test_the_vllm_engine_reports_its_delta_text(fake_vllm, random_llama, tokenizer):
    engine = VllmEngine.from_config(gpu_config(), random_llama, tokenizer)
    sampling = SamplingSettings(n=3, temperature=1.0, top_p=0.95, top_k=-1, max_tokens=10, seed=10)
    generations, by_key = stream(engine, [[5]], sampling)
    assert_pieces_make_each_answer(generations, by_key)
    assert [piece.text for piece in by_key["p0-r2"]] == ["w1", " w2", " "]  # a trailing space waits for the end
