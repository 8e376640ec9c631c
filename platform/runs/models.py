"""Runs: one training job on the cluster, its state machine, and what it reported.

Why one piece: a run's state machine (``Run.transition``) writes its timeline and ends its attempt (``Attempt``,
which may schedule the next one) in the same transaction, and the rows the ingester stores all hang off the run;
split, the state machine would import its own tables back.
"""

from __future__ import annotations

import hashlib
import time
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.core.validators import RegexValidator
from django.db import models, transaction
from django.db.models import Q
from django.urls import reverse
from django.utils import timezone
from pydantic import ValidationError

from runs.signals import infrastructure_retry_scheduled, state_changed
from trainer.cluster.failures import CAUSE_INFRASTRUCTURE, CAUSE_RUN
from trainer.config import ModelSource, RunConfig, without_deployment_secrets
from trainer.memory import memory_plan
from trainer.memory.memory_plan import LearnerMemory
from trainer.run.checkpoint import MODEL_FOLDER


class RunState(models.TextChoices):
    QUEUED = "queued", "Queued"
    STARTING = "starting", "Starting"
    RUNNING = "running", "Running"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed"
    CANCELLED = "cancelled", "Cancelled"


ACTIVE_STATES = (RunState.QUEUED, RunState.STARTING, RunState.RUNNING)
FINAL_STATES = (RunState.SUCCEEDED, RunState.FAILED, RunState.CANCELLED)

# Which state may follow which: anything else is a bug or a race lost, and is refused.
ALLOWED_TRANSITIONS = {
    RunState.QUEUED: {RunState.STARTING, RunState.FAILED, RunState.CANCELLED},
    # STARTING → QUEUED: the sweeper's, when the worker that claimed the run died before submitting it.
    RunState.STARTING: {RunState.QUEUED, RunState.RUNNING, RunState.SUCCEEDED, RunState.FAILED, RunState.CANCELLED},
    RunState.RUNNING: {RunState.SUCCEEDED, RunState.FAILED, RunState.CANCELLED},
    RunState.SUCCEEDED: set(),
    RunState.FAILED: {RunState.QUEUED},  # resume
    RunState.CANCELLED: {RunState.QUEUED},  # resume
}


class AttemptCause(models.TextChoices):
    """Why a failed attempt failed, as far as anyone said: the trainer's RUN_FINISHED ``cause``
    (trainer/cluster/failures.py), or the sweeper's reading of Ray's account of a job whose driver was lost."""

    INFRASTRUCTURE = CAUSE_INFRASTRUCTURE, "the infrastructure (a node, a worker or an actor was lost)"
    RUN = CAUSE_RUN, "the run's code"


# Automatic retries of infrastructure failures a run may have (its launch field ``infrastructure_retries``).
DEFAULT_INFRASTRUCTURE_RETRIES = 3
MOST_INFRASTRUCTURE_RETRIES = 10


def retry_delay_s(retry_number: int) -> float:
    """The back-off before automatic retry ``retry_number`` (1, 2, …): RUN_RETRY_FIRST_DELAY_S doubling each time,
    at most RUN_RETRY_MAX_DELAY_S, so a node that keeps dying is not hammered while the cluster recovers."""
    return min(settings.RUN_RETRY_FIRST_DELAY_S * 2 ** (retry_number - 1), settings.RUN_RETRY_MAX_DELAY_S)


class RunKind(models.TextChoices):
    RL = "rl", "Reinforcement learning (Dr.GRPO)"
    SFT = "sft", "Warm-start supervised fine-tuning"
    EVAL = "eval", "Evaluation (pass@k; no training)"


class RunQuerySet(models.QuerySet):
    def visible_to(self, user):
        if not user.is_authenticated:
            return self.none()
        return self.filter(Q(owner=user) | Q(shared_with=user)).distinct()

    def active(self):
        return self.filter(state__in=ACTIVE_STATES)


class RunGroup(models.Model):
    """Runs launched together: one configuration on several seeds, or a small grid over launch fields with each
    cell on several seeds (runs/run_groups.py). Each member is an ordinary run; the group is what a person
    compares, cancels and adds a seed to."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="run_groups")
    name = models.CharField(max_length=200)
    launch = models.JSONField(help_text="The launch fields every member shares (the launch contract's), seed aside.")
    grid = models.JSONField(default=dict, blank=True,
                            help_text="Launch field → the values it takes across the cells; empty: one cell.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self):
        return self.name

    def get_absolute_url(self):
        return reverse("runs:group", args=[self.pk])

    def is_visible_to(self, user) -> bool:
        return self.owner_id == user.pk

    def is_editable_by(self, user) -> bool:
        return self.owner_id == user.pk


class Run(models.Model):
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="runs")
    shared_with = models.ManyToManyField(settings.AUTH_USER_MODEL, blank=True, related_name="shared_runs")
    name = models.CharField(max_length=200)
    kind = models.CharField(max_length=8, choices=RunKind.choices, default=RunKind.RL)
    promptset_version = models.ForeignKey(
        "promptsets.PromptsetVersion", on_delete=models.PROTECT, related_name="runs"
    )
    preset = models.CharField(max_length=64)
    config = models.JSONField(help_text="The resolved trainer.config.RunConfig, as the trainer received it.")
    state = models.CharField(max_length=16, choices=RunState.choices, default=RunState.QUEUED, db_index=True)
    failure_reason = models.TextField(blank=True)
    ray_job_id = models.CharField(max_length=128, blank=True)
    cluster = models.JSONField(default=dict, blank=True, help_text="Cluster address and Ray version it ran on.")
    code_version = models.CharField(max_length=64, blank=True)
    starting_checkpoint = models.ForeignKey(
        "runs.Checkpoint", null=True, blank=True, on_delete=models.PROTECT, related_name="descendant_runs",
        help_text="The checkpoint (e.g. of a warm-start SFT run) this run's model started from: its lineage.",
    )
    attempt = models.PositiveIntegerField(
        default=1, help_text="The current attempt: 1 at launch, one more per resume. Its Ray job is "
                             "run-<id>-attempt-<n>, and only its events and its job may change the run.",
    )
    # db_default too: a row inserted without the column (SQL, code from before it) gets the launch default.
    infrastructure_retries = models.PositiveSmallIntegerField(
        default=DEFAULT_INFRASTRUCTURE_RETRIES, db_default=DEFAULT_INFRASTRUCTURE_RETRIES,
        help_text="Attempts the platform starts by itself, each from the last checkpoint, after a failure of the "
                  "infrastructure (a node lost, a worker preempted, an actor killed from outside); a failure of the "
                  "run's own code is never retried. Set at launch.")
    # The queue (runs/scheduling.py): a queued run waits until its owner's quota and the queue admit it.
    priority = models.IntegerField(default=0, help_text="Set by an administrator: higher runs leave the queue first.")
    queued_at = models.DateTimeField(default=timezone.now, help_text="Its place in the queue (within its priority).")
    admitted_at = models.DateTimeField(null=True, blank=True, help_text="When the scheduler let it leave the queue.")
    queue_reason = models.CharField(max_length=300, blank=True, help_text="Why it still waits, as the scheduler last saw it.")
    run_group = models.ForeignKey(RunGroup, null=True, blank=True, on_delete=models.SET_NULL, related_name="runs",
                                  help_text="The seeds or grid it was launched with, if any.")
    current_step = models.PositiveIntegerField(default=0)
    demonstrations_path = models.CharField(
        max_length=1000, blank=True, default="", db_default="",
        help_text="SFT only: the demonstrations file it trains on (an expert-iteration pipeline's proof corpus); "
                  "blank: demonstrations generated for its promptset, as the warm start does.")
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    objects = RunQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]

    def __str__(self):
        return f"{self.name} ({self.state})"

    def get_absolute_url(self):
        return reverse("runs:detail", args=[self.pk])

    @property
    def is_active(self) -> bool:
        return self.state in ACTIVE_STATES

    @property
    def is_final(self) -> bool:
        return self.state in FINAL_STATES

    def can_cancel(self) -> bool:
        return self.is_active

    def can_resume(self) -> bool:
        return self.state in (RunState.FAILED, RunState.CANCELLED)

    def is_visible_to(self, user) -> bool:
        return user.is_authenticated and (self.owner_id == user.pk or self.shared_with.filter(pk=user.pk).exists())

    def is_editable_by(self, user) -> bool:
        return user.is_authenticated and self.owner_id == user.pk

    def resume_checkpoint(self) -> "Checkpoint | None":
        """What Resume continues from: the newest checkpoint whose files retention kept (the trainer
        resumes from the newest complete one in the run's folder, or from step 0 without one)."""
        return self.checkpoints.filter(removed_at__isnull=True).order_by("-step").first()

    @property
    def resolved_config(self) -> "RunConfig":
        """The saved config as the trainer reads it (``RunConfig.from_saved``): the one way the platform
        reads a run's config. Raises pydantic's ValidationError for one the trainer no longer reads."""
        return RunConfig.from_saved(self.config)

    @property
    def waiting_for(self) -> str:
        """Why a queued run still waits, in words: the scheduler's last reason, or that it has not looked yet."""
        return self.queue_reason or "waiting for the scheduler"

    @property
    def public_config(self) -> dict:
        """The config as pages and the API show it (``RunConfig.to_public_dict``): without the deployment's
        Lean server address and key, which the trainer reads (from the exported config) and no reader needs.
        A config the trainer no longer reads is shown as saved, less the same two fields."""
        try:
            return self.resolved_config.to_public_dict()
        except ValidationError:
            return without_deployment_secrets(self.config)

    @property
    def planned_steps(self) -> int | None:
        """The step an RL run ends at: its schedule's total_epochs passes over the promptset version or
        its total_steps, whichever comes first (the trainer's own rule). None where that is unknown:
        a warm-start SFT run counts its own steps, and a config the trainer no longer reads says nothing."""
        if self.kind != RunKind.RL:
            return None
        try:
            config = self.resolved_config
        except ValidationError:
            return None
        return config.planned_steps(self.promptset_version.problem_count) or None

    @property
    def group_name(self) -> str:
        """The Channels group that browsers watching this run join."""
        return f"run-{self.pk}"

    @property
    def ray_job_id_of_attempt(self) -> str:
        """The current attempt's Ray submission id: predictable, so a job submitted by a worker that died
        before saving the id can still be found, adopted or stopped."""
        return job_id_for(self.pk, self.attempt)

    @property
    def artifacts_dir(self):
        return settings.ARTIFACTS_DIR / "runs" / str(self.pk)

    def transition(self, to: RunState, *, reason: str = "", expected: tuple[RunState, ...] | None = None,
                   attempt: int | None = None, where: Q | None = None, cause: AttemptCause | None = None) -> bool:
        """Move to ``to`` only if the stored state still allows it; returns whether this call did.

        A conditional UPDATE, so two processes (the ingester, a Celery worker, a cancel
        request) racing on one run cannot both win, and the losing one learns it lost.
        ``attempt``: only if the run is still at that attempt (what the trainer's events and the
        sweeper's look at a job say is about one attempt, never about the one that replaced it).
        ``where``: a further condition the stored row must meet (dispatch: the scheduler admitted it).
        Moving to QUEUED (a resume) starts the next attempt.
        A final state ends the attempt (its ``Attempt`` row says how, and ``cause`` why it failed); a failure of the
        infrastructure schedules the next attempt by itself while the run has automatic retries left.
        """
        to = RunState(to)
        sources = expected or tuple(s for s, targets in ALLOWED_TRANSITIONS.items() if to in targets)
        now = timezone.now()
        fields = {"state": to, "updated_at": now}
        if to == RunState.STARTING:
            fields["failure_reason"] = ""
        if to == RunState.RUNNING:
            fields["started_at"] = now
        if to in FINAL_STATES:
            fields["finished_at"] = now
        if to == RunState.FAILED:
            fields["failure_reason"] = reason[:10_000]
        if to == RunState.QUEUED:
            fields["finished_at"] = None
            # Back to the end of the queue: the scheduler admits it again when its owner has room.
            fields.update(queued_at=now, admitted_at=None, queue_reason="")
            # A new attempt: its own Ray job; what the last attempt's job or events say changes nothing.
            fields["attempt"] = models.F("attempt") + 1
            fields["ray_job_id"] = ""
        condition = {"pk": self.pk, "state__in": sources}
        if attempt is not None:
            condition["attempt"] = attempt
        with transaction.atomic():
            changed = Run.objects.filter(where or Q(), **condition).update(**fields)
            if changed:
                RunStateChange.objects.create(run_id=self.pk, state=to, reason=reason[:10_000])
                if to in FINAL_STATES:
                    self._end_attempt(to, reason, cause, now)
        if changed:
            self.refresh_from_db()
            state_changed.send(sender=Run, run=self, state=to)  # the scheduler listens (runs/signals.py)
        return changed == 1

    def _end_attempt(self, state: RunState, reason: str, cause: AttemptCause | None, now) -> None:
        """Record how the current attempt ended (inside transition's transaction) and, for a failure of the
        infrastructure with retries left, when the next attempt starts by itself."""
        number, allowed = Run.objects.filter(pk=self.pk).values_list("attempt", "infrastructure_retries").get()
        retry_at = None
        if state == RunState.FAILED and cause == AttemptCause.INFRASTRUCTURE:
            used = Attempt.objects.filter(run_id=self.pk, retry_at__isnull=False).exclude(number=number).count()
            if used < allowed:
                delay_s = retry_delay_s(used + 1)
                retry_at = now + timedelta(seconds=delay_s)
                transaction.on_commit(lambda: infrastructure_retry_scheduled.send(
                    sender=Run, run_id=self.pk, attempt=number, delay_s=delay_s))
        Attempt.objects.update_or_create(run_id=self.pk, number=number, defaults={
            "ended_state": state, "cause": cause or "", "reason": reason[:10_000], "ended_at": now,
            "retry_at": retry_at})

    def mark_failed(self, reason: str, *, attempt: int | None = None, cause: AttemptCause | None = None) -> bool:
        return self.transition(RunState.FAILED, reason=reason, attempt=attempt, cause=cause)

    def attempts_shown(self) -> list["Attempt"]:
        """Every attempt, the current one too before anything about it is stored, oldest first."""
        stored = {attempt.number: attempt for attempt in self.attempts.all()}
        return [stored.get(number) or Attempt(run=self, number=number) for number in range(1, self.attempt + 1)]


def job_id_for(run_id: int, attempt: int) -> str:
    """The Ray submission id of a run's attempt (ray_jobs.attempt_of reads it back)."""
    return f"run-{run_id}-attempt-{attempt}"


class Attempt(models.Model):
    """One dispatch of a run (its Ray job ``run-<id>-attempt-<n>``): where its actors were placed, how it ended and
    whether the platform retried it by itself. Written when its placement is reported and when it ends."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="attempts")
    number = models.PositiveIntegerField()
    placement = models.JSONField(
        default=dict, blank=True,
        help_text="The latest ``placement`` event of the attempt (trainer.observability.events.Placement): what it "
                  "waits for, or which node each actor is on (actors merged by name across events).")
    ended_state = models.CharField(max_length=16, choices=RunState.choices, blank=True)
    cause = models.CharField(max_length=16, choices=AttemptCause.choices, blank=True,
                             help_text="Why it failed, where anyone said; blank: not known.")
    reason = models.TextField(blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    retry_at = models.DateTimeField(null=True, blank=True,
                                    help_text="When the platform starts the next attempt by itself (an infrastructure "
                                              "failure with retries left); empty: no automatic retry.")

    class Meta:
        ordering = ["run", "number"]
        constraints = [models.UniqueConstraint(fields=["run", "number"], name="one_row_per_attempt")]

    def __str__(self):
        return f"{self.run_id} attempt {self.number}"

    @property
    def is_waiting_for_resources(self) -> bool:
        return self.ended_at is None and self.placement.get("state") == "waiting"

    @property
    def outcome(self) -> str:
        """How it ended, in the words of the run page's list of attempts."""
        if self.ended_state != RunState.FAILED:
            return RunState(self.ended_state).label.lower() if self.ended_state else "not ended"
        if self.cause == AttemptCause.RUN:
            return "failed: the run's code (not retried: it would fail the same way)"
        if self.cause != AttemptCause.INFRASTRUCTURE:
            return "failed"
        if self.retry_at is None:
            return (f"failed: the infrastructure; not retried, the run's {self.run.infrastructure_retries} automatic "
                    "retries are used up")
        return f"failed: the infrastructure; retried automatically at {self.retry_at:%H:%M} UTC"


class RunStateChange(models.Model):
    """The state timeline shown on the run page."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="state_changes")
    state = models.CharField(max_length=16, choices=RunState.choices)
    reason = models.TextField(blank=True)
    at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["at", "pk"]


class RunEvent(models.Model):
    """Every event the trainer published, stored once (event_id is the idempotency key)."""

    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="events")
    event_id = models.CharField(max_length=64, unique=True)
    attempt = models.PositiveIntegerField(default=1, help_text="The attempt that published it.")
    seq = models.BigIntegerField(help_text="The trainer's number: unique per publisher, not contiguous (ranks interleave).")
    run_seq = models.PositiveBigIntegerField(
        help_text="Position among the run's stored events: 1, 2, 3… with no gap, given by the ingester as it "
                  "stores them, so a browser that sees 7 after 5 knows it missed 6 and fetches it.",
    )
    type = models.CharField(max_length=32, db_index=True)
    payload = models.JSONField()
    published_at = models.DateTimeField()
    stored_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["pk"]
        indexes = [
            models.Index(fields=["run", "type", "id"]),
            # The run page's "last event id" and the WebSocket's backlog read a run's events by id.
            models.Index(fields=["run", "id"], name="runevent_run_id_order"),
        ]
        constraints = [models.UniqueConstraint(fields=["run", "run_seq"], name="one_event_per_run_seq")]


class DeadLetter(models.Model):
    """A stream entry the ingester could not store (not JSON, an unknown type, a payload that breaks its
    schema, a database refusal), kept with the error so nothing is dropped unseen. It was
    acknowledged, so it no longer blocks the run's stream; the run page counts them."""

    run = models.ForeignKey(Run, null=True, blank=True, on_delete=models.CASCADE, related_name="dead_letters",
                            help_text="The run whose stream held the entry; empty if that run no longer exists.")
    stream_key = models.CharField(max_length=200)
    entry_id = models.CharField(max_length=64, help_text="The Redis Stream entry id, e.g. 1717171717171-0.")
    raw_payload = models.TextField(help_text="The entry's fields as JSON text (control characters escaped), "
                                             "cut at 1,000,000 characters.")
    error = models.TextField(help_text="Why it could not be stored, in the ingester's words.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-pk"]
        constraints = [models.UniqueConstraint(fields=["stream_key", "entry_id"], name="one_dead_letter_per_entry")]

    def __str__(self):
        return f"{self.stream_key} {self.entry_id}: {self.error[:80]}"


class StepMetrics(models.Model):
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="step_metrics")
    step = models.PositiveIntegerField()
    values = models.JSONField()

    class Meta:
        ordering = ["step"]
        constraints = [models.UniqueConstraint(fields=["run", "step"], name="one_metrics_row_per_step")]


class Evaluation(models.Model):
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="evaluations")
    step = models.PositiveIntegerField()
    values = models.JSONField()
    # [{"problem_id", "reason"}] as the trainer published them (trainer.observability.events.ProblemNotAttempted):
    # each problem of the promptset this evaluation left out, and why; values["problems_not_attempted"] counts them.
    not_attempted = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["step"]
        constraints = [models.UniqueConstraint(fields=["run", "step"], name="one_evaluation_per_step")]

    def not_attempted_reasons(self) -> dict[str, str]:
        """Problem key → why this evaluation left it out."""
        return {entry["problem_id"]: entry["reason"] for entry in self.not_attempted}


class Checkpoint(models.Model):
    run = models.ForeignKey(Run, on_delete=models.CASCADE, related_name="checkpoints")
    step = models.PositiveIntegerField()
    path = models.CharField(max_length=1000)
    created_at = models.DateTimeField(auto_now_add=True)
    removed_at = models.DateTimeField(null=True, blank=True, help_text="When the run's retention deleted its files.")
    removal_reason = models.CharField(max_length=300, blank=True)

    class Meta:
        ordering = ["step"]
        constraints = [models.UniqueConstraint(fields=["run", "step"], name="one_checkpoint_per_step")]

    def __str__(self):
        return f"{self.run.name} · step {self.step}"

    @property
    def is_on_disk(self) -> bool:
        return self.removed_at is None

    @property
    def model_folder(self) -> str:
        """The Hugging Face model folder inside the checkpoint: what model.init_checkpoint takes."""
        return str(Path(self.path) / MODEL_FOLDER)


# A registered model's name: letters, digits, '.', '_' and '-'; never a path separator. The launch
# contract refuses any other `model` before looking anything up.
MODEL_NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$"


class RegisteredModel(models.Model):
    """A policy model people may train, by name: the only way a launch names a model (never a path).

    Administrators keep the list (Django admin); the presets' own models are registered by a migration.
    """

    name = models.CharField(max_length=100, unique=True, validators=[
        RegexValidator(MODEL_NAME_PATTERN, "letters, digits, '.', '_' and '-' only: a name, not a path")],
        help_text="What people choose in the launch form and send as `model` to the API.")
    source = models.CharField(max_length=32, choices=[(s.value, s.value) for s in ModelSource],
                              help_text="huggingface: a hub name or a folder on the cluster; the others need no download.")
    name_or_path = models.CharField(max_length=500, help_text="The Hugging Face name or folder the trainer loads.")
    description = models.CharField(max_length=300, blank=True)
    is_enabled = models.BooleanField(default=True, help_text="Disabled models stay on old runs but cannot be launched.")

    class Meta:
        ordering = ["name"]

    def __str__(self):
        return self.name


class Quota(models.Model):
    """Limits on what one person, or one group together, may run at once; the defaults are in settings."""

    user = models.OneToOneField(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE,
                                related_name="run_quota")
    group = models.OneToOneField("auth.Group", null=True, blank=True, on_delete=models.CASCADE, related_name="run_quota")
    max_concurrent_runs = models.PositiveIntegerField(help_text="Runs starting or running at once.")
    max_gpus = models.PositiveIntegerField(help_text="GPUs held at once by those runs together.")
    priority = models.IntegerField(default=0, help_text="Priority given to this person's new runs (a user quota only).")

    class Meta:
        constraints = [models.CheckConstraint(
            condition=(Q(user__isnull=False, group__isnull=True) | Q(user__isnull=True, group__isnull=False)),
            name="quota_is_for_a_user_or_a_group")]

    def __str__(self):
        return f"quota of {self.user or self.group}"


class QueueState(models.Model):
    """One row: whether an administrator paused the queue (running runs go on; nothing new starts)."""

    is_paused = models.BooleanField(default=False)
    reason = models.CharField(max_length=300, blank=True)
    changed_at = models.DateTimeField(auto_now=True)

    @classmethod
    def current(cls) -> "QueueState":
        state, _ = cls.objects.get_or_create(pk=1)
        return state


class LearnerPlanQuerySet(models.QuerySet):
    def of(self, config: RunConfig) -> LearnerPlanQuerySet:
        """The stored plan for ``config``, if any (a queryset of at most one)."""
        return self.filter(key_digest=_digest(memory_plan.learner_plan_key(config)))

    def for_config(self, config: RunConfig):
        """The learner's memory plan for ``config`` (``trainer.memory.memory_plan.LearnerMemory``), made once for every
        process: a GPU run's plan is a fake-tensor run of the whole model (half a minute of CPU for the
        h100x8 preset), so the launch form must not make it again in each web process, nor after a restart."""
        key = memory_plan.learner_plan_key(config)
        stored = self.filter(key_digest=_digest(key)).first()
        if stored is not None:
            return stored.learner_memory()
        started = time.monotonic()
        learner = memory_plan.cached_plan_learner(config)
        # Two processes may plan the same config at once: the same answer, stored once.
        self.get_or_create(key_digest=_digest(key), defaults={
            "key": key, "peak_bytes": learner.peak_bytes, "resident_bytes": learner.resident_bytes,
            "micro_batch_sequences": learner.micro_batch_sequences, "micro_batch_tokens": learner.micro_batch_tokens,
            "planning_seconds": time.monotonic() - started})
        return learner


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


class LearnerPlan(models.Model):
    """One learner memory plan, under the settings and code versions it was made with (its key)."""

    key_digest = models.CharField(max_length=64, unique=True, help_text="SHA-256 of the key.")
    key = models.TextField(help_text="The learner's settings and the torch, transformers and plan versions, as JSON.")
    peak_bytes = models.BigIntegerField(help_text="One rank's peak during the learner step.")
    resident_bytes = models.BigIntegerField(help_text="What the learner keeps between steps, per rank.")
    micro_batch_sequences = models.PositiveIntegerField()
    micro_batch_tokens = models.PositiveIntegerField()
    planning_seconds = models.FloatField(help_text="Wall seconds the fake-tensor run took, which every later launch saves.")
    created_at = models.DateTimeField(auto_now_add=True)

    objects = LearnerPlanQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]

    def __str__(self):
        return f"learner plan {self.key_digest[:12]}: {self.peak_bytes / 1024**3:.1f} GiB peak"

    def learner_memory(self):
        return LearnerMemory(self.peak_bytes, self.resident_bytes, self.micro_batch_sequences, self.micro_batch_tokens)
