"""A two-iteration cpu-smoke pipeline through the real platform: the API, Celery, Ray jobs, the trainer, the stand-in
Lean server (its verdicts labelled as the stand-in's), the ingester and the sweeper. Iteration 2's SFT data holds the
proofs iteration 1 harvested and nothing of the held-out benchmark; iteration 2's RL promptset leaves out what
iteration 1 solved often; the lineage page names every edge."""

import json
import time
from pathlib import Path

import pytest
from django.test import Client

from pipelines.corpus import benchmark_keys, contamination_key
from pipelines.models import Pipeline, PipelineState, Stage
from promptsets.demo import SMOKE_PROMPTSET_NAME
from promptsets.versions import create_smoke_promptset
from proofs.models import ProofAttempt
from tests.pipelines.conftest import make_version
from trainer.sft.smoke_model import SMOKE_HEADER, SMOKE_PROBLEMS

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]

# The smoke model answers only the smoke problems: the benchmark holds one of them, so it is also a statement
# planted in the training promptset, and the contamination guard must keep its proofs out of every corpus.
HELD_OUT = next(problem for problem in SMOKE_PROBLEMS if problem.problem_id == "smoke_int_sub")


def launch_pipeline(client, owner, name="loop", max_iterations=2) -> Pipeline:
    """A cpu-smoke pipeline of ``owner``'s through the API: the smoke promptset, a benchmark of one of its statements."""
    smoke, _ = create_smoke_promptset(owner)
    benchmark = make_version(owner, f"held-out smoke of {name}", [(HELD_OUT.problem_id, HELD_OUT.formal_statement)],
                             header=SMOKE_HEADER)
    response = client.post("/api/pipelines/", {
        "name": name, "preset": "cpu-smoke", "training_version_id": smoke.versions.get().pk,
        "benchmark_version_id": benchmark.pk, "harvest_samples": 2, "benchmark_samples": 2,
        "rl_fields": {"total_steps": 2}, "rl_max_win_rate": 0.5, "max_iterations": max_iterations, "min_gain": 1,
    }, content_type="application/json")
    assert response.status_code == 201, response.content
    return Pipeline.objects.get(pk=response.json()["id"])


def win_rates_before(owner, moment) -> dict[str, tuple[int, int]]:
    """Problem key → (accepted, scored) over the scored first attempts of ``owner``'s runs on the training promptset
    stored before ``moment``: the history a curation made at that moment read."""
    rates: dict[str, tuple[int, int]] = {}
    for attempt in ProofAttempt.objects.filter(run__owner=owner, turn="first", reward__isnull=False,
                                               created_at__lt=moment, problem__promptset__name=SMOKE_PROMPTSET_NAME):
        accepted, scored = rates.get(attempt.problem_key, (0, 0))
        rates[attempt.problem_key] = (accepted + (attempt.reward >= 1), scored + 1)
    return rates


def wait_for_end(pipeline: Pipeline, logs, timeout_s: float = 1500) -> Pipeline:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        pipeline.refresh_from_db()
        if pipeline.state != PipelineState.RUNNING:
            return pipeline
        time.sleep(1)
    raise AssertionError(f"pipeline still running after {timeout_s} s at {pipeline.current_iteration.stage}: "
                         f"{list(pipeline.events.values_list('message', flat=True))}\n{logs()}")


def test_two_iterations_harvest_fine_tune_reinforce_and_evaluate_with_every_edge_named(
        alice, platform_processes, platform_logs):
    client = Client()
    client.force_login(alice)
    pipeline = wait_for_end(launch_pipeline(client, alice), platform_logs)
    assert pipeline.state == PipelineState.SUCCEEDED, f"{pipeline.failure_reason}\n{platform_logs()}"
    assert pipeline.verified_by == "stand-in"  # no Lean here: labelled, never passed off as Lean's
    first, second = pipeline.iterations.order_by("number")
    assert first.stage == second.stage == Stage.DONE
    assert "maximum of 2" in second.plateau_verdict

    # Iteration 2's SFT data: every proof iteration 1 harvested (deduplicated), and nothing of the benchmark.
    harvested_1 = ProofAttempt.objects.filter(run=first.harvest_run, reward__gte=1, is_standin_verdict=True)
    assert harvested_1.exists(), "the smoke model solves smoke_nat_add: iteration 1 must harvest proofs"
    rows = [json.loads(line) for line in Path(second.sft_run.demonstrations_path).read_text().splitlines()]
    sft_attempts = {row["proof_attempt_id"] for row in rows}
    refused = benchmark_keys(pipeline.benchmark_version)
    clean_1 = {attempt.pk: attempt for attempt in harvested_1 if contamination_key(attempt.formal_statement) not in refused}
    kept_once = {(attempt.problem_key, " ".join(attempt.lean_code.split())) for attempt in clean_1.values()}
    assert len({row["proof_attempt_id"] for row in rows if row["run_id"] == first.harvest_run_id}) == len(kept_once)
    assert sft_attempts & set(clean_1), "iteration 2's SFT data lost iteration 1's proofs"
    assert not any(contamination_key(row["formal_statement"]) in refused for row in rows)
    assert first.corpus.refused_count >= 1  # the smoke model proves the held-out statement: its proofs were refused
    assert all(row["verified_by"] == "stand-in" for row in rows)

    # The lineage page names every edge: each run, each corpus, each promptset version and each model.
    page = client.get(f"/pipelines/{pipeline.pk}/lineage/").content.decode()
    body = client.get(f"/api/pipelines/{pipeline.pk}").json()
    assert len(body["lineage"]) == 8  # four stages in each of two iterations
    for iteration in (first, second):
        for run in (iteration.harvest_run, iteration.sft_run, iteration.rl_run, iteration.benchmark_run):
            assert f'href="/runs/{run.pk}/"' in page
        assert f"proof corpus v{iteration.corpus.number} ({iteration.corpus.proof_count} proofs" in page
        assert f"v{iteration.rl_version.number} ({iteration.rl_version.problem_count} problems)" in page
        for run in (iteration.sft_run, iteration.rl_run):
            assert f"/pipelines/checkpoints/{run.checkpoints.order_by('-step').first().pk}/" in page
    assert "Stand-in verdicts" in page

    # The RL model's checkpoint page says which corpus and promptset made it, back to the base model.
    rl_checkpoint = second.rl_run.checkpoints.order_by("-step").first()
    chain = client.get(f"/api/pipelines/checkpoints/{rl_checkpoint.pk}/lineage").json()
    assert chain[0]["data"]["label"].startswith(f"{pipeline.training_version.promptset.name} v{second.rl_version.number}")
    assert chain[1]["data"]["label"].startswith("proof corpus v2")
    assert chain[-1]["source"].startswith("base model")

    # Iteration 2's RL promptset: what was solved often (first attempts accepted more than half the time, in every run
    # of alice's up to then, iteration 1's among them) is left out; the rest, unsolved or rarely solved, is kept.
    kept = set(second.rl_version.problems.values_list("problem_key", flat=True))
    rates = win_rates_before(alice, second.rl_version.created_at)
    solved_often = {key for key, (accepted, scored) in rates.items() if accepted / scored > 0.5}
    solved_in_iteration_1 = set(harvested_1.values_list("problem_key", flat=True))
    assert solved_often & solved_in_iteration_1, f"iteration 1 solved nothing often: {rates}"
    assert kept == set(pipeline.training_version.problems.values_list("problem_key", flat=True)) - solved_often, \
        f"kept {kept}; first attempts (accepted, scored) before its curation: {rates}"
    assert "smoke_false_mul" in kept  # false: never solved
    assert second.rl_version.rule["win_rates_verified_by"] == "stand-in"
