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

from trainer.verification.verdicts import Verifier

# Who gave the verdicts a win rate counts: never both at once (the stand-in decides only a small fragment). The
# names are the trainer's, which says in every rollout event which of them judges the run (Verifier).
LEAN, STANDIN = Verifier.LEAN.value, Verifier.STANDIN.value
VERIFIED_BY = {LEAN: "real Lean's verdicts", STANDIN: "the stand-in Lean server's verdicts (not real Lean)"}


class ProblemResults(Protocol):
    def win_rates(self, problem_ids: Iterable[int], *, viewer, verified_by: str = LEAN) -> dict[int, tuple[int, int]]:
        """Problem id → (accepted, scored) over the first attempts of the runs ``viewer`` may see, verified
        by real Lean (``verified_by="lean"``) or by the stand-in only."""

    def attempt_history(self, problem, viewer):
        """The runs ``viewer`` may see that answered ``problem``'s statement, one row per run and verifier, newest
        run first: answers, scored, accepted and censored by round, first and last solved step."""

    def problem_history(self, problem, viewer) -> dict:
        """Everything the problem page and its API show of the statement's history (proofs/history.py)."""

    def version_problem_counts(self, version, viewer):
        """(The version's entries annotated with ``history_attempts``, ``history_solves`` and
        ``history_last_solved_at``, whose verdicts they count: LEAN or STANDIN)."""

    def prior_histories(self, statement_hashes: Iterable[str], viewer, verified_by: str,
                        excluding_run_id: int | None = None) -> dict:
        """Statement hash → its prior first attempts, solves and signal-less streak (attempts, solves,
        signal_less_streak) in the runs ``viewer`` may see, one verifier's."""

    def verifier_of(self, statement_hashes: Iterable[str], viewer) -> str:
        """LEAN wherever any of the statements has a scored Lean verdict in what ``viewer`` sees; else STANDIN
        where the stand-in scored any; else LEAN."""


_provider: ProblemResults | None = None


def provide(provider: ProblemResults) -> None:
    global _provider
    _provider = provider


def _results() -> ProblemResults:
    if _provider is None:
        raise ImproperlyConfigured("no app provides the problems' results: add 'proofs' to INSTALLED_APPS")
    return _provider


def win_rates(problem_ids: Iterable[int], *, viewer, verified_by: str = LEAN) -> dict[int, tuple[int, int]]:
    return _results().win_rates(problem_ids, viewer=viewer, verified_by=verified_by)


def platform_win_rates(problem_ids: Iterable[int], *, viewer) -> tuple[dict[int, tuple[int, int]], str]:
    """The win rates curation and the pages use, and who verified them: real Lean's wherever any problem
    has a real verdict; only where none has one, the stand-in's, and the caller says so."""
    problem_ids = list(problem_ids)
    rates = win_rates(problem_ids, viewer=viewer, verified_by=LEAN)
    if any(scored for _, scored in rates.values()):
        return rates, LEAN
    standin = win_rates(problem_ids, viewer=viewer, verified_by=STANDIN)
    if any(scored for _, scored in standin.values()):
        return standin, STANDIN
    return rates, LEAN


def attempt_history(problem, viewer):
    return _results().attempt_history(problem, viewer)


def problem_history(problem, viewer) -> dict:
    return _results().problem_history(problem, viewer)


def version_problem_counts(version, viewer):
    return _results().version_problem_counts(version, viewer)


def prior_histories(statement_hashes: Iterable[str], viewer, verified_by: str, excluding_run_id: int | None = None):
    return _results().prior_histories(statement_hashes, viewer, verified_by, excluding_run_id)


def verifier_of(statement_hashes: Iterable[str], viewer) -> str:
    return _results().verifier_of(statement_hashes, viewer)
