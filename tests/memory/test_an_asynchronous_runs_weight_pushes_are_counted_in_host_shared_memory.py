"""The memory plan counts what an asynchronous run's weight pushes hold in the node's /dev/shm, and says which
deploy layouts' /dev/shm they do not fit (trainer/memory/memory_plan.py, "Host shared memory").

Each push is one flat copy of the full state dict in the push dtype (trainer/asynchronous/generator_process.py
``packed_weights``, ``push_dtype``), and η + 1 of them can be live at once (``pushes_in_shared_memory`` says why).
The tiny random model's figures are by hand: a 49,152 × 64 embedding, tied and so listed twice by ``state_dict``,
and two layers of 4 · 64 · 64 attention, 3 · 64 · 128 MLP and 2 · 64 norm weights, and the final 64-wide norm.
"""

from __future__ import annotations

import pytest

from tests.memory.tiny_gpu import memory_plan_of_eight_tiny_gpus, two_pools
from trainer.config import RunConfig
from trainer.memory import memory_plan
from trainer.memory.memory_plan import GIB, plan_push_shared_memory

TINY_STATE_DICT_ELEMENTS = 2 * 49152 * 64 + 2 * (4 * 64 * 64 + 3 * 64 * 128 + 2 * 64) + 64  # 6,373,696


def test_one_push_is_the_full_state_dict_in_vllms_serving_dtype():
    pushes = plan_push_shared_memory(two_pools())
    assert (pushes.push_bytes, pushes.dtype) == (TINY_STATE_DICT_ELEMENTS * 2, "bfloat16")


def test_a_transformers_pool_is_pushed_the_learners_float32_weights():
    pushes = plan_push_shared_memory(two_pools(rollout={"engine": "transformers"}))
    assert (pushes.push_bytes, pushes.dtype) == (TINY_STATE_DICT_ELEMENTS * 4, "float32")


@pytest.mark.parametrize("max_staleness", [1, 2])
def test_eta_waiting_pushes_and_the_one_loading_are_live_at_once(max_staleness):
    pushes = plan_push_shared_memory(two_pools(rollout={"max_staleness": max_staleness}))
    assert pushes.live_pushes == max_staleness + 1
    assert pushes.total_bytes == (max_staleness + 1) * TINY_STATE_DICT_ELEMENTS * 2


def test_a_7b_pool_at_eta_1_overflows_the_compose_layouts_shm_and_says_by_how_much_and_what_to_change():
    config = RunConfig.from_preset("h100x8", {"model": {"name_or_path": "Qwen/Qwen2.5-7B"},
                                              "rollout": {"max_staleness": 1}, "cluster": {"rollout_gpus": 2}})
    pushes = plan_push_shared_memory(config)
    # Qwen2.5-7B: 7,615,616,512 weights in bfloat16 (untied), twice: 28.37 GiB against 80 − 64 GiB.
    assert pushes.push_bytes == 15_231_233_024
    assert pushes.shortfalls() == [
        "/dev/shm of the compose layout (deploy/compose/compose.yaml): 28.4 GiB of weight pushes (2 × 14.19 GiB in "
        "bfloat16, η = 1) beside Ray's object store of up to 64 GiB, over its 80 GiB by 12.4 GiB; raise RAY_SHM_SIZE "
        "or lower RAY_OBJECT_STORE_BYTES in deploy/compose/.env, or lower rollout.max_staleness"]


def test_the_json_contract_carries_the_pushes_and_each_layouts_verdict():
    shown = memory_plan.plan(two_pools()).to_json()["pools"]["host_shm"]
    assert shown["live_pushes"] == 2 and shown["total_gib"] == round(2 * TINY_STATE_DICT_ELEMENTS * 2 / GIB, 2)
    assert shown["layouts"] == {"compose": {"shm_gib": 80, "object_store_gib": 64, "fits": True},
                                "KubeRay": {"shm_gib": 96, "object_store_gib": 64, "fits": True}}


def test_the_command_prints_the_pushes_against_each_layout():
    printed = memory_plan_of_eight_tiny_gpus("rollout.max_staleness=2", "cluster.rollout_gpus=4")
    assert "× pushes live at once (η = 2 waiting, 1 loading)" in printed
    assert ("compose (deploy/compose/compose.yaml): 80 GiB /dev/shm − 64 GiB Ray object store = 16 GiB: fits"
            in printed)
    assert "KubeRay (deploy/k8s/20-raycluster.yaml): 96 GiB /dev/shm − 64 GiB Ray object store = 32 GiB: fits" in printed
