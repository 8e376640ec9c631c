"""Promptsets: uploaded problems, and the immutable versions runs point at."""

from __future__ import annotations

import hashlib

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.urls import reverse

from promptsets import results
from promptsets.hub_import import HubSource
from promptsets.lean_view import without_leading_comments


class PromptsetQuerySet(models.QuerySet):
    def visible_to(self, user):
        if not user.is_authenticated:
            return self.none()
        return self.filter(Q(owner=user) | Q(is_public=True))


class Promptset(models.Model):
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="promptsets")
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    is_public = models.BooleanField(default=False, help_text="Visible to every signed-in person.")
    created_at = models.DateTimeField(auto_now_add=True)

    objects = PromptsetQuerySet.as_manager()

    class Meta:
        ordering = ["-created_at"]
        constraints = [models.UniqueConstraint(fields=["owner", "name"], name="promptset_name_unique_per_owner")]

    def __str__(self):
        return self.name

    def get_absolute_url(self):
        return reverse("promptsets:detail", args=[self.pk])

    @property
    def latest_version(self):
        return self.versions.order_by("-number").first()

    @property
    def training_version(self):
        """The version to train on: the newest one that is not a split's held-out eval part."""
        versions = list(self.versions.order_by("-number").only("pk", "number", "rule", "problem_count", "promptset_id"))
        return next((v for v in versions if not v.is_held_out), versions[0] if versions else None)

    def is_visible_to(self, user) -> bool:
        return user.is_authenticated and (self.is_public or self.owner_id == user.pk)

    def is_editable_by(self, user) -> bool:
        """Only the owner curates: versions are what the owner's runs train on."""
        return user.is_authenticated and self.owner_id == user.pk


def statement_hash(formal_statement: str) -> str:
    """Identity of a statement regardless of whitespace layout."""
    return hashlib.sha256(" ".join(formal_statement.split()).encode()).hexdigest()


class Problem(models.Model):
    promptset = models.ForeignKey(Promptset, on_delete=models.CASCADE, related_name="problems")
    problem_key = models.CharField(max_length=300, help_text="The source's id (statement_id, uuid, name).")
    name = models.CharField(max_length=300, blank=True)
    formal_statement = models.TextField(help_text="Ends in ':= by', no proof.")
    informal_statement = models.TextField(blank=True)
    header = models.TextField(blank=True, help_text="Lean preamble (imports, open, set_option).")
    source = models.CharField(max_length=200, blank=True)
    source_win_rate = models.FloatField(null=True, blank=True, help_text="Win rate given in the uploaded file.")
    statement_hash = models.CharField(max_length=64)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["pk"]
        constraints = [
            models.UniqueConstraint(fields=["promptset", "problem_key"], name="problem_key_unique_per_promptset"),
        ]
        indexes = [models.Index(fields=["promptset", "statement_hash"])]

    def __str__(self):
        return self.name or self.problem_key

    def get_absolute_url(self):
        return reverse("promptsets:problem", args=[self.promptset_id, self.pk])

    @property
    def lean_text(self) -> str:
        """Header and statement as Lean reads them."""
        return f"{self.header}\n\n{self.formal_statement}" if self.header else self.formal_statement

    @property
    def theorem(self) -> str:
        """The statement without its leading docstring or comment, as the list of problems shows it."""
        return without_leading_comments(self.formal_statement)

    def attempt_history(self, viewer):
        """The runs ``viewer`` may see that answered this problem's statement (in any promptset), one row per run
        and verifier, newest run first, from the problem's history (proofs/history.py).

        The proofs app answers (promptsets/results.py): this app sits below it and imports nothing of it.
        """
        return results.attempt_history(self, viewer)

    def as_trainer_row(self) -> dict:
        """The row format trainer.recipe.problems.load_problems_jsonl reads."""
        return {
            "problem_id": self.problem_key,
            "name": self.name,
            "formal_statement": self.formal_statement,
            "informal_statement": self.informal_statement,
            "header": self.header,
            "source": self.source,
        }


class SplitPart(models.TextChoices):
    """The two versions a split makes (``rule["part"]``), and how every page names them."""

    TRAIN = "train", "train part"
    EVAL = "eval", "held-out eval part"


class PromptsetVersionQuerySet(models.QuerySet):
    def with_held_out(self):
        """Annotated with ``held_out``: whether a version is a split's eval part (``is_held_out``, in SQL)."""
        return self.annotate(held_out=models.Case(
            models.When(rule__kind="split", rule__part=SplitPart.EVAL.value, then=models.Value(True)),
            default=models.Value(False), output_field=models.BooleanField()))


class PromptsetVersion(models.Model):
    """Immutable once created: runs point at a version, never at something that can change under them."""

    promptset = models.ForeignKey(Promptset, on_delete=models.CASCADE, related_name="versions")
    number = models.PositiveIntegerField()
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.PROTECT, related_name="children")
    rule = models.JSONField(default=dict, blank=True, help_text="The curation rule that made it from its parent.")
    problems = models.ManyToManyField(Problem, through="VersionProblem", related_name="versions")
    problem_count = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    objects = PromptsetVersionQuerySet.as_manager()

    class Meta:
        ordering = ["promptset", "-number"]
        constraints = [models.UniqueConstraint(fields=["promptset", "number"], name="version_number_unique")]

    def __str__(self):
        return f"{self.promptset.name} v{self.number}" + (f" ({self.part_label})" if self.part else "")

    @property
    def part(self) -> SplitPart | str:
        """The SplitPart of a version made by a split; empty otherwise."""
        return SplitPart(self.rule["part"]) if self.rule.get("kind") == "split" else ""

    @property
    def part_label(self) -> str:
        return self.part.label if self.part else ""

    @property
    def is_held_out(self) -> bool:
        """The evaluation part of a split: never what a run should train on by default."""
        return self.part == SplitPart.EVAL

    def get_absolute_url(self):
        return reverse("promptsets:version", args=[self.promptset_id, self.number])

    def trainer_rows(self):
        """Problems in order, each repeated by its weight, in the trainer's row format."""
        for entry in self.entries.select_related("problem").order_by("position"):
            row = entry.problem.as_trainer_row()
            for _ in range(entry.copies):
                yield row


class VersionProblem(models.Model):
    version = models.ForeignKey(PromptsetVersion, on_delete=models.CASCADE, related_name="entries")
    problem = models.ForeignKey(Problem, on_delete=models.PROTECT, related_name="entries")
    position = models.PositiveIntegerField()
    copies = models.PositiveIntegerField(default=1, help_text="Duplication weight set by curation.")

    class Meta:
        ordering = ["position"]
        constraints = [models.UniqueConstraint(fields=["version", "problem"], name="problem_once_per_version")]


class UploadState(models.TextChoices):
    PENDING = "pending", "Waiting for a worker"
    STAGING = "staging", "Reading the dataset"
    CHECKING = "checking", "Checking every row"
    IMPORTED = "imported", "Imported"
    REJECTED = "rejected", "Rejected"
    CHECKED = "checked", "Checked (a dry run: nothing imported)"


# A worker is at these; it writes its progress (rows_read, updated_at) as it goes.
WORKING_STATES = (UploadState.STAGING, UploadState.CHECKING)


class UploadSource(models.TextChoices):
    FILE = "file", "An uploaded file"
    HUB = "hub", "A dataset on the Hugging Face Hub"
    FOLDER = "folder", "A dataset folder on the server"


class PromptsetUpload(models.Model):
    """An uploaded file, or a dataset to read, on its way to becoming a promptset: parsed by a Celery task,
    never the web process.

    A dataset (``source`` hub or folder, ``dataset`` holding hub_import.HubSource's fields) is first
    written by the task to ``staged_path`` as JSON Lines (state ``staging``, ``rows_read`` counting
    the rows staged), then checked like a file. The page of an upload follows ``rows_read`` and
    ``bytes_read``; a rejected upload keeps its report (the rejected rows) and stores no promptset.
    A ``dry_run`` upload (the API's validate) is checked and reported, never imported. ``updated_at`` moves
    with every write of the worker: an upload at work whose ``updated_at`` stopped is one whose worker died
    (uploads.end_stalled_uploads ends it).
    """

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="promptset_uploads")
    name = models.CharField(max_length=200)
    filename = models.CharField(max_length=300, help_text="The uploaded file's name, or the dataset described.")
    source = models.CharField(max_length=8, choices=UploadSource.choices, default=UploadSource.FILE)
    dataset = models.JSONField(default=dict, blank=True,
                               help_text="The dataset's name or folder, config, split and revision; empty for a file.")
    staged_path = models.CharField(max_length=1000, help_text="The file on the artifact volume until it is checked.")
    options = models.JSONField(default=dict, help_text="The form's choices: format, mapping, limits, header, …")
    state = models.CharField(max_length=16, choices=UploadState.choices, default=UploadState.PENDING)
    bytes_total = models.BigIntegerField(default=0)
    bytes_read = models.BigIntegerField(default=0)
    rows_read = models.PositiveIntegerField(default=0)
    failure = models.TextField(blank=True)
    report = models.JSONField(default=dict, blank=True)
    peak_memory_bytes = models.BigIntegerField(null=True, blank=True, help_text="Of the child process that read the file.")
    promptset = models.ForeignKey(Promptset, null=True, blank=True, on_delete=models.SET_NULL, related_name="uploads")
    dry_run = models.BooleanField(default=False, help_text="Checked and reported only; nothing is imported.")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True, help_text="The worker's last write: its progress, or the end.")
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at"]

    def get_absolute_url(self):
        return reverse("promptsets:upload_status", args=[self.pk])

    @property
    def is_finished(self) -> bool:
        return self.state in (UploadState.IMPORTED, UploadState.REJECTED, UploadState.CHECKED)

    def hub_source(self):
        """The dataset to stage (a promptsets.hub_import.HubSource), or None for an uploaded file."""
        return HubSource(**self.dataset) if self.source != UploadSource.FILE else None


class BenchmarkQuerySet(models.QuerySet):
    def visible_to(self, user):
        return self.filter(version__promptset__in=Promptset.objects.visible_to(user))


class Benchmark(models.Model):
    """A promptset version that evaluations are compared on, problem by problem and against published figures.

    The shipped ones (miniF2F test and valid, promptsets/benchmarks.py) belong to a system account nobody
    signs in as, so they are public and read-only; a person may mark a version of their own as one.
    ``reference_key`` names the published figures (promptsets/benchmarks.PUBLISHED_REFERENCES) a
    benchmark is compared with; a person's own benchmark has none.
    """

    version = models.OneToOneField(PromptsetVersion, on_delete=models.CASCADE, related_name="benchmark")
    name = models.CharField(max_length=200)
    reference_key = models.CharField(max_length=64, blank=True,
                                     help_text="The published figures it is compared with; blank: none.")
    is_shipped = models.BooleanField(default=False, help_text="Ships with the platform (read-only).")
    created_at = models.DateTimeField(auto_now_add=True)

    objects = BenchmarkQuerySet.as_manager()

    class Meta:
        ordering = ["-is_shipped", "name"]

    def __str__(self):
        return self.name
