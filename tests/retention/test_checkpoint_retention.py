"""Checkpoint retention: a run keeps its latest N checkpoints and its best by evaluation, deletes the
rest once a newer one is complete, says so in its events, and the run page shows what is left and the
disk the run uses."""

from __future__ import annotations

import json

import pytest
import redis

from trainer.run.checkpoint import checkpoint_folder, checkpoint_steps, checkpoints_to_remove, latest_checkpoint, step_of
from trainer.run.checkpoint import EVALUATIONS_FILE, best_evaluated_step


def test_the_latest_n_and_the_kept_steps_survive():
    assert checkpoints_to_remove([5, 10, 15, 20, 25], keep_last=2, keep={10}) == [5, 15]
    assert checkpoints_to_remove([5], keep_last=3, keep=set()) == []


def test_a_checkpoint_counts_once_its_step_folder_holds_its_trainer_state(tmp_path):
    for step, complete in ((3, True), (12, True), (40, False)):
        checkpoint_folder(tmp_path, step).mkdir(parents=True)
        if complete:
            (checkpoint_folder(tmp_path, step) / "trainer_state.pt").write_bytes(b"")
    (tmp_path / "checkpoints" / ".removing-step_000050").mkdir()
    assert checkpoint_steps(tmp_path) == [3, 12]
    assert latest_checkpoint(tmp_path) == checkpoint_folder(tmp_path, 12)
    assert latest_checkpoint(tmp_path / "elsewhere") is None
    assert [step_of(name) for name in ("step_000012", "run/step_1234567", "step_12", "best", ".removing-step_000050")] \
        == [12, 1234567, None, None, None]


def test_the_best_checkpoint_is_the_highest_evaluation_among_those_on_disk(tmp_path):
    rows = [(5, 0.40), (10, 0.55), (15, 0.50), (20, 0.55)]
    (tmp_path / EVALUATIONS_FILE).write_text("".join(json.dumps({"step": step, "values": {"pass@1": value}}) + "\n"
                                                     for step, value in rows))
    assert best_evaluated_step(tmp_path, "pass@1", [5, 10, 15, 20]) == 20  # the latest of ties
    assert best_evaluated_step(tmp_path, "pass@1", [5, 10, 15]) == 10
    assert best_evaluated_step(tmp_path, "pass@1", [25]) is None  # no evaluation of a checkpoint on disk
    assert best_evaluated_step(tmp_path, None, [5, 10]) is None


def test_a_run_keeps_only_its_latest_checkpoint_and_announces_each_deletion(tmp_path, capsys):
    from trainer.__main__ import main as trainer_main
    from trainer.verification.standin_server import StandinServerThread

    promptset = tmp_path / "problems.jsonl"
    promptset.write_text(json.dumps({"problem_id": "add", "formal_statement": "theorem add : (2 : ℕ) + 3 = 5 := by"}) + "\n")
    arguments = ["run", "--preset", "cpu-smoke", "--promptset", str(promptset), "--output", str(tmp_path / "run"),
                 "--set", "schedule.checkpoint_every=1", "--set", "schedule.keep_last_checkpoints=1"]
    with StandinServerThread() as server:
        assert trainer_main([*arguments, "--lean-url", server.url, "--set", "schedule.total_steps=3"]) == 0
        events = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
        assert checkpoint_steps(tmp_path / "run") == [3]
        removed = [event["payload"] for event in events if event["type"] == "checkpoint_removed"]
        assert [payload["step"] for payload in removed] == [1, 2]
        assert removed[0]["reason"].startswith("retention: the latest 1")
        # The kept checkpoint is whole: a resumed run continues from it.
        assert trainer_main([*arguments, "--lean-url", server.url, "--set", "schedule.total_steps=4", "--resume"]) == 0
    assert latest_checkpoint(tmp_path / "run").name == "step_000004"
    assert not list((tmp_path / "run" / "checkpoints").glob(".removing-*"))


@pytest.mark.django_db(transaction=True)
def test_the_run_page_marks_deleted_checkpoints_and_shows_the_disk_used(client, alice, make_run, settings):
    from runs.ingest import EventIngester
    from runs.models import Checkpoint
    from trainer.observability.events import EventPublisher, EventType, RedisStreamSink

    run = make_run(state="running")
    folder = run.artifacts_dir / "checkpoints"
    for step in (5, 10):
        (folder / f"step_{step:06d}").mkdir(parents=True)
        (folder / f"step_{step:06d}" / "weights").write_bytes(b"\0" * 2048)
    publisher = EventPublisher(str(run.pk), RedisStreamSink(settings.REDIS_URL, str(run.pk)))
    for step in (5, 10):
        publisher.publish(EventType.CHECKPOINT_SAVED, {"step": step, "path": str(folder / f"step_{step:06d}")})
    publisher.publish(EventType.CHECKPOINT_REMOVED, {"step": 5, "reason": "retention: the latest 1 are kept"})
    EventIngester().poll_once()
    assert Checkpoint.objects.get(run=run, step=5).removed_at is not None
    assert Checkpoint.objects.get(run=run, step=10).removed_at is None

    client.force_login(alice)
    page = client.get(run.get_absolute_url()).content.decode()
    assert "Disk used by this run: 4.1 kB" in page  # 4,096 bytes
    assert "(retention: the latest 1 are kept)" in page
    assert page.count("export the model") == 1  # only the checkpoint still on disk offers downloads
    listed = client.get(f"/api/runs/{run.pk}/checkpoints").json()
    assert [(c["step"], c["model_url"] is None) for c in listed] == [(5, True), (10, False)]
    redis.Redis.from_url(settings.REDIS_URL).delete(f"trainer:run:{run.pk}:events")


@pytest.mark.django_db
def test_resume_continues_from_the_newest_checkpoint_retention_kept(make_run):
    from django.utils import timezone

    run = make_run(state="failed")
    assert run.resume_checkpoint() is None
    run.checkpoints.create(step=5, path="/a")
    run.checkpoints.create(step=10, path="/b", removed_at=timezone.now(), removal_reason="retention")
    run.checkpoints.create(step=3, path="/c")
    assert run.resume_checkpoint().step == 5
