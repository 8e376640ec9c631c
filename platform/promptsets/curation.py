"""Curation rules: how a new version is made from its parent.

Each rule is a small typed model (validated once, stored with the version it made) and
``apply_rule`` is a pure function from the parent's entries to the new version's entries, so
the rules are tested without a database. ``versions.curate`` persists the result.
"""

from __future__ import annotations

import math
import random
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Annotated, Literal

from django.template.defaultfilters import pluralize
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter

from promptsets.models import SplitPart


class WinRateSource(StrEnum):
    FILE = "file"  # the win rate the uploaded file gave (e.g. Kimina's rl_data.win_rate)
    PLATFORM = "platform"  # the share of this platform's scored first attempts that Lean accepted


class Rule(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class DropAboveWinRate(Rule):
    """Drop problems the policy already solves often: they carry no learning signal in GRPO."""

    kind: Literal["drop_above_win_rate"] = "drop_above_win_rate"
    max_win_rate: float = Field(..., ge=0.0, le=1.0, description="Problems whose win rate is above this are dropped.")
    win_rate_source: WinRateSource = WinRateSource.FILE
    keep_unknown: bool = Field(True, description="Keep problems with no win rate yet (never attempted, or none in the file).")


class WeightHardProblems(Rule):
    """Repeat hard problems so that each step samples them more often."""

    kind: Literal["weight_hard"] = "weight_hard"
    max_win_rate: float = Field(..., ge=0.0, le=1.0, description="A problem at or below this win rate counts as hard.")
    copies: int = Field(..., ge=2, le=32, description="How many times each hard problem appears in the new version.")
    win_rate_source: WinRateSource = WinRateSource.FILE


class Sample(Rule):
    """A random subset, e.g. a small promptset for a quick run."""

    kind: Literal["sample"] = "sample"
    count: int = Field(..., ge=1, description="Problems to keep, at most as many as the parent has (a larger count is refused).")
    seed: int = Field(0, description="The same seed on the same parent gives the same sample.")


class Split(Rule):
    """Two versions from one: a training part and a held-out evaluation part, disjoint."""

    kind: Literal["split"] = "split"
    eval_fraction: float = Field(..., gt=0.0, lt=1.0, description="Share of problems held out for evaluation.")
    seed: int = Field(0, description="The same seed on the same parent gives the same split.")


class AddVariants(Rule):
    """Variants of one problem from an OpenAI-compatible endpoint, validated like an upload."""

    kind: Literal["variants"] = "variants"
    problem_key: str
    endpoint_model: str = ""
    added_keys: tuple[str, ...] = ()


CurationRule = Annotated[DropAboveWinRate | WeightHardProblems | Sample | Split, Field(discriminator="kind")]
CURATION_RULE_ADAPTER: TypeAdapter = TypeAdapter(CurationRule)


def parse_rule(data: dict) -> Rule:
    """A rule from JSON (the API, the form); pydantic.ValidationError names the bad field."""
    return CURATION_RULE_ADAPTER.validate_python(data)


@dataclass(frozen=True)
class Entry:
    problem_id: int
    copies: int
    file_win_rate: float | None = None
    platform_win_rate: float | None = None

    def win_rate(self, source: WinRateSource) -> float | None:
        return self.file_win_rate if source is WinRateSource.FILE else self.platform_win_rate


@dataclass(frozen=True)
class CuratedPart:
    """One new version: its entries in order, and what it is called in the rule's record."""

    entries: list[Entry]
    part: SplitPart | str = ""  # a split's parts only


def apply_rule(entries: list[Entry], rule: Rule) -> list[CuratedPart]:
    if isinstance(rule, DropAboveWinRate):
        kept = []
        for entry in entries:
            rate = entry.win_rate(rule.win_rate_source)
            if rate is None and not rule.keep_unknown:
                continue
            if rate is not None and rate > rule.max_win_rate:
                continue
            kept.append(entry)
        return [CuratedPart(kept)]
    if isinstance(rule, WeightHardProblems):
        weighted = []
        for entry in entries:
            rate = entry.win_rate(rule.win_rate_source)
            is_hard = rate is not None and rate <= rule.max_win_rate
            weighted.append(replace(entry, copies=rule.copies) if is_hard else entry)
        return [CuratedPart(weighted)]
    if isinstance(rule, Sample):
        chosen = set(random.Random(rule.seed).sample(range(len(entries)), min(rule.count, len(entries))))
        return [CuratedPart([entry for index, entry in enumerate(entries) if index in chosen])]
    if isinstance(rule, Split):
        order = list(range(len(entries)))
        random.Random(rule.seed).shuffle(order)
        eval_count = min(len(entries) - 1, max(1, math.ceil(len(entries) * rule.eval_fraction)))
        held_out = set(order[:eval_count])
        return [
            CuratedPart([entry for index, entry in enumerate(entries) if index not in held_out], part=SplitPart.TRAIN),
            CuratedPart([entry for index, entry in enumerate(entries) if index in held_out], part=SplitPart.EVAL),
        ]
    raise TypeError(f"apply_rule cannot apply {type(rule).__name__}; variants are added by versions.add_variants")


def _verified_by(rule: dict) -> str:
    """Whose verdicts a platform win rate counted (promptsets.results.platform_win_rates)."""
    verifier = rule.get("win_rates_verified_by")
    if verifier == "stand-in":
        return " (the platform's win rates are the stand-in Lean server's verdicts: no real Lean verdict yet)"
    if verifier == "lean":
        return " (the platform's win rates count real Lean's verdicts only)"
    return ""


def describe_rule(rule: dict) -> str:
    """The rule stored on a version, in words for its page."""
    kind = rule.get("kind")
    if kind == "upload":
        skipped = rule.get("rows_skipped", 0)
        return f"Uploaded from {rule.get('filename') or 'a file'}" + (f", {skipped:,} invalid row{pluralize(skipped)} skipped" if skipped else "")
    if kind == "drop_above_win_rate":
        return (f"Dropped problems with {rule.get('win_rate_source')} win rate above {rule.get('max_win_rate')}"
                + _verified_by(rule))
    if kind == "weight_hard":
        return (f"Problems with {rule.get('win_rate_source')} win rate ≤ {rule.get('max_win_rate')} "
                f"repeated {rule.get('copies')}×" + _verified_by(rule))
    if kind == "sample":
        return f"Random sample of {rule.get('count')} (seed {rule.get('seed')}), in the parent's order"
    if kind == "split":
        return (f"Split: the {SplitPart(rule['part']).label} "
                f"(eval fraction {rule.get('eval_fraction')}, seed {rule.get('seed')})")
    if kind == "variants":
        return f"Added {len(rule.get('added_keys', []))} variants of {rule.get('problem_key')}"
    return kind or "—"
