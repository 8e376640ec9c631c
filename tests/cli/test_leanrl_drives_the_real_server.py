"""``leanrl`` against the real server: log in with a token, upload a promptset, launch a run with the
launch form's fields, follow it to its end, fetch its rollouts as JSON Lines and download its model."""

from __future__ import annotations

import json
import stat
import zipfile

import pytest

from proofs.models import ProofAttempt
from runs.models import Run
from tests.conftest import DEMO_STATEMENTS

pytestmark = [pytest.mark.integration, pytest.mark.django_db(transaction=True)]


def test_a_researcher_uploads_launches_follows_and_fetches_from_the_terminal(
        alice, platform_processes, platform_logs, leanrl, tmp_path):
    from accounts.models import ApiToken, TokenScope

    _, token = ApiToken.issue(alice, "terminal", scope=TokenScope.LAUNCH)  # it uploads and launches
    server = platform_processes["url"]

    refused = leanrl("login", "--server", server, "--token", "lrl_not-a-token")
    assert refused.returncode == 3 and "leanrl login" in refused.stderr and "Traceback" not in refused.stderr

    logged_in = leanrl("login", "--server", server, "--token", token)
    assert logged_in.returncode == 0, logged_in.stderr
    credentials = tmp_path / "credentials.json"
    assert stat.S_IMODE(credentials.stat().st_mode) == 0o600

    problems = tmp_path / "arith.jsonl"
    problems.write_text("".join(json.dumps({"problem_id": key, "formal_statement": statement}) + "\n"
                                for key, statement in DEMO_STATEMENTS))
    uploaded = leanrl("promptsets", "upload", str(problems), "--name", "arith-cli")
    assert uploaded.returncode == 0, uploaded.stderr
    assert "with 3 problems; 0 rows rejected" in uploaded.stdout
    version_id = int(uploaded.stdout.split("(version id ")[1].split(")")[0])

    fields = leanrl("runs", "launch", "--fields")
    assert fields.returncode == 0 and "promptset_version_id" in fields.stdout and "name" in fields.stdout

    unknown = leanrl("runs", "launch", "name=x", f"promptset_version_id={version_id}", "colour=blue")
    assert unknown.returncode == 2 and "unknown launch field(s) colour" in unknown.stderr

    dotted = leanrl("runs", "launch", "name=x", f"promptset_version_id={version_id}", "optimizer.learning_rate=1e-5")
    assert dotted.returncode == 2 and "launch fields are flat names, not config paths" in dotted.stderr

    launched = leanrl("runs", "launch", "name=from-the-terminal", f"promptset_version_id={version_id}",
                      "preset=cpu-smoke", "learning_rate=1e-5")
    assert launched.returncode == 0, launched.stderr
    run_id = int(launched.stdout.split()[1])
    assert Run.objects.get(pk=run_id).config["optimizer"]["learning_rate"] == 1e-5

    followed = leanrl("runs", "follow", str(run_id), "--interval", "0.5")
    assert followed.returncode == 0, f"{followed.stdout}\n{followed.stderr}\n{platform_logs()}"
    assert f"run {run_id} succeeded at step 2" in followed.stdout
    assert "2/2" in followed.stderr  # the progress bar reached the last step
    assert "step 1 first" in followed.stdout  # rollouts were printed as they arrived, above the bar

    fetched = leanrl("rollouts", str(run_id))
    assert fetched.returncode == 0, fetched.stderr
    rows = [json.loads(line) for line in fetched.stdout.splitlines()]
    stored = ProofAttempt.objects.filter(run_id=run_id)
    assert sorted(row["rollout_key"] for row in rows) == sorted(stored.values_list("rollout_key", flat=True))
    only_step_2 = leanrl("rollouts", str(run_id), "--step", "2")
    assert {json.loads(line)["step"] for line in only_step_2.stdout.splitlines()} == {2}
    assert {(row["turn"], row["round"]) for row in rows} <= {("first", 0), ("retry", 1)}  # the release's one retry
    first_attempts = leanrl("rollouts", str(run_id), "--round", "0")
    assert sorted(json.loads(line)["rollout_key"] for line in first_attempts.stdout.splitlines()) == sorted(
        row["rollout_key"] for row in rows if row["turn"] == "first")

    listed = leanrl("checkpoints", "list", str(run_id))
    assert listed.returncode == 0 and "step 2" in listed.stdout
    downloaded = leanrl("checkpoints", "download", str(run_id), "2", "-o", "model.zip")
    assert downloaded.returncode == 0, downloaded.stderr
    with zipfile.ZipFile(tmp_path / "model.zip") as archive:
        assert "config.json" in archive.namelist()
    assert not (tmp_path / "model.zip.part").exists()

    missing = leanrl("checkpoints", "download", str(run_id), "99")
    assert missing.returncode == 3 and "Traceback" not in missing.stderr


def test_without_a_login_the_client_says_how_to_log_in(leanrl):
    result = leanrl("runs", "list")
    assert result.returncode == 2
    assert "run `leanrl login --server URL`" in result.stderr
