"""Asynchronous RL with bounded staleness (rollout.max_staleness = η ≥ 1): the rollouts' side of the loop.

The synchronous loop (η = 0, the release's) generates a batch, waits for Lean's last verdict, updates,
pushes the weights and generates again, so generation and Lean wait for the learner and the learner
waits for Lean's slowest proof. Here a generator process (trainer/asynchronous/generator_process.py) goes on
generating the next batches while the learner updates, and each answer goes to Lean as soon as it is
written, as verl's one-step-off-policy and AReaL do.

Versions. The policy version is the number of updates the learner has applied (a resumed run counts
on from its checkpoint's step). Step s trains on its batch with version s − 1, so a batch generated
by version v is s − 1 − v updates stale. Batch s is handed to the generator only once version
s − 1 − η has been pushed to it: no batch is ever generated staler than η. Every rollout records its
version, and the learner checks it again (``split_by_staleness``): one older than η would be dropped,
counted in ``rollout/dropped_stale`` and never trained on.

Resuming. A checkpoint records the prompts of the batches still in flight (sampled, not yet trained).
A resumed run generates those same prompts again from the checkpoint's weights, so no batch is lost
and none is trained twice; it says so in its log.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import asdict, dataclass, field

from trainer.observability.live import LiveRollouts
from trainer.recipe.rollouts import PromptSlot, Rollout, lean_phase, rollout_key


def staleness_of(rollout: Rollout, learner_version: int) -> int:
    """Updates between the weights that wrote ``rollout`` and those the learner trains it from."""
    return learner_version - rollout.policy_version


def split_by_staleness(rollouts: Sequence[Rollout], learner_version: int,
                       max_staleness: int) -> tuple[list[Rollout], list[Rollout]]:
    """(trainable, dropped): a rollout more than ``max_staleness`` updates old is never trained on."""
    trainable, dropped = [], []
    for rollout in rollouts:
        (trainable if staleness_of(rollout, learner_version) <= max_staleness else dropped).append(rollout)
    return trainable, dropped


@dataclass
class InFlightBatch:
    """One step's batch between its hand-over to the generator and the learner taking it."""

    step: int
    slots: list[PromptSlot]
    policy_version: int
    job: object  # trainer.asynchronous.generator_process.GenerationJob
    scored: list[Future] = field(default_factory=list)
    generation_done: threading.Event = field(default_factory=threading.Event)
    error: BaseException | None = None
    last_scored_at: float | None = None  # time.time() the batch's last answer was scored (Lean's verdict, or a format check's)


@dataclass
class TakenBatch:
    """What the learner takes: the slots, every scored rollout, and when each phase ran (time.time())."""

    slots: list[PromptSlot]
    rollouts: list[Rollout]
    phases: dict[str, tuple[float, float]]
    generation_s: float
    verification_tail_s: float
    waited_s: float


class RolloutPipeline:
    """Keeps up to η + 1 batches in flight ahead of the learner (see the module's docstring)."""

    def __init__(self, run, total_steps: int, in_flight_slots: Sequence[tuple[int, list[PromptSlot]]] = ()):
        self.run = run
        self.generator = run.engine
        self.max_staleness = run.config.rollout.max_staleness
        self.total_steps = total_steps
        self.in_flight: dict[int, InFlightBatch] = {}
        self.next_step = run.step + 1
        self._restored = {step: slots for step, slots in in_flight_slots if step > run.step}

    # --- handing batches to the generator ----------------------------------------------------------

    def fill(self) -> None:
        """Hand over every batch the staleness bound allows now."""
        version = self.generator.pushed_version
        while self.next_step <= self.total_steps and self.next_step - 1 - version <= self.max_staleness:
            self._submit(self.next_step)
            self.next_step += 1

    def _submit(self, step: int) -> None:
        run = self.run
        slots = self._restored.pop(step, None) or run.sample_prompts(step)
        sampling = run.sampling_settings(step)
        events = run.config.events
        is_streamed = getattr(run.publisher, "live", None) is not None and events.progress_rollouts > 0
        asking = ({"headers": [slot.problem.header for slot in slots]} if run.config.rollout.lean_tool_calls else {})
        job = self.generator.submit([slot.prompt_ids for slot in slots], sampling,
                                    events.progress_interval_s if is_streamed else None, **asking)
        batch = InFlightBatch(step, slots, job.policy_version, job)
        self.in_flight[step] = batch
        threading.Thread(target=self._send_to_lean, args=(batch, sampling, is_streamed),
                         name=f"rollouts-step-{step}", daemon=True).start()

    def _send_to_lean(self, batch: InFlightBatch, sampling, is_streamed: bool) -> None:
        """Runs beside the learner: each answer of ``batch`` goes to Lean the moment it arrives."""
        run, step = self.run, batch.step
        sampling_payload = asdict(sampling)

        def describe(prompt_index: int, sample_index: int):
            slot = batch.slots[prompt_index]
            return rollout_key(step, prompt_index, sample_index, slot.turn, run.attempt), step, slot.problem.problem_id, slot.turn

        live = (LiveRollouts(run.publisher.publish_live, describe, interval_s=run.config.events.progress_interval_s,
                             max_rollouts=run.config.events.progress_rollouts) if is_streamed else None)
        def scored(_future) -> None:
            batch.last_scored_at = time.time()

        try:
            for generation in self.generator.answers_of(batch.job, progress=live):
                if live is not None:
                    live.finish(generation.prompt_index, generation.sample_index, generation.text, generation.num_tokens)
                slot = batch.slots[generation.prompt_index]
                key = rollout_key(step, generation.prompt_index, generation.sample_index, slot.turn, run.attempt)
                scoring = run.events_loop.submit(run._score_and_publish(
                    step, key, generation.prompt_index, slot, generation, sampling_payload, batch.policy_version))
                scoring.add_done_callback(scored)
                batch.scored.append(scoring)
        except BaseException as error:  # noqa: BLE001 - handed to the learner's thread, which raises it
            batch.error = error
        finally:
            batch.generation_done.set()

    # --- the learner's side ------------------------------------------------------------------------

    def take(self, step: int) -> TakenBatch:
        """Step ``step``'s batch, every answer scored; waits for it (the learner's idle time)."""
        waited_from = time.perf_counter()
        batch = self.in_flight.pop(step)
        batch.generation_done.wait()
        if batch.error is not None:
            raise batch.error
        rollouts = [future.result() for future in batch.scored]
        waited_s = time.perf_counter() - waited_from
        job = batch.job
        phases = {"generation": (job.started_at, job.finished_at)}
        lean = lean_phase(rollouts)
        if lean is not None:
            phases["lean"] = lean
        # As the synchronous loop counts it: from the end of generation to the last answer scored.
        verification_tail_s = max(0.0, batch.last_scored_at - job.finished_at) if batch.last_scored_at else 0.0
        return TakenBatch(batch.slots, rollouts, phases, job.finished_at - job.started_at, verification_tail_s, waited_s)

    def in_flight_slots(self) -> list[tuple[int, list[PromptSlot]]]:
        """The sampled, untrained batches, for a checkpoint: a resumed run generates them again."""
        return [(step, batch.slots) for step, batch in sorted(self.in_flight.items())]

