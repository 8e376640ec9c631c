"""A step's rollouts as the driver handles them: prompt slots (each a GRPO group), rollouts with their score,
their keys (training rollouts and evaluation samples apart, per attempt), and the group's rewards matrix."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any


@dataclass
class PromptSlot:
    """One prompt of a step's batch, sampled ``samples_per_prompt`` times: a GRPO group."""

    problem: Any  # trainer.recipe.problems.Problem
    messages: list[dict]
    prompt_text: str
    prompt_ids: list[int]
    turn: str = "first"  # or "retry"
    parent_rollout_key: str | None = None
    round: int = 0  # of correction (retry.max_rounds): 0 for a first attempt, 1 for its retry, 2 for the retry's…


@dataclass
class Rollout:
    """One generation and its score."""

    rollout_key: str
    slot_index: int
    slot: PromptSlot
    generation: Any  # trainer.rollout.base.Generation
    scored: Any  # trainer.recipe.reward.ScoredResponse
    verification_seconds: float
    policy_version: int = 0  # the learner updates applied to the weights that generated it

    @property
    def reward(self) -> float | None:
        return None if self.scored.is_censored else self.scored.reward


def lean_phase(rollouts: Sequence[Rollout]) -> tuple[float, float] | None:
    """A batch's "lean" phase (``time/phases``): from the first proof handed to the verifier to the last verdict,
    in time.time(); None when no proof went to Lean (every answer failed the format check, say), so the step
    draws no Lean bar. Scorers that never call Lean (test doubles) give None too."""
    intervals = [interval for rollout in rollouts
                 if (interval := getattr(rollout.scored, "lean_interval", None)) is not None]
    if not intervals:
        return None
    return min(start for start, _ in intervals), max(end for _, end in intervals)


def rollout_key(step: int, slot_index: int, sample_index: int, turn: str, attempt: int = 1) -> str:
    """``a2-s3-p1-r0``: attempt 2's step 3, prompt slot 1, sample 0. The attempt keeps a resumed
    run's replayed steps apart from what the attempt it replaces published for the same step."""
    kind = "retry-p" if turn == "retry" else "p"
    return f"a{attempt}-s{step}-{kind}{slot_index}-r{sample_index}"


def group_key(key: str) -> str:
    """The GRPO group a rollout (or an evaluation sample) belongs to: its key without the sample, ``a2-s3-p1`` of
    ``a2-s3-p1-r0``; the answers of one prompt slot at one step share it."""
    group, separator, sample = key.rpartition("-r")
    if not separator or not group or not sample.isdigit():
        raise ValueError(f"{key!r} is not a rollout key (…-p<slot>-r<sample>, as rollout_key writes it)")
    return group


def evaluation_key_prefix(step: int, turn: str = "first", attempt: int = 1, share: str | None = None) -> str:
    """``a2-eval5``: attempt 2's evaluation of step 5 (``a2-eval5-retry`` its retries); a sample's key adds
    ``-p<slot>-r<sample>``. Never a training rollout's key (rollout_key), and per attempt as those are: a
    resumed run that evaluates a step again keeps both evaluations' samples apart. ``share`` names the part
    of the problems one engine of a data-parallel run evaluates (``a1-eval5-e1``): its slots count from 0 too."""
    return f"a{attempt}-eval{step}" + (f"-{share}" if share else "") + ("-retry" if turn == "retry" else "")


def rewards_matrix(rollouts: Sequence[Rollout], num_slots: int, samples_per_prompt: int):
    """(G, N) rewards, NaN where censored or missing; G prompt slots, N samples each."""
    import torch

    rewards = torch.full((num_slots, samples_per_prompt), float("nan"))
    for rollout in rollouts:
        reward = rollout.reward
        if reward is not None:
            rewards[rollout.slot_index, rollout.generation.sample_index] = reward
    return rewards
