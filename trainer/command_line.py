"""What every ``python -m trainer`` command shares: its mistakes are one line and an exit code.

A command raises ``CommandError`` for anything the person can fix (a missing file, a bad value, a
server that does not answer); ``trainer.__main__`` prints it as ``trainer COMMAND: MESSAGE`` on
standard error and exits with its code, never with a traceback. The codes are distinct so that
scripts can tell the cases apart:

| code | meaning |
| --- | --- |
| 0 | done |
| 1 | the run itself failed (its reason is in its events) |
| 2 | a bad option or configuration value |
| 3 | an input file is missing or unreadable |
| 4 | an input file is malformed (the line is named) |
| 5 | a service (Redis, the Lean server) does not answer |
| 6 | nothing was decided: every answer was censored (the Lean server failed) |
| 143 | cancelled (SIGTERM or Ctrl-C) |
"""

from __future__ import annotations

from pathlib import Path

from trainer.config import RunConfig

EXIT_FAILED = 1
EXIT_BAD_ARGUMENTS = 2
EXIT_MISSING_FILE = 3
EXIT_MALFORMED_INPUT = 4
EXIT_UNREACHABLE = 5
EXIT_NOTHING_DECIDED = 6
EXIT_CANCELLED = 143  # 128 + SIGTERM, as a shell reports a process stopped by it


class CommandError(Exception):
    """A mistake the person can fix: ``message`` says what was wrong and what to do."""

    def __init__(self, message: str, exit_code: int = EXIT_BAD_ARGUMENTS):
        super().__init__(message)
        self.exit_code = exit_code


def existing_file(path: str, option: str) -> Path:
    """``path`` as given to ``option``, or a CommandError that names the option."""
    file = Path(path)
    if not file.exists():
        raise CommandError(f"{option} {path}: no such file; give the path of an existing file", EXIT_MISSING_FILE)
    if not file.is_file():
        raise CommandError(f"{option} {path}: is a folder, not a file", EXIT_MISSING_FILE)
    try:
        with file.open("rb"):
            pass
    except OSError as error:
        raise CommandError(f"{option} {path}: cannot be read ({error.strerror})", EXIT_MISSING_FILE) from None
    return file


def config_error(error: Exception) -> CommandError:
    """A configuration mistake in one line per field, naming the valid fields of an unknown one's section."""
    from pydantic import ValidationError

    if not isinstance(error, ValidationError):
        return CommandError(f"configuration: {error}", EXIT_BAD_ARGUMENTS)
    problems = []
    for detail in error.errors():
        location = ".".join(str(part) for part in detail["loc"])
        if detail["type"] == "extra_forbidden":
            section = _section_model(RunConfig, detail["loc"][:-1])
            known = ", ".join(sorted(section.model_fields)) if section is not None else ""
            problems.append(f"{location} is not a setting" + (f"; valid fields here: {known}" if known else ""))
        else:
            value = detail.get("input")
            shown = "" if isinstance(value, dict) else f" (got {value!r})"
            problems.append(f"{location}: {detail['msg']}{shown}")
    return CommandError("configuration: " + "; ".join(problems), EXIT_BAD_ARGUMENTS)


def _section_model(model, path):
    for part in path:
        field = model.model_fields.get(str(part))
        annotation = getattr(field, "annotation", None)
        if annotation is None or not hasattr(annotation, "model_fields"):
            return None
        model = annotation
    return model


def warn_if_events_destination_is_down(url: str, *, shown: str | None = None) -> None:
    """Say at once, in one line, when ``--events redis://…`` does not answer. The run still starts: its
    events wait in a local buffer, and it fails only once Redis has stayed away past
    ``events.max_outage_s`` (a Redis restart is ridden out; a wrong address ends in that failure).

    ``shown`` is how the line names the destination (``env:NAME`` rather than a URL with its password).
    """
    import sys

    if not url.startswith(("redis://", "rediss://", "unix://")):
        return
    import redis

    client = redis.Redis.from_url(url, socket_connect_timeout=5, socket_timeout=5)
    try:
        client.ping()
    except redis.RedisError as error:
        print(f"trainer: --events {shown or url}: Redis does not answer ({error}); the run's events wait for it "
              "until events.max_outage_s, then the run fails (check the address, or pass --events stdout)",
              file=sys.stderr)
    finally:
        client.close()
