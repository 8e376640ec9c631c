"""Two data-parallel ranks (two processes, gloo on CPU) train as one process would, and fail as one run.

Each world is started with torch.multiprocessing's spawn; every rank writes its events to its
own JSON-lines file, which outlives the process even if it ends abruptly. The reference run
is one process on the same prompts. Answers come from the canned-answers engine (a test
double: a tiny random model never writes the recipe's shape); scoring is real, against the
stand-in Lean server.
"""

from __future__ import annotations

import copy
import os
from pathlib import Path

import pytest
import torch

from deploy.services import free_port
from tests.learning.conftest import CannedAnswersEngine, FirstTokenRewardScorer, tiny_run_config
from tests.learning.test_driver_events import PROBLEMS, answer_for
from trainer.loop.driver import RunStatus, TrainingRun
from trainer.observability.events import EventPublisher, EventType, ListSink, TrainerEvent
from trainer.verification.standin_server import StandinServerThread

# The ranks' own failure path is what these tests check: on a loaded machine rank 0's watch (tested in
# test_data_parallel_events.py) must not end the process first, however slowly a loaded machine runs them.
PEER_FAILURE_GRACE_IN_TESTS_S = 60.0

WORLD_SIZE = 2
STEPS = 2


class JsonLinesFileSink:
    """Each event a flushed line: what a rank published is on disk even if its process is ended."""

    def __init__(self, path: Path):
        self.path = path

    def write(self, event) -> None:
        with self.path.open("a") as file:
            file.write(event.model_dump_json() + "\n")


class ScorerThatBreaksAtStep(FirstTokenRewardScorer):
    def __init__(self, step: int):
        super().__init__(target_text="")
        self.step = step

    async def score(self, problem, response, num_tokens=None, max_tokens=None, *, key=None):
        if f"-s{self.step}-" in key:
            raise RuntimeError("injected: the Lean client on rank 1 lost its connection")
        return await super().score(problem, response, num_tokens, max_tokens, key=key)


def canned_config(verifier_url: str, num_gpus: int):
    return tiny_run_config(
        rollout={"prompts_per_step": 2, "samples_per_prompt": 3, "max_response_tokens": 64},
        optimizer={"mini_batch_prompts": 2, "micro_batch_sequences": 3},
        retry={"replay_probability": 1.0},
        schedule={"total_steps": STEPS, "eval_every": STEPS, "checkpoint_every": 1, "eval_samples": 3},
        verifier={"url": verifier_url},
        cluster={"num_gpus": num_gpus},
    )


def sampling_config(num_gpus: int):
    return tiny_run_config(
        rollout={"prompts_per_step": 2, "samples_per_prompt": 2, "max_response_tokens": 6},
        optimizer={"mini_batch_prompts": 2, "micro_batch_sequences": 2},
        schedule={"total_steps": STEPS, "eval_every": 0, "checkpoint_every": 0},
        cluster={"num_gpus": num_gpus},
    )


def rank_main(rank: int, port: int, scenario: str, folder: str, verifier_url: str) -> None:
    """One rank, as ``python -m trainer run`` under torchrun runs it, with the test's doubles."""
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      WORLD_SIZE=str(WORLD_SIZE), LOCAL_RANK=str(rank))
    torch.set_num_threads(1)  # two ranks share two cores
    from trainer.learning.models import smollm2_tokenizer, tiny_random_policy
    from trainer.loop.distributed import DataParallelRun, RankEventPublisher, RankGroup
    from trainer.ranks import torchrun_position

    model, tokenizer = tiny_random_policy(0, tokenizer=copy.deepcopy(smollm2_tokenizer()))
    folder = Path(folder)
    publisher = RankEventPublisher("dp", JsonLinesFileSink(folder / f"rank{rank}.jsonl"), rank=rank,
                                   world_size=WORLD_SIZE)
    options = {}
    if scenario == "canned":
        config = canned_config(verifier_url, WORLD_SIZE)
        options["engine"] = CannedAnswersEngine(tokenizer, answer_for)
    else:
        config = sampling_config(WORLD_SIZE)  # the real engine: a transformers copy of the policy on each rank
        options["scorer"] = ScorerThatBreaksAtStep(2 if rank == 1 and scenario == "rollout_failure" else -1)
        if rank == 1 and scenario == "learner_failure":
            from trainer.learning.learner import Learner

            def out_of_memory(self, sequences):
                raise RuntimeError("injected: rank 1's learner ran out of memory")

            Learner.step = out_of_memory
    group = RankGroup.join(torchrun_position())
    status = DataParallelRun(config, PROBLEMS, folder / "run", publisher, group=group, model=model, tokenizer=tokenizer,
                             peer_failure_grace_s=PEER_FAILURE_GRACE_IN_TESTS_S, **options).run()
    (folder / f"rank{rank}.status").write_text(status.value)


def spawn_world(scenario: str, folder: Path, verifier_url: str = "") -> tuple[dict[int, str], dict[int, list]]:
    torch.multiprocessing.spawn(rank_main, args=(free_port(), scenario, str(folder), verifier_url),
                                nprocs=WORLD_SIZE, join=True)
    statuses, events = {}, {}
    for rank in range(WORLD_SIZE):
        status_file = folder / f"rank{rank}.status"
        statuses[rank] = status_file.read_text() if status_file.exists() else "ended without returning"
        lines = (folder / f"rank{rank}.jsonl").read_text().splitlines()
        events[rank] = [TrainerEvent.model_validate_json(line) for line in lines]
    return statuses, events


def of_type(events, type):
    return [event for event in events if event.type == type]


def training_rollouts(events):
    return [e for e in of_type(events, EventType.ROLLOUT_FINISHED) if not e.payload["is_evaluation"]]


def evaluation_samples(events):
    return [e for e in of_type(events, EventType.ROLLOUT_FINISHED) if e.payload["is_evaluation"]]


@pytest.fixture(scope="module")
def runs(tmp_path_factory, smollm2_tokenizer_once):
    """The same two steps, one process and two ranks: ((status, events, output), (statuses, events by rank, output))."""
    from trainer.learning.models import tiny_random_policy

    one_folder, two_folder = tmp_path_factory.mktemp("one_rank"), tmp_path_factory.mktemp("two_ranks")
    with StandinServerThread() as server:
        model, tokenizer = tiny_random_policy(0, tokenizer=copy.deepcopy(smollm2_tokenizer_once))
        sink = ListSink()
        status = TrainingRun(canned_config(server.url, 0), PROBLEMS, one_folder / "run", EventPublisher("one", sink),
                             model=model, tokenizer=tokenizer, engine=CannedAnswersEngine(tokenizer, answer_for)).run()
        statuses, events = spawn_world("canned", two_folder, server.url)
    return (status, sink.events, one_folder / "run"), (statuses, events, two_folder / "run")


def checkpoint_weights(output: Path, step: int) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(output / "checkpoints" / f"step_{step:06d}" / "model" / "model.safetensors")


def test_two_ranks_take_the_same_steps_as_one_process_on_the_same_prompts(runs):
    (one_status, one_events, one_output), (statuses, events, two_output) = runs
    assert one_status is RunStatus.SUCCEEDED and statuses == {0: "succeeded", 1: "succeeded"}
    one_metrics = [e.payload["values"] for e in of_type(one_events, EventType.METRICS)]
    two_metrics = [e.payload["values"] for e in of_type(events[0], EventType.METRICS)]
    for one, two in zip(one_metrics, two_metrics, strict=True):
        assert two["learner/loss"] == pytest.approx(one["learner/loss"], rel=1e-5, abs=1e-9)
        assert two["learner/grad_norm"] == pytest.approx(one["learner/grad_norm"], rel=1e-5)
        assert two["learner/trained_sequences"] == one["learner/trained_sequences"]
    assert one_metrics[0]["learner/loss"] != 0.0  # step 1 has both rewards in each group: a real update
    for step in range(1, STEPS + 1):
        one_weights, two_weights = checkpoint_weights(one_output, step), checkpoint_weights(two_output, step)
        for name, tensor in one_weights.items():
            # Adam divides by |gradient| + 1e-8: where a gradient is that small, float summation order
            # shows; 5e-5 is 5% of one step's movement at this learning rate (1e-3).
            torch.testing.assert_close(two_weights[name], tensor, rtol=0, atol=5e-5, msg=f"{name} at step {step}")
    initial = checkpoint_weights(one_output, 1)  # and the update did move the weights
    assert not torch.equal(initial["model.layers.0.mlp.up_proj.weight"],
                           checkpoint_weights(one_output, 2)["model.layers.0.mlp.up_proj.weight"])


def test_rank_zero_writes_every_ranks_token_records_as_one_process_writes_them(runs):
    from trainer.observability import token_records

    (_, _, one_output), (_, _, two_output) = runs
    for step in range(1, STEPS + 1):
        one = token_records.step_records(one_output, step, ["advantage", "learner_logprob", "flags"])
        two = token_records.step_records(two_output, step, ["advantage", "learner_logprob", "flags"])
        assert set(two) == set(one) and one
        for key, record in one.items():
            assert two[key]["advantage"] == record["advantage"] and two[key]["flags"] == record["flags"]
            torch.testing.assert_close(torch.tensor(two[key]["learner_logprob"]), torch.tensor(record["learner_logprob"]),
                                       rtol=0, atol=1e-5)


def test_each_rank_publishes_its_own_rollouts_once_under_its_own_numbers(runs):
    (_, one_events, _), (_, events, _) = runs
    keys_by_rank = {rank: [e.payload["rollout_key"] for e in training_rollouts(events[rank])] for rank in events}
    assert all("-p0-" in key for key in keys_by_rank[0]) and all("-p1-" in key for key in keys_by_rank[1])
    all_keys = keys_by_rank[0] + keys_by_rank[1]
    assert len(all_keys) == len(set(all_keys)) == STEPS * 2 * 3
    assert set(all_keys) == {e.payload["rollout_key"] for e in training_rollouts(one_events)}
    assert {e.type for e in events[1]} == {EventType.ROLLOUT_FINISHED}  # everything else is rank 0's to say
    assert all(e.seq % WORLD_SIZE == rank for rank in events for e in events[rank])


def test_ordered_by_seq_each_steps_rollouts_fall_between_its_start_and_its_metrics(runs):
    _, (_, events, _) = runs
    merged = sorted(events[0] + events[1], key=lambda e: e.seq)
    assert len({e.seq for e in merged}) == len(merged)
    assert merged[0].type == EventType.RUN_STARTED and merged[-1].type == EventType.RUN_FINISHED
    for step in range(1, STEPS + 1):
        [started] = [i for i, e in enumerate(merged) if e.type == EventType.STEP_STARTED and e.payload["step"] == step]
        [metrics] = [i for i, e in enumerate(merged) if e.type == EventType.METRICS and e.payload["step"] == step]
        rollouts = [i for i, e in enumerate(merged) if e.type == EventType.ROLLOUT_FINISHED and e.payload["step"] == step
                    and not e.payload["is_evaluation"]]
        assert len(rollouts) == 6 and started < min(rollouts) and max(rollouts) < metrics


def test_rank_zero_publishes_one_global_metrics_per_step_and_the_retries_of_both_ranks(runs):
    (_, one_events, _), (_, events, _) = runs
    metrics = of_type(events[0], EventType.METRICS)
    assert [e.payload["step"] for e in metrics] == list(range(1, STEPS + 1))
    values, one_values = metrics[0].payload["values"], of_type(one_events, EventType.METRICS)[0].payload["values"]
    for name in ("rollouts", "reward/mean", "lean/accuracy", "format_errors", "retries/added", "censored",
                 "retries/buffer_size"):
        assert values[name] == one_values[name], name
    assert values["rollouts"] == 6 and values["retries/added"] == 2
    parents = {e.payload["parent_rollout_key"] for e in of_type(events[0], EventType.RETRY_CREATED)}
    assert parents == {"a1-s1-p0-r1", "a1-s1-p1-r1"}  # rank 1's rejected attempt was filed too
    # Step 2 drew both retries, on the rank that owns each slot, in every rank's buffer alike.
    retried = {e.payload["rollout_key"] for rank in events for e in training_rollouts(events[rank])
               if e.payload["turn"] == "retry"}
    assert {key.rsplit("-r", 1)[0] for key in retried} == {"a1-s2-retry-p0", "a1-s2-retry-p1"}


def test_rank_zero_evaluates_with_the_other_ranks_share_and_finishes_the_run_once(runs):
    (_, one_events, _), (_, events, _) = runs
    [evaluation] = of_type(events[0], EventType.EVALUATION)
    [one_evaluation] = of_type(one_events, EventType.EVALUATION)
    for name in ("problems", "pass@1", "retry/pass@1", "mean@3"):
        assert evaluation.payload["values"][name] == one_evaluation.payload["values"][name], name
    # Each engine publishes the samples of its own problem, keyed by its share, each once: as many as one process's.
    samples = {rank: [e.payload for e in evaluation_samples(events[rank])] for rank in events}
    assert all(s["rollout_key"].startswith(f"a1-eval{STEPS}-e{rank}-") for rank in samples for s in samples[rank])
    assert len({s["rollout_key"] for rank in samples for s in samples[rank]}) == sum(map(len, samples.values()))
    assert sorted((s["problem_id"], s["turn"], s["reward"]) for rank in samples for s in samples[rank]) == sorted(
        (e.payload["problem_id"], e.payload["turn"], e.payload["reward"]) for e in evaluation_samples(one_events))
    finished = of_type(events[0] + events[1], EventType.RUN_FINISHED)
    assert [e.payload["status"] for e in finished] == ["succeeded"]
    assert [e.payload["step"] for e in of_type(events[0], EventType.CHECKPOINT_SAVED)] == [1, 2]


@pytest.mark.parametrize(("scenario", "expected_reason"), [
    ("rollout_failure", "rank 1 failed during step 2: RuntimeError: injected: the Lean client on rank 1 lost its connection"),
    ("learner_failure", "rank 1 failed during step 1: RuntimeError: injected: rank 1's learner ran out of memory"),
])
def test_a_failure_on_rank_one_ends_the_run_as_failed_with_its_reason(scenario, expected_reason, tmp_path):
    statuses, events = spawn_world(scenario, tmp_path)
    assert statuses == {0: "failed", 1: "failed"}
    [finished] = of_type(events[0] + events[1], EventType.RUN_FINISHED)
    assert finished.payload["status"] == "failed"
    assert finished.payload["reason"] == expected_reason
    assert [e.payload["message"] for e in of_type(events[0], EventType.ERROR)] == [expected_reason]
    completed_steps = 1 if scenario == "rollout_failure" else 0
    assert [e.payload["step"] for e in of_type(events[0], EventType.METRICS)] == list(range(1, completed_steps + 1))
