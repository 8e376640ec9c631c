"""Benchmarks: the promptsets evaluations are compared on, and the figures their papers published.

miniF2F test and valid, PutnamBench and ProofNet valid and test ship with the platform (the files in
benchmark_data/, with their licences and sources in its README, committed because a clone elsewhere
has no ../shared/data): ``create_shipped_benchmarks`` imports them through the upload path, so they
are validated like any file, as public promptsets of a system account that nobody signs in as, so
nobody may curate them. A person may mark a version of their own as a benchmark (``mark_as_benchmark``).

The published figures are quoted, never measured here: every page and answer that shows one says
so (``REFERENCE_LABEL``). A figure is only comparable with its conditions, so each says them: the
benchmark's version, Lean's and Mathlib's, the budget (pass@k, rounds, tokens) and how strict its
verifier was; what its source does not state reads ``NOT_STATED``, never a guess.
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

MEASURED_HERE_LABEL = "measured here"
NOT_STATED = "not stated by the source"
# How strict a verifier was, in the words every leaderboard row uses.
COMPILE_ONLY = "compile only"
STATEMENT_AND_AXIOM_GUARD = "with the statement and axiom guard"

MINIF2F_TEST = "minif2f-test"
MINIF2F_VALID = "minif2f-valid"
PUTNAMBENCH = "putnambench"
PROOFNET_TEST = "proofnet-test"
PROOFNET_VALID = "proofnet-valid"


@dataclass(frozen=True)
class PublishedResult:
    """One figure a paper, release or leaderboard reports, as they measured it, with its conditions.

    ``pass_at_k`` is a share of the problems; a source that counts problems solved instead (PutnamBench's
    leaderboard) gives ``problems_solved`` and leaves the share None, since the benchmark's size changed.
    """

    model: str
    metric: str
    k: int | None  # None: the budget is not a number of samples (a tree search); ``rounds`` says what it was
    pass_at_k: float | None
    with_error_correction: bool
    source: str
    problems_solved: int | None = None
    benchmark_version: str = NOT_STATED
    lean_version: str = NOT_STATED
    mathlib_version: str = NOT_STATED
    rounds: str = NOT_STATED  # attempts per sample: one, or with rounds of correction, or a search
    max_tokens: str = NOT_STATED
    verifier: str = NOT_STATED

    def as_dict(self) -> dict:
        return {**asdict(self), "label": REFERENCE_LABEL}


_KIMINA_BLOG = "https://huggingface.co/blog/AI-MO/kimina-prover-rl"
_PUTNAMBENCH_LEADERBOARD = "https://trishullab.github.io/PutnamBench/leaderboard.html"
# The range: the Lean 4 benchmark counted 644 to 660 problems while these were reported (672 now).
_PUTNAMBENCH_THEN = "PutnamBench (Lean 4) when it had 644–660 problems; the source's row gives its own count"
_ONE_ATTEMPT = "one attempt per sample"
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
    PUTNAMBENCH: (
        PublishedResult("DeepSeek-Prover-V2-671B", "PutnamBench problems solved at pass@1024", 1024, None, False,
                        _PUTNAMBENCH_LEADERBOARD, problems_solved=47, benchmark_version=_PUTNAMBENCH_THEN,
                        rounds=_ONE_ATTEMPT),
        PublishedResult("Goedel-Prover-V2-32B", "PutnamBench problems solved at pass@184", 184, None, False,
                        _PUTNAMBENCH_LEADERBOARD, problems_solved=86, benchmark_version=_PUTNAMBENCH_THEN,
                        lean_version="Lean 4.9"),
        PublishedResult("Kimina-Prover-7B-Distill", "PutnamBench problems solved at pass@192", 192, None, False,
                        _PUTNAMBENCH_LEADERBOARD, problems_solved=10, benchmark_version=_PUTNAMBENCH_THEN),
    ),
    PROOFNET_TEST: (
        PublishedResult("BFS-Prover-V2-32B", "ProofNet-test, best-first tree search", None, 0.414, False,
                        "https://arxiv.org/abs/2509.06493", benchmark_version="ProofNet-test", rounds="step-level best-first tree search (its budget "
                        "is the search's, not a number of whole proofs)"),
        PublishedResult("OProver-32B", "ProofNet pass@32", 32, 0.332, True, "https://arxiv.org/abs/2605.17283",
                        benchmark_version="ProofNet; the abstract does not name the split (papers usually report test)",
                        rounds="multi-round repair with compiler feedback and retrieval, inside each of the 32"),
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
    ShippedBenchmark(
        PUTNAMBENCH, "PutnamBench", "putnambench.lean4.jsonl",
        "PutnamBench: 672 Putnam competition problems in Lean 4 (trishullab/PutnamBench @3c9b926, Apache-2.0), "
        "stated for Lean v4.27.0 and its Mathlib. Published figures counted 644–660 problems. Checking needs "
        "Lean 4 with Mathlib.",
    ),
    ShippedBenchmark(
        PROOFNET_TEST, "ProofNet-test", "proofnet_test.lean4.jsonl",
        "ProofNet test: 179 undergraduate textbook exercises in Lean 4 (DeepSeek-Prover-V1.5's copy, splits "
        "from zhangir-azerbayev/ProofNet, both MIT). Checking needs Lean 4 with Mathlib.",
    ),
    ShippedBenchmark(
        PROOFNET_VALID, "ProofNet-valid", "proofnet_valid.lean4.jsonl",
        "ProofNet valid: 178 undergraduate textbook exercises in Lean 4 (DeepSeek-Prover-V1.5's copy, splits "
        "from zhangir-azerbayev/ProofNet, both MIT). Checking needs Lean 4 with Mathlib.",
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

