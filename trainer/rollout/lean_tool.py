"""Lean inside the reasoning (``rollout.lean_tool_calls`` = K ≥ 1): an answer may ask Lean to check a snippet.

The syntax (its one home is trainer/recipe/format_reward.py, whose check enforces it). Inside ``<think>``, the model
writes a Lean snippet to check between ``<lean>`` and ``</lean>``, whole declarations with their proofs::

    <think>
    <lean>
    theorem try_it : (1 : ℚ) / 4 + 1 / 4 = 1 / 2 := by
      omega
    </lean>
    <lean_result>
    Lean's errors:
    line 2, column 2: omega could not prove the goal: …
    </lean_result>
    …

When the answer's text closes a ``<lean>`` block inside its reasoning, the engine pauses that answer (the
others go on being written), the snippet goes to the verifier (the run's problem header, then the
snippet), and the trainer appends Lean's reply, ``\\n<lean_result>\\n…\\n</lean_result>\\n``; the answer then
resumes from its text so far, the reply included (vLLM finds that prefix in its cache). At most K calls per
answer; after the K-th, or once ``</think>`` is written, ``</lean>`` is plain text. Message lines count from
the snippet's first line.

What defends the Lean server: every snippet keeps the rules of a final proof, with the declarations a snippet is
made of allowed (trainer/verification/integrity.py ``check_snippet_integrity``: no ``#eval``, ``IO``, ``run_cmd``,
``#exit``, imports, axioms…). A snippet that breaks one never reaches the verifier: it is answered at once with the
refusal, in a ``<lean_result>`` block as Lean's reply would be (so the model learns what it may ask), and its call is
marked ``is_refused`` (counted per step in ``rollout/tool_calls_refused``).

What defends the training signal:

- **The replies are context, not policy.** Their tokens are in the answer (the model reads them as it goes
  on), but the engine did not sample them: ``Generation.tool_calls`` records each reply's token span, the
  learner gives those tokens zero loss weight and leaves them out of the train–inference gap
  (trainer/learning/batching.py ``TokenBatch.loss_mask``). Their engine log-probabilities are NaN, not measured
  (``NOT_MEASURED``), as is any the engine did not return: never 0.0, which would read as probability 1.
- **Never a made-up verdict.** A snippet the verifier cannot decide (the stand-in's "cannot decide", an
  outage, a server error) is answered with exactly that: "Lean could not check this snippet", and why.
- **Only the trainer writes replies.** The format check (with K ≥ 1) fails an answer whose reply blocks are
  not the trainer's, or with a tool block outside its reasoning; the final answer's check is the release's.

Each call is kept with the stored rollout (``RolloutFinished.tool_calls``): the snippet, the reply, the
verdict, and when it was asked and answered.
"""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from trainer.recipe.format_reward import THINK_CLOSE, THINK_OPEN, TOOL_CALL_CLOSE, TOOL_CALL_OPEN, TOOL_REPLY_CLOSE, TOOL_REPLY_OPEN
from trainer.rollout.base import Generation
from trainer.verification.checked_code import CheckedCode, normalised_header
from trainer.verification.integrity import check_snippet_integrity
from trainer.verification.verdicts import Verdict, VerificationResult

MAX_REPLY_CHARACTERS = 1500  # Lean's messages beyond this are cut: the reply is context, and costs tokens
MAX_REPLY_MESSAGES = 5
# An engine log-probability nobody measured: a reply's token (never sampled), or one the engine did not return.
# NaN, so that no sum or ratio can take it for a measured value; its consumers skip it.
NOT_MEASURED = float("nan")


@dataclass(frozen=True)
class ToolCall:
    """One check the answer asked for, and Lean's reply; ``reply_tokens`` is where the reply's tokens sit in the
    response, [start, end), the span the learner masks out."""

    snippet: str
    reply: str
    verdict: str  # a Verdict value; "infra_error" when the verifier could not decide, "rejected" when refused
    is_decided: bool
    is_standin_verdict: bool
    asked_at: float  # time.time()
    answered_at: float
    reply_tokens: tuple[int, int] = (0, 0)
    is_refused: bool = False  # broke a snippet rule: answered with the refusal, never sent to the verifier

    def as_dict(self) -> dict:
        return {"snippet": self.snippet, "reply": self.reply, "verdict": self.verdict, "is_decided": self.is_decided,
                "is_standin_verdict": self.is_standin_verdict, "asked_at": self.asked_at,
                "answered_at": self.answered_at, "reply_tokens": list(self.reply_tokens),
                "is_refused": self.is_refused}


def checked_snippet(header: str, snippet: str) -> CheckedCode:
    """What the verifier is sent: the problem's header, normalised as for proofs, then the snippet."""
    head = normalised_header(header or "")
    head = head + "\n\n" if head else ""
    return CheckedCode(head + snippet.strip("\n") + "\n")


def snippet_line_offset(header: str) -> int:
    """Lines of the checked code before the snippet's first line."""
    head = normalised_header(header or "")
    return head.count("\n") + 2 if head else 0


def refusal(reasons: Sequence[str]) -> VerificationResult:
    """The answer to a snippet that breaks a rule (``check_snippet_integrity``): rejected, with its reasons."""
    return VerificationResult(Verdict.REJECTED, reasons=tuple(reasons))


def refusal_text(reasons: Sequence[str]) -> str:
    """The reply to a refused snippet, appended where Lean's would be: what the model may not ask, and why."""
    return _reply_block("Not sent to Lean: this snippet " + "; it ".join(reasons) + ".")


def reply_text(result: VerificationResult, line_offset: int) -> str:
    """Lean's reply as appended to the answer: the verdict in words, then its errors (lines of the snippet)."""
    if result.verdict is Verdict.INFRA_ERROR:
        why = "; ".join(result.reasons) or "the verifier gave no reason"
        body = f"Lean could not check this snippet: no verdict. ({why})"
    elif result.verdict is Verdict.VALID:
        body = "Lean accepts this snippet: no errors."
    elif result.verdict is Verdict.SORRY:
        body = "Lean accepts this snippet only with sorry."
    elif result.verdict is Verdict.TIMEOUT:
        body = "Lean timed out on this snippet."
    else:
        lines = ["Lean's errors:"]
        for message in result.errors[:MAX_REPLY_MESSAGES]:
            where = "" if message.line is None else f"line {message.line - line_offset}, column {message.column}: "
            lines.append(where + message.text.strip())
        if len(lines) == 1:
            lines.append("; ".join(result.reasons) or result.verdict.value)
        body = "\n".join(lines)
    return _reply_block(body)


def _reply_block(body: str) -> str:
    if len(body) > MAX_REPLY_CHARACTERS:
        body = body[:MAX_REPLY_CHARACTERS] + " …"
    # Fences would end the reasoning's blocks in the format check's eyes; the reply is prose.
    body = body.replace("```", "'''")
    return f"\n{TOOL_REPLY_OPEN}\n{body}\n{TOOL_REPLY_CLOSE}\n"


@dataclass(frozen=True)
class CallInText:
    """A ``</lean>`` found in an answer's new text: where it ends, and the snippet when it is a call."""

    end: int  # character offset just after </lean>
    snippet: str | None  # None: not a call (outside the reasoning, or no <lean> before it)


def find_call(text: str, start: int) -> CallInText | None:
    """The first ``</lean>`` at or after ``start`` in ``text`` (the answer so far), or None."""
    close = text.find(TOOL_CALL_CLOSE, start)
    if close == -1:
        return None
    opening = text.rfind(TOOL_CALL_OPEN, start, close)
    think_open, think_close = text.find(THINK_OPEN), text.find(THINK_CLOSE)
    is_inside = (opening != -1 and think_open != -1 and think_open < opening
                 and (think_close == -1 or think_close > close))
    snippet = text[opening + len(TOOL_CALL_OPEN):close].strip("\n") if is_inside else None
    return CallInText(close + len(TOOL_CALL_CLOSE), snippet if snippet and snippet.strip() else None)


def may_call_again(text: str, calls: int, max_calls: int) -> bool:
    """Whether ``</lean>`` may still pause this answer: calls left, and the reasoning not yet closed."""
    return calls < max_calls and THINK_CLOSE not in text


class LeanTool:
    """The run's tool: K, and how a snippet reaches the verifier.

    ``check(checked_code, key)`` returns a concurrent Future of the VerificationResult (the driver's
    background event loop and LeanVerifier; in a generator process, a request to the run's, which holds the run's one
    in-flight budget). It is never called with a snippet ``check_snippet_integrity`` refuses under
    ``reward_config`` (the run's ``RewardConfig``: ``allow_native_decide``).
    """

    def __init__(self, max_calls: int, check: Callable[[CheckedCode, str], concurrent.futures.Future], *,
                 reward_config: Any):
        if max_calls < 1:
            raise ValueError(f"LeanTool needs rollout.lean_tool_calls ≥ 1, got {max_calls}")
        self.max_calls = max_calls
        self._check = check
        self.reward_config = reward_config

    def session(self, headers: Sequence[str], tokenizer: Any, max_tokens: int, n: int) -> ToolCallSession:
        """One generate call's bookkeeping; ``headers[prompt_index]`` is each prompt's problem header."""
        return ToolCallSession(self, list(headers), tokenizer, max_tokens, n)

    def ask(self, checked_code: CheckedCode, key: str) -> concurrent.futures.Future:
        """The verifier's answer to a snippet the rules let through (``answer``'s caller checked them)."""
        try:
            return self._check(checked_code, key)
        except Exception as error:  # noqa: BLE001 - a call that cannot even be sent is answered as undecided
            failed: concurrent.futures.Future = concurrent.futures.Future()
            failed.set_exception(error)
            return failed


@dataclass
class _Answer:
    """One answer across its pauses: everything written and appended so far."""

    prompt_ids: list[int]
    token_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    engine_gave_logprobs: bool = False  # whether any part came with the engine's log-probabilities
    text: str = ""
    searched_to: int = 0  # characters of ``text`` already searched for </lean>
    calls: list[ToolCall] = field(default_factory=list)
    waiting: _Waiting | None = None


@dataclass(frozen=True)
class _Waiting:
    """A call asked and not yet answered; a refused one is answered already (its future is done)."""

    future: concurrent.futures.Future
    snippet: str
    asked_at: float
    is_refused: bool = False


@dataclass(frozen=True)
class Resumption:
    """A paused answer, ready to go on: its whole prefix (prompt, response so far, Lean's reply) and budget."""

    prompt_index: int
    sample_index: int
    prefix_ids: list[int]
    max_tokens: int
    may_call: bool  # whether </lean> may pause it again
    turn: int  # how many times it resumed (for distinct request ids and seeds)


class ToolCallSession:
    """The paused and resumed answers of one ``generate`` call; engines call it from their decoding thread.

    An engine asks ``wants_pause`` when an answer's text may have closed a call (its last token holds ``>``),
    ``pause`` to hand it over, takes ``ready()`` resumptions to generate on, and ``finish`` for its last part.
    """

    def __init__(self, tool: LeanTool, headers: list[str], tokenizer: Any, max_tokens: int, n: int):
        self.tool = tool
        self.headers = headers
        self._tokenizer = tokenizer
        self.max_tokens = max_tokens
        self._n = n
        self._answers: dict[tuple[int, int], _Answer] = {}
        self._resumed: dict[tuple[int, int], int] = {}

    # --- what engines ask ---------------------------------------------------------------------

    def text_of(self, prompt_index: int, sample_index: int, segment_text: str) -> str:
        """The answer's whole text so far, given the text of the part being written now (for live progress)."""
        answer = self._answers.get((prompt_index, sample_index))
        return segment_text if answer is None else answer.text + segment_text

    def may_call(self, prompt_index: int, sample_index: int) -> bool:
        answer = self._answers.get((prompt_index, sample_index))
        if answer is None:
            return True
        return may_call_again(answer.text, len(answer.calls), self.tool.max_calls)

    def wants_pause(self, prompt_index: int, sample_index: int, segment_ids: list[int]) -> bool:
        """Whether the answer, with ``segment_ids`` written since it last resumed, has just asked Lean."""
        answer = self._answers.get((prompt_index, sample_index))
        earlier_text = answer.text if answer else ""
        searched_to = answer.searched_to if answer else 0
        calls = len(answer.calls) if answer else 0
        if calls >= self.tool.max_calls:
            return False
        text = earlier_text + self._decode(segment_ids)
        found = find_call(text, searched_to)
        while found is not None and found.snippet is None:
            found = find_call(text, found.end)
        return found is not None and THINK_CLOSE not in text[:found.end]

    def pause(self, prompt_index: int, sample_index: int, prompt_ids: list[int], segment_ids: list[int],
              segment_logprobs: list[float], key: str) -> None:
        """The answer stopped at a call (or at a ``</lean>`` that is none: it then resumes unanswered)."""
        where = (prompt_index, sample_index)
        answer = self._answers.setdefault(where, _Answer(list(prompt_ids)))
        answer.token_ids.extend(segment_ids)
        answer.logprobs.extend(_aligned(segment_logprobs, len(segment_ids)))
        answer.engine_gave_logprobs |= bool(segment_logprobs)
        answer.text = self._decode(answer.token_ids)
        found = find_call(answer.text, answer.searched_to)
        while found is not None and found.snippet is None:
            found = find_call(answer.text, found.end)
        if found is None or len(answer.calls) >= self.tool.max_calls:
            answer.searched_to = len(answer.text)
            answer.waiting = None
            return
        answer.searched_to = found.end
        asked_at = time.time()
        reasons = check_snippet_integrity(found.snippet, self.tool.reward_config)
        if reasons:
            refused: concurrent.futures.Future = concurrent.futures.Future()
            refused.set_result(refusal(reasons))
            answer.waiting = _Waiting(refused, found.snippet, asked_at, is_refused=True)
            return
        header = self.headers[prompt_index] if prompt_index < len(self.headers) else ""
        future = self.tool.ask(checked_snippet(header, found.snippet), f"{key}-tool{len(answer.calls) + 1}")
        answer.waiting = _Waiting(future, found.snippet, asked_at)

    def has_waiting(self) -> bool:
        return any(answer.waiting is not None for answer in self._answers.values())

    def ready(self, block: bool = False) -> list[Resumption]:
        """Answers whose reply has come (all of them first waited for one when ``block``), reply appended."""
        waiting = {where: answer for where, answer in self._answers.items() if answer.waiting is not None}
        if block and waiting and not any(answer.waiting.future.done() for answer in waiting.values()):
            concurrent.futures.wait([answer.waiting.future for answer in waiting.values()],
                                    return_when=concurrent.futures.FIRST_COMPLETED)
        resumptions = []
        for where, answer in waiting.items():
            call = answer.waiting
            if not call.future.done():
                continue
            answer.waiting = None
            resumption = self._answer_call(where, answer, call)
            if resumption is not None:
                resumptions.append(resumption)
        return resumptions

    def finish(self, generation: Generation) -> Generation:
        """The engine's last part of an answer, joined to its earlier parts and Lean's replies."""
        where = (generation.prompt_index, generation.sample_index)
        answer = self._answers.pop(where, None)
        if answer is None:
            return generation
        token_ids = answer.token_ids + list(generation.token_ids)
        logprobs: list[float] | None = answer.logprobs + _aligned(generation.logprobs, len(generation.token_ids))
        if not (answer.engine_gave_logprobs or generation.logprobs):
            logprobs = None  # an engine that reports none: the whole answer is not measured, as without tool calls
        return replace(generation, text=self._decode(token_ids), token_ids=token_ids, num_tokens=len(token_ids),
                       logprobs=logprobs, tool_calls=tuple(answer.calls))

    def unanswered_resumption(self, prompt_index: int, sample_index: int) -> Resumption | None:
        """A paused answer whose ``</lean>`` asked nothing (outside the reasoning, calls used): it goes on as is."""
        where = (prompt_index, sample_index)
        answer = self._answers.get(where)
        if answer is None or answer.waiting is not None:
            return None
        return self._resumption(where, answer)

    def is_waiting(self, prompt_index: int, sample_index: int) -> bool:
        answer = self._answers.get((prompt_index, sample_index))
        return answer is not None and answer.waiting is not None

    # --- inside ---------------------------------------------------------------------------------

    def _answer_call(self, where, answer: _Answer, call: _Waiting) -> Resumption | None:
        header = self.headers[where[0]] if where[0] < len(self.headers) else ""
        try:
            result = call.future.result()
        except Exception as error:  # noqa: BLE001 - an outage is answered as one, never as a verdict
            result = VerificationResult(Verdict.INFRA_ERROR, reasons=(
                f"the verifier failed: {type(error).__name__}: {error}",))
        reply = refusal_text(result.reasons) if call.is_refused else reply_text(result, snippet_line_offset(header))
        reply_ids = list(self._tokenizer(reply, add_special_tokens=False)["input_ids"])
        room = self.max_tokens - len(answer.token_ids)
        start = len(answer.token_ids)
        reply_ids = reply_ids[:max(room, 0)]
        answer.token_ids.extend(reply_ids)
        answer.logprobs.extend([NOT_MEASURED] * len(reply_ids))  # not sampled: masked out of the loss and the gap
        answer.calls.append(ToolCall(
            snippet=call.snippet, reply=reply, verdict=result.verdict.value, is_decided=not result.is_censored,
            is_standin_verdict=result.is_standin_verdict, asked_at=call.asked_at, answered_at=time.time(),
            reply_tokens=(start, start + len(reply_ids)), is_refused=call.is_refused))
        answer.text = self._decode(answer.token_ids)
        answer.searched_to = len(answer.text)
        return self._resumption(where, answer)

    def _resumption(self, where, answer: _Answer) -> Resumption | None:
        turn = self._resumed.get(where, 0) + 1
        self._resumed[where] = turn
        return Resumption(where[0], where[1], answer.prompt_ids + answer.token_ids,
                          self.max_tokens - len(answer.token_ids),
                          may_call_again(answer.text, len(answer.calls), self.tool.max_calls), turn)

    def is_out_of_room(self, resumption: Resumption) -> bool:
        return resumption.max_tokens <= 0

    def out_of_room(self, resumption: Resumption, seconds: float) -> Generation:
        """An answer whose budget Lean's reply used up: it ends there, truncated."""
        empty = Generation(resumption.prompt_index, resumption.sample_index, "", [], 0, True, seconds, [])
        return self.finish(empty)

    def _decode(self, ids: list[int]) -> str:
        return self._tokenizer.decode(ids, skip_special_tokens=True)


def _aligned(logprobs: Sequence[float] | None, count: int) -> list[float]:
    """``count`` log-probabilities: the engine's, then NOT_MEASURED for tokens it gave none for."""
    values = list(logprobs or ())[:count]
    return values + [NOT_MEASURED] * (count - len(values))
