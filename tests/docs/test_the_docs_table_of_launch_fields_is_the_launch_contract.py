"""The launching guide's table of launch fields lists exactly the launch contract's fields, in its order:
a field added to the contract (or dropped from it) without the docs fails here, naming it."""

import re
from pathlib import Path

from runs import launch_contract

GUIDE = Path(__file__).resolve().parents[2] / "docs" / "guide" / "launching.md"


def table_under(heading: str, markdown: str) -> list[list[str]]:
    """The rows (cells stripped) of the first table after ``heading``, its header and rule left out."""
    section = markdown.split(f"\n{heading}\n", 1)[1]
    rows = []
    for line in section.splitlines():
        if line.startswith("|"):
            rows.append([cell.strip() for cell in line.strip().strip("|").split("|")])
        elif rows:
            break
    assert rows, f"no table under {heading!r} in {GUIDE}"
    return rows[2:]


def test_the_table_lists_every_launch_field_in_the_contracts_order():
    names = [re.fullmatch(r"`(\w+)`", row[0]).group(1) for row in table_under("## The launch contract", GUIDE.read_text())]
    fields = launch_contract.field_names()
    assert set(names) == set(fields), (f"missing from the docs: {sorted(set(fields) - set(names))}; "
                                       f"not in the contract: {sorted(set(names) - set(fields))}")
    assert names == fields


def test_every_field_of_the_table_says_what_it_is():
    assert all(len(row) == 2 and row[1] for row in table_under("## The launch contract", GUIDE.read_text()))
