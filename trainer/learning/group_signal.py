"""Where a step's rollouts went: the share of its GRPO groups that taught the learner something (issue 47).

Under Dr.GRPO (trainer/learning/learner.py ``group_advantages``) a group whose scored answers all
failed, or all passed, has advantage 0 on every answer: its generation, its Lean checks and its
learner pass teach nothing. On Lean problems most such groups are all-fail. These metrics say, each
step, how much of the batch that was, so a person can see rollouts being spent on nothing.

A group is one prompt slot's answers: first attempts and error-correction (retry) prompts alike,
each retry prompt its own group of the step that sampled it, as the learner treats it.

Every group of the step is in exactly one of four shares, which sum to 1:

- ``batch/groups_with_signal``: some scored answer has a non-zero advantage. Read from the
  advantages the learner is given, not restated: a group with a single scored answer (its siblings
  censored) keeps its raw reward as verl does, so a lone pass teaches and a lone failure does not.
- ``batch/groups_all_pass``: no signal, and every scored answer earned a positive reward.
- ``batch/groups_all_fail``: no signal, and not all passed: with the release's 0/1 reward, every
  scored answer earned 0.
- ``batch/groups_unscored``: not one scored answer (Lean censored them all, or, in an asynchronous
  run, every answer was too stale to train on): neither a failure nor a pass, so it is in neither.

A censored answer is no evidence either way: it is left out of its group's rewards, as it is left
out of the advantages; a group of three failures and one censored answer is all-fail.

``batch/tokens_without_signal`` counts the generated tokens of every answer, censored or stale ones
included, in the groups without signal (all-fail, all-pass and unscored): the generation spent on
nothing this step.

A step with no group measures nothing: its shares are None (a gap in a chart), never 0.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

GROUPS_WITH_SIGNAL = "batch/groups_with_signal"
GROUPS_ALL_FAIL = "batch/groups_all_fail"
GROUPS_ALL_PASS = "batch/groups_all_pass"
GROUPS_UNSCORED = "batch/groups_unscored"
TOKENS_WITHOUT_SIGNAL = "batch/tokens_without_signal"

# What the run page and the latest step's table call them (platform/runs/step_phases.py gives them to the page,
# which is why torch is imported only where the metrics are computed).
LABELS = {
    GROUPS_WITH_SIGNAL: "groups with signal (share)",
    GROUPS_ALL_FAIL: "groups whose answers all failed (share)",
    GROUPS_ALL_PASS: "groups whose answers all passed (share)",
    GROUPS_UNSCORED: "groups without a scored answer (share)",
    TOKENS_WITHOUT_SIGNAL: "tokens generated in groups without signal",
}

# The mean of equal float rewards can miss them by a rounding (six float32 0.3s average to 0.3 + 3e-8); no such
# crumb is a signal.
ADVANTAGE_TOLERANCE = 1e-6


def group_signal_metrics(rewards: torch.Tensor, generated_tokens: torch.Tensor) -> dict:
    """The step's four group shares and its tokens without signal (see the module's docstring).

    ``rewards`` is (G, N), NaN where censored or not trained, as the learner's advantages read it;
    ``generated_tokens`` is (G, N), each answer's generated tokens (0 where no answer was generated).
    """
    import torch

    if rewards.shape != generated_tokens.shape or rewards.dim() != 2:
        raise ValueError(f"rewards {tuple(rewards.shape)} and generated_tokens {tuple(generated_tokens.shape)} "
                         "must both be (groups, samples)")
    groups = rewards.shape[0]
    is_scored = ~torch.isnan(rewards)  # (G, N)
    has_signal, has_scored = groups_with_signal(rewards)  # (G,), (G,)
    passed = torch.where(is_scored, rewards > 0, torch.zeros_like(is_scored))  # (G, N)
    no_signal_scored = has_scored & ~has_signal
    all_pass = no_signal_scored & (passed.sum(dim=1) == is_scored.sum(dim=1))  # (G,)
    all_fail = no_signal_scored & ~all_pass  # (G,)
    counts = {
        GROUPS_WITH_SIGNAL: int(has_signal.sum()),
        GROUPS_ALL_FAIL: int(all_fail.sum()),
        GROUPS_ALL_PASS: int(all_pass.sum()),
        GROUPS_UNSCORED: int((~has_scored).sum()),
    }
    metrics: dict = {name: (count / groups if groups else None) for name, count in counts.items()}
    metrics[TOKENS_WITHOUT_SIGNAL] = int(generated_tokens[~has_signal].sum())
    return metrics


def groups_with_signal(rewards: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(has_signal, has_scored), each (G,): whether some scored answer of each group has a non-zero advantage, and
    whether the group has a scored answer at all. ``rewards`` is (G, N), NaN where censored or not trained. The
    shares above and the prompt selection's streaks (trainer/loop/prompt_selection.py) both read this."""
    import torch

    from trainer.learning.learner import group_advantages

    has_scored = (~torch.isnan(rewards)).any(dim=1)  # (G,)
    has_signal = (group_advantages(rewards).abs() > ADVANTAGE_TOLERANCE).any(dim=1)  # (G,)
    return has_signal, has_scored
