"""What runs learned about a promptset's problems, as the promptsets app asks for it.

The answers are the proofs app's (it stores every scored attempt), but promptsets sits below runs
and proofs (promptsets ← runs ← proofs) and imports neither: the proofs app provides the answers
when Django starts (``ProofsConfig.ready`` calls ``provide``), as Django's contrib apps plug into
the ones below them. A deployment without the proofs app has no results to give, and says so.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Protocol

from django.core.exceptions import ImproperlyConfigured


class ProblemResults(Protocol):
    def win_rates(self, problem_ids: Iterable[int], *, viewer) -> dict[int, tuple[int, int]]:
        """Problem id → (accepted, scored) over the first attempts of the runs ``viewer`` may see."""

    def attempt_history(self, problem, viewer):
        """Scored attempts at ``problem`` in every run ``viewer`` may see, one row per run, newest run first."""


_provider: ProblemResults | None = None


def provide(provider: ProblemResults) -> None:
    global _provider
    _provider = provider


def _results() -> ProblemResults:
    if _provider is None:
        raise ImproperlyConfigured("no app provides the problems' results: add 'proofs' to INSTALLED_APPS")
    return _provider


def win_rates(problem_ids: Iterable[int], *, viewer) -> dict[int, tuple[int, int]]:
    return _results().win_rates(problem_ids, viewer=viewer)


def attempt_history(problem, viewer):
    return _results().attempt_history(problem, viewer)
