"""A rollout pool of several engines (trainer/asynchronous/engine_actors.py ``RolloutEnginePool``) answers as one
generator: every prompt of a batch once, under the batch's own numbers, from the weights last pushed (over the
pool's weight group), each engine on a random stream of its own. Two real engine actors on a Ray node of this
machine, CPU standing in for their GPUs, the tiny random model in each. The pool is started alone, as learner rank
0 starts it but without a run (no driver), so the test reserves the run's placement group itself
(tests/asynchronous/ray_nodes.py ``reserved_placement_group``)."""

from __future__ import annotations

import copy
import os
import time

import psutil
import pytest

from tests.learning.conftest import tiny_run_config
from tests.asynchronous.ray_nodes import node_arguments, ray_cluster, reserved_placement_group
from trainer.asynchronous.engine_actors import PLACEMENT_GROUP_VARIABLE, RolloutEnginePool
from trainer.rollout.base import SamplingSettings


@pytest.fixture(scope="module")
def pool_and_prompts(smollm2_tokenizer_once):
    from trainer.learning.models import tiny_random_policy

    config = tiny_run_config(rollout={"max_response_tokens": 6, "max_staleness": 1},
                             cluster={"num_gpus": 3, "rollout_gpus": 2, "cpus_per_worker": 1})
    model, tokenizer = tiny_random_policy(0, tokenizer=copy.deepcopy(smollm2_tokenizer_once))
    with (ray_cluster(node_arguments(num_cpus=3, num_gpus=3), []),
          reserved_placement_group(config) as placement_group_name):
        pool = RolloutEnginePool.start(config, tokenizer, seed=0,
                                       environ={**os.environ, PLACEMENT_GROUP_VARIABLE: placement_group_name})
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


def test_every_engine_of_a_pool_is_started_before_the_first_is_ready(pool_and_prompts):
    """Each engine loads its model (and vLLM on GPUs of its own): started one after another, a pool of eight
    would wait eight start-ups."""
    pool, _ = pool_and_prompts
    first_ready = min(generator.ready_at for generator in pool.generators)
    started = [psutil.Process(generator.pid).create_time() for generator in pool.generators]
    assert max(started) < first_ready
