"""Redis acknowledges an event only once it is on disk, since the trainer lets the event go then: the Redis the
tests and the local stack run, and Compose's, write and fsync their append-only file before each reply
(deploy/services.py ``REDIS_DURABILITY``). Read from the running server and from compose.yaml."""

from pathlib import Path

import redis
import yaml

from deploy.services import REDIS_DURABILITY

COMPOSE = Path(__file__).resolve().parents[2] / "deploy" / "compose" / "compose.yaml"


def as_options(arguments) -> dict[str, str]:
    """``["--appendonly", "yes", ...]`` → ``{"appendonly": "yes", ...}``."""
    return {name.removeprefix("--"): value for name, value in zip(arguments[::2], arguments[1::2], strict=True)}


def test_the_running_redis_fsyncs_its_append_only_file_before_each_reply(settings):
    running = redis.Redis.from_url(settings.REDIS_URL).config_get("append*")  # redis-py decodes CONFIG GET's text
    assert {name: running[name] for name in as_options(REDIS_DURABILITY)} == {"appendonly": "yes",
                                                                            "appendfsync": "always"}


def test_compose_runs_redis_with_the_same_durability():
    command = yaml.safe_load(COMPOSE.read_text())["services"]["redis"]["command"]
    options = as_options(command[1:])
    assert {name: options.get(name) for name in as_options(REDIS_DURABILITY)} == as_options(REDIS_DURABILITY)
