"""A run's evaluations: every ``schedule.eval_every`` steps of a training run, and the whole of an evaluation run.

pass@k, best@k and mean@n on the evaluation problems (the metrics are trainer/loop/evaluation.py's pure
functions), for our gated reward and the release's ``acc``, then after error correction: a retry of each
failed attempt, round after round up to ``retry.max_rounds`` (1, the release's one retry, by default).
Every sample is published as it is scored (ROLLOUT_FINISHED with ``is_evaluation``), so the platform
keeps them apart from training rollouts; the report goes out as one EVALUATION event.

``RunEvaluation`` is a part of ``TrainingRun`` (trainer/loop/driver.py), written apart because it is the
one path the training loop, evaluation runs and data-parallel runs share: it uses the run's
engine (``generate_live``, ``scores_here``), its scorer and its publisher.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import asdict

from trainer.loop.evaluation import Outcome, evaluation_curves, evaluation_report, rounds_report
from trainer.observability.events import EventType, ProblemNotAttempted
from trainer.observability.progress import progress_bar
from trainer.recipe.prompt_budget import over_budget_reason, problems_over_budget
from trainer.recipe.prompts import first_attempt_messages, prompt_token_count
from trainer.recipe.retry import RetryPrompt, make_retry
from trainer.recipe.rollouts import PromptSlot, Rollout, evaluation_key_prefix
from trainer.rollout.base import SamplingSettings
from trainer.run.checkpoint import is_checkpoint_writer, record_evaluation


class RunEvaluation:
    """The evaluation methods of a run (mixed into ``TrainingRun``)."""

    evaluation_samples: list[dict]  # the last evaluation's every sample (``evaluation_rewards`` fills it)

    @property
    def evaluation_share(self) -> str | None:
        """Which part of the evaluation problems this process evaluates, in its samples' keys; None: all of them."""
        return None

    def evaluate(self, step: int, seed: int | None = None, show_progress: bool = False) -> dict:
        """pass@k, best@k and mean@n on the evaluation problems, for our gated reward and the release's
        acc, then the same after the retries of each failed attempt, up to ``retry.max_rounds`` rounds
        (``trainer.loop.evaluation``).

        ``seed`` defaults to ``schedule.seed + step``, so each evaluation of a run samples afresh.
        ``show_progress``: a bar per turn on standard error, counting scored samples (``trainer eval``;
        a training run shows its evaluations through its events instead).
        """
        started = time.perf_counter()
        first_outcomes, chains, standin_verdicts = self.evaluation_outcomes(step, seed, show_progress)
        return self.publish_evaluation(step, first_outcomes, chains, standin_verdicts, started,
                                       self.problems_not_attempted())

    def problems_not_attempted(self) -> list[ProblemNotAttempted]:
        """Each problem of the evaluation's promptset it leaves out, with why: a prompt over the budget
        (trainer/recipe/prompt_budget.py, the rule ``evaluation_rewards`` applies), or past ``schedule.eval_max_problems``.
        Over all the evaluation's problems, whichever share of them this process evaluates."""
        def prompt_tokens(problem) -> int:
            return len(self._slot(problem, first_attempt_messages(problem), "first", None).prompt_ids)

        return (problems_over_budget(self.eval_problems, prompt_tokens, self.config.rollout.max_prompt_tokens)
                + self.eval_problems_past_limit)

    def evaluation_outcomes(self, step: int, seed: int | None = None,
                            show_progress: bool = False) -> tuple[dict, dict, dict]:
        """Per evaluation problem id: the outcomes of its first attempts, of their rounds of correction (``evaluation_rewards``),
        and how many of its verdicts the stand-in gave. A data-parallel run gathers them from its ranks
        (trainer/loop/distributed.py)."""
        first_outcomes, chains = self.evaluation_rewards(self.eval_problems, step, seed, show_progress)
        return first_outcomes, chains, self.standin_verdicts_by_problem()

    def standin_verdicts_by_problem(self) -> dict[str, int]:
        """Per problem id, the last evaluation's samples (first attempts and retries) the stand-in decided."""
        counts: dict[str, int] = {}
        for record in self.evaluation_samples:
            counts[record["problem_id"]] = counts.get(record["problem_id"], 0) + bool(record["is_standin_verdict"])
        return counts

    def publish_evaluation(self, step: int, first_outcomes: dict, chains: dict | None,
                           standin_verdicts: dict[str, int], started: float,
                           not_attempted: list[ProblemNotAttempted] = ()) -> dict:
        """The evaluation's report from its outcomes (``chains``: each sample's rounds of correction, as
        ``evaluation_rewards`` returns them), published as one EVALUATION event with the problems it left out
        (``not_attempted``), each named with its reason and counted in ``problems_not_attempted``."""
        retry_outcomes = None if chains is None else {pid: [chain[0] for chain in samples] for pid, samples in chains.items()}
        if not self.config.schedule.eval_error_correction:
            retry_outcomes = None  # none was generated: "after one retry" is not measured, never equal to before
        values = evaluation_report(first_outcomes, retry_outcomes)
        values.update(evaluation_curves(first_outcomes, retry_outcomes))
        if retry_outcomes is not None and self.config.retry.max_rounds > 1:
            values.update(rounds_report(first_outcomes, chains, self.config.retry.max_rounds))
        # Which Lean decided: a benchmark never ranks the stand-in's verdicts beside real Lean's.
        values["standin_verdicts"] = float(sum(standin_verdicts.values()))
        if self.verifier is not None:  # over the run so far: for an evaluation run, the evaluation's own
            stats = self.verifier.stats()
            values["verifier/cache_hit_rate"] = stats["cache_hit_rate"]
            values["verifier/shared_cache_hit_rate"] = stats["shared_cache_hit_rate"]
        values["seconds"] = time.perf_counter() - started
        # Counted, never only implied by a smaller "problems": a left-out problem is not a failed one.
        values["problems_not_attempted"] = float(len(not_attempted))
        if not_attempted:
            self.publisher.log(
                f"evaluation at step {step}: {len(not_attempted)} problem(s) not attempted: "
                + "; ".join(f"{problem.problem_id}: {problem.reason}" for problem in not_attempted), "warning")
        self.publisher.publish(EventType.EVALUATION, {
            "step": step, "values": values, "not_attempted": [problem.model_dump() for problem in not_attempted]})
        return values

    def record_evaluation(self, step: int, values: dict) -> None:
        """A training run's evaluations, kept beside its checkpoints for the retention's "best" (rank 0)."""
        if is_checkpoint_writer():
            record_evaluation(self.output_dir, step, values)

    def evaluation_rewards(self, problems: Sequence, step: int, seed: int | None = None,
                           show_progress: bool = False) -> tuple[dict, dict]:
        """Per problem id, the ``Outcome`` of each first attempt, and of each one's rounds of correction (a list per
        sample, round 1 (its retry) first, ``retry.max_rounds`` long, None where no round was made).

        Every sample's record (scores, verdict, reasons, the answer) is kept in ``evaluation_samples``
        for ``trainer eval --output``.
        """
        seed = self.config.schedule.seed + step if seed is None else seed
        max_tokens = self.config.rollout.max_response_tokens
        slots = [self._slot(p, first_attempt_messages(p), "first", None) for p in problems]
        # Left out, never truncated; ``problems_not_attempted`` names each with its reason.
        slots = [s for s in slots if over_budget_reason(len(s.prompt_ids), self.config.rollout.max_prompt_tokens) is None]
        sampling = SamplingSettings.for_evaluation(self.config.schedule, max_tokens, seed=seed)
        first_prefix = evaluation_key_prefix(step, "first", self.attempt, self.evaluation_share)
        first = self._score_all(slots, sampling, first_prefix, "eval: first attempts" if show_progress else None,
                                step=step)
        first_outcomes = {s.problem.problem_id: [None] * sampling.n for s in slots}
        self.evaluation_samples = []
        # Rounds of correction: each sample's chain of retries, round 1 (the release's one retry) first; a chain goes
        # on from a round Lean rejected, up to retry.max_rounds (1 by default).
        max_rounds = self.config.retry.max_rounds
        chains: dict[str, list[list[Outcome | None]]] = {pid: [[None] * max_rounds for _ in range(sampling.n)]
                                                         for pid in first_outcomes}
        # (slot answered, its key, generation, scored, (problem id, sample index)) of each answer a round may correct.
        to_correct = []
        for (slot_index, sample_index), (generation, scored, outcome) in sorted(first.items()):
            slot = slots[slot_index]
            first_outcomes[slot.problem.problem_id][sample_index] = outcome
            self.evaluation_samples.append(_evaluation_record(step, seed, slot, generation, scored, outcome))
            to_correct.append((slot, f"{first_prefix}-p{slot_index}-r{sample_index}", generation, scored,
                               (slot.problem.problem_id, sample_index)))
        retry_sampling = SamplingSettings(
            n=1, temperature=sampling.temperature, top_p=sampling.top_p, top_k=-1,
            max_tokens=max_tokens, seed=sampling.seed,
        )
        for round_of_correction in range(1, max_rounds + 1):
            if not self.config.schedule.eval_error_correction:
                break
            retry_slots, retry_owner = [], []
            for slot, key, generation, scored, owner in to_correct:
                if scored.verification is None:
                    continue
                retry = make_retry(
                    slot.problem, slot.messages, generation.text, scored.format_check, scored.verification,
                    scored.checked_code, key, step, self.config.retry,
                    lambda messages: prompt_token_count(self.tokenizer, messages), answer_round=slot.round,
                )
                if isinstance(retry, RetryPrompt):
                    retry_slots.append(self._slot(retry.problem, retry.messages, "retry", retry.parent_rollout_key,
                                                  retry.round))
                    retry_owner.append(owner)
            if not retry_slots:
                break
            prefix = evaluation_key_prefix(step, "retry", self.attempt, self.evaluation_share)
            prefix += str(round_of_correction) if round_of_correction > 1 else ""  # round 1 keeps the release's keys
            progress = "eval: retries" if round_of_correction == 1 else f"eval: round {round_of_correction}"
            retried = self._score_all(retry_slots, retry_sampling, prefix, progress if show_progress else None,
                                      step=step)
            to_correct = []
            for (slot_index, _), (generation, scored, outcome) in sorted(retried.items()):
                problem_id, sample_index = retry_owner[slot_index]
                chains[problem_id][sample_index][round_of_correction - 1] = outcome
                record = _evaluation_record(step, seed, retry_slots[slot_index], generation, scored, outcome)
                self.evaluation_samples.append({**record, "sample_index": sample_index})
                to_correct.append((retry_slots[slot_index], f"{prefix}-p{slot_index}-r0", generation, scored,
                                   retry_owner[slot_index]))
        return first_outcomes, chains

    def _score_all(self, slots, sampling, key_prefix, progress_description: str | None = None, *, step: int = 0) -> dict:
        """(slot, sample) -> (generation, scored, Outcome) for every sample of ``slots`` this process scores;
        with a ``progress_description``, a bar on standard error counts the samples as they are scored.

        Each sample is published as it is scored (ROLLOUT_FINISHED with ``is_evaluation``, at ``step``), so the
        platform keeps an evaluation's samples, a training run's periodic ones as an evaluation run's: the
        benchmark's solved matrix and the proof viewer read them. Sizes: eval_samples events per problem and a
        retry per failed one; on h100x8 (8 samples) miniF2F-test's 244 problems make at most 3,904, under two
        training steps' 2,048 rollouts each, through the same bounded buffer (``events.buffer_mb``)."""
        bar = progress_bar(total=len(slots) * sampling.n, desc=progress_description, unit="sample",
                           disable=progress_description is None)
        sampling_payload = asdict(sampling)

        async def score_publish_and_count(slot_index: int, generation, key: str):
            started = time.perf_counter()
            scored, outcome = await self._score_for_evaluation(slots[slot_index].problem, generation,
                                                               sampling.max_tokens, key)
            rollout = Rollout(key, slot_index, slots[slot_index], generation, scored, time.perf_counter() - started)
            self.publisher.publish(EventType.ROLLOUT_FINISHED,
                                   self.rollout_event(step, rollout, sampling_payload, is_evaluation=True))
            bar.update(1)  # on the scoring loop's thread, before the caller's result() can return
            return scored, outcome

        futures = {}
        try:
            def describe(prompt_index: int, sample_index: int):
                slot = slots[prompt_index]
                return f"{key_prefix}-p{prompt_index}-r{sample_index}", step, slot.problem.problem_id, slot.turn

            for generation in self.generate_live([s.prompt_ids for s in slots], sampling, describe,
                                                 headers=[s.problem.header for s in slots]):
                if not self.scores_here(generation, sampling.n):
                    continue  # another rank of this engine scores (and publishes) it
                key = f"{key_prefix}-p{generation.prompt_index}-r{generation.sample_index}"
                futures[(generation.prompt_index, generation.sample_index)] = (generation, self.events_loop.submit(
                    score_publish_and_count(generation.prompt_index, generation, key)
                ))
            return {where: (generation, *future.result()) for where, (generation, future) in futures.items()}
        finally:
            bar.close()

    async def _score_for_evaluation(self, problem, generation, max_tokens: int, key: str):
        scored = await self.scorer.score(problem, generation.text, generation.num_tokens, max_tokens, key=key,
                                         **self.scoring_options(generation))
        lean_valid = await self.scorer.lean_validity(problem, generation.text, scored, key=key + "-acc")
        return scored, Outcome(None if scored.is_censored else scored.reward, lean_valid)


def _evaluation_record(step: int, seed: int, slot: PromptSlot, generation, scored, outcome) -> dict:
    """One evaluation sample as ``trainer eval --output`` writes it (a JSON line)."""
    verification = scored.verification
    return {
        "step": step, "seed": seed, "problem_id": slot.problem.problem_id, "turn": slot.turn,
        "sample_index": generation.sample_index, "reward": outcome.reward, "lean_valid": outcome.lean_valid,
        "is_censored": scored.is_censored, "verdict": verification.verdict.value if verification else None,
        "format_error": scored.format_check.error.value if scored.format_check.error is not None else None,
        "reasons": list(scored.reasons), "is_standin_verdict": scored.is_standin_verdict,
        "num_tokens": generation.num_tokens, "is_truncated": generation.is_truncated,
        "response": generation.text, "checked_code": scored.checked_code,
    }
