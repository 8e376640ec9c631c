"""The settings a production deployment must not start with.

Pure functions over setting values, so ``settings.py`` can call them before Django is
configured (``DJANGO_ENV=production``) and tests can call them without settings at all.
Each problem names the environment variable that fixes it. Secret values are never
echoed: an error message ends up in logs and bug reports.
"""

from __future__ import annotations

from collections.abc import Iterable

from django.core.exceptions import ImproperlyConfigured

# Django's own thresholds for a usable secret key (its check security.W009).
SECRET_KEY_MIN_LENGTH = 50
SECRET_KEY_MIN_UNIQUE_CHARACTERS = 5
DJANGO_INSECURE_KEY_PREFIX = "django-insecure-"

_MAKE_A_KEY = (
    "set DJANGO_SECRET_KEY to a fresh random value, e.g. the output of "
    "`python -c \"from django.core.management.utils import get_random_secret_key as k; print(k())\"`"
)


def _secret_key_problem(secret_key: str | None, insecure_default_secret_key: str | None) -> str | None:
    if not secret_key:
        return f"SECRET_KEY is empty (DJANGO_SECRET_KEY is unset or blank); {_MAKE_A_KEY}"
    if insecure_default_secret_key and secret_key == insecure_default_secret_key:
        # Anyone with the source can forge sessions and password-reset links with the default key.
        return f"SECRET_KEY is the development default written in settings.py (DJANGO_SECRET_KEY is unset); {_MAKE_A_KEY}"
    if secret_key.startswith(DJANGO_INSECURE_KEY_PREFIX):
        return f"SECRET_KEY starts with {DJANGO_INSECURE_KEY_PREFIX!r}, Django's mark of a development key; {_MAKE_A_KEY}"
    if len(secret_key) < SECRET_KEY_MIN_LENGTH or len(set(secret_key)) < SECRET_KEY_MIN_UNIQUE_CHARACTERS:
        return (
            f"SECRET_KEY is too weak ({len(secret_key)} characters, {len(set(secret_key))} distinct; "
            f"needs at least {SECRET_KEY_MIN_LENGTH} characters and {SECRET_KEY_MIN_UNIQUE_CHARACTERS} distinct); "
            f"{_MAKE_A_KEY}"
        )
    return None


def _is_on(debug: object) -> bool:
    if isinstance(debug, str):
        return debug.strip().lower() in {"1", "true", "yes", "on"}
    return bool(debug)


def production_problems(
    *,
    secret_key: str | None,
    debug: object,
    allowed_hosts: Iterable[str] | None,
    insecure_default_secret_key: str | None = None,
) -> list[str]:
    """Every reason these settings are unfit for production, each with its fix; empty when fit."""
    problems: list[str] = []
    secret_problem = _secret_key_problem(secret_key, insecure_default_secret_key)
    if secret_problem:
        problems.append(secret_problem)
    if _is_on(debug):
        problems.append(
            f"DEBUG is on (received {debug!r}): error pages would show settings, source and request data "
            "to anyone; set DJANGO_DEBUG=0"
        )
    hosts = [host for host in (allowed_hosts or []) if host and host.strip()]
    if not hosts:
        problems.append(
            "ALLOWED_HOSTS is empty, so every request would be refused; set DJANGO_ALLOWED_HOSTS to the "
            "comma-separated host names the site is served under, e.g. DJANGO_ALLOWED_HOSTS=lean.example.org"
        )
    elif "*" in hosts:
        # A wildcard lets a forged Host header into password-reset links and absolute URLs.
        problems.append(
            f"ALLOWED_HOSTS contains '*' (received {hosts!r}), which accepts any Host header; set "
            "DJANGO_ALLOWED_HOSTS to the host names the site is served under"
        )
    return problems


def assert_production_ready(
    *,
    secret_key: str | None,
    debug: object,
    allowed_hosts: Iterable[str] | None,
    insecure_default_secret_key: str | None = None,
) -> None:
    """Refuse to start (ImproperlyConfigured) listing every problem at once, so one restart fixes them all."""
    problems = production_problems(
        secret_key=secret_key,
        debug=debug,
        allowed_hosts=allowed_hosts,
        insecure_default_secret_key=insecure_default_secret_key,
    )
    if problems:
        listed = "\n".join(f"  - {problem}" for problem in problems)
        raise ImproperlyConfigured(
            f"DJANGO_ENV=production, but the settings are not fit for production ({len(problems)} problem"
            f"{'s' if len(problems) > 1 else ''}):\n{listed}"
        )
