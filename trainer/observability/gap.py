"""The train–inference gap: the rollout engine's log-probabilities of the tokens it sampled
against the learner's own, every step.

The ratio the loss clips is π_θ / π_old, with π_old computed by the learner (trainer/learning/learner.py,
``Learner.old_logprobs``); the tokens were sampled by the engine, whose numerics differ (vLLM's
kernels, a bfloat16 copy, another batch shape). When the two disagree much, the update is less
on-policy than it looks: weights that did not reach the engine (a missed push), a wrong
temperature, a precision bug. Each step reports, over response tokens:

- ``logprob_abs_diff_mean`` and ``logprob_abs_diff_max``: |log π_learner − log π_engine|;
- ``ratio_outside_share``: the share of tokens whose ratio exp(learner − engine) falls outside
  [0.5, 2], where one policy finds the token more than twice as likely as the other;
- ``logprob_diff_tokens``: how many tokens these are, so that data-parallel ranks' figures
  combine into the run's (``combine_train_inference_gaps``).

Both sides must mean the same distribution: the engines report log-probabilities after the
temperature (``Generation.logprobs``), as the learner divides its logits by it. Top-p below 1
renormalises the engine's side over the nucleus, which the gap then counts too.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

# Read by the platform too (the mismatch filter of the rollout list): this module loads without torch.
RATIO_BOUNDS = (0.5, 2.0)


def train_inference_gap(pairs: Iterable[tuple[torch.Tensor, Sequence[float] | None]]) -> dict[str, float | None]:
    """The gap over every response token of ``pairs``: (learner's log-probabilities (R,), the engine's R values).

    Sequences whose engine gave no log-probabilities are left out, and so are tokens whose engine log-probability is
    NaN (not measured: trainer/rollout/lean_tool.py ``NOT_MEASURED``); with none at all every figure is None.
    """
    import torch

    differences = []
    for learner_logprobs, engine_logprobs in pairs:
        if engine_logprobs is None:
            continue
        learner = learner_logprobs.detach().float().cpu().flatten()  # (R,)
        engine = torch.as_tensor(list(engine_logprobs), dtype=torch.float32)  # (R,)
        if engine.shape != learner.shape:
            raise ValueError(
                f"the engine gave {engine.numel()} log-probabilities for a response the learner scored in "
                f"{learner.numel()} tokens; an engine must return one per sampled token (Generation.logprobs)"
            )
        is_measured = ~torch.isnan(engine)  # (R,)
        differences.append((learner - engine)[is_measured])
    if not differences or not sum(d.numel() for d in differences):
        return {"logprob_abs_diff_mean": None, "logprob_abs_diff_max": None, "ratio_outside_share": None,
                "logprob_diff_tokens": 0}
    log_ratio = torch.cat(differences)  # (N,) log(π_learner / π_engine)
    low, high = (math.log(bound) for bound in RATIO_BOUNDS)
    return {
        "logprob_abs_diff_mean": float(log_ratio.abs().mean()),
        "logprob_abs_diff_max": float(log_ratio.abs().max()),
        "ratio_outside_share": float(((log_ratio < low) | (log_ratio > high)).float().mean()),
        "logprob_diff_tokens": int(log_ratio.numel()),
    }


def combine_train_inference_gaps(per_rank: Sequence[dict]) -> dict[str, float | None]:
    """The run's gap from each data-parallel rank's (train_inference_gap's figures over its share of the batch):
    means weighted by each rank's tokens, the max of the maxes; None where no rank measured a token.

    Every rank's share counts: a push that missed one rank's engine shows in the run's figures.
    """
    measured = [gap for gap in per_rank if gap.get("logprob_diff_tokens")]
    tokens = sum(gap["logprob_diff_tokens"] for gap in measured)
    if not tokens:
        return {"logprob_abs_diff_mean": None, "logprob_abs_diff_max": None, "ratio_outside_share": None,
                "logprob_diff_tokens": 0}
    return {
        "logprob_abs_diff_mean": sum(gap["logprob_abs_diff_mean"] * gap["logprob_diff_tokens"] for gap in measured) / tokens,
        "logprob_abs_diff_max": max(gap["logprob_abs_diff_max"] for gap in measured),
        "ratio_outside_share": sum(gap["ratio_outside_share"] * gap["logprob_diff_tokens"] for gap in measured) / tokens,
        "logprob_diff_tokens": tokens,
    }
