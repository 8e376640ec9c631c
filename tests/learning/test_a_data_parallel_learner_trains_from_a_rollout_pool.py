"""The asynchronous loop on a data-parallel learner (trainer/loop/distributed.py): two learner ranks fed by a rollout pool.

Laid out as on GPUs: ``cluster.num_gpus`` 3 with ``cluster.rollout_gpus`` 1 is two learner ranks (gloo on CPU) and
a pool of one engine, a Ray actor that learner rank 0 starts in the run's placement group, on a Ray node of this
machine whose logical GPUs CPU stands in for.

Why this test launches the ranks itself (torch.multiprocessing's spawn, with the environment the driver gives its
learner-rank actors) instead of through ``python -m trainer run``: each rank runs ``rank_main``, which injects the
test's scorer, the tiny random model and a run class that kills or inspects the engine, none of which the command can
be given. Without the driver, the test reserves the run's placement group itself
(tests/asynchronous/ray_nodes.py ``reserved_placement_group``), as the driver does. The run through the driver is
tests/asynchronous/test_a_pool_fed_run_with_its_engine_on_another_node_trains_as_on_one_node.py's.
The tiny random model generates for real, in the generator process; rewards come from the first-token test double
(tests/learning/conftest.py), because a tiny random model never writes a proof Lean could be asked about. The
reference is one process running the same η = 1 loop with its own generator process: the same batches must come
back, and the same weights after every step.
"""

from __future__ import annotations

import copy
import json
import os
import shutil
import signal
from pathlib import Path

import psutil
import pytest
import torch

from deploy.services import free_port
from tests.asynchronous.ray_nodes import node_arguments, ray_cluster, reserved_placement_group
from tests.asynchronous.synchronous_loop import PROBLEMS
from tests.learning.conftest import FirstTokenRewardScorer, tiny_run_config
from tests.learning.test_data_parallel_training import (
    PEER_FAILURE_GRACE_IN_TESTS_S,
    JsonLinesFileSink,
    checkpoint_weights,
    of_type,
    training_rollouts,
)
from trainer.loop.driver import RunStatus, TrainingRun
from trainer.observability.events import EventPublisher, EventType, ListSink, TrainerEvent
from trainer.run.checkpoint import first_event_seq_for_resume

LEARNER_RANKS = 2
STEPS = 3


def pooled_config(num_gpus: int, rollout_gpus: int):
    return tiny_run_config(
        rollout={"prompts_per_step": 2, "samples_per_prompt": 4, "max_response_tokens": 6, "top_k": 2,
                 "max_staleness": 1},
        optimizer={"learning_rate": 1e-3, "mini_batch_prompts": 2, "micro_batch_sequences": 2},
        schedule={"total_steps": STEPS, "eval_every": 0, "checkpoint_every": 1},
        cluster={"num_gpus": num_gpus, "rollout_gpus": rollout_gpus},
    )


def rank_main(rank: int, port: int, scenario: str, folder: str, ray_address: str, placement_group_name: str) -> None:
    """One learner rank, as a learner-rank actor of the driver runs it (trainer/loop/rank_actor.py), with the test's
    scorer."""
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      WORLD_SIZE=str(LEARNER_RANKS), LOCAL_RANK=str(rank), RAY_ADDRESS=ray_address,
                      TRAINER_PLACEMENT_GROUP=placement_group_name)
    torch.set_num_threads(1)  # two ranks and a generator process share two cores
    from trainer.learning.models import smollm2_tokenizer, tiny_random_policy
    from trainer.loop.distributed import DataParallelRun, RankEventPublisher, RankGroup
    from trainer.ranks import torchrun_position

    folder = Path(folder)

    class RunWhoseEngineIsKilledAtStepOne(DataParallelRun):
        def train_step(self, step):
            if step == 1 and self.engine.pool is not None:  # before the batch of step 3 is handed over
                for pid in self.engine.pool.pids:
                    os.kill(pid, signal.SIGKILL)
            return super().train_step(step)

    class RunThatRecordsItsEnginesAncestry(DataParallelRun):
        def train_step(self, step):
            if step == 1 and self.engine.pool is not None:  # the engines are up and serving
                ancestry = {pid: [parent.pid for parent in psutil.Process(pid).parents()]
                            for pid in self.engine.pool.pids}
                (folder / "engine_ancestry.json").write_text(json.dumps(ancestry))
            return super().train_step(step)

    (folder / f"rank{rank}.pid").write_text(str(os.getpid()))
    model, tokenizer = tiny_random_policy(0, tokenizer=copy.deepcopy(smollm2_tokenizer()))
    is_resumed = scenario == "resumed"
    publisher = RankEventPublisher("pool", JsonLinesFileSink(folder / f"rank{rank}.jsonl"), rank=rank,
                                   world_size=LEARNER_RANKS, attempt=2 if is_resumed else 1,
                                   first_seq=first_event_seq_for_resume(folder / "run") if is_resumed else 0)
    run_class = {"generator_killed": RunWhoseEngineIsKilledAtStepOne,
                 "records_its_engine": RunThatRecordsItsEnginesAncestry}.get(scenario, DataParallelRun)
    group = RankGroup.join(torchrun_position())
    status = run_class(pooled_config(LEARNER_RANKS + 1, 1), PROBLEMS, folder / "run", publisher, group=group,
                       model=model, tokenizer=tokenizer, scorer=FirstTokenRewardScorer(tokenizer.decode([198])),
                       peer_failure_grace_s=PEER_FAILURE_GRACE_IN_TESTS_S, resume=is_resumed).run()
    (folder / f"rank{rank}.status").write_text(status.value)


def spawn_learner_ranks(scenario: str, folder: Path, ray_address: str,
                        bundle_nodes: list | None = None) -> tuple[dict[int, str], dict[int, list]]:
    """The run's two learner ranks, in the run's placement group on the Ray cluster at ``ray_address``;
    ``bundle_nodes`` is given the node id of each bundle of the group, in order."""
    import ray

    with reserved_placement_group(pooled_config(LEARNER_RANKS + 1, 1)) as placement_group_name:
        if bundle_nodes is not None:
            table = ray.util.placement_group_table(ray.util.get_placement_group(placement_group_name))
            bundle_nodes.extend(table["bundles_to_node_id"][index] for index in range(LEARNER_RANKS + 1))
        torch.multiprocessing.spawn(rank_main, args=(free_port(), scenario, str(folder), ray_address,
                                                     placement_group_name), nprocs=LEARNER_RANKS, join=True)
    statuses, events = {}, {}
    for rank in range(LEARNER_RANKS):
        status_file = folder / f"rank{rank}.status"
        statuses[rank] = status_file.read_text() if status_file.exists() else "ended without returning"
        published = folder / f"rank{rank}.jsonl"  # a rank that published nothing left no file
        lines = published.read_text().splitlines() if published.exists() else []
        events[rank] = [TrainerEvent.model_validate_json(line) for line in lines]
    return statuses, events


@pytest.fixture(scope="module")
def one_ray_node():
    """One Ray node with the run's three logical GPUs; yields its address."""
    with ray_cluster(node_arguments(num_cpus=8, num_gpus=LEARNER_RANKS + 1), []) as cluster:
        yield cluster.address


@pytest.fixture(scope="module")
def runs(tmp_path_factory, smollm2_tokenizer_once, one_ray_node):
    """((status, events, output) of one process, (statuses, events by rank, output) of two learner ranks)."""
    from trainer.learning.models import tiny_random_policy

    one_folder, pooled_folder = tmp_path_factory.mktemp("one_process"), tmp_path_factory.mktemp("two_learner_ranks")
    model, tokenizer = tiny_random_policy(0, tokenizer=copy.deepcopy(smollm2_tokenizer_once))
    sink = ListSink()
    status = TrainingRun(pooled_config(0, 0), PROBLEMS, one_folder / "run", EventPublisher("one", sink),
                         scorer=FirstTokenRewardScorer(tokenizer.decode([198])), model=model, tokenizer=tokenizer).run()
    statuses, events = spawn_learner_ranks("trains", pooled_folder, one_ray_node)
    return (status, sink.events, one_folder / "run"), (statuses, events, pooled_folder / "run")


def metrics_by_step(events) -> dict[int, dict]:
    return {event.payload["step"]: event.payload["values"] for event in of_type(events, EventType.METRICS)}


def test_two_learner_ranks_fed_by_a_pool_train_every_step(runs):
    (one_status, _, _), (statuses, events, _) = runs
    assert one_status is RunStatus.SUCCEEDED
    assert statuses == {0: "succeeded", 1: "succeeded"}, of_type(events[0], EventType.ERROR)
    by_step = metrics_by_step(events[0])
    assert sorted(by_step) == [1, 2, 3]
    # Every step trains: a group of 4 whose rewards are all equal has no advantage and is skipped, never all of them.
    trained = {step: (values["rollouts"], values["learner/trained_sequences"]) for step, values in by_step.items()}
    assert all(rollouts == 8 and sequences in (4, 8) for rollouts, sequences in trained.values()), trained
    assert by_step[1]["learner/loss"] != 0.0


def test_no_batch_is_trained_more_than_one_update_after_the_weights_that_wrote_it(runs):
    _, (_, events, _) = runs
    by_step = metrics_by_step(events[0])
    assert [by_step[step]["rollout/staleness_max"] for step in (1, 2, 3)] == [0, 1, 1]
    assert all(values["rollout/dropped_stale"] == 0 for values in by_step.values())
    versions = {(e.payload["step"], e.payload["policy_version"]) for e in training_rollouts(events[0])}
    assert versions == {(1, 0), (2, 0), (3, 1)}


def test_rank_zero_publishes_every_rollout_once_and_the_other_rank_nothing(runs):
    _, (_, events, _) = runs
    keys = [event.payload["rollout_key"] for event in training_rollouts(events[0])]
    assert len(keys) == len(set(keys)) == STEPS * 2 * 4
    assert events[1] == []


def test_the_pool_fed_ranks_sample_and_train_as_one_process_does(runs):
    """The same answers (so the pool was sent the learner's weights after step 1) and the same weights after every
    step (so both ranks trained on the whole batch rank 0 handed them)."""
    (_, one_events, one_output), (_, events, pooled_output) = runs
    answers = {e.payload["rollout_key"]: e.payload["response"] for e in training_rollouts(events[0])}
    assert answers == {e.payload["rollout_key"]: e.payload["response"] for e in training_rollouts(one_events)}
    one_metrics, pooled_metrics = metrics_by_step(one_events), metrics_by_step(events[0])
    for step in range(1, STEPS + 1):
        assert pooled_metrics[step]["learner/loss"] == pytest.approx(one_metrics[step]["learner/loss"], rel=1e-5,
                                                                     abs=1e-9)
        one_weights, pooled_weights = checkpoint_weights(one_output, step), checkpoint_weights(pooled_output, step)
        for name, tensor in one_weights.items():
            # The tolerance of test_data_parallel_training.py: Adam divides by |gradient| + 1e-8, where float
            # summation order over two ranks shows; 5e-5 is 5% of one step's movement at this learning rate.
            torch.testing.assert_close(pooled_weights[name], tensor, rtol=0, atol=5e-5, msg=f"{name} at step {step}")
    assert not torch.equal(checkpoint_weights(pooled_output, 1)["model.layers.0.mlp.up_proj.weight"],
                           checkpoint_weights(pooled_output, 3)["model.layers.0.mlp.up_proj.weight"])


def test_a_killed_engine_actor_fails_the_run_on_both_learner_ranks_naming_the_engine_and_its_node(tmp_path, one_ray_node):
    import ray

    statuses, events = spawn_learner_ranks("generator_killed", tmp_path, one_ray_node)
    assert statuses == {0: "failed", 1: "failed"}
    [finished] = of_type(events[0], EventType.RUN_FINISHED)
    assert finished.payload["status"] == "failed"
    [node_id] = [node["NodeID"] for node in ray.nodes() if node["Alive"]]
    reason = finished.payload["reason"]
    assert "EngineActorLost: rollout engine 0" in reason and f"on node {node_id}" in reason, reason


def test_a_resumed_pool_fed_run_generates_the_batches_in_flight_again_and_trains_each_step_once(runs, tmp_path,
                                                                                                 one_ray_node):
    _, (_, uninterrupted, pooled_output) = runs
    shutil.copytree(pooled_output / "checkpoints" / "step_000001", tmp_path / "run" / "checkpoints" / "step_000001")
    statuses, events = spawn_learner_ranks("resumed", tmp_path, one_ray_node)
    assert statuses == {0: "succeeded", 1: "succeeded"}, of_type(events[0], EventType.ERROR)
    assert [e.payload["step"] for e in of_type(events[0], EventType.METRICS)] == [2, 3]

    def problems_by_step(rank_events):
        by_step: dict[int, list[str]] = {}
        for event in training_rollouts(rank_events):
            by_step.setdefault(event.payload["step"], []).append(event.payload["problem_id"])
        return {step: sorted(problems) for step, problems in by_step.items()}

    before = problems_by_step(uninterrupted[0])
    assert problems_by_step(events[0]) == {step: before[step] for step in (2, 3)}
    # From the checkpoint's weights (version 1), on every rank the same batches (rank 1 checks its own against them).
    assert {(e.payload["step"], e.payload["policy_version"]) for e in training_rollouts(events[0])} == {(2, 1), (3, 1)}
