"""A version's problems with their history on the platform, sorted and filtered as the URL says: the one table
the version page and ``GET /api/promptsets/{id}/versions/{n}/problems`` both read, so their numbers agree.

The columns count first attempts in the runs the person may see (promptsets/results.py), one verifier's: real
Lean's wherever any problem of the version has a scored Lean verdict, else the stand-in's, and the page says
which. A problem nobody attempted has no solve rate ("—"), never 0.
"""

from __future__ import annotations

from django.db.models import F, FloatField, Q
from django.db.models.functions import Cast, NullIf

from promptsets import results

# ?sort= : what the table is ordered by; a leading "-" reverses it. Not measured sorts last either way.
SORTS = {"position": "position", "attempts": "history_attempts", "solve_rate": "history_solve_rate",
         "last_solved": "history_last_solved_at"}
# ?show= : which problems are listed.
SHOWS = {
    "all": "every problem",
    "never_solved": "attempted, never solved",
    "solved": "solved at least once",
    "unattempted": "never attempted",
}


class BadTableQuery(ValueError):
    pass


def check_table_query(sort: str, show: str) -> None:
    """Refuse a sort or filter the table does not have, naming the value and the allowed ones."""
    if sort.removeprefix("-") not in SORTS:
        raise BadTableQuery(f"sort={sort!r} is not a column to sort by; use one of "
                            f"{', '.join(SORTS)}, each with a leading '-' for the reverse order")
    if show not in SHOWS:
        raise BadTableQuery(f"show={show!r} is not a filter; use one of {', '.join(SHOWS)}")


def problem_table(version, viewer, *, search=None, sort: str = "position", show: str = "all"):
    """(The version's entries, annotated with ``history_attempts``, ``history_solves``, ``history_solve_rate`` and
    ``history_last_solved_at``, filtered and ordered; whose verdicts they count). ``search`` narrows the entries
    (views.search_problems). Raises BadTableQuery for an unknown sort or filter."""
    check_table_query(sort, show)
    entries, verified_by = results.version_problem_counts(version, viewer)
    entries = entries.annotate(history_solve_rate=Cast("history_solves", FloatField())
                               / Cast(NullIf("history_attempts", 0), FloatField()))
    if search is not None:
        entries = search(entries)
    if show == "never_solved":
        entries = entries.filter(history_attempts__gt=0).filter(Q(history_solves=0) | Q(history_solves__isnull=True))
    elif show == "solved":
        entries = entries.filter(history_solves__gt=0)
    elif show == "unattempted":
        entries = entries.filter(Q(history_attempts__isnull=True) | Q(history_attempts=0))
    column = F(SORTS[sort.removeprefix("-")])
    order = column.desc(nulls_last=True) if sort.startswith("-") else column.asc(nulls_last=True)
    return entries.order_by(order, "position"), verified_by


def table_row(entry) -> dict:
    """One row's history columns as the page and the API write them."""
    attempts = entry.history_attempts or 0
    solves = entry.history_solves or 0
    return {"attempts": attempts, "solves": solves, "solve_rate": entry.history_solve_rate,
            "last_solved_at": entry.history_last_solved_at, "is_never_solved": attempts > 0 and solves == 0}
