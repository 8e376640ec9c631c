import socket
import threading
import time
from dataclasses import dataclass, field

import pytest


@pytest.fixture
def running_run(make_run):
    """A run whose trainer is starting: the ingester takes its events."""
    return make_run(state="starting")


@pytest.fixture
def redis_client():
    """The session's Redis; each test's run streams are removed afterwards (run ids restart per test)."""
    import redis
    from django.conf import settings

    client = redis.Redis.from_url(settings.REDIS_URL)
    yield client
    for key in client.scan_iter("trainer:run:*"):
        client.delete(key)


@pytest.fixture
def private_redis():
    """A Redis of this test's own, with its append-only file, to stop and start."""
    from deploy.services import RedisService, free_port
    from tests.services_plugin import TEST_ROOT

    service = RedisService(name=f"redis-outage-{free_port()}", port=free_port(), log_dir=TEST_ROOT / "logs",
                           data_dir=TEST_ROOT / f"redis-outage-{time.monotonic_ns()}")
    service.start()
    yield service
    service.stop()


@dataclass
class SilentRayHead:
    address: str
    accepted: list = field(default_factory=list)  # (socket, peer) of every connection it took


@pytest.fixture
def silent_ray_head(monkeypatch):
    """A port that accepts connections and never says a word: a Ray head stuck or behind a dead proxy. RAY_ADDRESS
    (the environment's and the settings') points at it."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    head = SilentRayHead(f"http://127.0.0.1:{listener.getsockname()[1]}")
    threading.Thread(target=lambda: head.accepted.extend(iter(listener.accept, None)), daemon=True).start()
    monkeypatch.setenv("RAY_ADDRESS", head.address)  # Ray lets the environment win over settings
    from django.conf import settings

    monkeypatch.setattr(settings, "RAY_ADDRESS", head.address)
    yield head
    listener.close()
