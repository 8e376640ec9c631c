"""An evaluation run through the real stack (API → Celery → Ray job → trainer evaluate → Redis → ingester →
Postgres): it trains nothing and GET /api/runs/<id> reports its pass@k curve with 95% intervals."""

import time

import pytest
from django.test import Client

from proofs.models import ProofAttempt
from runs.models import Run, RunState

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_an_eval_run_launched_through_the_api_reports_pass_at_k_for_every_k_up_to_its_samples(
        alice, promptset_version, platform_processes, platform_logs):
    client = Client()
    client.force_login(alice)
    response = client.post("/api/runs/", {"kind": "eval", "preset": "cpu-smoke", "eval_samples": 4,
                                          "promptset_version_id": promptset_version.pk, "name": "eval of the toy"},
                           content_type="application/json")
    assert response.status_code == 201, response.content
    run = Run.objects.get(pk=response.json()["id"])
    deadline = time.monotonic() + 420
    while time.monotonic() < deadline:
        run.refresh_from_db()
        if run.state in (RunState.SUCCEEDED, RunState.FAILED, RunState.CANCELLED):
            break
        time.sleep(0.5)
    assert run.state == RunState.SUCCEEDED, f"{run.state} {run.failure_reason}\n{platform_logs()}"
    assert not run.step_metrics.exists()  # no training step

    body = client.get(f"/api/runs/{run.pk}").json()
    evaluation = body["evaluation"]
    assert body["kind"] == "eval" and evaluation["step"] == 0
    assert evaluation["with_error_correction"]  # the preset's default: one retry per failed first attempt
    for family in ("pass_at_k", "acc_pass_at_k", "pass_at_k_with_error_correction"):
        report = evaluation[family]
        if not report["is_measured"]:
            assert report["note"].startswith("not measured") and report["curve"] == []
            continue
        assert [point["k"] for point in report["curve"]] == [1, 2, 3, 4]
        for point in report["curve"]:
            assert 0 <= point["ci95_low"] <= point["pass_at_k"] <= point["ci95_high"] <= 1
        values = [point["pass_at_k"] for point in report["curve"]]
        assert values == sorted(values)  # pass@k never falls as k grows
    # The demo statements lie in the stand-in's fragment: its verdicts are real there, so something is measured.
    assert evaluation["pass_at_k"]["is_measured"], evaluation
    assert evaluation["verdict_cache_hit_rate"] is not None

    # Every sample is kept as a rollout of step 0, for the proof viewer; each retry names its first attempt.
    samples = ProofAttempt.objects.filter(run=run)
    assert samples.filter(turn="first", step=0).count() == promptset_version.problem_count * 4
    first_keys = set(samples.filter(turn="first").values_list("rollout_key", flat=True))
    assert all(retry.parent_rollout_key in first_keys for retry in samples.filter(turn="retry"))
