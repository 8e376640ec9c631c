"""Where ``--events`` points: 'stdout', a redis:// URL, or ``env:NAME``.

``env:NAME`` reads the URL from the environment variable NAME, so a Redis password never sits on
a command line, where ``ps`` on the node and Ray's job list would show it to anyone. The platform
submits jobs with ``--events env:LEANRL_EVENTS_URL`` and the URL in the job's environment.
"""

from __future__ import annotations

import os

ENV_PREFIX = "env:"


def resolve(value: str) -> str:
    if not value.startswith(ENV_PREFIX):
        return value
    name = value.removeprefix(ENV_PREFIX)
    url = os.environ.get(name, "")
    if not url:
        raise ValueError(f"--events {value} names the environment variable {name}, which is unset or empty: "
                         f"set {name} to the redis:// URL")
    return url
