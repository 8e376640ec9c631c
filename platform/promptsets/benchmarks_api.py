"""``/api/benchmarks/``: the benchmarks a person may see, each with the figures its papers published."""

from __future__ import annotations

from django.shortcuts import get_object_or_404
from ninja import Router, Schema
from ninja.errors import HttpError

from config.api_schemas import StrictSchema
from promptsets import benchmarks
from promptsets.models import Promptset, PromptsetVersion

router = Router(tags=["benchmarks"])


class ReferenceOut(Schema):
    model: str
    metric: str
    k: int | None
    pass_at_k: float | None  # None where the source counts problems solved instead
    with_error_correction: bool
    source: str
    problems_solved: int | None
    benchmark_version: str
    lean_version: str
    mathlib_version: str
    rounds: str
    max_tokens: str
    verifier: str
    label: str


class BenchmarkOut(Schema):
    id: int
    name: str
    promptset_id: int
    promptset_version_id: int
    problems: int
    is_shipped: bool
    owner: str
    references: list[ReferenceOut]


class MarkIn(StrictSchema):
    promptset_version_id: int
    name: str = ""


def _benchmark_out(benchmark) -> dict:
    version = benchmark.version
    return {
        "id": benchmark.pk, "name": benchmark.name, "promptset_id": version.promptset_id,
        "promptset_version_id": version.pk, "problems": version.problem_count, "is_shipped": benchmark.is_shipped,
        "owner": version.promptset.owner.get_username(), "references": benchmarks.references_for(benchmark),
    }


@router.get("/", response=list[BenchmarkOut])
def list_benchmarks(request):
    return [_benchmark_out(benchmark) for benchmark in
            benchmarks.visible_benchmarks(request.user).select_related("version__promptset__owner")]


@router.post("/", response={201: BenchmarkOut})
def mark_benchmark(request, payload: MarkIn):
    """Mark a version of a promptset you own as a benchmark."""
    version = get_object_or_404(PromptsetVersion.objects.select_related("promptset"), pk=payload.promptset_version_id,
                                promptset__in=Promptset.objects.visible_to(request.user))
    try:
        benchmark = benchmarks.mark_as_benchmark(version, request.user, payload.name)
    except benchmarks.NotYours as error:
        raise HttpError(403, str(error)) from None
    return 201, _benchmark_out(benchmark)
