"""How a kimina-lean-server counts the lines of its messages, learnt from the server itself.

kimina-lean-server strips the leading import (and blank) lines of a snippet and runs them as
the REPL's environment. Its 2.0.0 Docker image (the one ``deploy/`` pins, and the release's)
reports Lean's positions in lines of what is left, counted from the first line after that
header. Since "Fix Lean snippet diagnostics line offsets" (#56, 2025-10-24) it adds the
header's length back and reports lines of the code as sent. Both builds call themselves
2.0.0, so neither the version nor the image tag tells them apart.

So the verifier asks: when it starts, and again after every reconnect, it sends
``PROBE_CODE`` (two import lines and a blank line, then a theorem and an axioms query on a
known line) and reads back the line of the axioms answer. Every answer of that server is
then converted once, into lines of the checked code (``CheckedCode.lean_line_to_code_line``).
The stand-in server answers in either numbering (``python -m trainer lean-standin
--line-numbering``), so both paths are tested over real HTTP.
"""

from __future__ import annotations

from enum import StrEnum

from trainer.verification.integrity import parse_axioms_report


class LineNumbering(StrEnum):
    """Which lines a server's message positions count."""

    AFTER_HEADER = "after-header"  # kimina-lean-server 2.0.0 image: line 1 is the first line after the imports
    AS_SENT = "as-sent"  # kimina-lean-server since #56 (2025-10-24): lines of the code as sent


PROBE_THEOREM = "lean_line_numbering_probe"
# The import lines most promptsets use (miniF2F's), so the probe reuses their REPLs; the stand-in
# decides the theorem too. Lines 1-3 are the header the server strips.
PROBE_CODE = (
    "import Mathlib\n"
    "import Aesop\n"
    "\n"
    f"theorem {PROBE_THEOREM} : (1 : ℕ) + 1 = 2 := by\n"
    "  norm_num\n"
    "\n"
    f"#print axioms {PROBE_THEOREM}\n"
)
PROBE_HEADER_LINES = 3
PROBE_AXIOMS_LINE = {LineNumbering.AS_SENT: 7, LineNumbering.AFTER_HEADER: 7 - PROBE_HEADER_LINES}


class ProbeFailed(Exception):
    """The server's answer to the probe does not say how it numbers lines; the message says why."""


def numbering_from_probe(response) -> LineNumbering:
    """The numbering a server uses, from its ``ReplResponse`` to ``PROBE_CODE``.

    Raises ProbeFailed when the answer is an error or puts the axioms answer on neither line.
    """
    if response.error is not None:
        raise ProbeFailed(f"the Lean server failed on the line-numbering probe: {response.error}")
    answer = response.response or {}
    if "message" in answer:
        raise ProbeFailed(f"the Lean REPL failed on the line-numbering probe: {answer['message']}")
    lines = {
        (message.get("pos") or {}).get("line")
        for message in answer.get("messages") or ()
        if message.get("severity") == "info" and (parse_axioms_report(message.get("data", "")) or ("",))[0] == PROBE_THEOREM
    }
    for numbering, line in PROBE_AXIOMS_LINE.items():
        if lines == {line}:
            return numbering
    expected = " or ".join(f"{line} ({numbering.value})" for numbering, line in PROBE_AXIOMS_LINE.items())
    raise ProbeFailed(
        f"the Lean server put the line-numbering probe's axioms answer on line(s) {sorted(lines, key=str) or 'none'}, "
        f"expected {expected}; check that verifier.url is a kimina-lean-server with Mathlib"
    )
