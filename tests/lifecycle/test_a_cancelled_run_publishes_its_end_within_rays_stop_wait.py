"""Ray stops a job with SIGTERM and SIGKILLs it RAY_JOB_STOP_WAIT_TIME_S later (3 s by default): the platform
sends a longer wait with every job, and a cancelled run publishes its "cancelled" end within it, however
long its own shutdown would take."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from deploy.services import REPO_DIR
from trainer.observability.events import stream_key
from trainer.run.lifecycle import STOP_WAIT_VARIABLE, stop_deadline_s

# Stand-ins for runs that end badly once stopped: the lifecycle is the trainer's own; the work, the tear-down and
# the sink are what each test says, in the script after this prelude.
STAND_IN_RUN = textwrap.dedent("""
    import sys, time
    from pathlib import Path
    from trainer.observability.events import EventPublisher, EventType, StdoutSink
    from trainer.run.lifecycle import RunCancelled, RunLifecycle

    class StandInRun(RunLifecycle):
        sink = StdoutSink

        def __init__(self):
            self.publisher = EventPublisher("stand-in", self.sink())
            self._seq_recorder = self.publisher.record_sequence()
            self.output_dir = Path(sys.argv[1])

        def live(self):
            self.publisher.publish(EventType.RUN_STARTED, {})
            self.work()

        def work(self):
            time.sleep(600)
""")

# A run whose tear-down hangs (vLLM's engines, a generator process, a peer in a collective).
HANGING_TEAR_DOWN = textwrap.dedent("""
    class HangingTearDown(StandInRun):
        def tear_down(self):
            time.sleep(600)

    HangingTearDown().run()
""")

# A run inside a C++ call that never returns to Python (a rendezvous whose peer is gone, as a collective whose peer
# died): no Python signal handler runs until it does.
STUCK_WAITING_FOR_A_PEER = textwrap.dedent("""
    import datetime, socket, threading
    import psutil
    import torch.distributed as dist

    class WaitingForAPeer(StandInRun):
        def live(self):
            with socket.socket() as probe:
                probe.bind(("127.0.0.1", 0))
                port = probe.getsockname()[1]

            def say_started_once_waiting():  # the store listens, then waits inside its constructor
                while not any(connection.status == psutil.CONN_LISTEN and connection.laddr.port == port
                              for connection in psutil.Process().net_connections("tcp")):
                    time.sleep(0.05)
                self.publisher.publish(EventType.RUN_STARTED, {})

            threading.Thread(target=say_started_once_waiting, daemon=True).start()
            dist.TCPStore("127.0.0.1", port, 2, True, timeout=datetime.timedelta(seconds=600))  # waits for rank 1

    WaitingForAPeer().run()
""")

# The race of a tear-down that ends just after the deadline: the watchdog has claimed the end and is still
# delivering it (a slow sink) when the run's own thread comes back.
TEAR_DOWN_ENDING_AS_THE_WATCHDOG_DELIVERS = textwrap.dedent("""
    class SlowToDeliverTheEnd(StdoutSink):
        def write(self, event):
            if event.type == EventType.RUN_FINISHED:
                time.sleep(1.5)
            super().write(event)

    class TearDownJustPastTheDeadline(StandInRun):
        sink = SlowToDeliverTheEnd

        def tear_down(self):
            time.sleep(2.3)  # the deadline is 2 s: the watchdog claims the end, then this returns

    TearDownJustPastTheDeadline().run()
""")

# Ray's stop signals the trainer's children as well: a child's end surfaces in the run as an error of its own.
SHUTDOWN_BROKEN_BY_A_STOPPED_CHILD = textwrap.dedent("""
    class ChildGoneWithTheStop(StandInRun):
        def live(self):
            try:  # from before the run says it started, when the test may stop it
                super().live()
            except RunCancelled:
                raise BrokenPipeError("the generator process is gone")

    ChildGoneWithTheStop().run()
""")


# ray.init replaces the process's SIGTERM handler with its own, sys.exit(15), before it connects (ray/_private/worker.py
# ``init``); its caller can put its own back only once it returns. Ray's stop comes in between here (the run's own
# handler, installed first, is the lifecycle's, and the driver's).
STOP_ONCE_RAYS_HANDLER_IS_IN = textwrap.dedent("""
    import os, signal, sys, threading, time

    def stop_once_rays_handler_is_in():
        while getattr(signal.getsignal(signal.SIGTERM), "__module__", "").split(".")[0] != "ray":
            time.sleep(0.001)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=stop_once_rays_handler_is_in, daemon=True).start()
""")

# The Ray metrics sink connects on a step's first metrics.
RUN_STOPPED_WHILE_ITS_METRICS_CONNECT = textwrap.dedent("""
    from trainer.observability.ray_metrics import RayMetricsSink

    class ConnectingToRaysMetrics(StandInRun):
        sink = staticmethod(lambda: RayMetricsSink(StdoutSink(), "stand-in", address=os.environ["RAY_ADDRESS"]))

        def work(self):
            self.step = 1
            self.publisher.publish(EventType.METRICS, {"step": 1, "values": {"reward/mean": 0.5}})  # connects
            time.sleep(600)

    ConnectingToRaysMetrics().run()
""")

# A run of several ranks: its driver connects first thing (trainer/loop/ray_driver.py).
DRIVER_STOPPED_WHILE_IT_CONNECTS = textwrap.dedent("""
    from types import SimpleNamespace
    from trainer.config import RunConfig
    from trainer.loop.ray_driver import RunDriver

    sink = StdoutSink()
    config = RunConfig.from_preset("cpu-smoke", {"cluster": {"num_gpus": 2}})
    arguments = SimpleNamespace(run_id="stand-in", attempt=1, output=sys.argv[1])
    sys.exit(RunDriver(arguments, config, sink, EventPublisher("stand-in", sink), rank_body=None).run())
""")


def stop_once_started(tmp_path, script: str, stop_wait_s: str) -> tuple[int, float, list[dict], str]:
    """Run ``script`` after the prelude, SIGTERM it once it has started (as Ray's stop does), and return its exit
    code, the seconds from the signal to its end, its events and its standard error."""
    environment = {"PATH": "/usr/bin:/bin", STOP_WAIT_VARIABLE: stop_wait_s, "PYTHONPATH": str(REPO_DIR)}
    process = subprocess.Popen([sys.executable, "-c", STAND_IN_RUN + script, str(tmp_path)], cwd=REPO_DIR,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=environment)
    try:
        assert json.loads(process.stdout.readline())["type"] == "run_started"
        stopped_at = time.monotonic()
        process.send_signal(signal.SIGTERM)
        code = process.wait(timeout=30)
        took = time.monotonic() - stopped_at
        events = [json.loads(line) for line in process.stdout.read().splitlines() if line.startswith("{")]
        return code, took, events, process.stderr.read()
    finally:
        if process.poll() is None:
            process.kill()


def test_the_deadline_lies_inside_rays_wait_with_room_for_the_last_events():
    assert stop_deadline_s({}) == 1.5  # Ray's default wait, 3 s
    assert stop_deadline_s({STOP_WAIT_VARIABLE: "60"}) == 55.0
    assert stop_deadline_s({STOP_WAIT_VARIABLE: "4"}) == 2.0


def test_a_run_whose_tear_down_hangs_still_publishes_its_cancelled_end_within_the_deadline(tmp_path):
    code, took, events, stderr = stop_once_started(tmp_path, HANGING_TEAR_DOWN, stop_wait_s="4")
    assert code == 143 and took < 4, (code, took, stderr[-2000:])  # before Ray's SIGKILL at 4 s
    [finished] = [event for event in events if event["type"] == "run_finished"]
    assert finished["payload"]["status"] == "cancelled"
    assert "its shutdown outlasted 2 s" in finished["payload"]["reason"]


def test_a_run_stuck_in_a_call_that_never_returns_to_python_still_publishes_its_cancelled_end(tmp_path):
    code, took, events, stderr = stop_once_started(tmp_path, STUCK_WAITING_FOR_A_PEER, stop_wait_s="4")
    assert code == 143 and took < 4, (code, took, stderr[-2000:])
    [finished] = [event for event in events if event["type"] == "run_finished"]
    assert finished["payload"]["status"] == "cancelled"


def test_a_tear_down_ending_while_the_watchdog_delivers_the_end_leaves_it_to_the_watchdog(tmp_path):
    code, _, events, stderr = stop_once_started(tmp_path, TEAR_DOWN_ENDING_AS_THE_WATCHDOG_DELIVERS, stop_wait_s="4")
    assert code == 143, (code, stderr[-2000:])
    [finished] = [event for event in events if event["type"] == "run_finished"]
    assert finished["payload"]["status"] == "cancelled"


def test_an_error_raised_by_the_shutdown_of_a_stopped_run_ends_it_cancelled_naming_both(tmp_path):
    _, _, events, _ = stop_once_started(tmp_path, SHUTDOWN_BROKEN_BY_A_STOPPED_CHILD, stop_wait_s="60")
    [finished] = [event for event in events if event["type"] == "run_finished"]
    assert finished["payload"]["status"] == "cancelled", finished
    assert finished["payload"]["reason"] == ("stopped by SIGTERM during step 0; its shutdown then raised "
                                             "BrokenPipeError: the generator process is gone")
    assert not [event for event in events if event["type"] == "error"]


def stopped_while_ray_connects(tmp_path, ray_head, script: str) -> tuple[int, list[dict], str]:
    """Run ``script`` after the prelude, joined to the suite's Ray head; its exit code, its events, its standard
    error."""
    environment = {"PATH": "/usr/bin:/bin", STOP_WAIT_VARIABLE: "60", "PYTHONPATH": str(REPO_DIR),
                   "RAY_ADDRESS": f"127.0.0.1:{ray_head.port}"}
    program = STAND_IN_RUN + STOP_ONCE_RAYS_HANDLER_IS_IN + script
    process = subprocess.Popen([sys.executable, "-c", program, str(tmp_path)], cwd=REPO_DIR, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True, env=environment)
    try:
        out, err = process.communicate(timeout=120)
    finally:
        process.kill()
    return process.returncode, [json.loads(line) for line in out.splitlines() if line.startswith("{")], err


@pytest.mark.parametrize("script, reason", [
    (RUN_STOPPED_WHILE_ITS_METRICS_CONNECT, "stopped by SIGTERM during step 1"),
    (DRIVER_STOPPED_WHILE_IT_CONNECTS, "stopped by SIGTERM while it connected to Ray"),
], ids=["a_run_whose_metrics_connect", "the_driver_of_a_run_of_several_ranks"])
def test_a_stop_heard_by_rays_own_handler_while_ray_connects_ends_the_run_cancelled(tmp_path, ray_head, script,
                                                                                     reason):
    code, events, stderr = stopped_while_ray_connects(tmp_path, ray_head, script)
    finished = [event["payload"] for event in events if event["type"] == "run_finished"]
    assert [(end["status"], end["reason"]) for end in finished] == [("cancelled", reason)], (code, stderr[-3000:])
    assert not [event for event in events if event["type"] == "error"]


@pytest.mark.django_db(transaction=True)
def test_ray_waits_the_platforms_stop_wait_before_it_kills_a_cancelled_job(make_admitted_run, ray_head, settings,
                                                                           tmp_path):
    from runs import actions
    from tests.runs.jobs import running_job_of_a_shell_trainer, wait_for_job

    evidence = tmp_path / "ended-in-its-own-time"
    # Six seconds to shut down: longer than Ray's default wait, shorter than the platform's.
    run = running_job_of_a_shell_trainer(make_admitted_run, settings, tmp_path / "slow-to-stop-trainer",
                                         f"trap 'sleep 6; touch {evidence}; exit 143' TERM\n"
                                         "while true; do sleep 0.2; done\n")
    time.sleep(1)  # the trap is set once the shell has started
    assert actions.cancel_run(run)
    wait_for_job(run.ray_job_id, {"STOPPED"}, timeout=60)
    assert evidence.exists()


@pytest.mark.django_db(transaction=True)
def test_a_trainer_run_cancelled_through_ray_publishes_its_cancelled_end(make_admitted_run, ray_head, lean_standin,
                                                                         settings):
    import redis

    from runs import actions
    from tests.runs.jobs import wait_for_job
    from trainer.config import RunConfig

    config = RunConfig.from_preset("cpu-demo", {
        "model": {"source": "tiny_random"}, "schedule": {"total_steps": 1000, "eval_every": 0},
        "rollout": {"engine": "transformers", "prompts_per_step": 2, "samples_per_prompt": 2, "max_response_tokens": 8},
        "verifier": {"url": lean_standin.url}})
    run = make_admitted_run(config=config.to_json_dict())
    actions.dispatch(run.pk)
    run.refresh_from_db()
    assert run.ray_job_id, run.failure_reason
    client = redis.Redis.from_url(settings.TRAINER_REDIS_URL)

    def events():
        return [json.loads(fields[b"event"]) for _, fields in client.xrange(stream_key(str(run.pk)))]

    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and not any(e["type"] == "step_started" for e in events()):
        assert not ray_jobs_ended(run.ray_job_id), [(e["type"], e["payload"]) for e in events()]
        time.sleep(1)
    assert actions.cancel_run(run)
    wait_for_job(run.ray_job_id, {"STOPPED"}, timeout=90)
    finished = [e for e in events() if e["type"] == "run_finished"]
    assert [e["payload"]["status"] for e in finished] == ["cancelled"], [(e["type"], e["payload"]) for e in events() if e["type"] in ("run_finished", "error", "log")]
    assert finished[0]["payload"]["reason"].startswith("stopped by SIGTERM")


def ray_jobs_ended(job_id: str) -> bool:
    from runs import ray_jobs

    return ray_jobs.status(job_id).is_terminal
