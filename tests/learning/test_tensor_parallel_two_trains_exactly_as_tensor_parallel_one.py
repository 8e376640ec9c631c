"""Two ranks sharing one vLLM engine (tensor parallel 2) train exactly as two ranks with an engine each.

Two worlds of two CPU ranks (gloo, torch.multiprocessing's spawn) run the same two steps, with an
evaluation and checkpoints: one at tensor-parallel size 1, one at 2. Answers come from a stand-in
for vLLM (the canned-answers engine, which records what each rank asked of it): like vLLM's
tensor-parallel shards, it answers the same prompts and seeds with the same answers on every rank.
Scoring is real, against the stand-in Lean server, except where a test breaks it on purpose.
"""

from __future__ import annotations

import copy
import json
import os
from pathlib import Path

import pytest
import torch

from deploy.services import free_port
from tests.learning.conftest import CannedAnswersEngine, FirstTokenRewardScorer
from tests.learning.test_data_parallel_training import (
    PEER_FAILURE_GRACE_IN_TESTS_S,
    STEPS,
    WORLD_SIZE,
    JsonLinesFileSink,
    canned_config,
    checkpoint_weights,
    of_type,
)
from tests.learning.test_driver_events import PROBLEMS, answer_for
from trainer.config import RunConfig
from trainer.observability.events import EventType, TrainerEvent
from trainer.verification.standin_server import StandinServerThread


class RecordingVllmStandIn(CannedAnswersEngine):
    """The canned answers, and a line per generate call: the prompts and sampling this rank asked for."""

    def __init__(self, tokenizer, log: Path):
        super().__init__(tokenizer, answer_for)
        self.log = log

    def generate(self, prompts, sampling):
        with self.log.open("a") as file:
            file.write(json.dumps({"prompts": [list(prompt) for prompt in prompts], "n": sampling.n,
                                   "seed": sampling.seed}) + "\n")
        return super().generate(prompts, sampling)


class ScorerThatBreaksInEvaluation(FirstTokenRewardScorer):
    def __init__(self):
        super().__init__(target_text="")

    async def score(self, problem, response, num_tokens=None, max_tokens=None, *, key=None):
        if "-eval" in key:  # an evaluation sample's key (trainer.loop.driver.evaluation_key_prefix)
            raise RuntimeError("injected: rank 1 lost its Lean connection while evaluating")
        return await super().score(problem, response, num_tokens, max_tokens, key=key)


def tensor_parallel_config(verifier_url: str, tensor_parallel: int) -> RunConfig:
    data = canned_config(verifier_url, WORLD_SIZE).model_dump(mode="python")
    data["rollout"].update(engine="vllm", vllm_tensor_parallel_size=tensor_parallel)
    return RunConfig.model_validate(data)


def rank_main(rank: int, port: int, tensor_parallel: int, folder: str, verifier_url: str,
              breaks_in_evaluation: bool = False) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank),
                      WORLD_SIZE=str(WORLD_SIZE), LOCAL_RANK=str(rank))
    torch.set_num_threads(1)
    from trainer.learning.models import smollm2_tokenizer, tiny_random_policy
    from trainer.loop.distributed import DataParallelRun, RankEventPublisher, RankGroup
    from trainer.ranks import torchrun_position

    model, tokenizer = tiny_random_policy(0, tokenizer=copy.deepcopy(smollm2_tokenizer()))
    folder = Path(folder)
    publisher = RankEventPublisher("tp", JsonLinesFileSink(folder / f"rank{rank}.jsonl"), rank=rank,
                                   world_size=WORLD_SIZE)
    engine = RecordingVllmStandIn(tokenizer, folder / f"rank{rank}.generate.jsonl")
    options = {"scorer": ScorerThatBreaksInEvaluation() if rank == 1 else FirstTokenRewardScorer("")} \
        if breaks_in_evaluation else {}
    status = DataParallelRun(tensor_parallel_config(verifier_url, tensor_parallel), PROBLEMS, folder / "run", publisher,
                             group=RankGroup.join(torchrun_position()), model=model, tokenizer=tokenizer, engine=engine,
                             peer_failure_grace_s=PEER_FAILURE_GRACE_IN_TESTS_S, **options).run()
    (folder / f"rank{rank}.status").write_text(status.value)


def spawn_world(tensor_parallel: int, folder: Path, verifier_url: str, breaks_in_evaluation: bool = False) -> dict:
    torch.multiprocessing.spawn(rank_main, args=(free_port(), tensor_parallel, str(folder), verifier_url,
                                                 breaks_in_evaluation), nprocs=WORLD_SIZE, join=True)
    ranks = {}
    for rank in range(WORLD_SIZE):
        status_file = folder / f"rank{rank}.status"
        ranks[rank] = {
            "status": status_file.read_text() if status_file.exists() else "ended without returning",
            "events": [TrainerEvent.model_validate_json(line)
                       for line in (folder / f"rank{rank}.jsonl").read_text().splitlines()],
            "generate_calls": [json.loads(line) for line in (folder / f"rank{rank}.generate.jsonl").read_text().splitlines()],
        }
    return {"ranks": ranks, "output": folder / "run"}


@pytest.fixture(scope="module")
def worlds(tmp_path_factory):
    """{tensor-parallel size: that world's ranks and output}."""
    with StandinServerThread() as server:
        return {tensor_parallel: spawn_world(tensor_parallel, tmp_path_factory.mktemp(f"tp{tensor_parallel}"), server.url)
                for tensor_parallel in (1, 2)}


def metrics_of(world) -> list[dict]:
    return [event.payload["values"] for event in of_type(world["ranks"][0]["events"], EventType.METRICS)]


def test_both_worlds_finish_their_steps(worlds):
    for world in worlds.values():
        assert {rank: info["status"] for rank, info in world["ranks"].items()} == {0: "succeeded", 1: "succeeded"}
        assert len(metrics_of(world)) == STEPS


def test_every_update_is_the_same_at_tensor_parallel_two_as_at_one(worlds):
    one, two = worlds[1], worlds[2]
    for step_one, step_two in zip(metrics_of(one), metrics_of(two), strict=True):
        for name in ("learner/loss", "learner/grad_norm", "learner/trained_sequences", "rollouts", "reward/mean"):
            assert step_two[name] == step_one[name], name
    assert metrics_of(one)[0]["learner/loss"] != 0.0  # a real update: both rewards in each group
    for step in range(1, STEPS + 1):
        # The same sequences in the same order on the same two learner ranks: the same arithmetic, bit for bit.
        weights_one, weights_two = checkpoint_weights(one["output"], step), checkpoint_weights(two["output"], step)
        assert weights_one.keys() == weights_two.keys()
        for name, tensor in weights_one.items():
            assert torch.equal(weights_two[name], tensor), f"{name} at step {step}"
    assert not torch.equal(checkpoint_weights(one["output"], 1)["model.layers.0.mlp.up_proj.weight"],
                           checkpoint_weights(one["output"], 2)["model.layers.0.mlp.up_proj.weight"])


def test_the_ranks_of_one_engine_ask_it_for_the_same_prompts_with_the_same_seeds(worlds):
    one, two = worlds[1]["ranks"], worlds[2]["ranks"]
    assert two[0]["generate_calls"] == two[1]["generate_calls"]  # the steps' rollouts, the evaluation and its retries
    # A step's two slots go to the one engine at size 2; at size 1 each rank's engine gets one of them.
    assert [len(call["prompts"]) for call in two[0]["generate_calls"][:STEPS]] == [2] * STEPS
    for rank in (0, 1):
        assert [len(call["prompts"]) for call in one[rank]["generate_calls"][:STEPS]] == [1] * STEPS
    assert one[0]["generate_calls"][0]["prompts"] != one[1]["generate_calls"][0]["prompts"]
    assert one[0]["generate_calls"][0]["seed"] != one[1]["generate_calls"][0]["seed"]
    assert two[0]["generate_calls"][0]["seed"] == one[0]["generate_calls"][0]["seed"]  # engine 0's stream either way


def published_keys(worlds, is_evaluation: bool) -> dict[int, dict[int, list[str]]]:
    """Per tensor-parallel size, per rank: the keys of the training rollouts, or of the evaluation samples, it published."""
    return {size: {rank: [e.payload["rollout_key"] for e in of_type(info["events"], EventType.ROLLOUT_FINISHED)
                          if e.payload["is_evaluation"] == is_evaluation]
                   for rank, info in world["ranks"].items()} for size, world in worlds.items()}


def test_each_rollout_is_scored_and_published_once_by_one_rank_of_its_engine(worlds):
    keys = published_keys(worlds, is_evaluation=False)
    for by_rank in keys.values():
        every = by_rank[0] + by_rank[1]
        assert len(every) == len(set(every)) == STEPS * 2 * 3
    assert set(keys[2][0] + keys[2][1]) == set(keys[1][0] + keys[1][1])
    # The evaluation's samples too: each once, by one rank, as many at either size (keyed per engine at size 1).
    samples = published_keys(worlds, is_evaluation=True)
    counts = set()
    for by_rank in samples.values():
        every = by_rank[0] + by_rank[1]
        assert every and len(every) == len(set(every))
        counts.add(len(every))
    assert len(counts) == 1
    # At size 2 the engine's answers alternate between its ranks: (prompt 0, sample 0) on rank 0, (0, 1) on rank 1, ...
    assert sorted(key for key in keys[2][0] if key.startswith("a1-s1-")) == ["a1-s1-p0-r0", "a1-s1-p0-r2", "a1-s1-p1-r1"]
    assert sorted(key for key in keys[2][1] if key.startswith("a1-s1-")) == ["a1-s1-p0-r1", "a1-s1-p1-r0", "a1-s1-p1-r2"]


def test_retries_and_evaluation_come_out_the_same(worlds):
    one, two = worlds[1]["ranks"][0]["events"], worlds[2]["ranks"][0]["events"]
    parents = [{e.payload["parent_rollout_key"] for e in of_type(events, EventType.RETRY_CREATED)} for events in (one, two)]
    assert parents[0] == parents[1] and parents[0]
    [evaluation_one], [evaluation_two] = of_type(one, EventType.EVALUATION), of_type(two, EventType.EVALUATION)
    values_one, values_two = evaluation_one.payload["values"], evaluation_two.payload["values"]
    assert values_one.pop("seconds") >= 0 and values_two.pop("seconds") >= 0
    assert values_two == values_one
    assert values_one["problems"] == len(PROBLEMS)


def test_a_scoring_failure_on_one_rank_of_an_engine_during_evaluation_fails_the_run_with_its_reason(tmp_path):
    # The engine's two ranks pool their evaluation verdicts before generating retries: rank 1's failure
    # there reaches rank 0 through that exchange, and the run's through rank 0, naming rank 1.
    world = spawn_world(2, tmp_path, "http://127.0.0.1:9", breaks_in_evaluation=True)
    assert {rank: info["status"] for rank, info in world["ranks"].items()} == {0: "failed", 1: "failed"}
    events = world["ranks"][0]["events"] + world["ranks"][1]["events"]
    [finished] = of_type(events, EventType.RUN_FINISHED)
    assert finished.payload["reason"] == ("rank 1 failed during evaluation at step 2: "
                                          "RuntimeError: injected: rank 1 lost its Lean connection while evaluating")
    assert len(of_type(events, EventType.METRICS)) == STEPS  # both steps trained; the evaluation after them failed
