"""A benchmark with evaluations on it, made through the models as the ingester stores them: an RL run of
alice's, two evaluation runs of two of its checkpoints (verified by the stand-in), their samples."""

from __future__ import annotations

from proofs.models import ProofAttempt
from promptsets import benchmarks
from promptsets.models import Benchmark
from runs.models import Evaluation, Run
from trainer.config import RunConfig
from trainer.evaluation import Outcome, evaluation_curves, evaluation_report


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
                ProofAttempt.objects.create(run=run, rollout_key=f"eval0-p{problem.pk}-r{sample}", step=0,
                                            problem=problem, problem_key=problem.problem_key, sample_index=sample,
                                            reward=reward, verdict="valid" if reward else "lean_error",
                                            is_standin_verdict=True)
        evaluation_runs.append(run)
    return benchmark, trained, problems, evaluation_runs
