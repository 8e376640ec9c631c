"""A benchmark with evaluations on it, made through the models as the ingester stores them: an RL run of
alice's and two evaluation runs of two of its checkpoints (verified by the stand-in), their samples; or an RL
run's own periodic evaluations, their samples beside its training rollouts."""

from __future__ import annotations

from proofs.models import ProofAttempt
from promptsets import benchmarks
from promptsets.models import Benchmark
from runs.models import Evaluation, Run
from trainer.config import RunConfig
from trainer.loop.evaluation import Outcome, evaluation_curves, evaluation_report


def evaluation_values(solved_by_problem: dict[str, list[float]], *, standin: bool) -> dict:
    first = {key: [Outcome(score, score) for score in scores] for key, scores in solved_by_problem.items()}
    values = {**evaluation_report(first), **evaluation_curves(first)}
    values["standin_verdicts"] = float(sum(len(scores) for scores in solved_by_problem.values())) if standin else 0.0
    return values


def two_checkpoint_evaluations(owner):
    """miniF2F-test with two evaluations of checkpoints 1 and 2 of one run: checkpoint 2 newly solves the
    second problem and loses the first. Returns (benchmark, trained run, first eval run, second eval run)."""
    benchmarks.create_shipped_benchmarks()
    benchmark = Benchmark.objects.get(reference_key=benchmarks.MINIF2F_TEST)
    version = benchmark.version
    config = RunConfig.from_preset("cpu-smoke").to_json_dict()
    trained = Run.objects.create(owner=owner, name="trained", promptset_version=version, preset="cpu-smoke",
                                 config=config, state="succeeded")
    checkpoints = [trained.checkpoints.create(step=step, path=f"/artifacts/{trained.pk}/step_{step}") for step in (1, 2)]
    problems = [entry.problem for entry in version.entries.select_related("problem").order_by("position")[:3]]
    scores = [  # per checkpoint, per problem: the two samples' rewards
        {problems[0].problem_key: [1.0, 0.0], problems[1].problem_key: [0.0, 0.0], problems[2].problem_key: [0.0, 0.0]},
        {problems[0].problem_key: [0.0, 0.0], problems[1].problem_key: [0.0, 1.0], problems[2].problem_key: [0.0, 0.0]},
    ]
    evaluation_runs = []
    for checkpoint, by_problem in zip(checkpoints, scores):
        run = Run.objects.create(owner=owner, name=f"eval of step {checkpoint.step}", kind="eval",
                                 promptset_version=version, preset="cpu-smoke", config=config, state="succeeded",
                                 starting_checkpoint=checkpoint)
        Evaluation.objects.create(run=run, step=0, values=evaluation_values(by_problem, standin=True))
        for problem in problems:
            for sample, reward in enumerate(by_problem[problem.problem_key]):
                ProofAttempt.objects.create(run=run, rollout_key=f"a1-eval0-p{problem.pk}-r{sample}", step=0,
                                            is_evaluation=True, problem=problem, problem_key=problem.problem_key,
                                            sample_index=sample, reward=reward,
                                            verdict="valid" if reward else "lean_error", is_standin_verdict=True)
        evaluation_runs.append(run)
    return benchmark, trained, problems, evaluation_runs


def store_samples(run, step, problem, rewards, *, is_evaluation, run_attempt=1):
    """One stored rollout per reward (None: censored), as the ingester stores a run's rollouts of ``step``."""
    prefix = f"a{run_attempt}-eval{step}" if is_evaluation else f"a{run_attempt}-s{step}"
    for sample, reward in enumerate(rewards):
        ProofAttempt.objects.create(
            run=run, rollout_key=f"{prefix}-p{problem.pk}-r{sample}", run_attempt=run_attempt, step=step,
            is_evaluation=is_evaluation, problem=problem, problem_key=problem.problem_key, sample_index=sample,
            reward=reward, is_censored=reward is None, is_standin_verdict=True,
            verdict="infra_error" if reward is None else ("valid" if reward else "lean_error"))


def periodic_evaluations(owner):
    """An RL run of alice's on miniF2F-test that evaluated itself at steps 1 and 2 (samples stored), beside
    training rollouts of those steps, and at step 3 by an older trainer (figures only).

    Step 1's evaluation solves problem 0 and is censored on problem 2; step 2's solves problem 1 and fails
    problem 0 (a resumed attempt 2 evaluated step 2 again: its samples count, not attempt 1's, which had
    solved problem 0). Training rollouts of step 1 solve problem 1 and of step 2 problem 0: neither counts.
    Returns (benchmark, run, problems)."""
    benchmarks.create_shipped_benchmarks()
    benchmark = Benchmark.objects.get(reference_key=benchmarks.MINIF2F_TEST)
    version = benchmark.version
    run = Run.objects.create(owner=owner, name="learning", promptset_version=version, preset="cpu-demo",
                             config=RunConfig.from_preset("cpu-demo").to_json_dict(), state="succeeded", attempt=2)
    problems = [entry.problem for entry in version.entries.select_related("problem").order_by("position")[:3]]
    evaluated = {
        1: {problems[0]: [1.0, 0.0], problems[1]: [0.0, 0.0], problems[2]: [0.0, None]},
        2: {problems[0]: [0.0, 0.0], problems[1]: [0.0, 1.0], problems[2]: [0.0, 0.0]},
    }
    for step, by_problem in evaluated.items():
        run_attempt = 2 if step == 2 else 1
        Evaluation.objects.create(run=run, step=step, values=evaluation_values(
            {p.problem_key: [r for r in rewards if r is not None] for p, rewards in by_problem.items()}, standin=True))
        for problem, rewards in by_problem.items():
            store_samples(run, step, problem, rewards, is_evaluation=True, run_attempt=run_attempt)
    store_samples(run, 2, problems[0], [1.0, 1.0], is_evaluation=True, run_attempt=1)  # the replaced attempt's
    store_samples(run, 1, problems[1], [1.0], is_evaluation=False)
    store_samples(run, 2, problems[0], [1.0], is_evaluation=False)
    Evaluation.objects.create(run=run, step=3, values=evaluation_values({p.problem_key: [0.0] for p in problems},
                                                                        standin=True))
    return benchmark, run, problems
