"""A theorem to prove, as the trainer sees it, and the reader of the platform's promptset export."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# The preamble the Kimina-Prover models were trained and evaluated under (their model cards and the
# release's promptset use it): Mathlib, Aesop, a raised heartbeat budget, the usual namespaces.
DEFAULT_LEAN_HEADER = (
    "import Mathlib\n"
    "import Aesop\n"
    "\n"
    "set_option maxHeartbeats 400000\n"
    "\n"
    "open BigOperators Real Nat Topology Rat\n"
    "\n"
)

STATEMENT_ENDING = ":= by"

# What the platform's export says of a problem's earlier runs (its per-problem history record): each a
# non-negative integer, or null where the platform has none. prior_signal_less_streak counts the problem's most
# recent groups in a row that gave no signal; data.selection history starts from it (trainer/loop/prompt_selection.py).
PRIOR_HISTORY_FIELDS = ("prior_attempts", "prior_solves", "prior_signal_less_streak")


@dataclass(frozen=True)
class Problem:
    """One formal statement. ``formal_statement`` ends in ``:= by`` and carries no proof; the Lean
    preamble is ``header``, kept apart so the code Lean checks is always header + statement + body."""

    problem_id: str
    formal_statement: str
    informal_statement: str = ""
    name: str = ""
    header: str = DEFAULT_LEAN_HEADER
    source: str = ""
    # From earlier runs (PRIOR_HISTORY_FIELDS); None: no history.
    prior_attempts: int | None = None
    prior_solves: int | None = None
    prior_signal_less_streak: int | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.problem_id, str) or not self.problem_id.strip():
            raise ValueError(f"problem_id must be a non-empty string, got {self.problem_id!r}")
        statement = self.formal_statement.rstrip() if isinstance(self.formal_statement, str) else ""
        if not statement.endswith(STATEMENT_ENDING):
            tail = statement[-40:] if statement else repr(self.formal_statement)
            raise ValueError(
                f"problem {self.problem_id!r}: formal_statement must end in '{STATEMENT_ENDING}' with no proof "
                f"after it, but it ends in {tail!r}; remove any proof or 'sorry' and end it with '{STATEMENT_ENDING}'"
            )
        # Trailing whitespace would otherwise sit between the statement and the model's proof body.
        object.__setattr__(self, "formal_statement", statement)
        if self.header and not self.header.endswith("\n"):
            object.__setattr__(self, "header", self.header + "\n")
        for key in PRIOR_HISTORY_FIELDS:
            value = getattr(self, key)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 0):
                raise ValueError(f"problem {self.problem_id!r}: {key} must be a non-negative integer or null "
                                 f"(no history), got {value!r}; export it from the platform again or remove it")

    @property
    def lean_prefix(self) -> str:
        """Everything Lean reads before the proof body."""
        return self.header + self.formal_statement

    def to_dict(self) -> dict[str, str]:
        return {
            "problem_id": self.problem_id,
            "formal_statement": self.formal_statement,
            "informal_statement": self.informal_statement,
            "name": self.name,
            "header": self.header,
            "source": self.source,
        }

    @classmethod
    def from_dict(cls, row: dict) -> "Problem":
        """Reads one exported row. A missing or null ``header`` means the default preamble; a missing or null
        ``prior_*`` field (PRIOR_HISTORY_FIELDS), no history."""
        missing = [key for key in ("problem_id", "formal_statement") if row.get(key) in (None, "")]
        if missing:
            raise ValueError(f"missing required field(s) {', '.join(missing)}; every row needs problem_id and formal_statement")
        problem_id = row["problem_id"]
        if isinstance(problem_id, int) and not isinstance(problem_id, bool):
            problem_id = str(problem_id)
        text_fields = {}
        for key in ("formal_statement", "informal_statement", "name", "header", "source"):
            value = row.get(key)
            if value is not None and not isinstance(value, str):
                raise ValueError(f"field {key!r} must be a string, got {type(value).__name__} {value!r}")
            text_fields[key] = value
        return cls(
            problem_id=problem_id,
            formal_statement=text_fields["formal_statement"],
            informal_statement=text_fields["informal_statement"] or "",
            name=text_fields["name"] or "",
            header=DEFAULT_LEAN_HEADER if text_fields["header"] is None else text_fields["header"],
            source=text_fields["source"] or "",
            **{key: row.get(key) for key in PRIOR_HISTORY_FIELDS},
        )


def load_problems_jsonl(path: str | Path) -> list[Problem]:
    """Problems from the platform's export: one JSON object per line with problem_id,
    formal_statement, informal_statement, name, header and source, and optionally the problem's history in
    earlier runs (PRIOR_HISTORY_FIELDS). Blank lines are skipped;
    unknown keys are ignored so the export can grow without breaking older trainers."""
    problems: list[Problem] = []
    first_seen_at: dict[str, str] = {}
    for where, row in json_lines(path):
        if not isinstance(row, dict):
            raise ValueError(f"{where}: expected a JSON object, got {type(row).__name__}")
        try:
            problem = Problem.from_dict(row)
        except ValueError as error:
            raise ValueError(f"{where}: {error}") from None
        if problem.problem_id in first_seen_at:
            raise ValueError(
                f"{where}: problem_id {problem.problem_id!r} already used on line {first_seen_at[problem.problem_id]}; "
                f"problem ids must be unique within a promptset"
            )
        first_seen_at[problem.problem_id] = where.rsplit(" ", 1)[-1]
        problems.append(problem)
    return problems


def json_lines(path: str | Path) -> Iterator[tuple[str, Any]]:
    """``(where, value)`` for each non-blank line of a JSON Lines file; ``where`` names the file and line."""
    path = Path(path)
    with path.open(encoding="utf-8") as lines:
        for line_number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            where = f"{path}, line {line_number}"
            try:
                yield where, json.loads(line)
            except json.JSONDecodeError as error:
                raise ValueError(f"{where}: not valid JSON ({error.msg} at column {error.colno}); "
                                 f"each line must be one JSON object") from None
