"""A step's "lean" phase (``time/phases``) runs from the first proof handed to Lean to its last verdict, in both loops.

An answer that fails the format check never reaches Lean, so a step whose every answer failed it has no "lean"
phase at all, rather than a thin bar at its first answer. Both loops run here: the synchronous one (η = 0) and the
asynchronous one (η = 1, generation in its own process). Scoring is the real ``RewardScorer`` against the stand-in
Lean server (with a latency, so a verdict comes measurably after its proof left), through a spy that forwards every
call to the real Lean client and notes when each proof left and its verdict came back.

- Tiny random answers: the tiny model never writes the recipe's shape, so every answer fails the format check.
- Canned answers: ``CannedAnswerScorer`` (a test double) scores a hand-written answer in place of the tiny model's
  text for samples 0 and 1 (a proof the stand-in accepts, one it rejects); samples 2 and 3 keep the tiny model's
  own text and fail the format check. The asynchronous loop's engine lives in another process, so the answers
  are swapped where they are scored, for both loops alike.
"""

from __future__ import annotations

import copy
import re
import time

import pytest

from tests.asynchronous.synchronous_loop import PROBLEMS
from tests.learning.conftest import tiny_run_config
from tests.learning.test_driver_events import answer
from trainer.loop.driver import RunStatus, TrainingRun
from trainer.observability.events import EventPublisher, EventType, ListSink
from trainer.recipe.reward import RewardScorer
from trainer.verification.client import LeanVerifier
from trainer.verification.standin_server import StandinServerThread, StandinSettings

STANDIN_LATENCY_S = 0.2
STEPS = 3
TRAINING_KEY = re.compile(r"^a\d+-s(\d+)-.*-r(\d+)$")  # rollout_key: attempt, step, slot, sample


class RecordingVerifier:
    """A spy around the real Lean client: forwards each proof and notes (step, sent_at, verdict_at) in time.time()."""

    def __init__(self, verifier: LeanVerifier):
        self.verifier = verifier
        self.calls: list[tuple[int | None, float, float]] = []

    async def verify(self, checked_code: str, *, key: str):
        sent_at = time.time()
        result = await self.verifier.verify(checked_code, key=key)
        training = TRAINING_KEY.match(key)
        self.calls.append((int(training[1]) if training else None, sent_at, time.time()))
        return result


class CannedAnswerScorer:
    """Test double around the real scorer: samples 0 and 1 are scored as a hand-written answer (a proof the stand-in
    accepts, one it rejects) in place of the tiny model's text; every other sample is scored as the model wrote it."""

    def __init__(self, scorer: RewardScorer):
        self.scorer = scorer

    def _answer(self, problem, response: str, key: str | None) -> str:
        sample = int(key.rsplit("-r", 1)[1]) if key else 0
        tactics = {0: "norm_num", 1: "rfl\n  norm_num"}
        return answer(problem.formal_statement, tactics[sample]) if sample in tactics else response

    async def score(self, problem, response, num_tokens=None, max_tokens=None, *, key=None, earlier_answers=()):
        return await self.scorer.score(problem, self._answer(problem, response, key), num_tokens, max_tokens, key=key,
                                       earlier_answers=earlier_answers)

    async def lean_validity(self, problem, response, scored, *, key):
        return await self.scorer.lean_validity(problem, self._answer(problem, response, key), scored, key=key)


def config(verifier_url: str, max_staleness: int):
    return tiny_run_config(
        rollout={"prompts_per_step": 2, "samples_per_prompt": 4, "max_response_tokens": 6, "top_k": 2,
                 "max_staleness": max_staleness},
        optimizer={"mini_batch_prompts": 1, "micro_batch_sequences": 2},
        schedule={"total_steps": STEPS, "eval_every": 0, "checkpoint_every": 0},
        verifier={"url": verifier_url},
    )


def train(tokenizer, output, max_staleness: int, *, is_canned: bool):
    """(run, metrics by step, the spy, the stand-in's request count) of a 3-step run."""
    from trainer.learning.models import tiny_random_policy

    model, tokenizer = tiny_random_policy(0, tokenizer=copy.deepcopy(tokenizer))
    with StandinServerThread(StandinSettings(latency_s=STANDIN_LATENCY_S)) as server:
        run_config = config(server.url, max_staleness)
        spy = RecordingVerifier(LeanVerifier(run_config.verifier, environment=server.url))
        scorer = RewardScorer(run_config, spy)
        sink = ListSink()
        run = TrainingRun(run_config, PROBLEMS, output, EventPublisher("lean-phase", sink),
                          scorer=CannedAnswerScorer(scorer) if is_canned else scorer, model=model, tokenizer=tokenizer)
        assert run.run() is RunStatus.SUCCEEDED, sink.of_type(EventType.ERROR)
        requests = server.app.requests_received
    metrics = {event.payload["step"]: event.payload["values"] for event in sink.of_type(EventType.METRICS)}
    return run, metrics, spy, requests


@pytest.fixture(scope="module", params=[0, 1], ids=["synchronous", "asynchronous"])
def tiny_answers(request, smollm2_tokenizer_once, tmp_path_factory):
    return train(smollm2_tokenizer_once, tmp_path_factory.mktemp("tiny"), request.param, is_canned=False)


@pytest.fixture(scope="module", params=[0, 1], ids=["synchronous", "asynchronous"])
def canned_answers(request, smollm2_tokenizer_once, tmp_path_factory):
    return train(smollm2_tokenizer_once, tmp_path_factory.mktemp("canned"), request.param, is_canned=True)


def test_a_step_whose_every_answer_fails_the_format_check_has_no_lean_phase(tiny_answers):
    _, metrics, spy, requests = tiny_answers
    assert sorted(metrics) == [1, 2, 3]
    assert all(values["format_error_share"] == 1.0 and values["rollouts"] == 8 for values in metrics.values())
    assert spy.calls == [] and requests == 0  # no proof went to Lean
    for values in metrics.values():
        assert set(values["time/phases"]) == {"generation", "learning", "sync"}


def test_the_lean_phase_spans_the_first_proof_sent_to_the_last_verdict_of_its_batch(canned_answers):
    run, metrics, spy, requests = canned_answers
    assert requests > 0
    for step, values in metrics.items():
        phases = values["time/phases"]
        assert set(phases) == {"generation", "lean", "learning", "sync"}
        # Samples 2 and 3 of each group failed the format check and never reached Lean; 0 and 1 did.
        assert values["format_error_share"] == 0.5
        calls = [(sent, verdict) for call_step, sent, verdict in spy.calls if call_step == step]
        assert len(calls) == values["rollouts"] / 2
        first_sent = min(sent for sent, _ in calls) - run.clock_origin
        last_verdict = max(verdict for _, verdict in calls) - run.clock_origin
        # The scorer notes the times just outside the spy's: microseconds apart, then rounded to milliseconds.
        assert phases["lean"] == [pytest.approx(first_sent, abs=0.005), pytest.approx(last_verdict, abs=0.005)]
        if step == 1:  # the run's first proofs wait for the stand-in; later ones may be answered by the verdict cache
            assert phases["lean"][1] - phases["lean"][0] >= STANDIN_LATENCY_S - 0.005
        assert phases["generation"][0] <= phases["lean"][0]  # a proof leaves once an answer is written
        assert phases["lean"][1] <= phases["learning"][0]  # the learner trains on the batch's every verdict
