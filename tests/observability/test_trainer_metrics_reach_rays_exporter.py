"""Inside a Ray cluster the trainer's step metrics become Ray gauges, exported on the node's metrics
port for Prometheus; outside one, or with the cluster unreachable, the run goes on without them."""

import subprocess
import sys
import textwrap
import time

import httpx

from trainer.observability.events import EventPublisher, EventType, ListSink
from trainer.observability.ray_metrics import RayMetricsSink

PUBLISH = textwrap.dedent("""
    import sys, time
    from trainer.observability.events import EventPublisher, EventType, ListSink
    from trainer.observability.ray_metrics import RayMetricsSink
    publisher = EventPublisher("77", RayMetricsSink(ListSink(), "77"))
    publisher.publish(EventType.METRICS, {"step": 1, "values": {"reward/mean": 0.625, "learner/grad_norm": 2.5,
                                                               "format_errors": {"NO_THINK": 3}}})
    assert not publisher.sink.is_off, "the sink switched itself off"
    print("published", flush=True)
    time.sleep(float(sys.argv[1]))
""")


def test_step_metrics_are_exported_by_the_ray_node(ray_head):
    environment = {"RAY_ADDRESS": f"127.0.0.1:{ray_head.port}", "PATH": "/usr/bin:/bin"}
    publisher = subprocess.Popen([sys.executable, "-c", PUBLISH, "60"], env=environment, stdout=subprocess.PIPE,
                                 stderr=subprocess.STDOUT, text=True)
    try:
        deadline, exported = time.monotonic() + 60, ""
        while time.monotonic() < deadline:
            try:
                exported = httpx.get(f"http://127.0.0.1:{ray_head.metrics_export_port}/metrics", timeout=5).text
            except httpx.HTTPError:
                exported = ""
            if "ray_leanrl_trainer_reward_mean{" in exported and "ray_leanrl_trainer_learner_grad_norm{" in exported:
                break
            time.sleep(1)
        assert publisher.poll() is None, publisher.stdout.read()
    finally:
        publisher.kill()
    lines = {line.split(" ")[0].split("{")[0]: line for line in exported.splitlines() if "leanrl_trainer" in line}
    assert 'run_id="77"' in lines["ray_leanrl_trainer_reward_mean"]
    assert lines["ray_leanrl_trainer_reward_mean"].endswith(" 0.625")
    assert lines["ray_leanrl_trainer_learner_grad_norm"].endswith(" 2.5")


def test_without_a_cluster_the_sink_only_passes_events_on(monkeypatch):
    monkeypatch.delenv("RAY_ADDRESS", raising=False)
    events = ListSink()
    publisher = EventPublisher("1", RayMetricsSink(events, "1"))
    publisher.publish(EventType.METRICS, {"step": 1, "values": {"reward/mean": 1.0}})
    assert publisher.sink.is_off and len(events.events) == 1


def test_an_unreachable_cluster_switches_the_metrics_off_not_the_run():
    from deploy.services import free_port

    code = textwrap.dedent(f"""
        from trainer.observability.events import EventPublisher, EventType, ListSink
        from trainer.observability.ray_metrics import RayMetricsSink
        events = ListSink()
        publisher = EventPublisher("1", RayMetricsSink(events, "1", address="127.0.0.1:{free_port()}"))
        publisher.publish(EventType.METRICS, {{"step": 1, "values": {{"reward/mean": 1.0}}}})
        publisher.publish(EventType.METRICS, {{"step": 2, "values": {{"reward/mean": 1.0}}}})
        assert publisher.sink.is_off and len(events.events) == 2
        print("ok")
    """)
    started = time.monotonic()
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin"})
    assert done.stdout.strip().endswith("ok"), done.stderr[-2000:]
    assert time.monotonic() - started < 60  # refused at once, not after Ray's own minutes of retries
