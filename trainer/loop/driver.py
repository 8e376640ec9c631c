"""The training loop: one Dr.GRPO step after another, reading top to bottom like nanoGPT's.

Each step: sample prompts (half of the slots from the retry replay buffer once it has
entries), roll out, verify each rollout the moment its generation is finished (an asyncio
loop in a background thread, so Lean overlaps generation), reward, advantages (censored
rollouts excluded), learner step, weight sync, retries from failed first attempts,
metrics; evaluation and checkpoint every k steps. Everything a person watches goes out as
typed events (``trainer.observability.events``).

How a run starts and ends (RUN_FINISHED, whatever happens; cancelled on SIGTERM or SIGINT) is
trainer/run/lifecycle.py's, the same for SFT and evaluation runs.

Why one piece: one training step, from the prompts to the published metrics, reads top to bottom
here; what other run kinds share lives apart (trainer/run/lifecycle.py, trainer/loop/run_evaluation.py,
trainer/recipe/rollouts.py).
"""

from __future__ import annotations

import asyncio
import os
import random
import threading
import time
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import Future
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, NamedTuple, Protocol

from trainer.asynchronous.engine_actors import RolloutEnginePool
from trainer.asynchronous.generator_process import GeneratorProcess, cpu_split, restore_cores, use_cores
from trainer.asynchronous.pipeline import RolloutPipeline, split_by_staleness, staleness_of
from trainer.cluster.placement import run_placement
from trainer.compute_dtype import compute_dtype_of
from trainer.config import RunConfig
from trainer.learning.group_signal import group_signal_metrics
from trainer.learning.models import load_policy
from trainer.loop.prompt_selection import PROBLEMS_SKIPPED, HistorySelection
from trainer.loop.ray_driver import placement_payload
from trainer.loop.run_evaluation import RunEvaluation
from trainer.observability import token_records
from trainer.observability.events import (
    EventPublisher,
    EventType,
    LeanMessagePayload,
    ProblemNotAttempted,
    RolloutFinished,
    RunStatus,
    ToolCallPayload,
)
from trainer.observability.live import LiveRollouts
from trainer.recipe.prompt_budget import over_budget_reason
from trainer.recipe.prompts import first_attempt_messages, prompt_token_count, render_prompt
from trainer.recipe.retry import ReplayBuffer, RetryDropReason, RetryPrompt, make_retry
from trainer.recipe.reward import RewardScorer
from trainer.recipe.rollouts import PromptSlot, Rollout, lean_phase, rewards_matrix, rollout_key
from trainer.rollout.base import SamplingSettings
from trainer.rollout.engines import build_engine
from trainer.rollout.lean_tool import LeanTool
from trainer.rollout.vllm_platform import EngineChoice, choose_rollout_engine
from trainer.run.checkpoint import (
    TrainerState,
    best_evaluated_step,
    capture_global_rng_states,
    checkpoint_steps,
    checkpoints_to_remove,
    is_checkpoint_writer,
    latest_checkpoint,
    load_checkpoint,
    remove_checkpoint,
    restore_global_rng_states,
    save_checkpoint,
)
from trainer.run.lifecycle import RunLifecycle
from trainer.sft.smoke_model import with_smoke_model
from trainer.verification.client import LeanVerifier
from trainer.verification.line_numbering import ProbeFailed
from trainer.verification.shared_cache import SharedVerdictCache
from trainer.verification.verdicts import Verdict


def start_rollout_generators(config: RunConfig, tokenizer, cores: tuple[int, ...] | None = None, ask_lean=None):
    """An asynchronous run's generator: one process beside the learner on CPU (on ``cores``, if given), or the
    rollout pool (``cluster.rollout_gpus``), one Ray actor per engine in the run's placement group, on any node
    (trainer/asynchronous/engine_actors.py). ``ask_lean``: the run's verifier, which checks their tool snippets
    (one budget a run)."""
    if config.cluster.rollout_gpus == 0:
        # A choice: the CPU run's generator shares the run's one bundle (trainer/cluster/placement.py), so it stays
        # a child process on the learner's node, on cores of its own.
        return GeneratorProcess(config, tokenizer, seed=config.schedule.seed, cores=cores, ask_lean=ask_lean)
    return RolloutEnginePool.start(config, tokenizer, seed=config.schedule.seed, ask_lean=ask_lean)


def publish_where_the_engines_sit(config: RunConfig, publisher, generator) -> None:
    """The second PLACEMENT "placed" of a pool-fed run, once its engine actors are up: the driver placed the learner
    ranks and said where (trainer/loop/ray_driver.py); only learner rank 0, which started the engines, knows where
    they sit. The platform merges both events' actors by name."""
    if config.cluster.rollout_gpus == 0:
        return  # a generator process beside the learner, in the learner's own bundle: nothing placed apart
    publisher.publish(EventType.PLACEMENT, placement_payload(run_placement(config), "placed",
                                                             actors=generator.actors_placed()))


class VerifierUnreachable(RuntimeError):
    """The Lean server does not answer: the run fails with this reason instead of training on nothing."""


class Scorer(Protocol):
    """What the driver needs of ``trainer.recipe.reward.RewardScorer`` (tests inject their own doubles)."""

    async def score(self, problem, response: str, num_tokens=None, max_tokens=None, *, key=None): ...

    async def lean_validity(self, problem, response: str, scored, *, key: str) -> float | None: ...


class _Position(NamedTuple):
    """Which answer of a generate call, before it exists (what ``scores_here`` reads of a generation)."""

    prompt_index: int
    sample_index: int


@dataclass
class DriverState:
    """The driver's own resumable state: its random stream and where it is in the promptset."""

    rng_state: Any = None
    problem_order: list[int] = field(default_factory=list)
    cursor: int = 0


class BackgroundEventLoop:
    """An asyncio loop in a daemon thread: rollouts are scored there while generation continues here."""

    def __init__(self):
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="verification-loop", daemon=True)
        self._thread.start()

    def submit(self, coroutine) -> Future:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop)

    def close(self, timeout: float = 10.0) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=timeout)


class TrainingRun(RunEvaluation, RunLifecycle):
    """An RL run from start (or its latest checkpoint) to RUN_FINISHED (trainer/run/lifecycle.py)."""

    def __init__(
        self,
        config: RunConfig,
        problems: Sequence,
        output_dir: str | Path,
        publisher: EventPublisher,
        *,
        scorer: Scorer | None = None,
        model=None,
        tokenizer=None,
        engine=None,
        eval_problems: Sequence | None = None,
        resume: bool = False,
        install_signal_handlers: bool = True,
    ):
        if not problems:
            raise ValueError("the promptset has no problems; upload a promptset with at least one formal statement")
        self.config = config
        self.problems = list(problems)
        self.eval_problems = list(eval_problems) if eval_problems is not None else self.problems
        self.eval_problems_past_limit: list[ProblemNotAttempted] = []
        # Training problems left out so far (over the prompt budget), by id: named in a log once, counted every step.
        self.problems_not_attempted_in_training: dict[str, ProblemNotAttempted] = {}
        limit = config.schedule.eval_max_problems
        if limit is not None:
            self.eval_problems_past_limit = [ProblemNotAttempted(
                problem_id=problem.problem_id,
                reason=f"past schedule.eval_max_problems ({limit}): only the first {limit} problems are evaluated; "
                       f"set it to null to evaluate them all") for problem in self.eval_problems[limit:]]
            self.eval_problems = self.eval_problems[:limit]
        self.output_dir = Path(output_dir)
        self.publisher = publisher
        self._seq_recorder = publisher.record_sequence()
        self.scorer = scorer
        self.model = model
        self.tokenizer = tokenizer
        self.engine = engine
        self.should_resume = resume
        self.install_signal_handlers = install_signal_handlers
        self.step = 0
        self.driver_state = DriverState()
        self.rng = random.Random(config.schedule.seed)
        # Per-problem streaks of signal-less groups (data.selection history), None for a uniform run.
        self.selection = HistorySelection.for_run(config.data, self.problems)
        self.learner = None
        self.replay_buffer = None
        self.events_loop: BackgroundEventLoop | None = None
        self.verifier = None
        self._verifier_state = None  # the verdict cache and its counters, from the checkpoint resumed
        self._startup_notes: list[tuple[str, str]] = []  # (message, level), published after RUN_STARTED
        self.rollout_engine_choice: EngineChoice | None = None  # what this node samples with (choose_engine)
        self.evaluation_samples: list[dict] = []  # the last evaluation's every sample (evaluate() fills it)
        self.pipeline = None  # the rollouts in flight of an asynchronous run (trainer/asynchronous/pipeline.py)
        self._cores_before_split: tuple[set[int], int] | None = None  # the learner's, before an asynchronous CPU run
        self._in_flight_slots: list = []  # from the checkpoint resumed: batches sampled but never trained
        self.clock_origin = time.time()  # the phases of every step are timed from here (RUN_STARTED)
        self._last_step_ended_at = self.clock_origin
        self._lean_tool = None  # Lean inside the reasoning (rollout.lean_tool_calls ≥ 1), made at the first rollouts
        # Writes each step's token records while the next step trains (rank 0's, made at the first step's records).
        self.records_writer: token_records.RecordsWriter | None = None

    @property
    def is_asynchronous(self) -> bool:
        return self.config.rollout.max_staleness > 0

    @property
    def attempt(self) -> int:
        return getattr(self.publisher, "attempt", 1)

    # --- the run -----------------------------------------------------------------------------

    def live(self) -> None:
        """Train to ``planned_steps()`` (total_epochs passes or total_steps, whichever comes first)."""
        total_steps = self.planned_steps()
        self.set_up()
        self.publisher.publish(EventType.RUN_STARTED, {
            "step": self.step, "config": self.config.to_public_dict(), "problems": len(self.problems),
            "resumed_from_step": self.step if self.step else None, "total_steps": total_steps,
            "attempt": self.attempt, "compute_dtype": compute_dtype_of(self.config).to_json_dict(),
            "rollout_engine": self.rollout_engine_choice.to_json_dict(),
        })
        self._publish_startup_notes()
        self.clock_origin = self._last_step_ended_at = time.time()
        if self.is_asynchronous:
            self.pipeline = self.rollout_pipeline(total_steps)
            self.pipeline.fill()
        while self.step < total_steps:
            self.step += 1
            self.train_step(self.step)
            if self._is_due(self.config.schedule.eval_every):
                self.record_evaluation(self.step, self.evaluate(self.step))
            if self._is_due(self.config.schedule.checkpoint_every):
                self.save_checkpoint()
        if not self._is_due(self.config.schedule.checkpoint_every):
            self.save_checkpoint()  # the last step is always kept

    def rollout_pipeline(self, total_steps: int):
        """The batches in flight of an asynchronous run (a data-parallel learner shares rank 0's: trainer/loop/distributed.py)."""
        return RolloutPipeline(self, total_steps, self._in_flight_slots)

    def before_the_end_is_published(self, status: RunStatus) -> None:
        self._publish_startup_notes()  # what set-up found before it failed says why

    def planned_steps(self) -> int:
        """Where the run ends. An epoch is len(promptset) // prompts_per_step steps, as the release's
        verl dataloader (drop_last) counts it; raises ValueError when that is no step at all."""
        schedule, per_step = self.config.schedule, self.config.rollout.prompts_per_step
        if schedule.total_epochs is not None and schedule.steps_per_epoch(len(self.problems), per_step) == 0:
            raise ValueError(
                f"the promptset has {len(self.problems)} problems, fewer than rollout.prompts_per_step ({per_step}), "
                "so an epoch (full batches only, as the release's dataloader) has no step; add problems, lower "
                "prompts_per_step, or train by steps: schedule.total_steps=N with schedule.total_epochs=null"
            )
        return self.config.planned_steps(len(self.problems))

    def _publish_startup_notes(self) -> None:
        notes, self._startup_notes = self._startup_notes, []
        for message, level in notes:
            self.publisher.log(message, level)


    def _is_due(self, every: int) -> bool:
        return every > 0 and self.step % every == 0

    def set_up(self) -> None:
        from trainer.learning.learner import Learner

        _quiet_transformers()

        self.choose_engine()  # before the model loads: a node that cannot run the engine fails fast
        if self.model is None:
            self.config = with_smoke_model(self.config)  # the cpu-smoke preset's model, built on first use
            self.model, self.tokenizer = load_policy(self.config.model, seed=self.config.schedule.seed)
        self.choose_engine()  # the model's shape may rule vLLM out on CPU
        self.learner = Learner(self.config, self.model, self.tokenizer)
        self.model = self.learner.model
        if compute_dtype_of(self.config).warning:
            self._startup_notes.append((compute_dtype_of(self.config).warning, "warning"))
        self.replay_buffer = ReplayBuffer(self.config.retry)
        self.driver_state.problem_order = []
        if self.should_resume:
            checkpoint = latest_checkpoint(self.output_dir)
            if checkpoint is None:
                self._startup_notes.append(
                    (f"--resume: no checkpoint under {self.output_dir}; starting from step 0", "warning"))
            else:
                state = load_checkpoint(checkpoint, self.model, self.learner.optimizer)
                self.step = state.step
                if state.replay_buffer is not None:
                    self.replay_buffer.load_state_dict(state.replay_buffer)
                driver = state.driver_rng_state or {}
                if driver.get("rng_state") is not None:
                    self.rng.setstate(driver["rng_state"])
                self.driver_state.problem_order = list(driver.get("problem_order", []))
                self.driver_state.cursor = int(driver.get("cursor", 0))
                if self.selection is not None and driver.get("selection") is not None:
                    self.selection.load_state_dict(driver["selection"])  # else: from the promptset's priors
                self._in_flight_slots = list(driver.get("in_flight", []))
                restore_global_rng_states(state.global_rng_states)
                self._verifier_state = state.verifier_state
                self._startup_notes.append((f"resumed from {checkpoint} at step {self.step}", "info"))
                if self._in_flight_slots:
                    steps = [step for step, _ in self._in_flight_slots]
                    self._startup_notes.append((
                        f"{len(steps)} batch(es) were in flight at the checkpoint (steps {min(steps)}–{max(steps)}), "
                        f"sampled but never trained: their prompts are generated again from step {self.step}'s weights",
                        "info"))
        self._startup_notes.append((self.learner.attention_note, "info"))  # after where it resumed: that comes first
        if self.is_asynchronous:
            self._start_generator_process()
        self._start_rollouts_and_scoring()
        if self._verifier_state is not None and self.verifier is not None:
            # The verdict cache and its counters, so verifier/cache_hit_rate reads as if never interrupted.
            self.verifier.load_state_dict(self._verifier_state)

    def _start_generator_process(self) -> None:
        """An asynchronous run generates in a process of its own, from the weights it is sent (version = step)."""
        if self.engine is not None:
            raise ValueError("an asynchronous run (rollout.max_staleness ≥ 1) generates in a process of its own; "
                             "pass no engine, or set rollout.max_staleness=0")
        # On CPU the generator and the learner compute at the same time: each gets its own cores (cpu_split says why).
        split = cpu_split(os.sched_getaffinity(0)) if self.config.cluster.num_gpus == 0 else None
        self.engine = start_rollout_generators(self.config, self.tokenizer, cores=split.generator if split else None,
                                               ask_lean=self._ask_lean)
        publish_where_the_engines_sit(self.config, self.publisher, self.engine)
        if split is not None:
            self._cores_before_split = use_cores(split.learner)  # after the child started: it inherits the whole set
            self._startup_notes.append((
                f"CPU cores split: the generator process on {list(split.generator)}, the learner on "
                f"{list(split.learner)}, one torch thread each", "info"))
        self.engine.push_state_dict(self.model.state_dict(), version=self.step)
        self._startup_notes.append((
            f"asynchronous RL: a generator process writes the next batches while the learner updates; a batch is "
            f"trained at most {self.config.rollout.max_staleness} update(s) after the weights that wrote it "
            f"(rollout.max_staleness), its loss weighted by min(π_prox/π_behaviour, {self.config.loss.behaviour_is_cap:g})",
            "info"))

    def choose_engine(self) -> None:
        """The engine this node can sample with, asked before the model loads and again after (its shape counts).
        A vLLM run where vLLM cannot run fails, with the fix, unless its config names a fallback
        (rollout.engine_fallback): then it samples with that and says why, in its log and in run_started (the run
        page shows it)."""
        if self.rollout_engine_choice is not None and self.rollout_engine_choice.reason is not None:
            return  # fell back already
        self.config, self.rollout_engine_choice = choose_rollout_engine(self.config, self.model)
        if self.rollout_engine_choice.reason is not None:
            self._startup_notes.append((f"this run {self.rollout_engine_choice.sentence}", "warning"))

    def prepare_for_evaluation(self) -> None:
        """Model, engine and scorer, without a learner: for ``python -m trainer eval``."""
        self.choose_engine()
        if self.model is None:
            self.config = with_smoke_model(self.config)
            self.model, self.tokenizer = load_policy(self.config.model, seed=self.config.schedule.seed)
        self.choose_engine()
        self.model.eval()
        self._start_rollouts_and_scoring()

    def _start_rollouts_and_scoring(self) -> None:
        if self.engine is None:
            started = time.monotonic()
            self.engine = build_engine(self.config, self.model, self.tokenizer)
            # vLLM's start-up is a minute or more when it compiles and seconds from its compile cache: worth a line.
            self._startup_notes.append((f"rollout engine {self.config.rollout.engine.value} ready in "
                                        f"{time.monotonic() - started:.1f} s", "info"))
        self.events_loop = BackgroundEventLoop()
        if self.scorer is None:
            self.scorer = self._lean_scorer()

    def verifier_config(self):
        """This process's Lean client settings: the run's (a data-parallel rank takes its share of them)."""
        return self.config.verifier

    def _lean_scorer(self):
        # The server's URL names its Lean environment in the verdict cache.
        self.verifier = LeanVerifier(
            self.verifier_config(), environment=self.config.verifier.url,
            allow_native_decide=self.config.reward.allow_native_decide,
            shared_cache=SharedVerdictCache.from_environment(self.config.verifier.shared_cache_size),
        )
        self.check_verifier_reachable()
        return RewardScorer(self.config, self.verifier)

    def check_verifier_reachable(self) -> None:
        """Fail at start-up, not at step 10,000: a run whose every proof would be censored learns nothing."""
        url = self.config.verifier.url
        try:
            self.events_loop.submit(self.verifier.health()).result(timeout=self.config.verifier.timeout_s)
        except Exception as error:  # any transport or HTTP failure means the same to the person
            raise VerifierUnreachable(
                f"the Lean server at {url} does not answer its /health check ({type(error).__name__}: {error}); "
                f"start it (kimina-lean-server, or `python -m trainer lean-standin` without Lean) or fix verifier.url"
            ) from error

        # Which lines its messages count (kimina-lean-server builds differ); asked again after a reconnect.
        try:
            self.events_loop.submit(self.verifier.line_numbering()).result()
        except ProbeFailed as error:
            raise VerifierUnreachable(f"the Lean server at {url} answers, but {error}") from error

    def check_verifier_still_reachable(self, rollouts) -> None:
        """A step whose every proof sent to Lean came back censored asks the server once more: if it is
        gone, the run fails with the reason rather than going on with no signal."""
        sent = [r for r in rollouts if r.scored.verification is not None and r.scored.format_check.is_valid]
        if self.verifier is not None and sent and all(r.scored.is_censored for r in sent):
            self.check_verifier_reachable()

    def tear_down(self) -> None:
        try:
            self.wait_for_token_records(close=True)  # a cancelled or failed run too: no file is left half-written
        except Exception as error:  # noqa: BLE001 - the run's outcome is decided; what was not written says so itself
            self.publisher.log(f"closing the token-records writer failed: {error}", "warning")
        if self.verifier is not None and self.events_loop is not None:
            try:
                self.events_loop.submit(self.verifier.aclose()).result(timeout=10)
            except Exception as error:  # noqa: BLE001 - closing is best effort; the run's outcome is already decided
                self.publisher.log(f"closing the Lean client failed: {error}", "warning")
        if self.events_loop is not None:
            self.events_loop.close()
        try:
            if self.engine is not None and hasattr(self.engine, "close"):
                self.engine.close()
        finally:
            if self._cores_before_split is not None:  # the process outlives the run (a test, an evaluation after it)
                restore_cores(self._cores_before_split)
                self._cores_before_split = None

    # --- one training step ----------------------------------------------------------------------

    def train_step(self, step: int) -> dict:
        self.publish_step_started(step)
        timings = {}
        learner_version = step - 1  # the updates applied before this step's
        if self.pipeline is not None:
            taken = self.pipeline.take(step)
            slots, rollouts, phases = taken.slots, taken.rollouts, dict(taken.phases)
            timings["generation_s"], timings["verification_tail_s"] = taken.generation_s, taken.verification_tail_s
            timings["learner_idle_s"] = taken.waited_s
        else:
            slots = self.sample_prompts(step)
            started = time.time()
            rollouts, timings["generation_s"], timings["verification_tail_s"] = self.roll_out_batch(slots, step)
            generated = started + timings["generation_s"]
            phases = {"generation": (started, generated)}
            lean = lean_phase(rollouts)
            if lean is not None:
                phases["lean"] = lean
            timings["learner_idle_s"] = timings["generation_s"] + timings["verification_tail_s"]

        trained, dropped = split_by_staleness(rollouts, learner_version, self.config.rollout.max_staleness)
        rewards = rewards_matrix(trained, len(slots), self.config.rollout.samples_per_prompt)  # (G, N), NaN = censored
        sequences = self.training_sequences(slots, trained, rewards)  # advantages inside

        learner_metrics = self.update_policy(sequences, timings, phases)
        self.write_token_records(step)

        self.record_selection_history(slots, rewards)  # before the next batches are drawn (fill, below)
        retry_counts = self.add_retries(rollouts, step)
        if self.pipeline is not None:
            self.pipeline.fill()
        ended = time.time()
        timings["generation_idle_s"] = self._generation_idle_s(ended, timings)
        self._last_step_ended_at = ended
        metrics = self.step_metrics(rollouts, learner_metrics, retry_counts, timings)
        staleness = [staleness_of(rollout, learner_version) for rollout in trained]
        metrics.update({
            "rollout/policy_version": learner_version,
            "rollout/staleness_mean": _mean(staleness),
            "rollout/staleness_max": max(staleness, default=0),
            "rollout/dropped_stale": len(dropped),
            "problems_not_attempted": len(self.problems_not_attempted_in_training),
            # A uniform run skips nothing by construction: its 0 is a count, not a missing measurement.
            PROBLEMS_SKIPPED: self.selection.take_skipped(step) if self.selection is not None else 0,
            **self.group_signal(rollouts, rewards),
            "time/generation_idle_s": timings["generation_idle_s"],
            "time/learner_idle_s": timings["learner_idle_s"],
            "time/phases": {name: [round(start - self.clock_origin, 3), round(end - self.clock_origin, 3)]
                            for name, (start, end) in phases.items() if start is not None and end is not None},
        })
        self.publisher.publish(EventType.METRICS, {"step": step, "values": metrics})
        return metrics

    def record_selection_history(self, slots: list[PromptSlot], rewards) -> None:
        """Each first-attempt group's signal moves its problem's streak (trainer/loop/prompt_selection.py); every
        data-parallel rank holds the whole batch, so every rank's streaks stay the same."""
        if self.selection is not None:
            self.selection.record_groups([slot.problem.problem_id if slot.turn == "first" else None for slot in slots],
                                         rewards)

    def group_signal(self, rollouts: list[Rollout], rewards) -> dict:
        """Which of the step's groups taught the learner something (trainer/learning/group_signal.py), read from the
        rewards its advantages came from; tokens of every answer generated, the stale ones' too."""
        import torch

        generated_tokens = torch.zeros(rewards.shape, dtype=torch.long)  # (G, N)
        for rollout in rollouts:
            generated_tokens[rollout.slot_index, rollout.generation.sample_index] = rollout.generation.num_tokens
        return group_signal_metrics(rewards, generated_tokens)

    def _generation_idle_s(self, ended: float, timings: dict) -> float:
        """Seconds of this step (since the last one ended) during which nothing was being generated."""
        step_seconds = ended - self._last_step_ended_at
        if self.pipeline is not None:
            return max(0.0, step_seconds - self.engine.busy_seconds(self._last_step_ended_at, ended))
        return max(0.0, step_seconds - timings["generation_s"])

    def publish_step_started(self, step: int) -> None:
        self.publisher.publish(EventType.STEP_STARTED, {"step": step})

    def roll_out_batch(self, slots: list[PromptSlot], step: int) -> tuple[list[Rollout], float, float]:
        """Every slot's rollouts, scored, and the seconds spent generating, then waiting for Lean's last verdict.
        A data-parallel run gathers them from its engines (trainer/loop/distributed.py)."""
        rollouts, generation_s, verification_tail_s = self.roll_out_and_verify(slots, step)
        self.check_verifier_still_reachable(rollouts)
        return rollouts, generation_s, verification_tail_s

    def update_policy(self, sequences, timings: dict, phases: dict | None = None) -> dict:
        """The learner step and the hand-over to the rollout engine, in the order one GPU can hold.

        generate (done) → engine.sleep() → learner step → the learner's cached blocks back to the
        device → push_weights (wakes vLLM's weights alone and writes into them) → the next
        generate wakes the key/value cache. So vLLM never wakes into memory PyTorch still holds,
        and its cache never shares the GPU with the learner's step or the weight transfer.
        Records ``learning_s`` and ``weight_sync_s`` in ``timings`` (and their intervals in ``phases``);
        returns the learner's metrics.
        """
        phases = {} if phases is None else phases
        started, learning_from = time.perf_counter(), time.time()
        self.engine.sleep()
        learner_metrics = self.learner_step(sequences)
        timings["learning_s"] = time.perf_counter() - started
        phases["learning"] = (learning_from, learning_from + timings["learning_s"])

        started, sync_from = time.perf_counter(), time.time()
        release_cached_accelerator_memory()
        self.engine.push_weights(self.model)
        timings["weight_sync_s"] = time.perf_counter() - started
        phases["sync"] = (sync_from, sync_from + timings["weight_sync_s"])
        return learner_metrics

    def learner_step(self, sequences) -> dict:
        return self.learner.step(sequences)

    def step_token_records(self) -> list:
        """The step's per-token records of every trained rollout (a data-parallel run gathers its ranks')."""
        return self.learner.token_records

    def write_token_records(self, step: int) -> None:
        """One columnar file a step beside the run's artifacts (trainer/observability/token_records.py), then its retention:
        handed to the background writer, so the step goes on while it is written."""
        records = self.step_token_records()
        if not is_checkpoint_writer():
            return
        if self.records_writer is None:
            self.records_writer = self.start_token_records_writer()
        self.records_writer.submit(step, records)
        self.report_token_records_failures()

    def start_token_records_writer(self) -> token_records.RecordsWriter:
        return token_records.RecordsWriter(self.output_dir, self.attempt, self.config.schedule.keep_token_records,
                                           token_records.TokenTexts(self.tokenizer))

    def wait_for_token_records(self, *, close: bool = False) -> None:
        """Every step handed to the writer is written (or has failed, which is published) before going on."""
        if self.records_writer is None:
            return
        if close:
            self.records_writer.close()
        else:
            self.records_writer.wait()
        self.report_token_records_failures()

    def report_token_records_failures(self) -> None:
        for message in self.records_writer.take_failures():
            self.publisher.log(message, "error")

    def sample_prompts(self, step: int) -> list[PromptSlot]:
        """``prompts_per_step`` slots; once the replay buffer has retries, each slot takes one with p = 0.5."""
        count = self.config.rollout.prompts_per_step
        schedule = self.config.schedule
        if schedule.total_epochs is not None:
            steps_per_epoch = schedule.steps_per_epoch(len(self.problems), count)
            if (step - 1) % steps_per_epoch == 0:
                # A new epoch, where the release's dataloader starts one: a fresh shuffle, and the
                # problems the last one had no full batch for are dropped (drop_last).
                self.start_epoch()
        takes_retry = self.replay_buffer.choose_prompt_slots(count, self.rng)
        if self.selection is not None:
            self.selection.count_skips(step)
        slots = []
        newly_left_out = []
        for is_retry in takes_retry:
            if is_retry:
                retry = self.replay_buffer.draw(self.rng)
                slots.append(self._slot(retry.problem, retry.messages, "retry", retry.parent_rollout_key, retry.round))
                continue
            for _ in range(len(self.problems)):
                problem = self.next_selected_problem(step)
                slot = self._slot(problem, first_attempt_messages(problem), "first", None)
                reason = over_budget_reason(len(slot.prompt_ids), self.config.rollout.max_prompt_tokens)
                if reason is None:
                    slots.append(slot)
                    break
                if problem.problem_id not in self.problems_not_attempted_in_training:
                    left_out = ProblemNotAttempted(problem_id=problem.problem_id, reason=reason)
                    self.problems_not_attempted_in_training[problem.problem_id] = left_out
                    newly_left_out.append(left_out)
            else:
                raise ValueError(
                    f"every problem's prompt is longer than rollout.max_prompt_tokens "
                    f"({self.config.rollout.max_prompt_tokens}); raise it or shorten the statements"
                )
        if newly_left_out:  # each problem named once, when first met; step metrics count them all
            self.publisher.log(
                f"step {step}: {len(newly_left_out)} problem(s) not attempted: "
                + "; ".join(f"{problem.problem_id}: {problem.reason}" for problem in newly_left_out), "warning")
        return slots

    def next_selected_problem(self, step: int):
        """The next problem of the pass that ``data.selection`` keeps (uniform: the next, without a draw); a skipped
        one's slot goes to the one after it, at most one promptset's worth of them (trainer/loop/prompt_selection.py)."""
        if self.selection is None:
            return self.next_problem()
        for _ in range(len(self.problems)):
            problem = self.next_problem()
            if self.selection.keeps(problem, self.rng, step):
                return problem
        return self.next_problem()  # every problem passed over once: this slot takes the next, whatever its streak

    def start_epoch(self) -> None:
        """A fresh shuffle of the problems, served from its start."""
        self.driver_state.problem_order = list(range(len(self.problems)))
        self.rng.shuffle(self.driver_state.problem_order)
        self.driver_state.cursor = 0

    def next_problem(self):
        """Problems in shuffled passes, as verl's dataloader serves them (by steps: a new pass when one runs out)."""
        state = self.driver_state
        if state.cursor >= len(state.problem_order):
            self.start_epoch()
        problem = self.problems[state.problem_order[state.cursor]]
        state.cursor += 1
        return problem

    def _slot(self, problem, messages, turn, parent_rollout_key, round_of_correction: int | None = None) -> PromptSlot:
        text = render_prompt(self.tokenizer, messages)
        ids = self.tokenizer(text, add_special_tokens=False)["input_ids"]
        if round_of_correction is None:
            round_of_correction = 0 if turn == "first" else 1
        return PromptSlot(problem, list(messages), text, list(ids), turn, parent_rollout_key, round_of_correction)

    def sampling_settings(self, step: int):
        # A seed per step: a resumed run samples what the uninterrupted run would have.
        return SamplingSettings.from_config(self.config.rollout, seed=self.config.schedule.seed * 1_000_003 + step)

    def roll_out_and_verify(self, slots: list[PromptSlot], step: int, slot_indices: Sequence[int] | None = None):
        """Generate; each finished generation goes to Lean at once; returns (rollouts, gen s, tail s).

        ``slot_indices`` are the slots this process rolls out (all of them by default; one share
        per engine when data-parallel); rollouts keep the batch-wide slot index in keys and groups.
        Only the answers ``scores_here`` names are scored and returned.
        """
        indices = list(range(len(slots))) if slot_indices is None else list(slot_indices)
        sampling = self.sampling_settings(step)
        sampling_payload = asdict(sampling)
        pending: list[Future] = []
        started = time.perf_counter()
        def describe(prompt_index: int, sample_index: int):
            slot_index = indices[prompt_index]
            slot = slots[slot_index]
            key = rollout_key(step, slot_index, sample_index, slot.turn, self.attempt)
            return key, step, slot.problem.problem_id, slot.turn

        # Token ids, not text: the engine samples from exactly the prompt the learner will score.
        for generation in self.generate_live([slots[index].prompt_ids for index in indices], sampling, describe,
                                             headers=[slots[index].problem.header for index in indices]):
            if not self.scores_here(generation, sampling.n):
                continue  # another rank of this engine scores it
            slot_index = indices[generation.prompt_index]
            slot = slots[slot_index]
            key = rollout_key(step, slot_index, generation.sample_index, slot.turn, self.attempt)
            pending.append(self.events_loop.submit(
                self._score_and_publish(step, key, slot_index, slot, generation, sampling_payload, step - 1)
            ))
        generation_seconds = time.perf_counter() - started
        rollouts = [future.result() for future in pending]
        return rollouts, generation_seconds, time.perf_counter() - started - generation_seconds

    def generate_live(self, prompt_ids: list[list[int]], sampling, describe, headers: list[str] | None = None):
        """The engine's generations, with their text streamed as ``rollout_progress`` while they are written
        (trainer/observability/live.py) when the publisher has a live sink and ``events.progress_rollouts`` allows.

        ``headers``: each prompt's problem header, for the Lean snippets its answers may ask about
        (``rollout.lean_tool_calls``; with 0, the engine is called as it always was)."""
        events = self.config.events
        tools = self.tool_session(headers, sampling) if headers is not None else None
        asking = {"tools": tools} if tools is not None else {}
        if getattr(self.publisher, "live", None) is None or events.progress_rollouts == 0:
            yield from self.engine.generate(prompt_ids, sampling, **asking)
            return

        def describe_if_published(prompt_index: int, sample_index: int):
            if not self.scores_here(_Position(prompt_index, sample_index), sampling.n):
                return None  # the rank that scores it streams it
            return describe(prompt_index, sample_index)

        live = LiveRollouts(self.publisher.publish_live, describe_if_published,
                            interval_s=events.progress_interval_s, max_rollouts=events.progress_rollouts)
        for generation in self.engine.generate(prompt_ids, sampling, progress=live, **asking):
            live.finish(generation.prompt_index, generation.sample_index, generation.text, generation.num_tokens)
            yield generation

    def tool_session(self, headers: list[str], sampling):
        """One generate call's Lean tool (trainer/rollout/lean_tool.py), or None when ``rollout.lean_tool_calls`` is 0."""
        max_calls = self.config.rollout.lean_tool_calls
        if max_calls == 0:
            return None
        if self._lean_tool is None:
            self._lean_tool = LeanTool(max_calls, self._ask_lean, reward_config=self.config.reward)
        return self._lean_tool.session(headers, self.tokenizer, sampling.max_tokens, sampling.n)

    def _ask_lean(self, checked_code, key: str) -> Future:
        if self.verifier is None:
            raise RuntimeError("this run has no Lean verifier of its own (its scorer was given), so no snippet can be checked")
        return self.events_loop.submit(self.verifier.verify(checked_code, key=key))

    def scoring_options(self, generation) -> dict:
        """What the scorer needs beyond the answer's text: with Lean inside the reasoning, the replies it was given."""
        if self.config.rollout.lean_tool_calls == 0:
            return {}
        return {"tool_replies": [call.reply for call in getattr(generation, "tool_calls", ())]}

    def scores_here(self, generation, samples_per_prompt: int) -> bool:
        """Whether this process scores (and publishes) ``generation``: every answer, unless the engine spans
        several ranks that share its answers (trainer/loop/distributed.py)."""
        return True

    async def _score_and_publish(self, step, key, slot_index: int, slot: PromptSlot, generation, sampling_payload,
                                 policy_version: int) -> Rollout:
        started = time.perf_counter()
        scored = await self.scorer.score(
            slot.problem, generation.text, generation.num_tokens, self.config.rollout.max_response_tokens, key=key,
            **self.scoring_options(generation),
        )
        rollout = Rollout(key, slot_index, slot, generation, scored, time.perf_counter() - started, policy_version)
        self.publisher.publish(EventType.ROLLOUT_FINISHED, self.rollout_event(step, rollout, sampling_payload))
        return rollout

    def rollout_event(self, step: int, rollout: Rollout, sampling_payload: dict, *,
                      is_evaluation: bool = False) -> RolloutFinished:
        scored, generation, slot = rollout.scored, rollout.generation, rollout.slot
        format_check = scored.format_check
        verification = scored.verification
        return RolloutFinished(
            rollout_key=rollout.rollout_key,
            step=step,
            is_evaluation=is_evaluation,
            problem_id=slot.problem.problem_id,
            problem_name=slot.problem.name,
            formal_statement=slot.problem.formal_statement,
            turn=slot.turn,
            parent_rollout_key=slot.parent_rollout_key,
            round=slot.round,
            sample_index=generation.sample_index,
            prompt=slot.prompt_text,
            response=generation.text,
            reasoning=format_check.reasoning,
            lean_code=format_check.lean_code,
            checked_code=scored.checked_code,
            format_error=format_check.error.value if format_check.error is not None else None,
            format_detail=format_check.detail if format_check.error is not None else "",
            format_failure_lines=[list(lines) for lines in format_check.failure_lines],
            verdict=verification.verdict.value if verification is not None else None,
            lean_messages=[LeanMessagePayload(**message.as_dict()) for message in (verification.messages if verification else ())],
            reward=rollout.reward,
            reasons=list(scored.reasons),
            is_censored=scored.is_censored,
            is_standin_verdict=scored.is_standin_verdict,
            # Said on every answer, a format failure's too: the platform counts each answer in its verifier's rates.
            verified_by=self.verifier.verified_by if self.verifier is not None else None,
            num_tokens=generation.num_tokens,
            is_truncated=generation.is_truncated,
            generation_seconds=generation.seconds,
            verification_seconds=rollout.verification_seconds,
            sampling=sampling_payload,
            policy_version=None if is_evaluation else rollout.policy_version,
            tool_calls=[ToolCallPayload(**call.as_dict()) for call in getattr(generation, "tool_calls", ())],
        )

    def training_sequences(self, slots: list[PromptSlot], rollouts: list[Rollout], rewards):
        """Scored rollouts with their Dr.GRPO advantages; censored ones are left out entirely."""
        from trainer.learning.batching import TrainingSequence
        from trainer.learning.learner import group_advantages

        advantages = group_advantages(rewards)  # (G, N)
        sequences = []
        for rollout in sorted(rollouts, key=lambda r: (r.slot_index, r.generation.sample_index)):
            if rollout.reward is None:
                continue  # censored, not zero: a Lean outage is not a wrong proof
            if not rollout.generation.token_ids:
                continue  # nothing to learn from an empty answer
            sequences.append(TrainingSequence(
                prompt_ids=slots[rollout.slot_index].prompt_ids,
                response_ids=rollout.generation.token_ids,
                advantage=float(advantages[rollout.slot_index, rollout.generation.sample_index]),
                group_key=f"slot-{rollout.slot_index}",
                rollout_key=rollout.rollout_key,
                sampled_logprobs=rollout.generation.logprobs,
                context_mask=getattr(rollout.generation, "context_mask", None),
            ))
        return sequences

    def add_retries(self, rollouts: list[Rollout], step: int) -> dict:
        """Rejected attempts become the next round's prompts in the replay buffer (a first attempt's retry, and
        up to retry.max_rounds rounds of them); returns counts by outcome."""
        counts: Counter[str] = Counter()
        for rollout in rollouts:
            if rollout.slot.round >= self.config.retry.max_rounds:
                counts[f"dropped:{RetryDropReason.ALREADY_A_RETRY.value}"] += 1
                continue
            if rollout.scored.verification is None:
                # A format failure never reached Lean: there is no feedback to quote.
                counts[f"dropped:{RetryDropReason.FORMAT_INVALID.value}"] += 1
                continue
            outcome = make_retry(
                rollout.slot.problem, rollout.slot.messages, rollout.generation.text, rollout.scored.format_check,
                rollout.scored.verification, rollout.scored.checked_code, rollout.rollout_key, step,
                self.config.retry, lambda messages: prompt_token_count(self.tokenizer, messages),
                answer_round=rollout.slot.round,
            )
            if isinstance(outcome, RetryPrompt):
                self.replay_buffer.add(outcome)
                counts["added"] += 1
                if outcome.dropped_turns and self.config.retry.max_rounds > 1:
                    counts["history_trimmed"] += 1
                self.publisher.publish(EventType.RETRY_CREATED, {
                    "step": step, "parent_rollout_key": rollout.rollout_key,
                    "problem_id": rollout.slot.problem.problem_id, "feedback": outcome.feedback,
                })
            else:
                counts[f"dropped:{outcome.value}"] += 1
        return dict(counts)

    def step_metrics(self, rollouts: list[Rollout], learner_metrics: dict, retry_counts: dict, timings: dict) -> dict:
        scored = [r for r in rollouts if r.reward is not None]
        reached_lean = [r for r in scored if r.scored.verification is not None]
        lengths = [r.generation.num_tokens for r in rollouts]
        format_errors = Counter(
            r.scored.format_check.error.value for r in rollouts if r.scored.format_check.error is not None
        )
        generated_tokens = sum(lengths)
        metrics = {
            "reward/mean": _mean([r.reward for r in scored]),
            "reward/first_attempt": _mean([r.reward for r in scored if r.slot.turn == "first"]),
            "reward/retry": _mean([r.reward for r in scored if r.slot.turn == "retry"]),
            "lean/accuracy": _mean([1.0 if r.reward and r.reward > 0 else 0.0 for r in reached_lean]),
            # The second check on accepted proofs and the integrity rules (trainer/verification/integrity.py):
            # answers that earned 0 for what Lean alone would have let through, or never saw.
            "reward/rejected_by_guard": sum(1 for r in rollouts if r.scored.verdict is Verdict.REJECTED),
            "rollouts": len(rollouts),
            "censored": sum(1 for r in rollouts if r.reward is None),
            "standin_verdicts": sum(1 for r in rollouts if r.scored.is_standin_verdict),
            "format_errors": dict(format_errors),
            "format_error_share": sum(format_errors.values()) / len(rollouts) if rollouts else None,
            "response_length/mean": _mean(lengths),
            "response_length/max": max(lengths, default=None),
            "response_length/truncated_share": _mean([1.0 if r.generation.is_truncated else 0.0 for r in rollouts]),
            "retries/added": retry_counts.get("added", 0),
            "retries/dropped": {k.split(":", 1)[1]: v for k, v in retry_counts.items() if k.startswith("dropped:")},
            "retries/buffer_size": len(self.replay_buffer),
            "learner/loss": learner_metrics["loss"],
            "learner/grad_norm": learner_metrics["grad_norm"],
            "learner/clip_fraction": learner_metrics["clip_fraction"],
            "learner/clip_low_fraction": learner_metrics["clip_low_fraction"],
            "learner/clip_high_fraction": learner_metrics["clip_high_fraction"],
            "learner/dual_clip_fraction": learner_metrics["dual_clip_fraction"],
            "learner/trained_sequences": learner_metrics["trained_sequences"],
            "learner/tokens_per_second": learner_metrics["tokens_per_second"],
            # The train–inference gap (trainer/observability/gap.py): engine against learner, on the same tokens.
            "rollout/logprob_abs_diff_mean": learner_metrics.get("logprob_abs_diff_mean"),
            "rollout/logprob_abs_diff_max": learner_metrics.get("logprob_abs_diff_max"),
            "rollout/ratio_outside_share": learner_metrics.get("ratio_outside_share"),
            "time/generation_s": timings["generation_s"],
            "time/verification_tail_s": timings["verification_tail_s"],
            "time/verification_total_s": sum(r.verification_seconds for r in rollouts),
            "time/learning_s": timings["learning_s"],
            "time/weight_sync_s": timings["weight_sync_s"],
            "generation/tokens_per_second": (generated_tokens / timings["generation_s"] if generated_tokens and timings["generation_s"] > 0
                                            else None),
        }
        if self.config.rollout.lean_tool_calls:
            # Snippets the rules refused before they reached Lean (trainer/verification/integrity.py): what the policy
            # tries to run on the server, answered with the refusal instead.
            metrics["rollout/tool_calls_refused"] = sum(
                1 for r in rollouts for call in getattr(r.generation, "tool_calls", ()) if call.is_refused)
        if self.config.retry.max_rounds > 1:
            metrics.update(round_metrics(rollouts, self.config.retry.max_rounds))
            metrics["retries/history_trimmed"] = retry_counts.get("history_trimmed", 0)
        if self.verifier is not None:
            stats = self.verifier.stats()
            metrics["verifier/cache_hit_rate"] = stats["cache_hit_rate"]
            metrics["verifier/shared_cache_hit_rate"] = stats["shared_cache_hit_rate"]  # other runs' verdicts
        return metrics

    # --- checkpoints ---------------------------------------------------------------------------

    def save_checkpoint(self) -> Path:
        self.wait_for_token_records()  # a checkpoint's steps have their records on disk, as its weights are
        driver_rng_state = {
            "rng_state": self.rng.getstate(),
            "problem_order": list(self.driver_state.problem_order),
            "cursor": self.driver_state.cursor,
            # An asynchronous run's sampled, untrained batches: a resumed run generates them again.
            "in_flight": self.pipeline.in_flight_slots() if self.pipeline is not None else [],
        }
        if self.selection is not None:  # data.selection history's streaks, and the skips of batches not yet trained
            driver_rng_state["selection"] = self.selection.state_dict()
        state = TrainerState(
            step=self.step,
            # The CHECKPOINT_SAVED event below takes the next number; a resumed run continues after it.
            next_event_seq=self._next_event_seq() + 1,
            replay_buffer=self.replay_buffer.state_dict(),
            driver_rng_state=driver_rng_state,
            global_rng_states=capture_global_rng_states(),
            verifier_state=self.verifier.state_dict() if self.verifier is not None else None,
        )
        folder = save_checkpoint(
            self.output_dir, self.model, self.learner.optimizer, self.tokenizer, self.config.to_json_dict(), state
        )
        self.publisher.publish(EventType.CHECKPOINT_SAVED, {"step": self.step, "path": str(folder)})
        self.prune_checkpoints()
        return folder

    def prune_checkpoints(self) -> None:
        """Keep the latest ``schedule.keep_last_checkpoints`` and the best by evaluation; delete the rest."""
        schedule = self.config.schedule
        if schedule.keep_last_checkpoints is None or not is_checkpoint_writer():
            return
        best = best_evaluated_step(self.output_dir, schedule.keep_best_checkpoint_by, checkpoint_steps(self.output_dir))
        for step in checkpoints_to_remove(checkpoint_steps(self.output_dir), keep_last=schedule.keep_last_checkpoints,
                                          keep={best} if best is not None else set()):
            remove_checkpoint(self.output_dir, step)
            self.publisher.publish(EventType.CHECKPOINT_REMOVED, {
                "step": step, "reason": f"retention: the latest {schedule.keep_last_checkpoints}"
                + (f" and the best by {schedule.keep_best_checkpoint_by} (step {best})" if best is not None else "")
                + " are kept"})

    def _next_event_seq(self) -> int:
        return self._seq_recorder.last_seq + 1


def release_cached_accelerator_memory() -> None:
    """Give PyTorch's cached GPU blocks back to the device, once the learner's tensors are unreferenced.

    The caching allocator keeps every block the learner step used; a rollout engine with its
    own allocator (vLLM) cannot use them and would wake into a GPU PyTorch still holds.
    """
    import gc

    import torch

    if torch.cuda.is_available():
        gc.collect()  # the step's activations may sit in reference cycles (autograd graphs, exceptions)
        torch.cuda.empty_cache()


def _quiet_transformers() -> None:
    # Progress bars on every checkpoint write would bury the run's own output.
    from transformers.utils import logging as transformers_logging

    transformers_logging.disable_progress_bar()


def round_metrics(rollouts: Sequence[Rollout], max_rounds: int) -> dict:
    """Per round of correction r = 0 (first attempts) … max_rounds, as ``{"0": value, …}`` with rounds this step
    did not sample left out (not measured, never 0):

    ``rounds/accuracy``: the mean reward of round r's scored answers;
    ``rounds/first_solved_share``: of round r's groups with a scored answer, the share some answer solved. A
    round-r group answers one chain of corrections whose every earlier answer was rejected; its problem may
    already be solved by another chain (a sibling in round 0 or an earlier round), since every rejected
    answer is retried. So the share counts rejected chains that round r corrected, not problems first
    solved in round r;
    ``rounds/rollouts``: answers generated in round r (censored ones included)."""
    accuracy, solved, counts = {}, {}, {}
    for round_of_correction in range(max_rounds + 1):
        in_round = [r for r in rollouts if r.slot.round == round_of_correction]
        if not in_round:
            continue
        counts[str(round_of_correction)] = len(in_round)
        scored = [r for r in in_round if r.reward is not None]
        if scored:
            accuracy[str(round_of_correction)] = _mean([r.reward for r in scored])
        groups: dict[int, bool] = {}
        for r in scored:
            groups[r.slot_index] = groups.get(r.slot_index, False) or r.reward > 0
        if groups:
            solved[str(round_of_correction)] = sum(groups.values()) / len(groups)
    return {"rounds/accuracy": accuracy, "rounds/first_solved_share": solved, "rounds/rollouts": counts}


def _mean(values) -> float | None:
    """None when nothing was counted: "not measured" is a gap in a chart, never a 0."""
    values = [v for v in values if v is not None]
    return float(sum(values) / len(values)) if values else None


