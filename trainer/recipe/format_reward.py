"""The format check in front of Lean: an answer earns anything only if its shape is the release's.

By default this is the Kimina-Prover-RL release's ``FormatReward`` (kimina-prover-rl,
``recipe/kimina_prover_rl/kimina_prover_rl/reward/format_reward.py`` and ``proof_utils.py``),
check for check and corner for corner: the same verdict and the same category on every answer.
``tests/recipe/test_format_check_agrees_with_the_release.py`` replays the 3,416 answers of
``shared/data/format_oracle.jsonl`` that the release's own checker labelled.

The checks, in the release's order (the first that fails gives the category):

1. ``NO_VALID_LEAN4_CODE_BLOCK``: the first ```` ```lean4 ```` … ```` ``` ```` (closed anywhere, even
   mid-line) must exist and end the answer. A lean4 block inside the reasoning is therefore
   this error too: text follows it.
2. ``NO_VALID_THINK_BLOCK``: no ``<think>``.
3. ``INVALID_THINK_BLOCK_COUNT``: from the first ``<think>`` on, exactly one ``<think>`` and one
   ``</think>``. (A ``</think>`` before the first ``<think>`` is not looked at.)
4. ``INVALID_LEAN4_CODE_BLOCK_COUNT``: from the first ``<think>`` on, exactly one block that opens
   with the line ```` ```lean4 ```` (nothing after it, not even spaces or ``\\r``) and closes with
   ```` ``` ```` at the start of a line.
5. ``GENERATION_REPEATS``: a reasoning line (tactics blocks left out, lower-cased) with at least
   10 words outside the release's ``COMMON_STOPWORDS`` occurs 6 times or more.
6. ``INSUFFICIENT_TACTICS_BLOCKS``: fewer than 2 ```` ```tactics ```` blocks after ``<think>``
   (opening line exactly ```` ```tactics ````, closing ```` ``` ```` at a line start).
7. ``TACTIC_CODE_TOO_MANY_LINES``: a tactics block longer than max(5, int(0.95 × lines of the
   lean4 code)).
8. ``TACTIC_BLOCK_FORMATTING_ERROR``: read line by line over the whole answer, a ```` ```tactics ````
   line (spaces around allowed) never closed by a ```` ``` ```` line, or a block that contains
   ```` ``` ````.
9. ``TACTICS_LEAN4_NOT_MATCH``: under 70 % of the lean4 code's distinct lines (comments removed)
   occur in those tactics blocks.
10. ``LEAN4_CODE_NOT_START_WITH_STATEMENT``: the lean4 code (comments and every ``sorry`` removed,
    whitespace collapsed) contains the letters ``axiom`` or ``local_instance`` anywhere, or lacks
    one of the formal statement's paragraphs (import/set_option/open paragraphs skipped).

"Comments" there are the release's: ``/-`` to the first ``-/`` (no nesting) and ``--`` to the end
of the line, strings not excepted (``lean_lexer.CommentRule.KIMINA_RELEASE``). Where we believe
the release is wrong there is a named option in ``RewardConfig``, off by default:
``crlf_line_endings_accepted``, ``axiom_check_by_token`` and ``comments_read_by_lean_lexer`` (the
one Lean lexer, ``trainer/verification/lean_lexer.py``). Two checks of ours are there too, off by default:
``REASONING_COMMENT_DENSITY`` and ``CODE_COMMENT_DENSITY``.

Every verdict says why in words and where: ``failure_lines`` are the line ranges of the answer
that the proof viewer marks (the stray fence, the repeated lines, the code that lacks the
statement).

What Lean then checks is ours, not the model's copy: header + canonical statement + the proof
body after the statement's copy in the lean4 code (``find_statement_end``; whitespace and
comments normalised, whole tokens). A statement may begin with definitions its theorem needs
(PutnamBench's); they are part of the statement, so an answer whose copy changes one has no
copy to take a proof body from (check 10 already fails most such answers, as the release's would).

Why one piece: it mirrors the release's checker check for check, in the release's order; split, that
order (which decides the category) would no longer read top to bottom against the original.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from trainer.config import RewardConfig
from trainer.recipe.problems import Problem
from trainer.verification import lean_lexer


class FormatError(StrEnum):
    """The release's ``FormatError`` names (ours, the two densities, come last)."""

    NO_VALID_LEAN4_CODE_BLOCK = "no_valid_lean4_code_block"
    NO_VALID_THINK_BLOCK = "no_valid_think_block"
    INVALID_THINK_BLOCK_COUNT = "invalid_think_block_count"
    INVALID_LEAN4_CODE_BLOCK_COUNT = "invalid_lean4_code_block_count"
    GENERATION_REPEATS = "generation_repeats"
    INSUFFICIENT_TACTICS_BLOCKS = "insufficient_tactics_blocks"
    TACTIC_CODE_TOO_MANY_LINES = "tactic_code_too_many_lines"
    TACTIC_BLOCK_FORMATTING_ERROR = "tactic_block_formatting_error"
    TACTICS_LEAN4_NOT_MATCH = "tactics_lean4_not_match"
    LEAN4_CODE_NOT_START_WITH_STATEMENT = "lean4_code_not_start_with_statement"
    REASONING_COMMENT_DENSITY = "reasoning_comment_density"
    CODE_COMMENT_DENSITY = "code_comment_density"
    # Lean inside the reasoning (rollout.lean_tool_calls ≥ 1), checked only then and after the release's checks:
    TOOL_BLOCK_OUTSIDE_REASONING = "tool_block_outside_reasoning"
    TOOL_REPLY_NOT_FROM_LEAN = "tool_reply_not_from_lean"


LineRange = tuple[int, int]  # first and last line, 1-based, inclusive, in the answer


@dataclass(frozen=True)
class FormatCheck:
    """The verdict of the format check and the parts it found (empty where it stopped before them).

    ``proof_body`` is None when the format is valid but the statement's copy could not be located
    as whole tokens (the release's letters-only comparison accepts ``:= by_contra``): nothing to
    send to Lean, reward 0, as the release's "No proof found" or Lean's error on the glued body."""

    error: FormatError | None
    detail: str
    reasoning: str = ""
    lean_code: str = ""
    proof_body: str | None = ""
    failure_lines: tuple[LineRange, ...] = ()

    @property
    def is_valid(self) -> bool:
        return self.error is None


THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"
# Lean inside the reasoning (rollout.lean_tool_calls; trainer/rollout/lean_tool.py): the model asks Lean to check
# a snippet with a <lean>…</lean> block inside <think>, and the trainer, never the model, appends Lean's reply as
# a <lean_result>…</lean_result> block.
TOOL_CALL_OPEN = "<lean>"
TOOL_CALL_CLOSE = "</lean>"
TOOL_REPLY_OPEN = "<lean_result>"
TOOL_REPLY_CLOSE = "</lean_result>"
TOOL_TAGS = (TOOL_CALL_OPEN, TOOL_CALL_CLOSE, TOOL_REPLY_OPEN, TOOL_REPLY_CLOSE)
# The release finds the final block loosely (any whitespace after ``lean4``, closed anywhere)…
LEAN4_BLOCK_ANYWHERE = re.compile(r"```lean4\s*([\s\S]+?)\s*```")
# …and counts blocks strictly: the opening line is exactly ```lean4, the fence closes at a line start.
LEAN4_BLOCK = re.compile(r"```lean4\n(.*?)\n```", re.DOTALL)
TACTICS_BLOCK = re.compile(r"```tactics\n(.*?)\n```", re.DOTALL)
FENCE = "```"
TACTICS_FENCE_LINE = "```tactics"
WORD = re.compile(r"\b\w+\b")
IDENTIFIER_CHARACTER = re.compile(r"[\w'.!?₀-₉ₐ-ₜ]")

# Words the release's disallowed-keyword check looks for, as letters anywhere in the code.
DISALLOWED_WORDS = ("axiom", "local_instance")
# Paragraphs of a formal statement the release does not look for in the code.
PREAMBLE_PARAGRAPH_STARTS = ("import", "set_option", "open")

# The release's COMMON_STOPWORDS (reward/definitions.py), its entries that can equal a ``\w+``
# word; its phrases ("we have") and symbols ("⇒", "\\forall") never can, so they are left out.
COMMON_STOPWORDS = frozenset(
    """
    a an the and or of to in on for with by from as at is are was were be been it its this that
    these those we you they he she i there their your his her not no yes but if only than then so
    let assume suppose consider take fix define set choose given each every all any either
    otherwise exists exist such wlog have obtain get see conclude note notice observe clearly
    obviously evidently hence thus therefore implies imply iff since because theorem lemma
    corollary proposition claim definition remark example proof qed now next finally lastly again
    furthermore moreover first second third one two three
    """.split()
)


# ------------------------------------------------------------------------------ comments


def comment_density(text: str) -> float:
    """Share of the non-whitespace characters of ``text`` that lie in Lean comments (delimiters
    included), in [0, 1]; 0.0 for text with no visible characters."""
    mask = lean_lexer.comment_mask(text, strict=False)
    visible = [is_comment for character, is_comment in zip(text, mask) if not character.isspace()]
    if not visible:
        return 0.0
    return sum(visible) / len(visible)


def normalize_lean_whitespace(code: str) -> tuple[str, list[int]]:
    """``code`` with comments read as whitespace, whitespace runs collapsed to one space and the
    ends trimmed, plus, for each normalised character, its index in ``code``."""
    mask = lean_lexer.comment_mask(code, strict=False)
    characters: list[str] = []
    origins: list[int] = []
    for index, (character, is_comment) in enumerate(zip(code, mask)):
        if is_comment or character.isspace():
            if characters and characters[-1] != " ":
                characters.append(" ")
                origins.append(index)
        else:
            characters.append(character)
            origins.append(index)
    if characters and characters[-1] == " ":
        characters.pop()
        origins.pop()
    return "".join(characters), origins


def find_statement_end(lean_code: str, formal_statement: str) -> int | None:
    """Index in ``lean_code`` just past the first copy of ``formal_statement`` (compared after
    whitespace normalisation), or None. A copy must stand as whole tokens: ``:= by`` followed by
    ``by_cases`` glued to it is not a match."""
    normalized_code, origins = normalize_lean_whitespace(lean_code)
    normalized_statement, _ = normalize_lean_whitespace(formal_statement)
    if not normalized_statement:
        return None
    start = normalized_code.find(normalized_statement)
    while start != -1:
        end = start + len(normalized_statement)
        starts_cleanly = start == 0 or not IDENTIFIER_CHARACTER.match(normalized_code[start - 1])
        ends_cleanly = end == len(normalized_code) or not IDENTIFIER_CHARACTER.match(normalized_code[end])
        if starts_cleanly and ends_cleanly:
            return origins[end - 1] + 1
        start = normalized_code.find(normalized_statement, start + 1)
    return None


# ------------------------------------------------------------------------------ places in the answer


def line_of(text: str, offset: int) -> int:
    """1-based line of ``offset`` in ``text`` (lines end at ``\\n``, as the viewer shows them)."""
    return text.count("\n", 0, offset) + 1


def span_lines(text: str, start: int, end: int) -> LineRange:
    """Lines covered by ``text[start:end]`` (an empty span: the line of ``start``)."""
    return line_of(text, start), line_of(text, max(start, end - 1))


def merge_lines(lines: Iterable[int]) -> tuple[LineRange, ...]:
    """Line numbers as ranges of consecutive lines."""
    ranges: list[list[int]] = []
    for line in sorted(set(lines)):
        if ranges and line == ranges[-1][1] + 1:
            ranges[-1][1] = line
        else:
            ranges.append([line, line])
    return tuple((first, last) for first, last in ranges)


def _shorten(text: str, limit: int = 80) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _lines_containing(text: str, needle: str, start: int = 0, end: int | None = None) -> list[int]:
    end = len(text) if end is None else end
    lines, at = [], text.find(needle, start, end)
    while at != -1:
        lines.append(line_of(text, at))
        at = text.find(needle, at + 1, end)
    return lines


# ------------------------------------------------------------------------------ the check


@dataclass(frozen=True)
class _Answer:
    """One answer and the parts found so far, with their offsets in it."""

    text: str
    think_at: int = 0  # offset of the first <think>
    lean_match: re.Match | None = None  # the one strict lean4 block, offsets relative to think_at

    @property
    def lean_code(self) -> str:
        return self.lean_match.group(1).strip() if self.lean_match else ""

    def lean_lines(self) -> LineRange:
        start = self.think_at + self.lean_match.start(1)
        return span_lines(self.text, start, self.think_at + self.lean_match.end(1))


def check_format(
    response: str, problem: Problem, config: RewardConfig, earlier_answers: Sequence[str] = (),
    tool_replies: Sequence[str] | None = None,
) -> FormatCheck:
    """The release's verdict on ``response`` (and, as the release checks every assistant turn of the
    conversation, on each of ``earlier_answers`` first: a retry's first attempt). The driver
    passes none: its retries come only from first attempts that passed this same check.

    ``tool_replies``: None when Lean inside the reasoning is off (the release's check, nothing more); else the
    replies the trainer appended to this answer, and an answer the release's checks pass must then keep every
    tool block inside its reasoning and hold exactly those replies (one it wrote itself would be a verdict Lean
    never gave)."""
    for number, earlier in enumerate(earlier_answers, 1):
        verdict = _check_answer(earlier, problem.formal_statement, config)
        if not verdict.is_valid:
            return FormatCheck(
                verdict.error,
                f"earlier answer {number} of this conversation fails the format check, and the release checks "
                f"every turn: {verdict.detail}",
            )
    verdict = _check_answer(response, problem.formal_statement, config)
    if not verdict.is_valid:
        return verdict
    if tool_replies is not None:
        failure = _check_tool_blocks(response, tool_replies)
        if failure is not None:
            return FormatCheck(failure[0], failure[1], verdict.reasoning, verdict.lean_code, failure_lines=failure[2])
    statement_end = find_statement_end(verdict.lean_code, problem.formal_statement)
    if statement_end is None:
        return FormatCheck(
            None,
            "format valid, but the lean4 code holds no whole-token copy of the statement, the definitions before "
            "its theorem included, to take the proof body from (a definition changed, or the copy glued to the next "
            "token, e.g. ':= by_contra'): reward 0, nothing sent to Lean",
            verdict.reasoning, verdict.lean_code, None,
        )
    return FormatCheck(None, "format valid", verdict.reasoning, verdict.lean_code, verdict.lean_code[statement_end:])


def _check_answer(text: str, formal_statement: str, config: RewardConfig) -> FormatCheck:
    if config.crlf_line_endings_accepted:
        text = text.replace("\r\n", "\n")
    answer = _Answer(text)
    for check in (_check_final_block, _check_think_block, _check_lean4_block_count):
        failure, answer = check(answer)
        if failure:
            return failure
    think_open = answer.think_at
    think_close = text.index(THINK_CLOSE, think_open)
    reasoning = text[think_open + len(THINK_OPEN):think_close]
    lean_code = answer.lean_code
    found = {"reasoning": reasoning, "lean_code": lean_code}

    failure = _check_repeats(text, think_open + len(THINK_OPEN), reasoning, config)
    if failure:
        return FormatCheck(failure[0], failure[1], failure_lines=failure[2], **found)

    tactics = list(TACTICS_BLOCK.finditer(text, think_open))
    if config.min_tactic_blocks is not None and len(tactics) < config.min_tactic_blocks:
        marked = [span_lines(text, block.start(), block.end()) for block in tactics] or [
            span_lines(text, think_open, think_close + len(THINK_CLOSE))
        ]
        return FormatCheck(
            FormatError.INSUFFICIENT_TACTICS_BLOCKS,
            f"found {len(tactics)} ```tactics block(s) after <think> (a line that is exactly ```tactics, the code, "
            f"then ``` at the start of a line); at least {config.min_tactic_blocks} are required",
            failure_lines=tuple(marked), **found,
        )

    line_limit = _tactic_block_line_limit(lean_code, config)
    if line_limit is not None:
        for number, block in enumerate(tactics, 1):
            block_lines = len(block.group(1).split("\n"))
            if block_lines > line_limit:
                return FormatCheck(
                    FormatError.TACTIC_CODE_TOO_MANY_LINES,
                    f"tactics block {number} has {block_lines} lines; the limit for this answer is {line_limit} "
                    f"(max({config.tactic_block_lines_floor}, {config.tactic_block_lines_ratio} × the lean4 code's lines))",
                    failure_lines=(span_lines(text, block.start(), block.end()),), **found,
                )

    if config.max_reasoning_comment_density is not None and tactics:
        density = comment_density("\n".join(block.group(1) for block in tactics))
        if density > config.max_reasoning_comment_density:
            return FormatCheck(
                FormatError.REASONING_COMMENT_DENSITY,
                f"{density:.0%} of the tactics blocks' characters are comments (limit {config.max_reasoning_comment_density:.0%})",
                failure_lines=tuple(span_lines(text, b.start(), b.end()) for b in tactics), **found,
            )

    if config.min_tactics_lean4_match is not None:
        failure = _check_tactics_match(answer, config)
        if failure:
            return FormatCheck(failure[0], failure[1], failure_lines=failure[2], **found)

    failure = _check_statement(answer, formal_statement, config)
    if failure:
        return FormatCheck(failure[0], failure[1], failure_lines=failure[2], **found)

    if config.max_code_comment_density is not None:
        statement_end = find_statement_end(lean_code, formal_statement) or 0
        density = comment_density(lean_code[statement_end:])
        if density > config.max_code_comment_density:
            return FormatCheck(
                FormatError.CODE_COMMENT_DENSITY,
                f"{density:.0%} of the proof body's characters are comments (limit {config.max_code_comment_density:.0%})",
                failure_lines=(answer.lean_lines(),), **found,
            )
    return FormatCheck(None, "format valid", **found)


def _check_tool_blocks(text: str, tool_replies: Sequence[str]) -> tuple[FormatError, str, tuple[LineRange, ...]] | None:
    """Tool blocks only inside the one <think>…</think> (which the release's checks found), and the reply blocks
    exactly the trainer's, in order."""
    think_open = text.index(THINK_OPEN)
    think_close = text.index(THINK_CLOSE, think_open)
    outside = [line_of(text, match.start()) for tag in TOOL_TAGS for match in re.finditer(re.escape(tag), text)
               if not think_open < match.start() < think_close]
    if outside:
        return (FormatError.TOOL_BLOCK_OUTSIDE_REASONING,
                f"a Lean tool block ({', '.join(TOOL_TAGS)}) outside <think>…</think> (line(s) "
                f"{', '.join(map(str, sorted(set(outside))))}); Lean is asked only inside the reasoning",
                merge_lines(outside))
    replies = [match.group(0) for match in re.finditer(
        re.escape(TOOL_REPLY_OPEN) + r".*?" + re.escape(TOOL_REPLY_CLOSE), text, re.DOTALL)]
    stray = text.count(TOOL_REPLY_OPEN) != len(replies) or text.count(TOOL_REPLY_CLOSE) != len(replies)
    if stray or [reply.strip() for reply in replies] != [reply.strip() for reply in tool_replies]:
        marked = _lines_containing(text, TOOL_REPLY_OPEN) + _lines_containing(text, TOOL_REPLY_CLOSE)
        return (FormatError.TOOL_REPLY_NOT_FROM_LEAN,
                f"the answer holds {len(replies)} {TOOL_REPLY_OPEN} block(s) but Lean gave {len(tool_replies)} "
                f"repl{'y' if len(tool_replies) == 1 else 'ies'} to its checks; only the trainer writes Lean's replies",
                merge_lines(marked) or ((1, 1),))
    return None


def _check_final_block(answer: _Answer) -> tuple[FormatCheck | None, _Answer]:
    text = answer.text
    final = LEAN4_BLOCK_ANYWHERE.search(text)
    if final is None:
        opening = text.find("```lean4")
        if opening == -1:
            return FormatCheck(FormatError.NO_VALID_LEAN4_CODE_BLOCK, "no ```lean4 block in the answer"), answer
        return FormatCheck(
            FormatError.NO_VALID_LEAN4_CODE_BLOCK,
            f"the ```lean4 block opened on line {line_of(text, opening)} is never closed with ``` (a truncated answer?)",
            failure_lines=(span_lines(text, opening, len(text)),),
        ), answer
    trailing = text[final.end():]
    if trailing.strip():
        first_after = final.end() + (len(trailing) - len(trailing.lstrip()))
        inside_reasoning = THINK_CLOSE in trailing
        return FormatCheck(
            FormatError.NO_VALID_LEAN4_CODE_BLOCK,
            f"the first ```lean4 block (lines {line_of(text, final.start())}–{line_of(text, final.end() - 1)}) is followed "
            f"by {_shorten(trailing)!r}; the answer must end with its one lean4 block"
            + (" (a lean4 block inside the reasoning counts as the first)" if inside_reasoning else ""),
            failure_lines=(span_lines(text, final.start(), final.end()), span_lines(text, first_after, len(text))),
        ), answer
    return None, answer


def _check_think_block(answer: _Answer) -> tuple[FormatCheck | None, _Answer]:
    text = answer.text
    if THINK_OPEN not in text:
        return FormatCheck(
            FormatError.NO_VALID_THINK_BLOCK, "no <think> in the answer; it must start its reasoning with <think>",
            failure_lines=((1, 1),),
        ), answer
    think_at = text.index(THINK_OPEN)
    opens, closes = text.count(THINK_OPEN, think_at), text.count(THINK_CLOSE, think_at)
    if opens != 1 or closes != 1:
        marked = _lines_containing(text, THINK_OPEN, think_at) + _lines_containing(text, THINK_CLOSE, think_at)
        return FormatCheck(
            FormatError.INVALID_THINK_BLOCK_COUNT,
            f"from the first <think> on, the answer has {opens} <think> and {closes} </think>; exactly one "
            "<think>…</think> pair is needed",
            failure_lines=merge_lines(marked),
        ), answer
    return None, _Answer(text, think_at)


def _check_lean4_block_count(answer: _Answer) -> tuple[FormatCheck | None, _Answer]:
    text, think_at = answer.text, answer.think_at
    after_think = text[think_at:]
    blocks = list(LEAN4_BLOCK.finditer(after_think))
    if len(blocks) == 1:
        return None, _Answer(text, think_at, blocks[0])
    fences = _lines_containing(text, "```lean4", think_at)
    if blocks:
        detail = f"found {len(blocks)} ```lean4 blocks after <think>; exactly one is allowed"
    else:
        final = LEAN4_BLOCK_ANYWHERE.search(text)
        fences.append(line_of(text, final.end() - 1))
        opening_line = text[final.start():].split("\n", 1)[0]
        closing_line = text[text.rfind("\n", 0, final.end() - 1) + 1:final.end()]
        detail = (
            "the lean4 block must open with a line that is exactly ```lean4 and close with ``` at the start of a "
            f"line; its opening line is {opening_line!r} and its closing line {closing_line!r}"
        )
        if "\r" in text:
            detail += " (the answer has CRLF line endings; reward.crlf_line_endings_accepted reads them as LF)"
    return FormatCheck(FormatError.INVALID_LEAN4_CODE_BLOCK_COUNT, detail, failure_lines=merge_lines(fences)), answer


def _check_repeats(
    text: str, reasoning_at: int, reasoning: str, config: RewardConfig
) -> tuple[FormatError, str, tuple[LineRange, ...]] | None:
    if config.repeated_line_limit is None:
        return None
    occurrences: dict[str, list[int]] = {}
    for line, offset in _prose_lines(reasoning):
        stripped = line.strip()
        if not stripped or not re.search(r"\w", stripped):
            continue
        content_words = [word for word in WORD.findall(stripped.lower()) if word not in COMMON_STOPWORDS]
        if len(content_words) >= config.repeated_line_min_content_words:
            occurrences.setdefault(stripped.lower(), []).append(line_of(text, reasoning_at + offset))
    repeated = {line: lines for line, lines in occurrences.items() if len(lines) >= config.repeated_line_limit}
    if not repeated:
        return None
    line, lines = next(iter(repeated.items()))
    return (
        FormatError.GENERATION_REPEATS,
        f"the reasoning line {_shorten(line)!r} occurs {len(lines)} times (the limit is fewer than "
        f"{config.repeated_line_limit} for a line of {config.repeated_line_min_content_words}+ words outside the stopwords)",
        merge_lines(number for lines in repeated.values() for number in lines),
    )


def _prose_lines(reasoning: str) -> list[tuple[str, int]]:
    """The reasoning with its tactics blocks cut out, split as Python's ``splitlines`` splits
    (the release does both), each line with the offset in ``reasoning`` of its first character."""
    kept: list[str] = []
    origins: list[int] = []
    cursor = 0
    for block in TACTICS_BLOCK.finditer(reasoning):
        kept.append(reasoning[cursor:block.start()])
        origins.extend(range(cursor, block.start()))
        cursor = block.end()
    kept.append(reasoning[cursor:])
    origins.extend(range(cursor, len(reasoning)))
    prose = "".join(kept)
    lines, position = [], 0
    for line in prose.splitlines(keepends=True):
        lines.append((line, origins[position] if position < len(origins) else len(reasoning)))
        position += len(line)
    return lines


def _tactic_block_line_limit(lean_code: str, config: RewardConfig) -> int | None:
    limits = []
    if config.tactic_block_lines_ratio is not None:
        final_lines = len(lean_code.strip().split("\n"))
        limits.append(max(config.tactic_block_lines_floor, int(final_lines * config.tactic_block_lines_ratio)))
    if config.max_tactic_block_lines is not None:
        limits.append(config.max_tactic_block_lines)
    return min(limits) if limits else None


def _strip_comments(code: str, config: RewardConfig) -> str:
    rule = lean_lexer.CommentRule.LEAN if config.comments_read_by_lean_lexer else lean_lexer.CommentRule.KIMINA_RELEASE
    return lean_lexer.strip_comments(code, strict=False, rule=rule)


def _code_lines(code: str, config: RewardConfig) -> set[str]:
    return {line.strip() for line in _strip_comments(code, config).split("\n") if line.strip()}


def _check_tactics_match(answer: _Answer, config: RewardConfig) -> tuple[FormatError, str, tuple[LineRange, ...]] | None:
    text = answer.text
    lines = text.split("\n")
    starts = [0]
    for line in lines:
        starts.append(starts[-1] + len(line) + 1)
    blocks: list[str] = []
    index = 0
    while index < len(lines):
        if lines[index].strip() == TACTICS_FENCE_LINE:
            closing = next((j for j in range(index + 1, len(lines)) if lines[j].strip() == FENCE), None)
            if closing is None:
                return (
                    FormatError.TACTIC_BLOCK_FORMATTING_ERROR,
                    f"the ```tactics block opened on line {index + 1} is never closed by a line that is just ```",
                    ((index + 1, len(lines)),),
                )
            body = lines[index + 1:closing]
            stray = next((j for j, line in enumerate(body) if FENCE in line), None)
            if stray is not None:
                return (
                    FormatError.TACTIC_BLOCK_FORMATTING_ERROR,
                    f"the ```tactics block opened on line {index + 1} has a stray ``` on line {index + 2 + stray} "
                    f"before its closing fence on line {closing + 1}",
                    ((index + 2 + stray, index + 2 + stray), (index + 1, closing + 1)),
                )
            blocks.append("\n".join(body))
            index = closing
        index += 1

    final_lines = _code_lines(answer.lean_code, config)
    tried = set().union(*(_code_lines(block, config) for block in blocks)) if blocks else set()
    score = len(final_lines & tried) / len(final_lines) if final_lines else 0.0
    if score >= config.min_tactics_lean4_match:
        return None
    untried = final_lines - tried
    first, last = answer.lean_lines()
    block_text_lines = text.split("\n")[first - 1:last]
    marked = [first + i for i, line in enumerate(block_text_lines) if _strip_comments(line, config).strip() in untried]
    return (
        FormatError.TACTICS_LEAN4_NOT_MATCH,
        f"only {score:.0%} of the lean4 code's distinct lines were tried in the tactics blocks (at least "
        f"{config.min_tactics_lean4_match:.0%} must be); the marked lines never appear in one",
        merge_lines(marked) or ((first, last),),
    )


def _normalized(code: str, config: RewardConfig) -> str:
    """The release's comparison form: comments and every ``sorry`` removed, whitespace collapsed."""
    return re.sub(r"\s+", " ", _strip_comments(code, config).replace("sorry", "")).strip()


def _statement_paragraphs(formal_statement: str, config: RewardConfig) -> list[str]:
    paragraphs = []
    for paragraph in _strip_comments(formal_statement, config).split("\n\n"):
        normalized = _normalized(paragraph, config)
        if normalized and not normalized.startswith(PREAMBLE_PARAGRAPH_STARTS):
            paragraphs.append(normalized)
    return paragraphs


def _disallowed_words(lean_code: str, config: RewardConfig) -> list[str]:
    if not config.axiom_check_by_token:
        normalized = _normalized(lean_code, config)
        return [word for word in DISALLOWED_WORDS if word in normalized]
    tokens = lean_lexer.scan(lean_code, strict=False)
    words = {token.text for token in tokens if token.kind == lean_lexer.TokenKind.WORD}
    return [word for word in DISALLOWED_WORDS if word in words]


def _check_statement(
    answer: _Answer, formal_statement: str, config: RewardConfig
) -> tuple[FormatError, str, tuple[LineRange, ...]] | None:
    text, lean_code = answer.text, answer.lean_code
    first, last = answer.lean_lines()
    disallowed = _disallowed_words(lean_code, config)
    if disallowed:
        marked = [
            first + i for i, line in enumerate(text.split("\n")[first - 1:last])
            if any(word in _strip_comments(line, config) for word in disallowed)
        ]
        how = "as a word" if config.axiom_check_by_token else (
            "as letters anywhere, even inside a name such as Classical.axiom_of_choice (the release's rule; "
            "reward.axiom_check_by_token looks for the word only)"
        )
        return (
            FormatError.LEAN4_CODE_NOT_START_WITH_STATEMENT,
            f"the lean4 code contains {' and '.join(repr(word) for word in disallowed)} outside comments, {how}",
            merge_lines(marked) or ((first, last),),
        )
    normalized_code = _normalized(lean_code, config)
    missing = [paragraph for paragraph in _statement_paragraphs(formal_statement, config) if paragraph not in normalized_code]
    if missing:
        statement_lines = max(1, len(formal_statement.strip().split("\n")))
        return (
            FormatError.LEAN4_CODE_NOT_START_WITH_STATEMENT,
            f"the lean4 code does not contain the formal statement {_shorten(missing[0], 120)!r} (compared with "
            "comments and 'sorry' removed and whitespace collapsed); the marked lines are where it should be",
            ((first, min(last, first + statement_lines - 1)),),
        )
    return None


def length_penalty(num_tokens: int, max_tokens: int, config: RewardConfig) -> float:
    """Multiplier of the reward for a response of ``num_tokens`` tokens out of a ``max_tokens``
    budget: 1.0 up to ``config.length_penalty_start_tokens``, falling linearly to 0.0 at the budget.
    Always 1.0 when the penalty is off (the recipe's default)."""
    if num_tokens < 0:
        raise ValueError(f"num_tokens must be ≥ 0, got {num_tokens}")
    if max_tokens < 1:
        raise ValueError(f"max_tokens must be ≥ 1, got {max_tokens}")
    start = config.length_penalty_start_tokens
    if start is None:
        return 1.0
    if start >= max_tokens:
        raise ValueError(
            f"reward.length_penalty_start_tokens ({start}) must be below the response budget ({max_tokens} tokens); "
            "lower it or turn the penalty off with None"
        )
    if num_tokens <= start:
        return 1.0
    return max(0.0, 1.0 - (num_tokens - start) / (max_tokens - start))
