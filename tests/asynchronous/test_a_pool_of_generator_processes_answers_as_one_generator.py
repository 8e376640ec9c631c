"""A rollout pool of several engines (trainer/asynchronous/generator_process.py ``GeneratorPool``) answers as one generator: every
prompt of a batch once, under the batch's own numbers, from the weights last pushed, each engine on a random stream
of its own. Two real generator processes on CPU, the tiny random model in each."""

from __future__ import annotations

import copy
import time

import pytest

from tests.learning.conftest import tiny_run_config
from trainer.asynchronous.generator_process import GeneratorPool
from trainer.rollout.base import SamplingSettings


@pytest.fixture(scope="module")
def pool_and_prompts(smollm2_tokenizer_once):
    from trainer.learning.models import tiny_random_policy

    config = tiny_run_config(rollout={"max_response_tokens": 6, "max_staleness": 1})
    model, tokenizer = tiny_random_policy(0, tokenizer=copy.deepcopy(smollm2_tokenizer_once))
    pool = GeneratorPool.start(config, tokenizer, seed=0, devices=["1", "2"])  # no GPU here: the ids change nothing
    try:
        pool.push_weights(model, version=4)
        prompts = [tokenizer(text, add_special_tokens=False)["input_ids"]
                   for text in ("theorem a : 1 = 1", "theorem b : 2 = 2", "theorem c : 3 = 3")]
        yield pool, prompts
    finally:
        pool.close()


def test_every_answer_of_a_batch_comes_back_once_under_the_batchs_prompt_numbers(pool_and_prompts):
    pool, prompts = pool_and_prompts
    sampling = SamplingSettings(n=2, temperature=1.0, top_p=1.0, top_k=-1, max_tokens=6, seed=11)
    started = time.time()
    job = pool.submit(prompts, sampling)
    answers = list(pool.answers_of(job))
    assert sorted((a.prompt_index, a.sample_index) for a in answers) == [(p, s) for p in range(3) for s in range(2)]
    assert job.policy_version == 4 and job.owned == [[0, 2], [1]]
    assert 0 < pool.busy_seconds(started, time.time()) <= time.time() - started


def test_two_engines_given_the_same_prompt_write_different_answers(pool_and_prompts):
    pool, prompts = pool_and_prompts
    sampling = SamplingSettings(n=1, temperature=1.0, top_p=1.0, top_k=-1, max_tokens=6, seed=11)
    answers = {a.prompt_index: a.token_ids for a in pool.generate([prompts[0], prompts[0]], sampling)}
    assert answers[0] != answers[1]  # engine 1 samples the step's seed + ENGINE_SEED_STRIDE
    again = {a.prompt_index: a.token_ids for a in pool.generate([prompts[0], prompts[0]], sampling)}
    assert again == answers  # and each engine's stream is reproducible
