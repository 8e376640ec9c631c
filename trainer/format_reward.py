"""The format check in front of Lean: an answer earns anything only if its shape is the recipe's.

The shape: one ``<think>…</think>`` block of reasoning, in which the model tries code in
```` ```tactics ```` blocks, then exactly one ```` ```lean4 ```` block, and nothing after it. The
lean4 code must contain the problem's formal statement; only what follows the statement's
``:= by`` (the proof body) is kept, and Lean checks header + canonical statement + body
(``trainer.verification.checked_code``), never the model's copy of the statement.

The categories and their order follow the release's ``FormatReward`` (kimina-prover-rl,
``reward/format_reward.py``), with every threshold a ``RewardConfig`` field. Two checks the
release describes but never applies are here too, off by default:

* ``REASONING_COMMENT_DENSITY``: share of comment characters in the tactics blocks of the reasoning.
* ``CODE_COMMENT_DENSITY``: share of comment characters in the proof body.

Statement matching compares after normalising whitespace, as the release does: Lean comments
count as whitespace, every run of whitespace becomes one space, and the ends are trimmed. So a
statement re-wrapped over other lines, re-indented, or with its doc comment dropped still matches;
a changed token (``:=by`` for ``:= by``, a renamed hypothesis) does not.
"""

from __future__ import annotations

import re
from collections import Counter
from dataclasses import dataclass
from enum import StrEnum

from trainer.config import RewardConfig
from trainer.problems import Problem


class FormatError(StrEnum):
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


@dataclass(frozen=True)
class FormatCheck:
    """The verdict of the format check and the parts it found (empty where it stopped before them)."""

    error: FormatError | None
    detail: str
    reasoning: str = ""
    lean_code: str = ""
    proof_body: str = ""

    @property
    def is_valid(self) -> bool:
        return self.error is None


THINK_OPEN = "<think>"
THINK_CLOSE = "</think>"
LEAN4_FENCE_OPEN = re.compile(r"```lean4[^\S\n]*\n")
FENCE_CLOSE = "```"
TACTICS_FENCE_OPEN = "```tactics"

# A declaration keyword, not an identifier part such as ``Classical.axiom_of_choice`` or ``axiom'``.
AXIOM_DECLARATION = re.compile(r"(?<![\w.'])axiom(?![\w'])")
IDENTIFIER_CHARACTER = re.compile(r"[\w'.!?₀-₉ₐ-ₜ]")
CHARACTER_LITERAL = re.compile(r"'(?:\\.[^\n']{0,7}|[^\\'\n])'")
WORD = re.compile(r"\b\w+\b")

# Function words that make a line look long without saying anything; a repeated line only
# counts when enough of its words are outside this list.
STOPWORDS = frozenset(
    """
    a an the and or but nor so yet if then else than that this these those there here
    is are was were be been being am do does did doing have has had having will would shall should
    can could may might must of in on at by for with about against between into through during
    before after above below to from up down out off over under again further once
    i me my we our you your he him his she her it its they them their what which who whom whose
    when where why how all any both each few more most other some such no not only own same too very
    just also as let lets us now need needs one get got use using
    """.split()
)


def lean_comment_mask(code: str) -> list[bool]:
    """For each character, whether it belongs to a Lean comment (``--`` to end of line, or a
    nestable ``/- … -/`` block, doc comments included). String and character literals are skipped
    so a ``--`` inside ``"…"`` is not taken for a comment."""
    mask = [False] * len(code)
    position = 0
    length = len(code)
    while position < length:
        character = code[position]
        if code.startswith("--", position):
            end = code.find("\n", position)
            end = length if end == -1 else end
            mask[position:end] = [True] * (end - position)
            position = end
        elif code.startswith("/-", position):
            depth, cursor = 1, position + 2
            while cursor < length and depth:
                if code.startswith("/-", cursor):
                    depth, cursor = depth + 1, cursor + 2
                elif code.startswith("-/", cursor):
                    depth, cursor = depth - 1, cursor + 2
                else:
                    cursor += 1
            mask[position:cursor] = [True] * (cursor - position)
            position = cursor
        elif character == '"':
            cursor = position + 1
            while cursor < length and code[cursor] != '"':
                cursor += 2 if code[cursor] == "\\" else 1
            position = cursor + 1
        elif character == "'" and (position == 0 or not IDENTIFIER_CHARACTER.match(code[position - 1])):
            literal = CHARACTER_LITERAL.match(code, position)
            position = literal.end() if literal else position + 1
        else:
            position += 1
    return mask


def strip_lean_comments(code: str) -> str:
    """The code without its comments; newlines inside block comments stay, so lines keep their numbers."""
    mask = lean_comment_mask(code)
    return "".join(character for character, is_comment in zip(code, mask) if not is_comment or character == "\n")


def comment_density(text: str) -> float:
    """Share of the non-whitespace characters of ``text`` that lie in Lean comments (delimiters
    included), in [0, 1]; 0.0 for text with no visible characters."""
    mask = lean_comment_mask(text)
    visible = [is_comment for character, is_comment in zip(text, mask) if not character.isspace()]
    if not visible:
        return 0.0
    return sum(visible) / len(visible)


def normalize_lean_whitespace(code: str) -> tuple[str, list[int]]:
    """``code`` with comments read as whitespace, whitespace runs collapsed to one space and the
    ends trimmed, plus, for each normalised character, its index in ``code``."""
    mask = lean_comment_mask(code)
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


def extract_tactic_blocks(reasoning: str) -> tuple[list[str], str | None]:
    """The ```tactics blocks of the reasoning (fences on their own lines), and a description of the
    first malformed one, if any: an opening fence never closed, or a fence inside a block."""
    blocks: list[str] = []
    lines = reasoning.split("\n")
    index = 0
    while index < len(lines):
        if lines[index].strip() == TACTICS_FENCE_OPEN:
            opened_at = index
            index += 1
            body: list[str] = []
            while index < len(lines) and lines[index].strip() != FENCE_CLOSE:
                if FENCE_CLOSE in lines[index]:
                    return blocks, f"tactics block opened on reasoning line {opened_at + 1} has a stray ``` on line {index + 1}"
                body.append(lines[index])
                index += 1
            if index == len(lines):
                return blocks, f"tactics block opened on reasoning line {opened_at + 1} is never closed"
            blocks.append("\n".join(body))
        index += 1
    return blocks, None


def significant_reasoning_lines(reasoning: str, min_content_words: int) -> list[str]:
    """Lowercased prose lines of the reasoning (tactics blocks left out) with at least
    ``min_content_words`` words outside the stopword list."""
    prose = re.sub(r"```tactics\n.*?\n\s*```", "", reasoning, flags=re.DOTALL)
    significant = []
    for line in prose.split("\n"):
        line = line.strip().lower()
        content_words = [word for word in WORD.findall(line) if word not in STOPWORDS]
        if len(content_words) >= min_content_words:
            significant.append(line)
    return significant


def _code_lines(code: str) -> set[str]:
    return {line.strip() for line in strip_lean_comments(code).split("\n") if line.strip()}


def tactics_match_score(tactic_blocks: list[str], lean_code: str) -> float:
    """Share of the final code's distinct non-comment lines that also occur in some tactics block
    (the release's 'iof', intersection over final); 0.0 when the final code is empty."""
    final_lines = _code_lines(lean_code)
    if not final_lines:
        return 0.0
    tried_lines = set().union(*(_code_lines(block) for block in tactic_blocks)) if tactic_blocks else set()
    return len(final_lines & tried_lines) / len(final_lines)


def _shorten(text: str, limit: int = 80) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def check_format(response: str, problem: Problem, config: RewardConfig) -> FormatCheck:
    """Runs the checks in the release's order and stops at the first failure."""
    # --- the final lean4 block -------------------------------------------------------------
    openings = list(LEAN4_FENCE_OPEN.finditer(response))
    if not openings:
        return FormatCheck(FormatError.NO_VALID_LEAN4_CODE_BLOCK, "no ```lean4 block (a line starting ```lean4) in the answer")
    if len(openings) > 1:
        return FormatCheck(
            FormatError.INVALID_LEAN4_CODE_BLOCK_COUNT,
            f"found {len(openings)} ```lean4 blocks; the answer must have exactly one, after the reasoning",
        )
    block_start = openings[0].end()
    block_end = response.find(FENCE_CLOSE, block_start)
    if block_end == -1:
        return FormatCheck(FormatError.NO_VALID_LEAN4_CODE_BLOCK, "the ```lean4 block is never closed (truncated answer?)")
    lean_code = response[block_start:block_end].strip("\n")
    trailing_text = response[block_end + len(FENCE_CLOSE):]
    if trailing_text.strip():
        return FormatCheck(
            FormatError.NO_VALID_LEAN4_CODE_BLOCK,
            f"text after the lean4 block: {_shorten(trailing_text)!r}; the lean4 block must end the answer",
            lean_code=lean_code,
        )
    if not lean_code.strip():
        return FormatCheck(FormatError.NO_VALID_LEAN4_CODE_BLOCK, "the lean4 block is empty")

    # --- the think block ---------------------------------------------------------------------
    if THINK_OPEN not in response:
        return FormatCheck(FormatError.NO_VALID_THINK_BLOCK, "no <think> in the answer", lean_code=lean_code)
    opens, closes = response.count(THINK_OPEN), response.count(THINK_CLOSE)
    think_start = response.find(THINK_OPEN)
    think_end = response.find(THINK_CLOSE, think_start)
    if opens != 1 or closes != 1 or think_end == -1:
        return FormatCheck(
            FormatError.INVALID_THINK_BLOCK_COUNT,
            f"found {opens} <think> and {closes} </think>; the answer needs exactly one <think>…</think> pair, in that order",
            lean_code=lean_code,
        )
    # The lean4 block cannot sit inside the reasoning: the </think> after it would have been
    # rejected above as text after the block.
    reasoning = response[think_start + len(THINK_OPEN):think_end]

    # --- the reasoning -----------------------------------------------------------------------
    if config.repeated_line_limit is not None:
        counts = Counter(significant_reasoning_lines(reasoning, config.repeated_line_min_content_words))
        if counts:
            line, count = counts.most_common(1)[0]
            if count >= config.repeated_line_limit:
                return FormatCheck(
                    FormatError.GENERATION_REPEATS,
                    f"the reasoning line {_shorten(line)!r} occurs {count} times (limit: fewer than {config.repeated_line_limit})",
                    reasoning,
                    lean_code,
                )

    tactic_blocks, malformed = extract_tactic_blocks(reasoning)
    if malformed:
        return FormatCheck(FormatError.TACTIC_BLOCK_FORMATTING_ERROR, malformed, reasoning, lean_code)
    if config.min_tactic_blocks is not None and len(tactic_blocks) < config.min_tactic_blocks:
        return FormatCheck(
            FormatError.INSUFFICIENT_TACTICS_BLOCKS,
            f"the reasoning has {len(tactic_blocks)} ```tactics blocks; at least {config.min_tactic_blocks} are required",
            reasoning,
            lean_code,
        )

    line_limit = _tactic_block_line_limit(lean_code, config)
    if line_limit is not None:
        for number, block in enumerate(tactic_blocks, 1):
            block_lines = len(block.strip("\n").split("\n"))
            if block_lines > line_limit:
                return FormatCheck(
                    FormatError.TACTIC_CODE_TOO_MANY_LINES,
                    f"tactics block {number} has {block_lines} lines; the limit for this answer is {line_limit}",
                    reasoning,
                    lean_code,
                )

    if config.max_reasoning_comment_density is not None and tactic_blocks:
        density = comment_density("\n".join(tactic_blocks))
        if density > config.max_reasoning_comment_density:
            return FormatCheck(
                FormatError.REASONING_COMMENT_DENSITY,
                f"{density:.0%} of the tactics blocks' characters are comments (limit {config.max_reasoning_comment_density:.0%})",
                reasoning,
                lean_code,
            )

    if config.min_tactics_lean4_match is not None:
        score = tactics_match_score(tactic_blocks, lean_code)
        if score < config.min_tactics_lean4_match:
            return FormatCheck(
                FormatError.TACTICS_LEAN4_NOT_MATCH,
                f"only {score:.0%} of the final code's lines were tried in the tactics blocks (need {config.min_tactics_lean4_match:.0%})",
                reasoning,
                lean_code,
            )

    # --- the final code ----------------------------------------------------------------------
    statement_end = find_statement_end(lean_code, problem.formal_statement)
    if statement_end is None:
        return FormatCheck(
            FormatError.LEAN4_CODE_NOT_START_WITH_STATEMENT,
            f"the lean4 code does not contain the formal statement {_shorten(problem.formal_statement, 120)!r} "
            "(compared with whitespace and comments normalised)",
            reasoning,
            lean_code,
        )
    axiom = AXIOM_DECLARATION.search(strip_lean_comments(lean_code))
    if axiom:
        return FormatCheck(
            FormatError.LEAN4_CODE_NOT_START_WITH_STATEMENT,
            "the lean4 code declares an axiom; a proof may not add axioms",
            reasoning,
            lean_code,
        )
    proof_body = lean_code[statement_end:]

    if config.max_code_comment_density is not None:
        density = comment_density(proof_body)
        if density > config.max_code_comment_density:
            return FormatCheck(
                FormatError.CODE_COMMENT_DENSITY,
                f"{density:.0%} of the proof body's characters are comments (limit {config.max_code_comment_density:.0%})",
                reasoning,
                lean_code,
                proof_body,
            )

    return FormatCheck(None, "format valid", reasoning, lean_code, proof_body)


def _tactic_block_line_limit(lean_code: str, config: RewardConfig) -> int | None:
    limits = []
    if config.tactic_block_lines_ratio is not None:
        final_lines = len(lean_code.strip().split("\n"))
        limits.append(max(config.tactic_block_lines_floor, int(final_lines * config.tactic_block_lines_ratio)))
    if config.max_tactic_block_lines is not None:
        limits.append(config.max_tactic_block_lines)
    return min(limits) if limits else None


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
