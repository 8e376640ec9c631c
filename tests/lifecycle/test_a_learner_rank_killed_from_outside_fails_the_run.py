"""A learner rank killed from outside (the kernel's OOM killer sends SIGKILL) fails the run, naming the rank and the
signal; it never ends "cancelled", and it is a failure of the infrastructure (the next attempt resumes), since
nothing of the run's code failed. The driver sees the rank's actor die; learner rank 0, on the same host, reads how
it died (trainer/loop/distributed.py ``PeerExitWatch``). A run ends cancelled only when it was told to stop: Ray's
job stop (SIGTERM to the driver), which the driver passes to every rank.

Both are real two-rank CPU runs placed as actors by the driver, as the platform starts a data-parallel run."""

from __future__ import annotations

import signal

from tests.lifecycle.trainer_process import events_until_it_ends, learner_rank, start_smoke_trainer
from trainer.verification.standin_server import StandinServerThread


def stop_as_ray_does(driver) -> None:
    """Ray's job stop: SIGTERM to the job's entrypoint, the run's driver (its rank actors are workers of Ray's)."""
    driver.send_signal(signal.SIGTERM)


def run_two_ranks_until(tmp_path, at_step_two) -> tuple[list[dict], str]:
    with StandinServerThread() as server:
        trainer = start_smoke_trainer(tmp_path, server.url, "--set", "cluster.num_gpus=2")
        events = events_until_it_ends(trainer, lambda: at_step_two(trainer))
        stderr = trainer.stderr.read()
    return events, stderr


def test_a_rank_killed_by_sigkill_fails_the_run_naming_the_rank_and_the_signal(tmp_path):
    events, stderr = run_two_ranks_until(tmp_path, lambda trainer: learner_rank(trainer, 1).send_signal(signal.SIGKILL))
    finished = [e["payload"] for e in events if e["type"] == "run_finished"]
    assert len(finished) == 1, f"events: {[e['type'] for e in events]}\nstderr: {stderr[-3000:]}"
    assert finished[0]["status"] == "failed", f"{finished[0]}\n{stderr[-3000:]}"
    # The raylet may reap the killed worker before rank 0 reads its exit status: then it "ended without a word".
    assert finished[0]["reason"].startswith(("rank 1 was killed by signal 9 (SIGKILL) during step 2",
                                             "rank 1 ended during step 2 without a word")), finished[0]
    assert "nobody cancelled the run" in finished[0]["reason"]
    assert finished[0]["cause"] == "infrastructure"
    errors = [e["payload"]["message"] for e in events if e["type"] == "error"]
    assert errors and errors[0] == finished[0]["reason"]


def test_rays_stop_of_a_two_rank_run_still_ends_it_cancelled(tmp_path):
    events, stderr = run_two_ranks_until(tmp_path, stop_as_ray_does)
    finished = [e["payload"] for e in events if e["type"] == "run_finished"]
    assert len(finished) == 1, f"events: {[e['type'] for e in events]}\nstderr: {stderr[-3000:]}"
    assert finished[0]["status"] == "cancelled", f"{finished[0]}\n{stderr[-3000:]}"
    assert not [e for e in events if e["type"] == "error"]
