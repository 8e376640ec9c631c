"""The event-by-event simulation of training steps, synchronous (η = 0) or with bounded staleness (η ≥ 1).

Pure Python, no torch: one simulation of the recipe's 2,048-answer batches, 40 steps, takes a second or two on
any machine.

What it simulates, batch by batch (batch k is the one the learner trains at step k):

- **Generation** by continuous batching: ``concurrent_sequences`` slots, each decoding one answer at
  ``decode_tokens_per_s_per_sequence``; an answer of L tokens holds its slot for L / rate seconds, and
  the next answer of the batch takes the slot it frees. Decoding is memory-bound, so one sequence's
  speed is taken not to depend on how many others are decoding (the engines' decode step costs about
  the same for a few sequences as for many): the batch ends with its longest answers alone, and that
  tail is what it costs. The transformers engine decodes a batch of at most 64 sequences as one static
  batch; with at least as many slots as answers that is the same timeline. A batch starts with
  ``prefill_s`` (reading the prompts) before any token.
- **Lean**: each answer goes to Lean the moment it is written, unless the format check failed it
  (share ``1 − lean_reach_share``; those are decided at once). At most ``max_in_flight`` checks run
  together (the verifier's limit), the rest wait in order. A check takes a latency drawn from
  ``trainer.verification.standin_server.LatencyDistribution`` (log-normal with a share that runs to the
  timeout), at most ``verifier.timeout_s``. One Lean server serves every batch in turn.
- **The learner** trains batch k once its last verdict is in and step k − 1 is done, for
  ``learner_fixed_s + tokens / learner rate``; then the **weight sync**, then the step's bookkeeping
  (``step_overhead_s``). Version k of the weights is the generator's once step k's sync has ended.
- **η**: batch k may be generated only by weights at most η updates older than those it is trained
  after (version ≥ k − 1 − η). So η = 0 is the synchronous loop: generate, wait for the last verdict,
  learn, sync, generate again. With η ≥ 1 the generator starts the next batches (and Lean checks them)
  while the learner updates, up to η batches ahead. The generator takes the newest weights at the start
  of each batch and generates its batches one after another.
- **Where**: on ``Layout.shared`` devices (one GPU pool for both, or the CPU) a generation and a learner step
  that run at the same time share them, each at half speed (two processes on the same cores or GPUs);
  alone, each runs at full speed. On split pools (``cluster.rollout_gpus`` > 0) the generation pool and the
  learner pool run at once, each at its own devices' throughput (throughputs scale linearly with a pool's
  GPUs); the weight push is taken not to slow the generator.

Each draw (answer lengths, which answers reach Lean, latencies) comes from a stream seeded by the batch's
index, so every η sees the same batches: the comparison between η values is of the schedules alone.
"""

from __future__ import annotations

import heapq
import math
import random
from dataclasses import dataclass, field

from trainer.verification.standin_server import LatencyDistribution


@dataclass(frozen=True)
class AnswerLengths:
    """Tokens of one answer: log-normal with mean ``mean_tokens`` (``sigma`` 0: always the mean), capped at
    ``max_tokens`` (the generation budget; a capped answer is a truncated one); or, when ``observed`` is
    given, drawn from those measured lengths."""

    mean_tokens: float
    sigma: float = 0.0
    max_tokens: int = 1 << 30
    observed: tuple[int, ...] = ()

    def __post_init__(self):
        if self.mean_tokens <= 0 and not self.observed:
            raise ValueError(f"an answer's mean length is at least one token, got {self.mean_tokens}")
        if self.sigma < 0:
            raise ValueError(f"the spread of answer lengths is 0 or more, got sigma {self.sigma}")

    def draw(self, stream: random.Random) -> int:
        if self.observed:
            return min(stream.choice(self.observed), self.max_tokens)
        if not self.sigma:
            return min(max(1, round(self.mean_tokens)), self.max_tokens)
        # The log-normal whose mean is mean_tokens: exp(mu + sigma^2 / 2) = mean_tokens.
        tokens = stream.lognormvariate(math.log(self.mean_tokens) - self.sigma ** 2 / 2, self.sigma)
        return min(max(1, round(tokens)), self.max_tokens)


@dataclass(frozen=True)
class LeanLatency:
    """The settings of a ``LatencyDistribution`` (seconds), kept apart from its random stream."""

    mean_s: float
    sigma: float = 0.0
    timeout_share: float = 0.0

    def distribution(self, seed: int) -> LatencyDistribution:
        return LatencyDistribution(self.mean_s, self.sigma, self.timeout_share, seed)


@dataclass(frozen=True)
class StepTimeInputs:
    """What a step costs, per device. A device is one GPU, or the whole CPU machine (``cluster.num_gpus`` 0)."""

    rollouts_per_step: int
    answer_tokens: AnswerLengths
    decode_tokens_per_s_per_sequence: float
    concurrent_sequences_per_device: int
    prefill_s: float
    lean_latency: LeanLatency
    lean_timeout_s: float
    lean_max_in_flight: int
    lean_reach_share: float
    learner_tokens_per_s_per_device: float
    prompt_tokens_mean: float
    learner_fixed_s: float
    weight_sync_s: float
    step_overhead_s: float
    # What one more token of context adds to a token's learner work, as a share of its work without attention
    # (layers × attention width / parameters: causal attention averages half the sequence per token). 0 where a
    # measured rate already holds attention at the run's own lengths.
    learner_attention_per_context_token: float = 0.0
    # Where each figure came from (field name → "measured: …", "published: …", "assumed: …", "config: …").
    sources: dict[str, str] = field(default_factory=dict, compare=False)

    def __post_init__(self):
        positive = ("rollouts_per_step", "decode_tokens_per_s_per_sequence", "concurrent_sequences_per_device",
                    "lean_timeout_s", "lean_max_in_flight", "learner_tokens_per_s_per_device")
        for name in positive:
            if not getattr(self, name) > 0:
                raise ValueError(f"{name} must be more than 0, got {getattr(self, name)!r}")
        for name in ("prefill_s", "prompt_tokens_mean", "learner_fixed_s", "weight_sync_s", "step_overhead_s",
                     "learner_attention_per_context_token"):
            if getattr(self, name) < 0:
                raise ValueError(f"{name} must be 0 or more, got {getattr(self, name)!r}")
        if not 0 <= self.lean_reach_share <= 1:
            raise ValueError(f"lean_reach_share is a share between 0 and 1, got {self.lean_reach_share!r}")


@dataclass(frozen=True)
class Layout:
    """Which devices generate and which learn. ``shared``: the same devices do both, sharing them when both run."""

    shared: bool
    generation_devices: int
    learner_devices: int
    note: str = ""


SHARED_CPU_NOTE = ("CPU: one machine's cores do both; with η ≥ 1 generation runs in its own process, and while both "
                   "run each is taken to run at half speed (assumed)")


@dataclass
class BatchTimeline:
    """One batch's phases, in seconds from the start of the simulation."""

    step: int
    policy_version: int  # the weights that generated it (updates applied)
    generation: tuple[float, float]
    lean: tuple[float, float] | None  # first answer sent to Lean → last verdict; None when none reached Lean
    ready_s: float  # every answer written and every verdict in
    learning: tuple[float, float]
    sync: tuple[float, float]
    step_end_s: float  # after the sync and the step's bookkeeping

    @property
    def staleness(self) -> int:
        return (self.step - 1) - self.policy_version


@dataclass
class SimulationResult:
    eta: int
    layout: Layout
    batches: list[BatchTimeline]
    step_time_s: float  # the mean over the simulated steps: the time to train them all / their number
    generation_idle_share: float  # of the whole time, the share during which no generation ran
    learner_idle_share: float  # the share during which the learner neither learned nor synced
    devices_idle_share: float  # the share of device-seconds doing neither (shared devices: of the time)

    def mean_interval_after(self, step: int) -> float:
        """Seconds between consecutive steps' ends, from the end of ``step`` on (a run's metrics events are as far apart)."""
        ends = {batch.step: batch.step_end_s for batch in self.batches}
        last = max(ends)
        return (ends[last] - ends[step]) / (last - step)


def simulate(inputs: StepTimeInputs, eta: int, layout: Layout, *, steps: int = 20, seed: int = 0) -> SimulationResult:
    """``steps`` training steps with staleness bound ``eta``: each batch's timeline, the mean step time and the
    idle shares over the whole of them."""
    if eta < 0:
        raise ValueError(f"η (rollout.max_staleness) is 0 or more, got {eta}")
    if steps < 2:
        raise ValueError(f"simulate at least 2 steps (the step time is the interval between steps), got {steps}")
    if layout.generation_devices < 1 or layout.learner_devices < 1:
        raise ValueError(f"each pool needs at least one device, got {layout}")

    slots = inputs.concurrent_sequences_per_device * layout.generation_devices
    learner_rate = inputs.learner_tokens_per_s_per_device * layout.learner_devices
    lean_free = [0.0] * inputs.lean_max_in_flight  # when each of Lean's slots is next free (a heap)
    generation_end = {0: 0.0}
    step_end = {0: 0.0}
    generated: dict[int, tuple] = {}  # step → (version, generation interval, Lean interval, ready time, tokens)
    batches: list[BatchTimeline] = []
    now = 0.0
    generating: _Phase | None = None
    learning: _Phase | None = None
    next_generation, next_learning = 1, 1

    while next_learning <= steps:
        generation_from = learning_from = None  # when the next phase of each may start, once that is known
        if generating is None and next_generation <= steps and next_generation - 1 - eta < next_learning:
            # Batch k may use weights of version k − 1 − η or newer: that step has ended.
            generation_from = max(generation_end[next_generation - 1], step_end[max(next_generation - 1 - eta, 0)])
            if generation_from <= now:
                draws = _batch_draws(inputs, next_generation, seed)
                generating = _Phase(next_generation, now, _decoding_work(inputs, draws[0], slots), draws)
                generating.version = next_learning - 1  # the newest weights synced by now
                generation_from = None
        if learning is None and next_learning in generated:
            learning_from = max(generated[next_learning][3], step_end[next_learning - 1])
            if learning_from <= now:
                tokens = generated[next_learning][4]
                learning_s = inputs.learner_fixed_s + tokens / learner_rate
                learning = _Phase(next_learning, now, [learning_s, learning_s + inputs.weight_sync_s,
                                                       learning_s + inputs.weight_sync_s + inputs.step_overhead_s])
                learning_from = None

        running = [phase for phase in (generating, learning) if phase is not None]
        # Shared devices run both phases at once at half speed each (two processes on the same cores or
        # GPUs); split pools each run at full speed.
        speed = 0.5 if layout.shared and len(running) == 2 else 1.0
        upcoming = [phase.finishes_at(now, speed) for phase in running]
        upcoming += [moment for moment in (generation_from, learning_from) if moment is not None and moment > now]
        if not upcoming:
            raise RuntimeError(f"the simulation stalled at {now} s (step {next_learning}, batch {next_generation})")
        later = min(upcoming)
        for phase in running:
            phase.advance(now, later, speed)
        now = later

        if generating is not None and generating.is_done():
            k = generating.step
            lengths, reaches_lean, latencies = generating.draws
            written = [generating.wall_time_at(work) for work in generating.marks]
            lean, ready = _lean_checks(written, reaches_lean, latencies, lean_free)
            tokens = learner_work(inputs, lengths)
            generated[k] = (generating.version, (generating.start, now), lean, ready, tokens)
            generation_end[k] = now
            generating = None
            next_generation += 1
        if learning is not None and learning.is_done():
            k = learning.step
            version, generation, lean, ready, _ = generated.pop(k)
            learned_at, synced_at, _ = (learning.wall_time_at(work) for work in learning.marks)
            step_end[k] = now
            batches.append(BatchTimeline(k, version, generation, lean, ready, (learning.start, learned_at),
                                         (learned_at, synced_at), now))
            learning = None
            next_learning += 1

    # The whole run, the pipeline's filling included: the time to train `steps` steps, divided by them. (A
    # window after the filling would be steadier, but its mean can rise when the early steps speed up more.)
    window = (0.0, step_end[steps])
    length = window[1]
    generation_busy = _busy_within([batch.generation for batch in batches], window)
    learner_busy = _busy_within([(batch.learning[0], batch.step_end_s) for batch in batches], window)
    either_busy = _busy_within([batch.generation for batch in batches]
                               + [(batch.learning[0], batch.step_end_s) for batch in batches], window)
    generation_idle = 1 - generation_busy / length if length > 0 else 0.0
    learner_idle = 1 - learner_busy / length if length > 0 else 0.0
    if layout.shared:
        devices_idle = 1 - either_busy / length if length > 0 else 0.0
    else:
        devices_idle = ((layout.generation_devices * generation_idle + layout.learner_devices * learner_idle)
                        / (layout.generation_devices + layout.learner_devices))
    return SimulationResult(
        eta=eta, layout=layout, batches=batches, step_time_s=length / steps,
        generation_idle_share=generation_idle, learner_idle_share=learner_idle, devices_idle_share=devices_idle,
    )


class _Phase:
    """A generation or a learner step in progress: its work in seconds at full speed, done as time passes at the
    speed the devices give it; ``marks`` are points of its work (an answer written, the learning done) whose
    wall-clock times are read back once it is over."""

    def __init__(self, step: int, start: float, marks: list[float], draws=None):
        self.step, self.start, self.marks, self.draws = step, start, marks, draws
        self.work = max(marks) if marks else 0.0
        self.done = 0.0
        self.progress = [(start, 0.0)]  # (wall-clock time, work done): a line between each pair
        self.version = 0

    def finishes_at(self, now: float, speed: float) -> float:
        return now + (self.work - self.done) / speed

    def advance(self, now: float, later: float, speed: float) -> None:
        self.done = min(self.work, self.done + (later - now) * speed)
        if self.work - self.done <= 1e-9 * max(1.0, self.work):  # finished, up to floating-point rounding
            self.done = self.work
        self.progress.append((later, self.done))

    def is_done(self) -> bool:
        return self.done >= self.work

    def wall_time_at(self, work: float) -> float:
        for (t0, w0), (t1, w1) in zip(self.progress, self.progress[1:]):
            if w1 >= work:
                return t0 if w1 == w0 else t0 + (t1 - t0) * (work - w0) / (w1 - w0)
        return self.progress[-1][0]


def sequence_work(tokens: float, attention_per_context_token: float) -> float:
    """One sequence's learner work in tokens without attention: each of its tokens weighed by 1 + its length ×
    ``attention_per_context_token`` (causal attention grows with the sequence)."""
    return tokens * (1 + tokens * attention_per_context_token)


def learner_work(inputs: StepTimeInputs, answer_lengths: list[int]) -> float:
    """A batch's learner work in tokens at the learner's rate (``sequence_work`` of each prompt and answer)."""
    return sum(sequence_work(length + inputs.prompt_tokens_mean, inputs.learner_attention_per_context_token)
               for length in answer_lengths)


def _batch_draws(inputs: StepTimeInputs, step: int, seed: int):
    """Batch ``step``'s answers: lengths, whether each reaches Lean, each check's latency. Drawn from a stream of
    the batch's own, so every η sees the same batches."""
    draws = random.Random(f"{seed}/batch/{step}")
    latencies = inputs.lean_latency.distribution(draws.randrange(1 << 30))
    lengths = [inputs.answer_tokens.draw(draws) for _ in range(inputs.rollouts_per_step)]
    reaches_lean = [draws.random() < inputs.lean_reach_share for _ in lengths]
    latency_of = [min(latencies.draw(), inputs.lean_timeout_s) for _ in lengths]
    return lengths, reaches_lean, latency_of


def _decoding_work(inputs: StepTimeInputs, lengths: list[int], slots: int) -> list[float]:
    """When each answer is written, in seconds of decoding at full speed from the batch's start (continuous
    batching: each answer takes the first slot that frees, in the order answers were submitted)."""
    slot_free = [inputs.prefill_s] * min(slots, len(lengths))
    written = []
    for tokens in lengths:
        free = heapq.heappop(slot_free)
        done = free + tokens / inputs.decode_tokens_per_s_per_sequence
        written.append(done)
        heapq.heappush(slot_free, done)
    return written


def _lean_checks(written: list[float], reaches_lean: list[bool], latencies: list[float], lean_free: list[float]):
    """Each answer to Lean as it is written, in turn for one of Lean's slots; returns (Lean's interval or None,
    the time of the batch's last verdict)."""
    verdicts, sent = [], []
    for index in sorted(range(len(written)), key=lambda i: written[i]):
        if not reaches_lean[index]:
            verdicts.append(written[index])  # failed the format check: decided without Lean
            continue
        check_start = max(written[index], heapq.heappop(lean_free))
        verdict = check_start + latencies[index]
        heapq.heappush(lean_free, verdict)
        sent.append(written[index])
        verdicts.append(verdict)
    return ((min(sent), max(verdicts)) if sent else None), max(verdicts)


def _busy_within(intervals: list[tuple[float, float]], window: tuple[float, float]) -> float:
    """Seconds of ``window`` covered by at least one of ``intervals``."""
    clipped = sorted((max(a, window[0]), min(b, window[1])) for a, b in intervals if b > window[0] and a < window[1])
    busy, current_start, current_end = 0.0, None, None
    for a, b in clipped:
        if current_end is None or a > current_end:
            if current_end is not None:
                busy += current_end - current_start
            current_start, current_end = a, b
        else:
            current_end = max(current_end, b)
    if current_end is not None:
        busy += current_end - current_start
    return busy
