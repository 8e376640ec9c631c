"""A run's rollouts, as the runs app asks for them: the proofs app stores and shows them.

Every scored rollout is a proof attempt, a row of the proofs app. The runs app sits below it
(promptsets ← runs ← proofs) and imports nothing of it: the ingester hands the stored events to
``store`` and the run page asks ``page`` and ``attempt_ids``, and the proofs app answers them all
(``ProofsConfig.ready`` calls ``provide``), as Django's contrib apps plug into the ones below them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from django.core.exceptions import ImproperlyConfigured


class RunRollouts(Protocol):
    def store(self, events: list) -> None:
        """Inside the ingester's transaction: store what the run's newly stored events say of its rollouts and
        retries, and set ``attempt_id`` on each ``rollout_finished`` event stored as an attempt."""

    def attempt_ids(self, event_ids: Iterable[int]) -> dict[int, int]:
        """Stored event id → the id of the attempt it became (events that became none are left out)."""

    def page(self, run, query: Mapping[str, Any]) -> tuple[Any, list, int | None]:
        """The run page's rollouts: (the viewer's filters, a form bound to ``query``; one page of attempts,
        newest first; the id to pass as ``before`` for the next page, or None)."""


_provider: RunRollouts | None = None


def provide(provider: RunRollouts) -> None:
    global _provider
    _provider = provider


def _rollouts() -> RunRollouts:
    if _provider is None:
        raise ImproperlyConfigured("no app stores the runs' rollouts: add 'proofs' to INSTALLED_APPS")
    return _provider


def store(events: list) -> None:
    _rollouts().store(events)


def attempt_ids(event_ids: Iterable[int]) -> dict[int, int]:
    return _rollouts().attempt_ids(event_ids)


def page(run, query: Mapping[str, Any]):
    return _rollouts().page(run, query)
