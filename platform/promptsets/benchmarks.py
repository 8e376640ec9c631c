"""Benchmarks: the promptsets evaluations are compared on, and the figures their papers published.

miniF2F test and valid ship with the platform (the files in benchmark_data/, committed because a
clone elsewhere has no ../shared/data): ``create_shipped_benchmarks`` imports them through the
upload path, so they are validated like any file, as public promptsets of a system account that
nobody signs in as, so nobody may curate them. A person may mark a version of their own as a
benchmark (``mark_as_benchmark``).

The published figures are quoted, never measured here: every page and answer that shows one says
so (``REFERENCE_LABEL``).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

from django.contrib.auth import get_user_model
from django.db import IntegrityError, transaction

from promptsets import versions
from promptsets.intake import FileCheck
from promptsets.models import Benchmark, PromptsetVersion

DATA_FOLDER = Path(__file__).resolve().parent / "benchmark_data"
# Owns the shipped benchmarks. Inactive, with no usable password: nobody signs in as it, so they are read-only.
BENCHMARK_OWNER_USERNAME = "leanrl-benchmarks"
REFERENCE_LABEL = "published, not measured here"

MINIF2F_TEST = "minif2f-test"
MINIF2F_VALID = "minif2f-valid"


@dataclass(frozen=True)
class PublishedResult:
    """One figure a paper or release reports: a model's pass@k on a benchmark, as they measured it."""

    model: str
    metric: str
    k: int
    pass_at_k: float
    with_error_correction: bool
    source: str

    def as_dict(self) -> dict:
        return {**asdict(self), "label": REFERENCE_LABEL}


_KIMINA_BLOG = "https://huggingface.co/blog/AI-MO/kimina-prover-rl"
PUBLISHED_REFERENCES: dict[str, tuple[PublishedResult, ...]] = {
    MINIF2F_TEST: (
        PublishedResult("Kimina-Prover-Distill-1.7B", "miniF2F-test pass@32", 32, 0.7295, False, _KIMINA_BLOG),
        PublishedResult("Kimina-Prover-Distill-1.7B", "miniF2F-test pass@32", 32, 0.7541, True, _KIMINA_BLOG),
        PublishedResult("Kimina-Prover-Distill-1.7B after Kimina-Prover-RL", "miniF2F-test pass@32", 32, 0.7623,
                        False, _KIMINA_BLOG),
        PublishedResult("Kimina-Prover-Distill-1.7B after Kimina-Prover-RL", "miniF2F-test pass@32", 32, 0.7787,
                        True, _KIMINA_BLOG),
        PublishedResult("Kimina-Prover-Distill-0.6B", "miniF2F-test pass@32", 32, 0.6885, False, _KIMINA_BLOG),
        PublishedResult("Kimina-Prover-Distill-0.6B after Kimina-Prover-RL", "miniF2F-test pass@32", 32, 0.7130,
                        False, _KIMINA_BLOG),
        PublishedResult("DeepSeek-Prover-V2-7B", "miniF2F-test pass@32", 32, 0.756, False,
                        "https://arxiv.org/abs/2504.21801"),
        PublishedResult("Goedel-Prover-V2-8B", "miniF2F-test pass@32", 32, 0.846, False,
                        "https://arxiv.org/abs/2508.03613"),
    ),
}


@dataclass(frozen=True)
class ShippedBenchmark:
    key: str
    name: str
    filename: str
    description: str


SHIPPED_BENCHMARKS: tuple[ShippedBenchmark, ...] = (
    ShippedBenchmark(
        MINIF2F_TEST, "miniF2F-test", "minif2f_test.goedel.jsonl",
        "miniF2F test: 244 competition problems in Lean 4 (Goedel-Prover-V2's copy, Apache-2.0, from "
        "openai/miniF2F, MIT). The benchmark the Kimina-Prover-RL, DeepSeek-Prover-V2 and Goedel-Prover-V2 "
        "papers report pass@32 on. Checking needs Lean 4 with Mathlib.",
    ),
    ShippedBenchmark(
        MINIF2F_VALID, "miniF2F-valid", "minif2f_valid.deepseek.jsonl",
        "miniF2F valid: 244 competition problems in Lean 4 (DeepSeek-Prover-V1.5's copy, MIT, from "
        "openai/miniF2F, MIT). Checking needs Lean 4 with Mathlib.",
    ),
)


def references_for(benchmark: Benchmark) -> list[dict]:
    return [reference.as_dict() for reference in PUBLISHED_REFERENCES.get(benchmark.reference_key, ())]


def benchmark_owner():
    owner, created = get_user_model().objects.get_or_create(
        username=BENCHMARK_OWNER_USERNAME, defaults={"is_active": False})
    if created:
        owner.set_unusable_password()
        owner.save(update_fields=["password"])
    return owner


def create_shipped_benchmarks() -> list[tuple[Benchmark, bool]]:
    """Import each shipped benchmark once (idempotent); returns each with whether it was created now."""
    owner = benchmark_owner()
    made = []
    for shipped in SHIPPED_BENCHMARKS:
        existing = Benchmark.objects.filter(is_shipped=True, reference_key=shipped.key).first()
        if existing is not None:
            made.append((existing, False))
            continue
        with (DATA_FOLDER / shipped.filename).open("rb") as file:
            try:
                result = versions.import_promptset(owner, shipped.name, FileCheck(file, filename=shipped.filename),
                                                   description=shipped.description, is_public=True)
            except versions.PromptsetNameTaken:  # a concurrent call imported it first
                made.append((Benchmark.objects.get(is_shipped=True, reference_key=shipped.key), False))
                continue
        benchmark, _ = Benchmark.objects.get_or_create(
            version=result.version, defaults={"name": shipped.name, "reference_key": shipped.key, "is_shipped": True})
        made.append((benchmark, True))
    return made


class NotYours(PermissionError):
    pass


def mark_as_benchmark(version: PromptsetVersion, user, name: str = "") -> Benchmark:
    """Make ``version`` (of a promptset ``user`` owns) a benchmark; marking it twice keeps the first."""
    if not version.promptset.is_editable_by(user):
        raise NotYours("only the promptset's owner may mark its versions as benchmarks")
    name = (name or str(version)).strip()[:200]
    try:
        with transaction.atomic():
            benchmark, _ = Benchmark.objects.get_or_create(version=version, defaults={"name": name})
    except IntegrityError:
        benchmark = Benchmark.objects.get(version=version)
    return benchmark


def visible_benchmarks(user):
    return (Benchmark.objects.visible_to(user)
            .select_related("version", "version__promptset"))

