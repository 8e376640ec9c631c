"""Expert-iteration pipelines: prove, harvest, fine-tune, reinforce, evaluate, again.

A pipeline is a state machine stored here, never a loop in a process: each stage is a run the platform
already knows (evaluation, SFT, RL), and ``pipelines.advance.advance`` moves the pipeline on when a stage's
run ends (a Celery task sent on the run's state change, and the sweeper's every pass). So a restarted
worker or platform continues it from the database alone.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.urls import reverse

from promptsets.results import LEAN, STANDIN, VERIFIED_BY


class PipelineState(models.TextChoices):
    RUNNING = "running", "Running"
    SUCCEEDED = "succeeded", "Succeeded"
    FAILED = "failed", "Failed (a stage can be retried)"
    CANCELLED = "cancelled", "Cancelled"


class Stage(models.TextChoices):
    """An iteration's stages, in the order they run."""

    HARVEST = "harvest", "1. Harvest (evaluation on the training promptset)"
    CORPUS = "corpus", "2. Proof corpus"
    SFT = "sft", "3. SFT on the corpus"
    RL = "rl", "4. RL on what is still unsolved"
    BENCHMARK = "benchmark", "5. Evaluation on the held-out benchmark"
    DONE = "done", "Done"


STAGE_ORDER = [Stage.HARVEST, Stage.CORPUS, Stage.SFT, Stage.RL, Stage.BENCHMARK, Stage.DONE]
# The stages that are runs, and the iteration's field that holds each one's run.
RUN_OF_STAGE = {Stage.HARVEST: "harvest_run", Stage.SFT: "sft_run", Stage.RL: "rl_run", Stage.BENCHMARK: "benchmark_run"}


class SftStart(models.TextChoices):
    BASE = "base", "From the starting model, each iteration (BFS-Prover-V2's rebuild)"
    LAST = "last", "From the last iteration's RL model"


class VerifiedBy(models.TextChoices):
    # The one home of the two verifier names is promptsets.results; these are its choices.
    LEAN_VERDICTS = LEAN, VERIFIED_BY[LEAN]
    STANDIN_VERDICTS = STANDIN, VERIFIED_BY[STANDIN]


class PipelineQuerySet(models.QuerySet):
    def visible_to(self, user):
        if not user.is_authenticated:
            return self.none()
        return self.filter(owner=user)


class Pipeline(models.Model):
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="pipelines")
    name = models.CharField(max_length=200)
    preset = models.CharField(max_length=64, help_text="Every stage's run uses this preset (its bounds apply).")
    model = models.CharField(max_length=100, blank=True, help_text="A registered model's name; blank: the preset's.")
    starting_checkpoint = models.ForeignKey(
        "runs.Checkpoint", null=True, blank=True, on_delete=models.PROTECT, related_name="started_pipelines",
        help_text="A checkpoint to start from instead of the model.")
    training_version = models.ForeignKey("promptsets.PromptsetVersion", on_delete=models.PROTECT,
                                         related_name="training_pipelines")
    benchmark_version = models.ForeignKey(
        "promptsets.PromptsetVersion", on_delete=models.PROTECT, related_name="benchmark_pipelines",
        help_text="The held-out benchmark: evaluated after each iteration; its statements never enter the corpus.")
    harvest_samples = models.PositiveIntegerField(help_text="Samples per problem when harvesting (eval_samples).")
    benchmark_samples = models.PositiveIntegerField(help_text="Samples per benchmark problem: its pass@k's k.")
    harvest_error_correction = models.BooleanField(
        default=False, help_text="Harvest with rounds of correction (a repaired proof is a proof too).")
    sft_fields = models.JSONField(default=dict, blank=True, help_text="Launch fields of every SFT stage's run.")
    rl_fields = models.JSONField(default=dict, blank=True, help_text="Launch fields of every RL stage's run.")
    sft_start = models.CharField(max_length=8, choices=SftStart.choices, default=SftStart.LAST)
    rl_max_win_rate = models.FloatField(
        default=0.5, help_text="RL trains on the problems whose win rate on this platform is at most this (unsolved or "
                               "rarely solved), the curation rule drop_above_win_rate.")
    max_iterations = models.PositiveIntegerField()
    min_gain = models.PositiveIntegerField(
        help_text="δ: the pipeline stops when the benchmark gains fewer problems than this for two iterations running.")
    verified_by = models.CharField(
        max_length=16, choices=VerifiedBy.choices, blank=True,
        help_text="Whose verdicts count as proofs, fixed by the first harvest and never mixed: real Lean's, or "
                  "(where no Lean runs, as on every development machine) the stand-in server's, labelled so.")
    state = models.CharField(max_length=16, choices=PipelineState.choices, default=PipelineState.RUNNING, db_index=True)
    failure_reason = models.TextField(blank=True)
    stop_reason = models.CharField(max_length=300, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    objects = PipelineQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]

    def __str__(self):
        return f"{self.name} ({self.state})"

    def get_absolute_url(self):
        return reverse("pipelines:detail", args=[self.pk])

    @property
    def is_standin(self) -> bool:
        return self.verified_by == STANDIN

    @property
    def current_iteration(self) -> "Iteration | None":
        return self.iterations.order_by("-number").first()

    def can_retry(self) -> bool:
        return self.state == PipelineState.FAILED

    def can_cancel(self) -> bool:
        return self.state == PipelineState.RUNNING

    @property
    def artifacts_dir(self):
        return settings.ARTIFACTS_DIR / "pipelines" / str(self.pk)


class ProofCorpus(models.Model):
    """One immutable version of a pipeline's proof corpus: the previous version plus an iteration's new proofs."""

    pipeline = models.ForeignKey(Pipeline, on_delete=models.CASCADE, related_name="corpora")
    number = models.PositiveIntegerField(help_text="The iteration that made it.")
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.PROTECT, related_name="children")
    harvest_run = models.ForeignKey("runs.Run", on_delete=models.PROTECT, related_name="harvested_corpora")
    verified_by = models.CharField(max_length=16, choices=VerifiedBy.choices)
    proof_count = models.PositiveIntegerField(default=0)
    added_count = models.PositiveIntegerField(default=0, help_text="New proofs this iteration (after deduplication).")
    duplicate_count = models.PositiveIntegerField(default=0, help_text="Accepted proofs already in the corpus.")
    refused_count = models.PositiveIntegerField(
        default=0, help_text="Accepted proofs refused because their statement is one of the held-out benchmark's.")
    refused_keys = models.JSONField(default=list, blank=True, help_text="The problem keys refused, for the page.")
    path = models.CharField(max_length=1000, help_text="The demonstrations file the SFT run reads.")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["pipeline", "number"]
        constraints = [models.UniqueConstraint(fields=["pipeline", "number"], name="one_corpus_per_iteration")]

    def __str__(self):
        return f"corpus v{self.number} of pipeline {self.pipeline_id} ({self.proof_count} proofs)"


class CorpusProof(models.Model):
    """One demonstration of a corpus version: a Lean-accepted answer, in the release's answer format."""

    corpus = models.ForeignKey(ProofCorpus, on_delete=models.CASCADE, related_name="proofs")
    proof_attempt = models.ForeignKey("proofs.ProofAttempt", null=True, blank=True, on_delete=models.SET_NULL,
                                      related_name="+")
    problem_key = models.CharField(max_length=300)
    statement_hash = models.CharField(max_length=64)
    proof_hash = models.CharField(max_length=64, help_text="SHA-256 of the whitespace-normalised Lean proof: the "
                                                           "deduplication key, with the statement.")
    row = models.JSONField(help_text="The demonstrations row (trainer.sft.training.load_demonstrations reads it).")

    class Meta:
        ordering = ["pk"]
        constraints = [models.UniqueConstraint(fields=["corpus", "statement_hash", "proof_hash"],
                                               name="one_proof_text_per_statement_per_corpus")]


class IterationQuerySet(models.QuerySet):
    def holding(self, run) -> "IterationQuerySet":
        """The iterations one of whose stages ``run`` is."""
        condition = models.Q()
        for field in RUN_OF_STAGE.values():
            condition |= models.Q(**{field: run})
        return self.filter(condition)


class Iteration(models.Model):
    pipeline = models.ForeignKey(Pipeline, on_delete=models.CASCADE, related_name="iterations")
    number = models.PositiveIntegerField()
    stage = models.CharField(max_length=16, choices=Stage.choices, default=Stage.HARVEST)
    harvest_run = models.ForeignKey("runs.Run", null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    corpus = models.ForeignKey(ProofCorpus, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    sft_run = models.ForeignKey("runs.Run", null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    rl_version = models.ForeignKey("promptsets.PromptsetVersion", null=True, blank=True, on_delete=models.PROTECT,
                                   related_name="+", help_text="The curated promptset version RL trained on.")
    rl_run = models.ForeignKey("runs.Run", null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    benchmark_run = models.ForeignKey("runs.Run", null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    proofs_harvested = models.PositiveIntegerField(null=True, blank=True,
                                                   help_text="Accepted proofs in the harvest (before deduplication).")
    problems_unsolved = models.PositiveIntegerField(null=True, blank=True,
                                                    help_text="Training problems the corpus has no proof of.")
    benchmark_solved = models.PositiveIntegerField(null=True, blank=True,
                                                   help_text="Benchmark problems with an accepted sample (pass@k).")
    benchmark_problems = models.PositiveIntegerField(null=True, blank=True)
    benchmark_k = models.PositiveIntegerField(null=True, blank=True)
    plateau_verdict = models.CharField(max_length=300, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = IterationQuerySet.as_manager()

    class Meta:
        ordering = ["pipeline", "number"]
        constraints = [models.UniqueConstraint(fields=["pipeline", "number"], name="one_iteration_per_number")]

    def __str__(self):
        return f"iteration {self.number} of pipeline {self.pipeline_id}"

    def run_of(self, stage: Stage):
        field = RUN_OF_STAGE.get(Stage(stage))
        return getattr(self, field) if field else None

    @property
    def benchmark_pass_rate(self) -> float | None:
        """pass@k on the benchmark; None (not measured) until its evaluation is read."""
        if self.benchmark_solved is None or not self.benchmark_problems:
            return None
        return self.benchmark_solved / self.benchmark_problems


class PipelineEvent(models.Model):
    """The pipeline's timeline: each stage started, ended, retried; why it stopped."""

    pipeline = models.ForeignKey(Pipeline, on_delete=models.CASCADE, related_name="events")
    iteration = models.PositiveIntegerField(null=True, blank=True)
    stage = models.CharField(max_length=16, choices=Stage.choices, blank=True)
    message = models.TextField()
    at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["at", "pk"]
