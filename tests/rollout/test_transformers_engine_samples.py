"""The CPU engine: n samples per prompt, reproducible with a seed, honest truncation flags."""

from __future__ import annotations

import pytest
import torch

from trainer.rollout.base import SamplingSettings
from trainer.rollout.transformers_engine import TransformersEngine

PROMPTS = ["theorem x + y", "proof by simp", "have n := n"]


def sampling(**overrides) -> SamplingSettings:
    values = dict(n=3, temperature=1.0, top_p=1.0, top_k=-1, max_tokens=6, seed=1234)
    values.update(overrides)
    return SamplingSettings(**values)


def test_it_yields_every_sample_of_every_prompt_exactly_once(random_llama, tokenizer):
    generations = list(TransformersEngine(random_llama, tokenizer).generate(PROMPTS, sampling()))
    keys = sorted((g.prompt_index, g.sample_index) for g in generations)
    assert keys == [(p, s) for p in range(len(PROMPTS)) for s in range(3)]


def test_it_never_writes_more_than_max_tokens(random_llama, tokenizer):
    for generation in TransformersEngine(random_llama, tokenizer).generate(PROMPTS, sampling(max_tokens=4)):
        assert 1 <= generation.num_tokens <= 4
        assert generation.num_tokens == len(generation.token_ids)


def test_the_same_seed_gives_the_same_answers_and_another_seed_other_answers(random_llama, tokenizer):
    engine = TransformersEngine(random_llama, tokenizer)

    def answers(seed):
        return sorted((g.prompt_index, g.sample_index, tuple(g.token_ids)) for g in engine.generate(PROMPTS, sampling(seed=seed)))

    assert answers(7) == answers(7)
    assert answers(7) != answers(8)


def test_seeding_does_not_disturb_the_callers_random_state(random_llama, tokenizer):
    torch.manual_seed(99)
    expected = torch.rand(3)
    torch.manual_seed(99)
    list(TransformersEngine(random_llama, tokenizer).generate(PROMPTS[:1], sampling(seed=5)))
    assert torch.equal(torch.rand(3), expected)


def test_the_samples_of_one_prompt_differ_from_each_other(random_llama, tokenizer):
    generations = list(TransformersEngine(random_llama, tokenizer).generate(PROMPTS[:1], sampling(n=4, max_tokens=8)))
    assert len({tuple(g.token_ids) for g in generations}) > 1


def test_it_marks_an_answer_that_ran_out_of_tokens_as_truncated_and_one_that_ended_as_not(stop_or_go_llama, tokenizer):
    engine = TransformersEngine(stop_or_go_llama, tokenizer)
    generations = list(engine.generate(["theorem stop", "theorem go"], sampling(n=2, max_tokens=5)))
    ended = [g for g in generations if g.prompt_index == 0]
    ran_out = [g for g in generations if g.prompt_index == 1]
    for generation in ended:
        assert not generation.is_truncated
        assert generation.token_ids == [tokenizer.eos_token_id]  # the end token is kept for the learner
        assert generation.text == ""
    for generation in ran_out:
        assert generation.is_truncated
        assert generation.num_tokens == 5
        assert tokenizer.eos_token_id not in generation.token_ids


def test_it_hands_over_a_finished_answer_before_the_rest_of_the_batch_ends(stop_or_go_llama, tokenizer):
    stream = TransformersEngine(stop_or_go_llama, tokenizer).generate(["theorem go", "theorem stop"], sampling(n=1, max_tokens=40))
    first = next(stream)
    assert first.prompt_index == 1 and not first.is_truncated
    rest = list(stream)
    assert [g.prompt_index for g in rest] == [0] and rest[0].seconds > first.seconds


def test_response_tokens_never_include_the_prompt(stop_or_go_llama, tokenizer):
    generations = list(TransformersEngine(stop_or_go_llama, tokenizer).generate(["theorem go"], sampling(n=1, max_tokens=3)))
    assert generations[0].text.split() == ["go", "go", "go"]


def test_greedy_decoding_is_the_same_every_time_without_a_seed(random_llama, tokenizer):
    engine = TransformersEngine(random_llama, tokenizer)
    first = [g.token_ids for g in engine.generate(PROMPTS, SamplingSettings.greedy(max_tokens=5))]
    again = [g.token_ids for g in engine.generate(PROMPTS, SamplingSettings.greedy(max_tokens=5))]
    assert first == again


def test_small_batches_still_cover_all_prompts_with_distinct_randomness(random_llama, tokenizer):
    engine = TransformersEngine(random_llama, tokenizer, max_batch_sequences=3)
    generations = list(engine.generate([PROMPTS[0]] * 3, sampling(n=3)))
    assert sorted((g.prompt_index, g.sample_index) for g in generations) == [(p, s) for p in range(3) for s in range(3)]
    by_prompt = {p: sorted(tuple(g.token_ids) for g in generations if g.prompt_index == p) for p in range(3)}
    assert by_prompt[0] != by_prompt[1]  # same prompt, another batch: another seed


def test_stopping_early_ends_the_background_generation(stop_or_go_llama, tokenizer):
    engine = TransformersEngine(stop_or_go_llama, tokenizer)
    stream = engine.generate(["theorem stop", "theorem go"], sampling(n=1, max_tokens=200))
    next(stream)
    stream.close()  # must return promptly rather than decode 200 more steps for nobody
    assert list(engine.generate(["theorem stop"], sampling(n=1, max_tokens=2)))[0].token_ids == [tokenizer.eos_token_id]


def test_it_leaves_the_model_in_the_mode_the_learner_left_it(random_llama, tokenizer):
    random_llama.train()
    try:
        list(TransformersEngine(random_llama, tokenizer).generate(PROMPTS[:1], sampling(n=1, max_tokens=2)))
        assert random_llama.training
    finally:
        random_llama.eval()


def test_push_weights_refuses_a_model_it_does_not_sample_from(random_llama, stop_or_go_llama, tokenizer):
    engine = TransformersEngine(random_llama, tokenizer)
    engine.push_weights(random_llama)
    with pytest.raises(ValueError, match="cannot take weights from another"):
        engine.push_weights(stop_or_go_llama)


def test_weights_changed_by_the_learner_are_used_by_the_next_generation(fresh_random_llama, tokenizer):
    model = fresh_random_llama
    engine = TransformersEngine(model, tokenizer)
    before = [g.token_ids for g in engine.generate(PROMPTS, SamplingSettings.greedy(max_tokens=4))]
    with torch.no_grad():
        model.lm_head.weight.mul_(-1.0)  # what an optimizer step does, exaggerated
    engine.push_weights(model)
    after = [g.token_ids for g in engine.generate(PROMPTS, SamplingSettings.greedy(max_tokens=4))]
    assert before != after


def test_a_short_prompt_gets_the_same_greedy_answer_alone_as_beside_a_longer_one(random_llama, tokenizer):
    engine = TransformersEngine(random_llama, tokenizer)
    short, long = "proof by simp", "theorem x + y = y + x := by intro n apply ring"
    alone = next(engine.generate([short], SamplingSettings.greedy(max_tokens=6))).token_ids
    batched = {g.prompt_index: g.token_ids for g in engine.generate([long, short], SamplingSettings.greedy(max_tokens=6))}
    assert batched[1] == alone  # left padding and its attention mask leave the short prompt's answer unchanged


def test_reading_each_prompt_once_for_its_n_samples_gives_the_answers_of_reading_it_n_times(fresh_random_llama, tokenizer):
    # Prompts of different lengths, so rows are left-padded; with n > 1 the engine prefills each
    # prompt once and repeats its cache, with n = 1 on repeated prompts it reads every copy.
    with torch.no_grad():  # sharp next-token distributions: a wrong position or mask changes the samples
        fresh_random_llama.lm_head.weight.mul_(40.0)
    prompts = ["theorem x + y = y + x := by", "proof by simp", "have"]
    engine = TransformersEngine(fresh_random_llama, tokenizer)
    shared = sorted((g.prompt_index, g.sample_index, tuple(g.token_ids))
                    for g in engine.generate(prompts, sampling(n=3, max_tokens=8, seed=11)))
    repeated = [prompt for prompt in prompts for _ in range(3)]
    read_n_times = sorted((g.prompt_index // 3, g.prompt_index % 3, tuple(g.token_ids))
                          for g in engine.generate(repeated, sampling(n=1, max_tokens=8, seed=11)))
    assert shared == read_n_times
