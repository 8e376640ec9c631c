"""The driver end to end: a tiny random model learning from the real scorer and the stand-in Lean server.

Answers come from a canned-answers engine (a test double): a tiny random model never writes
the recipe's shape, so Lean would never be reached. Everything after generation is real:
format check, the Lean client, the stand-in server, rewards, advantages, learner, retries,
evaluation, checkpoints and events.
"""

from __future__ import annotations

import pytest

from tests.learning.conftest import CannedAnswersEngine, tiny_run_config
from trainer.loop.driver import RunStatus, TrainingRun
from trainer.observability.events import EventPublisher, EventType, ListSink, RolloutFinished
from trainer.recipe.problems import Problem
from trainer.verification.standin_server import StandinServerThread
from trainer.verification.verdicts import Verifier

PROBLEMS = [
    Problem("add_small", "theorem add_small : (2 : ℕ) + 3 = 5 := by", name="add_small"),
    Problem("mul_small", "theorem mul_small : (6 : ℕ) * 7 = 42 := by", name="mul_small"),
]


def answer(statement: str, tactic: str) -> str:
    return f"<think>\nCompute both sides.\n</think>\nSo:\n```lean4\n{statement}\n  {tactic}\n```"


def answer_for(prompt: str, sample_index: int) -> str:
    problem = next(p for p in PROBLEMS if p.formal_statement in prompt)
    if "Error" in prompt:  # an error-correction turn: fix it
        return answer(problem.formal_statement, "norm_num")
    # sample 0 proves it; sample 1 writes a wrong closed statement's proof (Lean rejects it); sample 2 rambles.
    return [
        answer(problem.formal_statement, "norm_num"),
        answer(problem.formal_statement, "rfl\n  norm_num"),
        "I am not sure how to do this.",
    ][sample_index]


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory, smollm2_tokenizer_once):
    import copy

    from trainer.learning.models import tiny_random_policy

    model, tokenizer = tiny_random_policy(0, tokenizer=copy.deepcopy(smollm2_tokenizer_once))
    sink = ListSink()
    output = tmp_path_factory.mktemp("run")
    with StandinServerThread() as server:
        config = tiny_run_config(
            rollout={"prompts_per_step": 2, "samples_per_prompt": 3, "max_response_tokens": 64},
            optimizer={"mini_batch_prompts": 2, "micro_batch_sequences": 3},
            retry={"replay_probability": 1.0},
            schedule={"total_steps": 3, "eval_every": 3, "checkpoint_every": 2, "eval_samples": 3},
            verifier={"url": server.url},
        )
        engine = CannedAnswersEngine(tokenizer, answer_for)
        status = TrainingRun(config, PROBLEMS, output, EventPublisher("e2e", sink),
                             model=model, tokenizer=tokenizer, engine=engine).run()
    return status, sink, output, engine


def test_the_run_starts_steps_and_finishes_succeeded_in_order(finished_run):
    status, sink, _, _ = finished_run
    assert status is RunStatus.SUCCEEDED, sink.of_type(EventType.ERROR)
    assert sink.events[0].type == EventType.RUN_STARTED
    assert sink.events[-1].type == EventType.RUN_FINISHED
    assert sink.events[-1].payload["status"] == "succeeded"
    assert [e.payload["step"] for e in sink.of_type(EventType.STEP_STARTED)] == [1, 2, 3]
    assert [e.seq for e in sink.events] == list(range(len(sink.events)))


def test_the_runs_log_says_which_attention_its_learner_chose_at_start_up(finished_run):
    _, sink, _, _ = finished_run
    messages = [e.payload["message"] for e in sink.of_type(EventType.LOG)]
    assert "learner attention for packed micro-batches: sdpa_per_packed_sequence (on cpu, where flash-attn's " \
        "kernels do not run; causal SDPA once per packed sequence, no tokens × tokens mask)" in messages


def test_run_started_says_what_precision_the_trainer_computes_in_and_why(finished_run):
    _, sink, _, _ = finished_run
    # Resolved in the trainer's process (trainer/compute_dtype.py); the run page shows these words.
    assert sink.events[0].payload["compute_dtype"] == {
        "requested": "float32", "dtype": "float32", "reason": "the run asks for float32", "warning": None,
        "sentence": "computes in float32: the run asks for float32"}


def training_rollouts(sink) -> list[RolloutFinished]:
    rollouts = [RolloutFinished.model_validate(e.payload) for e in sink.of_type(EventType.ROLLOUT_FINISHED)]
    return [r for r in rollouts if not r.is_evaluation]


def test_every_rollout_is_published_with_its_verdict_from_the_stand_in(finished_run):
    _, sink, _, _ = finished_run
    rollouts = training_rollouts(sink)
    assert len(rollouts) == 3 * 2 * 3
    proved = [r for r in rollouts if r.verdict == "valid"]
    assert proved and all(r.reward == 1.0 and r.is_standin_verdict and r.checked_code for r in proved)
    rambling = [r for r in rollouts if r.format_error]
    assert rambling and all(r.reward == 0.0 and r.verdict is None for r in rambling)
    # The format check's words, for the rollout page (no lean4 block: nothing to mark).
    assert all(r.format_detail == "no ```lean4 block in the answer" for r in rambling)
    assert all(not r.format_detail and not r.format_failure_lines for r in rollouts if not r.format_error)
    assert all(r.prompt and r.response and r.num_tokens > 0 and r.sampling["n"] == 3 for r in rollouts)
    assert len({r.rollout_key for r in rollouts}) == len(rollouts)


def test_every_rollout_names_the_stand_in_as_its_runs_verifier_a_format_failures_too(finished_run):
    """A format failure reached no verifier, yet it is the model's 0 under the run's: the platform counts it there."""
    _, sink, _, _ = finished_run
    rollouts = [RolloutFinished.model_validate(e.payload) for e in sink.of_type(EventType.ROLLOUT_FINISHED)]
    assert any(r.format_error and r.verdict is None for r in rollouts)
    assert any(r.is_evaluation for r in rollouts)
    assert {r.verified_by for r in rollouts} == {Verifier.STANDIN}


def test_rejected_first_attempts_become_retries_that_are_rolled_out_later(finished_run):
    _, sink, _, _ = finished_run
    retries = sink.of_type(EventType.RETRY_CREATED)
    assert retries and all("Error" in e.payload["feedback"] for e in retries)
    retry_rollouts = [r for r in training_rollouts(sink) if r.turn == "retry"]
    parents = {e.payload["parent_rollout_key"] for e in retries}
    assert retry_rollouts and all(r.parent_rollout_key in parents for r in retry_rollouts)
    assert all(r.reward == 1.0 for r in retry_rollouts)


def test_each_step_publishes_its_metrics(finished_run):
    _, sink, _, engine = finished_run
    metrics = sink.of_type(EventType.METRICS)
    assert [e.payload["step"] for e in metrics] == [1, 2, 3]
    values = metrics[0].payload["values"]
    # 2 problems × (1 proved, 1 rejected, 1 rambling): reward 1/3, Lean accepts 1 of the 2 it sees.
    assert values["reward/mean"] == pytest.approx(1 / 3)
    assert values["lean/accuracy"] == pytest.approx(1 / 2)
    assert values["format_errors"] == {"no_valid_lean4_code_block": 2}
    assert values["retries/added"] == 2
    assert values["censored"] == 0
    for key in ("learner/grad_norm", "learner/clip_fraction", "time/generation_s", "time/learning_s",
                "time/weight_sync_s", "response_length/max", "verifier/cache_hit_rate", "generation/tokens_per_second"):
        assert key in values
    assert engine.pushed_weights == 3


def test_evaluation_and_checkpoints_are_published_when_due(finished_run):
    _, sink, output, _ = finished_run
    evaluations = sink.of_type(EventType.EVALUATION)
    assert [e.payload["step"] for e in evaluations] == [3]
    values = evaluations[0].payload["values"]
    # Each problem: 1 of 3 samples proves it; after one retry the rejected one is fixed too.
    assert values["pass@1"] == pytest.approx(1 / 3)
    assert values["retry/pass@1"] == pytest.approx(2 / 3)
    saved = sink.of_type(EventType.CHECKPOINT_SAVED)
    assert [e.payload["step"] for e in saved] == [2, 3]
    assert all((output / "checkpoints" / f"step_00000{step}" / "model" / "model.safetensors").is_file() for step in (2, 3))


def test_a_periodic_evaluation_publishes_every_sample_as_an_evaluation_sample_of_its_step(finished_run):
    _, sink, _, _ = finished_run
    published = [(index, RolloutFinished.model_validate(e.payload)) for index, e in enumerate(sink.events)
                 if e.type == EventType.ROLLOUT_FINISHED and e.payload["is_evaluation"]]
    [evaluation_index] = [index for index, e in enumerate(sink.events) if e.type == EventType.EVALUATION]
    samples = [sample for _, sample in published]
    # 2 problems × 3 samples, and a retry of each rejected one (the rambling answer never reached Lean).
    assert sorted(s.rollout_key for s in samples) == sorted(
        [f"a1-eval3-p{slot}-r{sample}" for slot in (0, 1) for sample in (0, 1, 2)]
        + [f"a1-eval3-retry-p{slot}-r0" for slot in (0, 1)])
    assert all(s.step == 3 for s in samples) and all(index < evaluation_index for index, _ in published)
    first_keys = {s.rollout_key for s in samples if s.turn == "first"}
    assert all(s.parent_rollout_key in first_keys for s in samples if s.turn == "retry")
    # What the evaluation counted: per problem, 1 of 3 first attempts proves it (pass@1 = 1/3), as stored.
    for problem in PROBLEMS:
        rewards = sorted(s.reward for s in samples if s.problem_id == problem.problem_id and s.turn == "first")
        assert rewards == [0.0, 0.0, 1.0]
    assert sink.of_type(EventType.EVALUATION)[0].payload["values"]["pass@1"] == pytest.approx(1 / 3)
