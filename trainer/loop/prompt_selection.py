"""Prompt selection by history (``data.selection history``, issue 47): skip, before generation, the problems
whose recent groups taught the learner nothing.

Under Dr.GRPO a group whose scored answers all failed, or all passed, has advantage 0 on every answer
(trainer/learning/group_signal.py): its generation and its Lean checks are spent on nothing. GRESO
(arXiv 2506.02177) found that a prompt with no signal in one epoch mostly has none in the next, and skips it
before rollout with a probability that grows with its run of such epochs. The rule here is GRESO's with a fixed
base instead of its adaptive one:

- each problem has a *streak*: how many of its first-attempt groups in a row gave no signal. A group with signal
  resets it to 0; a group with no scored answer at all (Lean censored every answer, or, in an asynchronous run,
  every answer was too stale to train on) is no evidence and leaves it as it was. Error-correction groups do not
  count: selection chooses first attempts only, and a retry's signal is its own prompt's, not the problem's;
- when the loader serves a problem with streak k ≥ 1, it is kept with probability
  ``max(data.min_keep_probability, data.keep_base ** k)``, so skipped with probability
  ``min(1 − floor, 1 − base^k)``: growing with k, never reaching 1 (every problem is revisited, since a model
  that improves may start to solve what it always failed, or fail what it always solved). A problem with streak 0
  is kept without a draw, so a run whose problems all have signal draws what a uniform run draws;
- a skipped problem's slot goes to the next problem of the same shuffled pass (trainer/loop/driver.py
  ``next_problem``), so ``rollout.prompts_per_step`` stays whole and an epoch stays its number of steps, the same
  generation budget as a uniform run: skipping moves the pass along faster, and a pass that runs out before its
  epoch ends goes on with a fresh shuffle, as a run by steps does. One slot passes over at most one promptset's
  worth of problems; then it takes the next one whatever its streak, so a promptset whose every problem has a long
  streak still fills its steps in bounded time;
- a streak starts from the promptset's ``prior_signal_less_streak`` (the platform's history of the problem in
  earlier runs, trainer/recipe/problems.py), so a run does not relearn what earlier runs found; a problem without
  one starts at 0.

The draws come from the driver's own seeded random stream, and the streaks are updated from the whole batch after
each step, so every data-parallel rank draws the same prompts (trainer/loop/distributed.py). The streaks, with the
skips counted for batches drawn but not yet trained, are saved in each checkpoint: a resumed run continues the
selection exactly. A uniform run (the default, the release's) never builds this state and draws nothing extra.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from trainer.config import DataConfig, PromptSelection
from trainer.learning.group_signal import groups_with_signal

if TYPE_CHECKING:
    import torch

    from trainer.recipe.problems import Problem

PROBLEMS_SKIPPED = "data/problems_skipped"
LABELS = {PROBLEMS_SKIPPED: "problems skipped before generation (their recent groups had no signal)"}


def keep_probability(streak: int, config: DataConfig) -> float:
    """The chance a problem after ``streak`` signal-less groups in a row is kept when the loader serves it."""
    if streak <= 0:
        return 1.0
    return max(config.min_keep_probability, config.keep_base ** streak)


class HistorySelection:
    """The per-problem streaks of ``data.selection history`` and the skips counted per step (module docstring)."""

    STATE_VERSION = 1

    def __init__(self, config: DataConfig, problems: Sequence[Problem]):
        self.config = config
        self.streaks: dict[str, int] = {problem.problem_id: problem.prior_signal_less_streak or 0
                                        for problem in problems}
        # Skips counted when a step's batch was drawn, read when it is trained (an asynchronous run draws ahead).
        self.skipped_by_step: dict[int, int] = {}

    @classmethod
    def for_run(cls, config: DataConfig, problems: Sequence[Problem]) -> HistorySelection | None:
        """The run's selection state, or None for a uniform run (which then keeps none and draws nothing more)."""
        return cls(config, problems) if config.selection is PromptSelection.HISTORY else None

    def keeps(self, problem: Problem, rng: random.Random, step: int) -> bool:
        """Whether ``problem``, served for ``step``'s batch, is kept; a skip is counted against ``step``."""
        streak = self.streaks.get(problem.problem_id, 0)
        if streak == 0 or rng.random() < keep_probability(streak, self.config):
            return True
        self.skipped_by_step[step] = self.skipped_by_step.get(step, 0) + 1
        return False

    def count_skips(self, step: int) -> None:
        """Makes ``step`` count as measured with no skip, so its ``data/problems_skipped`` reads 0, not absent."""
        self.skipped_by_step.setdefault(step, 0)

    def take_skipped(self, step: int) -> int | None:
        """Problems skipped while ``step``'s batch was drawn; None where its draw is not known (never stored as 0)."""
        return self.skipped_by_step.pop(step, None)

    def record_groups(self, problem_ids: Sequence[str | None], rewards: torch.Tensor) -> None:
        """Each first-attempt group's outcome moves its problem's streak. ``problem_ids`` names the problem of each
        of the step's G slots (None for an error-correction slot, which does not count); ``rewards`` is (G, N),
        NaN where censored or not trained, as the learner's advantages read it."""
        has_signal, has_scored = groups_with_signal(rewards)  # (G,), (G,)
        for slot_index, problem_id in enumerate(problem_ids):
            if problem_id is None or not bool(has_scored[slot_index]):
                continue  # a retry's group, or no evidence either way
            self.streaks[problem_id] = 0 if bool(has_signal[slot_index]) else self.streaks.get(problem_id, 0) + 1

    def state_dict(self) -> dict[str, Any]:
        return {"version": self.STATE_VERSION, "streaks": dict(self.streaks),
                "skipped_by_step": dict(self.skipped_by_step)}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if state.get("version") != self.STATE_VERSION:
            raise ValueError(f"the checkpoint's prompt-selection state has version {state.get('version')!r}, this "
                             f"trainer reads version {self.STATE_VERSION}; resume with the trainer that saved it")
        # A problem the checkpoint does not know (the promptset cannot change under a run) keeps its prior streak.
        self.streaks.update({str(problem_id): int(streak) for problem_id, streak in state["streaks"].items()})
        self.skipped_by_step = {int(step): int(count) for step, count in state["skipped_by_step"].items()}
