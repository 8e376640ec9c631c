"""The attack suite's world: alice's private things, a public promptset, and the people who try to reach them."""

from datetime import timedelta

import pytest
from django.utils import timezone

from accounts.models import ApiToken, TokenScope

SECRET_RUN_NAME = "alice-secret-run"
SECRET_PROMPTSET_NAME = "alice-secret-promptset"


@pytest.fixture
def world(alice, promptset_version, make_run, settings, tmp_path):
    """alice's private promptset, run (in a group), checkpoint, rollout, pipeline and token: what a stranger must never reach."""
    from promptsets.models import PromptsetUpload, UploadState
    from proofs.models import ProofAttempt, Turn

    promptset = promptset_version.promptset
    promptset.name = SECRET_PROMPTSET_NAME
    promptset.save()
    run = make_run(state="running", name=SECRET_RUN_NAME)
    # A real checkpoint folder inside the artifacts folder, so that its owner's download succeeds.
    settings.ARTIFACTS_DIR = tmp_path
    folder = tmp_path / "runs" / str(run.pk) / "checkpoints" / "step_000005"
    (folder / "model").mkdir(parents=True)
    (folder / "model" / "config.json").write_text("{}")
    checkpoint = run.checkpoints.create(step=5, path=str(folder))
    problem = promptset_version.problems.first()
    attempt = ProofAttempt.objects.create(run=run, rollout_key="k0", step=1, problem=problem,
                                          problem_key=problem.problem_key, turn=Turn.FIRST, reward=1.0)
    token, _ = ApiToken.issue(alice, "alice's notebook")
    upload = PromptsetUpload.objects.create(owner=alice, name=SECRET_PROMPTSET_NAME, filename="secret.jsonl",
                                            staged_path="/nowhere/secret.jsonl", state=UploadState.REJECTED)
    from promptsets.benchmarks import mark_as_benchmark

    benchmark = mark_as_benchmark(promptset_version, alice, SECRET_PROMPTSET_NAME)
    from pipelines.models import Pipeline
    from runs.models import RunGroup

    group = RunGroup.objects.create(owner=alice, name=SECRET_RUN_NAME, launch={"preset": "cpu-demo"})
    run.run_group = group
    run.save(update_fields=["run_group"])
    pipeline = Pipeline.objects.create(
        owner=alice, name=SECRET_RUN_NAME, preset="cpu-smoke", training_version=promptset_version,
        benchmark_version=promptset_version, harvest_samples=2, benchmark_samples=2, max_iterations=1, min_gain=1)
    return {"upload": upload, "promptset": promptset, "version": promptset_version, "problem": problem, "run": run,
            "checkpoint": checkpoint, "attempt": attempt, "token": token, "benchmark": benchmark, "group": group,
            "pipeline": pipeline}


@pytest.fixture
def token_of():
    """A raw API token: ``token_of(user, scope, expired=False)``."""

    def issue(user, scope=TokenScope.READ, *, expired=False):
        token, raw = ApiToken.issue(user, f"{scope} token", scope=scope)
        if expired:
            ApiToken.objects.filter(pk=token.pk).update(expires_at=timezone.now() - timedelta(seconds=1))
        return raw

    return issue


def bearer(raw):
    return {"HTTP_AUTHORIZATION": f"Bearer {raw}"}
