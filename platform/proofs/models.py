"""Proof attempts: every rollout the trainer scored, first attempts and their retries."""

from __future__ import annotations

from django.conf import settings
from django.contrib.postgres.indexes import GinIndex
from django.contrib.postgres.search import SearchVector, SearchVectorField
from django.db import models
from django.db.models import TextField
from django.db.models.functions import Cast
from django.urls import reverse

from runs.models import Run
from trainer.observability import token_records
from trainer.recipe import rollouts
from trainer.verification import verdicts

# The trainer's enumerations are the one list of each (trainer/verification/verdicts.py); the choices
# are built from them, names, values and labels, so the database, the admin and the pages cannot drift.
Turn = models.TextChoices("Turn", [(turn.name, (turn.value, turn.label)) for turn in verdicts.Turn],
                          module=__name__)
Verdict = models.TextChoices("Verdict", [(verdict.name, (verdict.value, verdict.label)) for verdict in verdicts.Verdict],
                             module=__name__)


# 'simple': words as written, lowercased, no stemming and no stop words: Lean's names (``Nat.succ_le``, ``omega``)
# are not English, and a search for "have" must find ``have``.
TEXT_SEARCH_CONFIG = "simple"


def searchable_text() -> SearchVector:
    """What the proof viewer's text search reads: the answer and Lean's messages."""
    return SearchVector("response", Cast("lean_messages", TextField()), config=TEXT_SEARCH_CONFIG)


# The first attempt and up to retry.max_rounds (at most 8) rounds of correction, with room to spare.
MAX_TRAJECTORY_ROUNDS = 16


class ProofAttemptQuerySet(models.QuerySet):
    def visible_to(self, user):
        return self.filter(run__in=Run.objects.visible_to(user))


class ProofAttempt(models.Model):
    run = models.ForeignKey("runs.Run", on_delete=models.CASCADE, related_name="proof_attempts")
    rollout_key = models.CharField(max_length=128)
    run_attempt = models.PositiveIntegerField(
        default=1, help_text="The run's attempt that generated it: a resumed run replays steps under new keys.")
    step = models.PositiveIntegerField(db_index=True)
    is_evaluation = models.BooleanField(
        default=False, help_text="A sample of an evaluation (an evaluation run's, or a training run's periodic one of "
                                 "this step), not a training rollout: it trained nothing.")
    problem = models.ForeignKey("promptsets.Problem", null=True, blank=True, on_delete=models.SET_NULL,
                                related_name="proof_attempts")
    problem_key = models.CharField(max_length=300, db_index=True)
    problem_name = models.CharField(max_length=300, blank=True)
    formal_statement = models.TextField(blank=True)
    turn = models.CharField(max_length=8, choices=Turn.choices, default=Turn.FIRST)
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="retries")
    parent_rollout_key = models.CharField(max_length=128, blank=True)
    round = models.PositiveSmallIntegerField(
        default=0, help_text="The round of correction (retry.max_rounds): 0 for a first attempt, 1 for its retry, 2 for "
                             "that retry's retry…")
    sample_index = models.PositiveIntegerField(default=0)
    prompt = models.TextField(blank=True)
    response = models.TextField(blank=True)
    reasoning = models.TextField(blank=True)
    lean_code = models.TextField(blank=True)
    checked_code = models.TextField(blank=True)
    format_error = models.CharField(max_length=64, blank=True, db_index=True)
    format_detail = models.TextField(blank=True, help_text="The format check's own words for why the answer failed it.")
    format_failure_lines = models.JSONField(
        default=list, blank=True, help_text="Where the format check failed: [first, last] line ranges (1-based) of the response.")
    verdict = models.CharField(max_length=16, choices=Verdict.choices, blank=True, db_index=True)
    lean_messages = models.JSONField(default=list)
    reward = models.FloatField(null=True, blank=True, help_text="None when the verdict was censored.")
    reasons = models.JSONField(default=list)
    is_censored = models.BooleanField(default=False)
    # Judged under the stand-in: its verdict is the stand-in server's or, for an answer that reached no verifier (a
    # format failure), its run's verifier is the stand-in (set by the ingester: proofs/run_rollouts.py).
    is_standin_verdict = models.BooleanField(default=False)
    num_tokens = models.PositiveIntegerField(default=0)
    is_truncated = models.BooleanField(default=False)
    generation_seconds = models.FloatField(default=0)
    verification_seconds = models.FloatField(default=0)
    sampling = models.JSONField(default=dict)
    # Stored, not computed per query: a search that checks a row (a phrase, or the newest rows first) reads its
    # words instead of parsing a long answer again (0.3 ms a row: benchmarks/viewer_page_latency.py).
    searchable = models.GeneratedField(expression=searchable_text(), output_field=SearchVectorField(), db_persist=True)
    policy_version = models.PositiveIntegerField(
        null=True, blank=True,
        help_text="The policy that wrote it: learner updates in the weights that generated it (0: the starting "
                  "weights). Empty where the trainer did not say (runs from before asynchronous RL).")
    tool_calls = models.JSONField(
        default=list, blank=True,
        help_text="The Lean checks the answer asked for inside its reasoning (rollout.lean_tool_calls), in order: "
                  "snippet, Lean's reply, verdict, and when each was asked and answered.")
    event = models.ForeignKey("runs.RunEvent", null=True, blank=True, on_delete=models.SET_NULL)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = ProofAttemptQuerySet.as_manager()

    class Meta:
        ordering = ["-pk"]
        constraints = [models.UniqueConstraint(fields=["run", "rollout_key"], name="one_attempt_per_rollout_key")]
        indexes = [
            models.Index(fields=["run", "step", "id"]),
            # A benchmark's solved matrix reads one evaluation's samples; the proof viewer filters by purpose.
            models.Index(fields=["run", "is_evaluation", "step", "id"], name="attempt_run_evaluation_step_id"),
            models.Index(fields=["run", "verdict", "id"]),
            models.Index(fields=["run", "turn", "id"]),
            models.Index(fields=["run", "problem_key", "id"]),
            # The proof viewer's filter by format error category, newest first.
            models.Index(fields=["run", "format_error", "id"], name="attempt_run_format_error_id"),
            GinIndex(fields=["searchable"], name="attempt_text_search"),
        ]

    def __str__(self):
        return f"{self.rollout_key} ({self.verdict or self.format_error})"

    def get_absolute_url(self):
        return reverse("proofs:detail", args=[self.pk])

    @property
    def format_category(self) -> str:
        """The release's name for the format error (its ``FormatError`` enum), e.g. NO_VALID_THINK_BLOCK."""
        return self.format_error.upper()

    def response_lines(self) -> list[dict]:
        """The raw answer line by line (lines end at "\n", as the format check counts them), each
        marked where the format check failed."""
        marked: set[int] = set()
        for line_range in self.format_failure_lines or []:
            if isinstance(line_range, (list, tuple)) and len(line_range) == 2 and all(isinstance(n, int) for n in line_range):
                marked.update(range(line_range[0], line_range[1] + 1))
        return [
            {"number": number, "text": text, "is_marked": number in marked}
            for number, text in enumerate(self.response.split("\n"), 1)
        ]

    def trajectory(self) -> list["ProofAttempt"]:
        """The rounds of correction this attempt belongs to, as one chain (retry.max_rounds): back through its
        parents to the first attempt, then on through the earliest retry of each round. A chain is at most
        ``MAX_TRAJECTORY_ROUNDS`` long (the trainer allows 8 rounds), so a page never walks an unbounded one."""
        chain = [self]
        while chain[0].parent_id is not None and len(chain) < MAX_TRAJECTORY_ROUNDS:
            chain.insert(0, chain[0].parent)
        while len(chain) < MAX_TRAJECTORY_ROUNDS:
            following = chain[-1].retries.order_by("pk").first()
            if following is None:
                break
            chain.append(following)
        return chain

    @property
    def group_key(self) -> str | None:
        """Its GRPO group (trainer/recipe/rollouts.py's ``group_key``): the answers to the same prompt at the same step.
        None for a key the trainer did not write (a hand-made one)."""
        try:
            return rollouts.group_key(self.rollout_key)
        except ValueError:
            return None

    def group(self) -> "ProofAttemptQuerySet":
        """Every answer of its group, itself among them."""
        if self.group_key is None:
            return ProofAttempt.objects.filter(pk=self.pk)
        return ProofAttempt.objects.filter(run_id=self.run_id, step=self.step, rollout_key__startswith=self.group_key + "-r")

    def first_lean_error(self) -> str:
        """Lean's first error in one line, or '' when Lean reported none."""
        for message in self.lean_messages or []:
            if isinstance(message, dict) and message.get("severity") == "error":
                return verdicts.lean_text_in_one_line(str(message.get("text", "")))
        return ""

    def token_records(self) -> dict | None:
        """This rollout's per-token records (trainer/observability/token_records.py), read on demand from the run's artifacts:
        one row of its step's file. None where there are none yet or for good (``look_up_token_records`` says which)."""
        return self.look_up_token_records().record

    def look_up_token_records(self) -> token_records.RolloutRecords:
        """Its records, or why there are none: still being written (its step's file is written in the background
        after the step's learner step, while the run is live) or never to be (an evaluation sample, an answer never
        trained, a step the retention removed or whose write failed, a run from before)."""
        if self.is_evaluation:
            return token_records.RolloutRecords(token_records.RecordsState.NOT_RECORDED, reason=(
                "an evaluation sample: evaluations train nothing, so they leave no token records"))
        # Only the run's current attempt writes: an earlier attempt's step that was never written never will be.
        is_being_trained = self.run.is_active and self.run_attempt == self.run.attempt
        return token_records.look_up_rollout(self.run.artifacts_dir, self.step, self.run_attempt, self.rollout_key,
                                             is_being_trained=is_being_trained)

    def updates_behind(self, trained_by_version: int | None) -> int | None:
        """How many learner updates stale this rollout was when it trained, given the policy version that trained
        it (the step's ``rollout/policy_version``); None when either side was not recorded."""
        if self.policy_version is None or not isinstance(trained_by_version, int) or isinstance(trained_by_version, bool):
            return None
        return trained_by_version - self.policy_version

    @property
    def zero_reason(self) -> str:
        """Why this attempt earned nothing (or why it was not scored), in words."""
        if self.is_censored:
            return "Censored: " + ("; ".join(self.reasons) or "the verifier could not decide") + " — not counted as wrong."
        if self.reward:
            return ""
        if self.format_error:
            return f"Format: {self.format_category}" + (f": {self.format_detail}" if self.format_detail else "")
        return "; ".join(self.reasons) or (self.get_verdict_display() if self.verdict else "")


class RetryFeedback(models.Model):
    """A failed first attempt turned into an error-correction prompt."""

    run = models.ForeignKey("runs.Run", on_delete=models.CASCADE, related_name="retry_feedback")
    parent_rollout_key = models.CharField(max_length=128)
    parent = models.ForeignKey(ProofAttempt, null=True, blank=True, on_delete=models.SET_NULL,
                               related_name="retry_feedback")
    feedback = models.TextField()
    created_step = models.PositiveIntegerField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["run", "parent_rollout_key"], name="one_retry_per_attempt")]


class ProblemHistoryQuerySet(models.QuerySet):
    def visible_to(self, user):
        """The groups of runs ``user`` may see, and of their own runs since deleted (the record outlives the run,
        and a deleted run is shared with nobody any more)."""
        if not user.is_authenticated:
            return self.none()
        return self.filter(models.Q(run_owner=user) | models.Q(run__in=Run.objects.visible_to(user).values("pk")))

    def of_statement(self, statement_hash: str):
        return self.filter(statement_hash=statement_hash)


class ProblemHistory(models.Model):
    """A problem's history, one row per group: the answers one run wrote to one formal statement at one step in
    one round, as the verifier judged them (proofs/history.py fills it and says how it is counted).

    Keyed by the statement's identity (promptsets.models.statement_hash), so one problem is one history across
    promptsets, versions and benchmarks. It holds counts, not the answers: it stays when the run's rollouts or
    artifacts are deleted, and even when the run is (``run`` keeps the id without a database constraint, and the
    run's name and owner are copied in).
    """

    statement_hash = models.CharField(max_length=64)
    run = models.ForeignKey("runs.Run", on_delete=models.DO_NOTHING, db_constraint=False, related_name="+",
                            help_text="Kept, with no constraint, after the run is deleted: the history outlives it.")
    run_name = models.CharField(max_length=200)
    run_owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    starting_checkpoint_id = models.PositiveIntegerField(
        null=True, blank=True, help_text="The checkpoint the run's policy started from (runs.Checkpoint), if any.")
    step = models.PositiveIntegerField()
    round = models.PositiveSmallIntegerField(help_text="0: first attempts; 1, 2…: rounds of correction.")
    is_evaluation = models.BooleanField(help_text="An evaluation's samples: they trained nothing.")
    is_standin = models.BooleanField(
        help_text="Judged by the stand-in Lean server, not real Lean: never pooled with Lean's in a rate.")
    answers = models.PositiveIntegerField(default=0, help_text="Answers generated, censored ones included.")
    scored = models.PositiveIntegerField(default=0, help_text="Answers with a reward: censored ones left out.")
    accepted = models.PositiveIntegerField(default=0, help_text="Scored answers Lean (or the stand-in) accepted.")
    last_policy_version = models.PositiveIntegerField(
        null=True, blank=True, help_text="The newest policy version among the answers (learner updates).")
    first_recorded_at = models.DateTimeField(auto_now_add=True)
    last_recorded_at = models.DateTimeField(auto_now=True)

    objects = ProblemHistoryQuerySet.as_manager()

    class Meta:
        constraints = [models.UniqueConstraint(
            fields=["statement_hash", "run", "step", "round", "is_evaluation", "is_standin"],
            name="one_history_row_per_group")]
        indexes = [models.Index(fields=["run", "step"], name="history_run_step")]
        verbose_name_plural = "problem histories"

    def __str__(self):
        return f"{self.statement_hash[:12]} in {self.run_name} step {self.step} round {self.round}"

    @property
    def censored(self) -> int:
        return self.answers - self.scored
