"""What Lean said about one proof, in the trainer's own words."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import StrEnum


class Verdict(StrEnum):
    """Lean's word on one proof. The one list of verdicts: the proofs app's choices, the ingester's
    checks and the run page's labels (through ``json_script``) are all built from it.

    Members keep the order of the platform's choices (its migrations record that order)."""

    VALID = "valid"  # no error-severity message, no sorry, integrity rules passed
    SORRY = "sorry"
    LEAN_ERROR = "lean_error"
    # Lean accepted the code, but it breaks an integrity rule (a forbidden construct, a non-standard
    # axiom, no axioms report): zero, never censored, the reason in ``reasons``.
    REJECTED = "rejected"
    # Lean ran out of time on the proof: the proof's fault, as in the release, so it scores 0 and
    # its retry prompt is the release's "# System Error" feedback. Not censored.
    TIMEOUT = "timeout"
    INFRA_ERROR = "infra_error"  # censored: server error, unreachable, bad response, stand-in "cannot decide"

    @property
    def is_censored(self) -> bool:
        """Censored, not zero: a Lean outage or an undecided proof is not a wrong proof."""
        return self is Verdict.INFRA_ERROR

    @property
    def label(self) -> str:
        """What a person reads for it, on the pages and in the admin."""
        return VERDICT_LABELS[self]


VERDICT_LABELS: dict[Verdict, str] = {
    Verdict.VALID: "Valid",
    Verdict.SORRY: "Uses sorry",
    Verdict.LEAN_ERROR: "Lean error",
    Verdict.REJECTED: "Rejected by an integrity rule",
    Verdict.TIMEOUT: "Lean timeout (scored 0)",
    Verdict.INFRA_ERROR: "Verifier could not decide (censored)",
}


class Turn(StrEnum):
    """Which turn of a problem a rollout is: the first attempt, or the error-correction retry of one."""

    FIRST = "first"
    RETRY = "retry"

    @property
    def label(self) -> str:
        return TURN_LABELS[self]


TURN_LABELS: dict[Turn, str] = {Turn.FIRST: "First attempt", Turn.RETRY: "Retry"}


class Verifier(StrEnum):
    """Which Lean server judges a run's answers. The one list: the rollout events name it, and the platform's rates
    (promptsets.results) count one verifier's answers at a time, never both."""

    LEAN = "lean"  # a real kimina-lean-server
    STANDIN = "stand-in"  # trainer/verification/standin_server.py: decides a small fragment only, never pooled with Lean


MAX_ONE_LINE_CHARACTERS = 300


def lean_text_in_one_line(text: str) -> str:
    """A message of Lean's on one line, for a verdict's reason or a table's cell: its first line, cut at
    MAX_ONE_LINE_CHARACTERS. Where that line ends with a colon, what it announces comes along: Lean often says on the
    next line what it could not do ("omega could not prove the goal:" / "No usable constraints found for the atoms."),
    and the first line alone would end on the colon and say nothing. The goal state after "unsolved goals" stays out."""
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    quoted = lines[0] if lines else ""
    for line in lines[1:]:
        if not quoted.endswith(":"):
            break
        quoted += " " + line
    return quoted if len(quoted) <= MAX_ONE_LINE_CHARACTERS else quoted[: MAX_ONE_LINE_CHARACTERS - 1].rstrip() + "…"


@dataclass(frozen=True)
class LeanMessage:
    """Positions as Lean reports them: lines 1-based, columns 0-based in code points."""

    severity: str  # "error", "warning", "info"
    text: str
    line: int | None = None
    column: int | None = None
    end_line: int | None = None
    end_column: int | None = None

    def as_dict(self) -> dict:
        return {
            "severity": self.severity,
            "text": self.text,
            "line": self.line,
            "column": self.column,
            "end_line": self.end_line,
            "end_column": self.end_column,
        }


@dataclass(frozen=True)
class VerificationResult:
    verdict: Verdict
    messages: tuple[LeanMessage, ...] = ()
    reasons: tuple[str, ...] = ()  # why it earns nothing, or why it was censored
    is_standin_verdict: bool = False  # decided (or not) by the stand-in server, not by Lean
    is_cached: bool = False
    seconds: float = 0.0
    # The server's own error for the snippet (a timeout's "Lean REPL command timed out in 60.0
    # seconds"): the release quotes it as "# System Error" when Lean gave no error message.
    system_error: str | None = None
    extra: dict = field(default_factory=dict)

    @property
    def is_censored(self) -> bool:
        return self.verdict.is_censored

    @property
    def errors(self) -> tuple[LeanMessage, ...]:
        return tuple(m for m in self.messages if m.severity == "error")
