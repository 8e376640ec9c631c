"""The reward of one answer: format, integrity, then Lean.

Reward 1 only if the answer has the recipe's shape, the proof body keeps the integrity
rules, and Lean accepts header + canonical statement + body with no error, no sorry and
only the standard axioms. Every zero carries its reason. A verdict Lean could not give
(timeout, server outage, the stand-in's "cannot decide") is censored: ``reward`` is None
and the rollout is left out of the advantage computation; it is not a wrong proof.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from trainer.recipe.format_reward import FormatCheck, check_format, length_penalty
from trainer.verification import lean_lexer
from trainer.verification.checked_code import build_checked_code
from trainer.verification.integrity import check_integrity, disallowed_axioms
from trainer.verification.verdicts import Verdict, VerificationResult


@dataclass(frozen=True)
class ScoredResponse:
    reward: float | None  # None when censored
    format_check: FormatCheck
    verification: VerificationResult | None  # None when the format check failed
    checked_code: str = ""
    reasons: list[str] = field(default_factory=list)  # why it earned nothing, or why it was censored
    is_censored: bool = False
    is_standin_verdict: bool = False
    # (time.time() the proof was handed to the verifier, time.time() its verdict came back); None when no proof
    # went to Lean (format check failed, no proof body, integrity rejected): a step's "lean" phase is drawn from these.
    lean_interval: tuple[float, float] | None = None

    @property
    def verdict(self) -> Verdict | None:
        return self.verification.verdict if self.verification else None


class RewardScorer:
    """Scores answers against one verifier (a ``LeanVerifier`` or anything with its ``verify``)."""

    def __init__(self, config, verifier):
        self.config = config
        self.verifier = verifier
        self._keys = 0

    async def score(
        self, problem, response: str, num_tokens: int | None = None, max_tokens: int | None = None, *,
        key: str | None = None, earlier_answers: Sequence[str] = (), tool_replies: Sequence[str] | None = None,
    ) -> ScoredResponse:
        """``earlier_answers``: the model's earlier turns in this conversation (a retry's first
        attempt), which the release's format check checks too. ``tool_replies``: Lean's replies the trainer
        appended to the answer (rollout.lean_tool_calls ≥ 1), None when tool calls are off."""
        format_check = check_format(response, problem, self.config.reward, earlier_answers, tool_replies)
        if not format_check.is_valid:
            return ScoredResponse(0.0, format_check, None, reasons=[f"format: {format_check.detail}"])
        if format_check.proof_body is None:
            # No whole-token copy of the statement, so no proof body: 0, as the release's "No proof
            # found" (or Lean's error on a body glued to the statement) would give.
            return ScoredResponse(0.0, format_check, None, reasons=[format_check.detail])

        checked_code = build_checked_code(problem, format_check.proof_body)
        integrity_reasons = check_integrity(format_check.proof_body, self.config.reward)
        if integrity_reasons:
            # Not sent to Lean: whatever Lean said, it would earn nothing.
            rejected = VerificationResult(Verdict.REJECTED, reasons=tuple(integrity_reasons))
            return ScoredResponse(0.0, format_check, rejected, str(checked_code), list(integrity_reasons))

        if key is None:
            self._keys += 1
            key = f"{problem.problem_id}-{self._keys}"
        sent_to_lean_at = time.time()
        verification = await self.verifier.verify(checked_code, key=key)
        lean_interval = (sent_to_lean_at, time.time())
        verification = self._apply_axioms_rule(verification)
        common = dict(
            format_check=format_check,
            verification=verification,
            checked_code=str(checked_code),
            is_standin_verdict=verification.is_standin_verdict,
            lean_interval=lean_interval,
        )
        if verification.is_censored:
            return ScoredResponse(None, reasons=list(verification.reasons), is_censored=True, **common)
        if verification.verdict is not Verdict.VALID:
            reasons = list(verification.reasons) or [f"Lean's verdict: {verification.verdict.value}"]
            return ScoredResponse(0.0, reasons=reasons, **common)

        reward = 1.0
        if num_tokens is not None:
            budget = max_tokens if max_tokens is not None else self.config.rollout.max_response_tokens
            reward *= length_penalty(num_tokens, budget, self.config.reward)
        return ScoredResponse(reward, **common)

    async def lean_validity(self, problem, response: str, scored: ScoredResponse, *, key: str) -> float | None:
        """The release's ``acc`` of this answer: 1.0 when Lean accepts its proof, the format check not
        applied (None when censored). The release's pass@k counts this; our reward gates it on the format.

        An answer that passed the format check was already sent to Lean; one that failed it (or had
        no proof body of ours) is sent now, with the proof the release would have extracted
        (``release_proof_body``).
        """
        if scored.format_check.is_valid and scored.verification is not None:
            if scored.is_censored:
                return None
            return 1.0 if scored.verification.verdict is Verdict.VALID else 0.0
        body = release_proof_body(response, problem.formal_statement)
        if body is None or check_integrity(body, self.config.reward):
            return 0.0  # the release's "No proof found in the output." never passes Lean
        verification = self._apply_axioms_rule(await self.verifier.verify(build_checked_code(problem, body), key=key))
        if verification.is_censored:
            return None
        return 1.0 if verification.verdict is Verdict.VALID else 0.0

    def _apply_axioms_rule(self, verification: VerificationResult) -> VerificationResult:
        """The run's own axioms rule, in case the verifier was built more lenient than the run."""
        axioms: Any = verification.extra.get("axioms")
        if verification.verdict is Verdict.VALID and axioms is not None:
            extra_axioms = disallowed_axioms(axioms, allow_native_decide=self.config.reward.allow_native_decide)
            if extra_axioms:
                return replace(
                    verification,
                    verdict=Verdict.REJECTED,
                    reasons=(f"the proof depends on non-standard axioms {', '.join(extra_axioms)}",),
                )
        return verification


def release_proof_body(response: str, formal_statement: str) -> str | None:
    """The proof body the release checks for an answer, whatever its format (``extract_proof_from_text``).

    The last ```lean4 block that contains the statement's ``theorem … :=`` text outside a comment;
    the body is what follows the first ``:= by`` after it. None when no block qualifies.
    """
    statement = formal_statement.rstrip()
    statement = statement[: -len("sorry")].strip() if statement.endswith("sorry") else statement
    statement = statement if statement.endswith("by") else statement + " by"
    declared = None
    for keyword in ("theorem", "lemma", "example"):
        found = re.findall(rf"{keyword}\s*(.*?)\s*:=", statement, flags=re.DOTALL)
        if found:
            declared = found[0].strip()
            break
    if not declared:
        return None
    for block in reversed(re.findall(r"```lean4\n(.*?)\n```", response, flags=re.DOTALL)):
        start = block.find(declared)
        if start == -1 or lean_lexer.comment_mask(block, strict=False)[start]:
            continue
        by = re.search(r":=\s*by", block[start:])
        if by:
            return block[start + by.end() :]
    return None
