"""The pipelines' cast: alice's training promptset (the smoke problems), a held-out benchmark, and helpers that
end a stage's run the way the ingester does (a state change, its proof attempts and their problems' history, its
checkpoint)."""

import itertools

import pytest

from promptsets.models import Problem, Promptset, PromptsetVersion, VersionProblem, statement_hash
from tests.stored_attempts import stored_attempt
from trainer.sft.smoke_model import SMOKE_PROBLEMS

_keys = itertools.count(1)


def make_version(owner, name, statements, header="import Mathlib"):
    """Version 1 of a promptset of ``statements`` ((key, formal statement) pairs)."""
    promptset = Promptset.objects.create(owner=owner, name=name)
    version = PromptsetVersion.objects.create(promptset=promptset, number=1, problem_count=len(statements))
    for position, (key, statement) in enumerate(statements):
        problem = Problem.objects.create(promptset=promptset, problem_key=key, name=key, formal_statement=statement,
                                         header=header, statement_hash=statement_hash(statement))
        VersionProblem.objects.create(version=version, problem=problem, position=position)
    return version


SMOKE_STATEMENTS = [(problem.problem_id, problem.formal_statement) for problem in SMOKE_PROBLEMS]


@pytest.fixture
def training_version(alice):
    return make_version(alice, "smoke training", SMOKE_STATEMENTS)


@pytest.fixture
def benchmark_version(alice):
    return make_version(alice, "held-out bench", [("bench_square", "theorem bench_square : (5 : ℕ) * 5 = 25 := by")])


def answer(statement: str, tactic: str) -> str:
    """An answer in the release's format: a think block, then a lean4 block with the statement and its proof."""
    return f"<think>\n`{tactic}` closes it.\n</think>\n```lean4\n{statement}\n  {tactic}\n```"


def add_attempt(run, problem_key: str, *, accepted: bool, tactic: str = "norm_num", standin: bool = True,
                censored: bool = False, turn: str = "first"):
    # Stored as the ingester stores it, history included: the RL stage's curation reads win rates from the history.
    problem = run.promptset_version.problems.get(problem_key=problem_key)
    response = answer(problem.formal_statement, tactic)
    return stored_attempt(
        run=run, rollout_key=f"s0-{problem_key}-r{next(_keys)}", step=0, is_evaluation=run.kind == "eval",
        problem=problem, problem_key=problem_key, formal_statement=problem.formal_statement, turn=turn,
        response=response, lean_code=f"{problem.formal_statement}\n  {tactic}",
        verdict="" if censored else ("valid" if accepted else "lean_error"),
        reward=None if censored else (1.0 if accepted else 0.0), is_censored=censored, is_standin_verdict=standin)


def end_run(run, state="succeeded", *, checkpoint_step: int | None = None, reason: str = ""):
    """The run's ending as the trainer and the ingester record it: its states, and its last checkpoint if any."""
    from runs.models import Checkpoint, RunState

    run.refresh_from_db()
    if run.state == RunState.QUEUED:
        assert run.transition(RunState.STARTING)
    if state == RunState.SUCCEEDED:
        assert run.transition(RunState.RUNNING)
        if checkpoint_step is not None:
            Checkpoint.objects.create(run=run, step=checkpoint_step, path=str(run.artifacts_dir / f"step_{checkpoint_step}"))
    assert run.transition(state, reason=reason)
    return run


@pytest.fixture
def pipeline_request(training_version, benchmark_version):
    return {"name": "loop", "preset": "cpu-smoke", "training_version_id": training_version.pk,
            "benchmark_version_id": benchmark_version.pk, "harvest_samples": 2, "benchmark_samples": 2,
            "sft_fields": {}, "rl_fields": {"total_steps": 2}, "rl_max_win_rate": 0.5, "max_iterations": 2,
            "min_gain": 1}
