"""The promptsets API: the same actions as the pages, the same validation as every other door."""

from __future__ import annotations

from datetime import datetime

from django.shortcuts import get_object_or_404
from ninja import Body, Field, File, Form, Router, Schema
from ninja.errors import HttpError
from ninja.files import UploadedFile
from pydantic import ValidationError

from config.api_schemas import StrictSchema, refuse_unknown_fields
from promptsets import problem_table, results, uploads, versions
from promptsets.curation import describe_rule, parse_rule
from promptsets.export import UnknownExportFormat, export_response
from promptsets.hub_import import HubSource, HubSourceError
from promptsets.intake import RECIPE_HEADER, ColumnMapping, RowLimits
from promptsets.models import Problem, Promptset, PromptsetUpload, PromptsetVersion
from promptsets.upload_contract import import_options, max_statement_chars_problem
from promptsets.validation import DEFAULT_MAX_STATEMENT_CHARS
from promptsets.views import search_problems

router = Router(tags=["promptsets"])
MAX_PAGE = 500


class VersionOut(Schema):
    id: int
    number: int
    parent_number: int | None
    rule: dict
    rule_description: str
    problem_count: int
    created_at: datetime


class PromptsetOut(Schema):
    id: int
    name: str
    description: str
    owner: str
    is_public: bool
    created_at: datetime
    versions: list[VersionOut]


class ProblemOut(Schema):
    id: int
    position: int
    copies: int
    problem_key: str
    name: str
    formal_statement: str
    informal_statement: str
    header: str
    source: str
    source_win_rate: float | None
    attempts: int = Field(description="Scored first attempts at the statement in the runs you can see.")
    solves: int = Field(description="Of those, the ones accepted.")
    solve_rate: float | None = Field(description="solves / attempts; null when never attempted (not 0).")
    last_solved_at: datetime | None = Field(description="When a group with an accepted answer was last recorded.")
    is_never_solved: bool = Field(description="Attempted, and never solved.")
    verified_by: str = Field(description="Whose verdicts the four columns count: 'lean' or 'stand-in', never both.")


class RunThatTriedOut(Schema):
    run_id: int
    run_name: str
    run_state: str | None = Field(description="null: the run was deleted; its history stays.")
    verified_by: str
    starting_checkpoint_id: int | None
    last_policy_version: int | None
    first_answers: int
    first_scored: int
    first_accepted: int
    first_censored: int
    first_solve_rate: float | None
    retry_answers: int
    retry_scored: int
    retry_accepted: int
    first_solved_step: int | None
    last_solved_step: int | None
    last_step: int


class SolveRatePointOut(Schema):
    step: int
    accepted: int
    scored: int
    solve_rate: float


class SolveRateSeriesOut(Schema):
    run_id: int
    run_name: str
    points: list[SolveRatePointOut]


class VerifiedProofOut(Schema):
    attempt_id: int
    rollout_key: str
    run_id: int
    run_name: str
    step: int
    round: int
    is_evaluation: bool
    verified_by: str
    url: str


class ProblemHistoryOut(Schema):
    problem_id: int
    statement_hash: str
    verified_by: str = Field(description="Whose verdicts the totals and the series count: 'lean' or 'stand-in'.")
    first_attempts_scored: int
    first_attempts_accepted: int
    solve_rate: float | None
    is_never_solved: bool
    series: list[SolveRateSeriesOut]
    runs: list[RunThatTriedOut]
    verified_proofs: list[VerifiedProofOut]


class RejectionOut(Schema):
    row: int
    line: int | None
    reason: str
    problem_key: str


class ReportOut(Schema):
    filename: str
    file_format: str
    columns: dict[str, str]
    rows_read: int
    rows_accepted: int
    rows_rejected: int
    file_error: str | None
    summary: str
    rejections: list[RejectionOut]



class RejectedOut(Schema):
    detail: str
    report: ReportOut


class DetailOut(Schema):
    detail: str


class _ImportChoicesIn(StrictSchema):
    """What every import takes, from a file or a dataset: the name and the form's choices."""

    name: str
    description: str = ""
    is_public: bool = False
    skip_invalid_rows: bool = False
    default_header: str = RECIPE_HEADER
    max_statement_chars: int = DEFAULT_MAX_STATEMENT_CHARS
    formal_statement_column: str | None = None
    informal_statement_column: str | None = None
    problem_key_column: str | None = None
    name_column: str | None = None
    header_column: str | None = None
    source_column: str | None = None
    win_rate_column: str | None = None

    def mapping(self) -> ColumnMapping:
        return ColumnMapping(
            formal_statement=self.formal_statement_column, informal_statement=self.informal_statement_column,
            problem_key=self.problem_key_column, name=self.name_column, header=self.header_column,
            source=self.source_column, win_rate=self.win_rate_column,
        )

    def options(self, file_format: str | None) -> dict:
        return import_options(
            file_format=file_format, mapping=self.mapping(), skip_invalid_rows=self.skip_invalid_rows,
            description=self.description, is_public=self.is_public, default_header=self.default_header,
            limits=_limits(self.max_statement_chars))


class UploadIn(_ImportChoicesIn):
    file_format: str | None = None


class ImportIn(_ImportChoicesIn):
    """A dataset on the Hub (``dataset``, owner/name) or a dataset folder on the server (``folder``)."""

    dataset: str | None = None
    folder: str | None = None
    config: str | None = None
    split: str = "train"
    revision: str | None = None

    def source(self) -> HubSource:
        return HubSource.from_fields(dataset=self.dataset, folder=self.folder, config=self.config, split=self.split,
                                     revision=self.revision)


def _version_out(version: PromptsetVersion) -> dict:
    return {
        "id": version.pk, "number": version.number, "parent_number": version.parent.number if version.parent else None,
        "rule": version.rule, "rule_description": describe_rule(version.rule),
        "problem_count": version.problem_count, "created_at": version.created_at,
    }


def _promptset_out(promptset: Promptset) -> dict:
    return {
        "id": promptset.pk, "name": promptset.name, "description": promptset.description,
        "owner": promptset.owner.get_username(), "is_public": promptset.is_public, "created_at": promptset.created_at,
        "versions": [_version_out(v) for v in promptset.versions.select_related("parent").order_by("number")],
    }


def _visible(request, promptset_id: int) -> Promptset:
    return get_object_or_404(Promptset.objects.visible_to(request.user).select_related("owner"), pk=promptset_id)


def _limits(max_statement_chars: int) -> RowLimits:
    problem = max_statement_chars_problem(max_statement_chars)
    if problem:
        raise HttpError(422, problem)
    return RowLimits(max_statement_chars=max_statement_chars)


@router.get("/", response=list[PromptsetOut])
def list_promptsets(request):
    return [_promptset_out(p) for p in Promptset.objects.visible_to(request.user).select_related("owner")[:MAX_PAGE]]


class UploadOut(Schema):
    id: int
    name: str
    filename: str
    source: str
    dataset: dict
    state: str
    state_label: str
    is_finished: bool
    bytes_total: int
    bytes_read: int
    rows_read: int
    failure: str
    report: dict
    promptset_id: int | None
    dry_run: bool
    status_url: str


def _upload_out(upload: PromptsetUpload) -> dict:
    return {"id": upload.pk, "name": upload.name, "filename": upload.filename, "source": upload.source,
            "dataset": upload.dataset, "state": upload.state,
            "state_label": upload.get_state_display(), "is_finished": upload.is_finished,
            "bytes_total": upload.bytes_total, "bytes_read": upload.bytes_read, "rows_read": upload.rows_read,
            "failure": upload.failure, "report": upload.report, "promptset_id": upload.promptset_id,
            "dry_run": upload.dry_run, "status_url": f"/api/promptsets/uploads/{upload.pk}"}


@router.post("/", response={202: UploadOut, 409: DetailOut, 422: RejectedOut})
def upload_promptset(request, data: Form[UploadIn], file: File[UploadedFile]):
    """Upload a file; a worker checks every row. 202 with the upload: follow ``status_url`` until it is
    imported (``promptset_id``) or rejected (``report`` lists every rejected row; nothing is stored).
    A Parquet file whose metadata already shows a row over the limit is refused at once (422)."""
    refuse_unknown_fields([*request.POST, *request.FILES], UploadIn, also=("file",))
    options = data.options(data.file_format or None)
    try:
        upload = uploads.stage_upload(request.user, data.name, file, options=options)
    except versions.PromptsetNameTaken as error:
        return 409, {"detail": str(error)}
    except versions.ImportRejected as rejected:
        return 422, {"detail": str(rejected), "report": rejected.report.as_dict()}
    return 202, _upload_out(upload)


@router.post("/imports", response={202: UploadOut, 409: DetailOut, 422: DetailOut})
def import_dataset(request, data: ImportIn):
    """Import a dataset: from the Hub by ``dataset`` (owner/name; the server must reach the Hub), or from a
    ``folder`` on the server under one of PROMPTSET_IMPORT_ROOTS, with its ``config``, ``split`` and
    ``revision``. 202 with the upload: a worker reads the split (``state`` staging, ``rows_read`` rows so
    far), then checks every row as for a file; follow ``status_url`` as for an upload. A bad name or a
    folder outside the allowed ones is refused at once (422); a dataset that cannot be read ends the upload
    rejected, its ``failure`` saying why."""
    try:
        upload = uploads.stage_dataset_import(request.user, data.name, data.source(),
                                              options=data.options(None))
    except versions.PromptsetNameTaken as error:
        return 409, {"detail": str(error)}
    except HubSourceError as error:
        return 422, {"detail": str(error)}
    return 202, _upload_out(upload)


@router.get("/uploads/{upload_id}", response=UploadOut)
def get_upload(request, upload_id: int):
    """An upload's progress (rows and bytes read) and, once finished, its promptset or its report."""
    return _upload_out(get_object_or_404(PromptsetUpload, pk=upload_id, owner=request.user))


@router.post("/validate", response={202: UploadOut, 422: RejectedOut})
def validate_promptset(request, data: Form[UploadIn], file: File[UploadedFile]):
    """A dry run: the per-row report of a file, storing no promptset (``name`` only labels it). A worker checks
    it as it checks an upload; 202 with the upload: follow ``status_url`` until ``state`` is ``checked``, then
    ``report`` holds the report. A Parquet file whose metadata already shows a row over the limit is refused at
    once (422)."""
    refuse_unknown_fields([*request.POST, *request.FILES], UploadIn, also=("file",))
    try:
        upload = uploads.stage_upload(request.user, data.name, file, options=data.options(data.file_format or None),
                                      dry_run=True)
    except versions.ImportRejected as rejected:
        return 422, {"detail": str(rejected), "report": rejected.report.as_dict()}
    return 202, _upload_out(upload)


@router.get("/{promptset_id}", response=PromptsetOut)
def get_promptset(request, promptset_id: int):
    return _promptset_out(_visible(request, promptset_id))


@router.get("/{promptset_id}/versions/{number}/problems", response={200: list[ProblemOut], 422: DetailOut})
def list_version_problems(request, promptset_id: int, number: int, q: str = "", sort: str = "position",
                          show: str = "all", offset: int = 0, limit: int = 100):
    """The version's problems with their history, as its page's table: ``sort`` one of position, attempts,
    solve_rate, last_solved (a leading '-' reverses it), ``show`` one of all, never_solved, solved, unattempted."""
    version = get_object_or_404(PromptsetVersion, promptset=_visible(request, promptset_id), number=number)
    limit = max(1, min(limit, MAX_PAGE))
    try:
        entries, verified_by = problem_table.problem_table(
            version, request.user, search=lambda rows: search_problems(rows, q), sort=sort, show=show)
    except problem_table.BadTableQuery as error:
        return 422, {"detail": str(error)}
    return 200, [
        {"id": e.problem.pk, "position": e.position, "copies": e.copies, "problem_key": e.problem.problem_key,
         "name": e.problem.name, "formal_statement": e.problem.formal_statement,
         "informal_statement": e.problem.informal_statement, "header": e.problem.header,
         "source": e.problem.source, "source_win_rate": e.problem.source_win_rate,
         **problem_table.table_row(e), "verified_by": verified_by}
        for e in entries[max(0, offset):max(0, offset) + limit]
    ]


@router.get("/{promptset_id}/problems/{problem_id}/history", response=ProblemHistoryOut)
def get_problem_history(request, promptset_id: int, problem_id: int):
    """The problem's statement's history in the runs you can see, as its page shows it: first-attempt totals and
    solve rate per run and step (one verifier's, named), the runs that tried it, its verified proofs."""
    problem = get_object_or_404(Problem, pk=problem_id, promptset=_visible(request, promptset_id))
    return {"problem_id": problem.pk, **results.problem_history(problem, request.user)}


@router.get("/{promptset_id}/versions/{number}/export.{file_format}", response={200: None, 404: DetailOut})
def export_version(request, promptset_id: int, number: int, file_format: str):
    """The version's problems as JSON Lines or Parquet, one row per problem (with its curation weight)."""
    version = get_object_or_404(PromptsetVersion, promptset=_visible(request, promptset_id), number=number)
    try:
        return export_response(version, file_format, request.user)
    except UnknownExportFormat as error:
        return 404, {"detail": str(error)}


@router.post("/{promptset_id}/versions/{number}/curate", response={201: list[VersionOut], 403: DetailOut, 422: DetailOut})
def curate_version(request, promptset_id: int, number: int, rule: Body[dict]):
    """A new version (two for a split) from this one by a rule, e.g. {"kind": "sample", "count": 100}."""
    promptset = _visible(request, promptset_id)
    if not promptset.is_editable_by(request.user):
        return 403, {"detail": "Only the promptset's owner may curate it."}
    version = get_object_or_404(PromptsetVersion, promptset=promptset, number=number)
    try:
        parsed = parse_rule(rule)
    except ValidationError as error:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in error.errors())
        return 422, {"detail": f"invalid rule ({problems}); kinds: drop_above_win_rate, weight_hard, sample, split"}
    try:
        created = versions.curate(version, parsed)
    except versions.CurationRefused as error:
        return 422, {"detail": str(error)}
    return 201, [_version_out(v) for v in created]
