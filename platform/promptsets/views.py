from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.db.models import Count, Q
from django.http import Http404
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.http import urlencode
from django.views.decorators.http import require_POST

from promptsets import benchmarks, problem_table, results, uploads, versions
from promptsets.curation import describe_rule
from promptsets.export import UnknownExportFormat, export_response
from promptsets.forms import CurationForm, HubImportForm, UploadForm, VariantsForm
from promptsets.hub_import import HubSourceError
from promptsets.lean_view import highlighted_html
from promptsets.models import Problem, Promptset, PromptsetUpload, PromptsetVersion, UploadState
from promptsets.solve_rate_chart import solve_rate_chart
from promptsets.variants import VariantsEndpoint, VariantsUnavailable, request_variants

PAGE_SIZE = 50
DEFAULT_TABLE = {"sort": "position", "show": "all"}
REPORT_ROWS_SHOWN = 1000


def _visible_promptset(request, pk) -> Promptset:
    promptset = get_object_or_404(Promptset, pk=pk)
    if not promptset.is_visible_to(request.user):
        raise Http404("No such promptset.")  # a stranger learns nothing, not even that it exists
    return promptset


def _owned_promptset(request, pk) -> Promptset:
    promptset = _visible_promptset(request, pk)
    if not promptset.is_editable_by(request.user):
        raise PermissionDenied("Only the promptset's owner may curate it.")
    return promptset


def search_problems(queryset, query: str):
    query = query.strip()
    if not query:
        return queryset
    return queryset.filter(
        Q(problem__problem_key__icontains=query) | Q(problem__name__icontains=query)
        | Q(problem__formal_statement__icontains=query) | Q(problem__informal_statement__icontains=query)
        | Q(problem__source__icontains=query)
    )


def uploaded_binary_file(uploaded):
    """A binary file object for the readers: the temporary file on disk, or the in-memory buffer."""
    if hasattr(uploaded, "temporary_file_path"):
        return open(uploaded.temporary_file_path(), "rb")
    uploaded.file.seek(0)
    return uploaded.file


@login_required
def promptset_list(request):
    query = request.GET.get("q", "").strip()
    promptsets = Promptset.objects.visible_to(request.user).select_related("owner").annotate(
        version_count=Count("versions", distinct=True),
    ).order_by("-created_at", "-pk")
    if query:
        promptsets = promptsets.filter(Q(name__icontains=query) | Q(description__icontains=query))
    page = Paginator(promptsets, PAGE_SIZE).get_page(request.GET.get("page"))
    return render(request, "promptsets/list.html", {"page": page, "query": query})


HUB_FORM_PREFIX = "hub"


def _upload_page(request, *, form=None, hub_form=None, report=None, failure=None):
    """The upload page: the file form and the Hub dataset form side by side, one of them perhaps posted."""
    return render(request, "promptsets/upload.html", {
        "form": form or UploadForm(), "hub_form": hub_form or HubImportForm(prefix=HUB_FORM_PREFIX),
        "report": report, "failure": failure,
        "rejections_shown": report.rejections[:REPORT_ROWS_SHOWN] if report else [],
    })


@login_required
def promptset_upload(request):
    form = UploadForm(request.POST or None, request.FILES or None)
    report = None
    failure = None
    if request.method == "POST" and form.is_valid():
        # The web process only stores the file (and reads a Parquet footer); a worker checks the rows.
        try:
            upload = uploads.stage_upload(request.user, form.cleaned_data["name"], form.cleaned_data["file"],
                                          options=form.import_options())
        except versions.PromptsetNameTaken as error:
            form.add_error("name", str(error))
        except versions.ImportRejected as rejected:
            report, failure = rejected.report, str(rejected)
        else:
            return redirect(upload)
    return _upload_page(request, form=form, report=report, failure=failure)


@login_required
@require_POST
def promptset_import(request):
    """A dataset from the Hub or a server folder: a worker reads it, then checks it as it does a file."""
    hub_form = HubImportForm(request.POST, prefix=HUB_FORM_PREFIX)
    if hub_form.is_valid():
        try:
            upload = uploads.stage_dataset_import(request.user, hub_form.cleaned_data["name"],
                                                  hub_form.cleaned_data["source"], options=hub_form.import_options())
        except versions.PromptsetNameTaken as error:
            hub_form.add_error("name", str(error))
        except HubSourceError as error:
            hub_form.add_error(None, str(error))
        else:
            return redirect(upload)
    return _upload_page(request, hub_form=hub_form)


@login_required
def upload_status(request, upload_pk):
    """An upload being checked (the page follows it), its report if rejected; once imported, the promptset."""
    upload = get_object_or_404(PromptsetUpload, pk=upload_pk, owner=request.user)
    if upload.state == UploadState.IMPORTED and upload.promptset_id:
        messages.success(request, f"Imported “{upload.name}”: {upload.report.get('summary', 'every row checked')}.")
        return redirect(upload.promptset)
    return render(request, "promptsets/upload_status.html", {
        "upload": upload, "report": upload.report or None, "failure": upload.failure,
        "rejections_shown": (upload.report or {}).get("rejections", [])[:REPORT_ROWS_SHOWN],
    })


def _problems_page(request, version: PromptsetVersion) -> dict:
    """The version's problems with their history, as the URL's ``q``, ``sort`` and ``show`` say; a sort or filter
    the table does not have is named on the page, and the table shown as it is by default."""
    query, sort, show = request.GET.get("q", ""), request.GET.get("sort", "position"), request.GET.get("show", "all")
    try:
        entries, verified_by = problem_table.problem_table(
            version, request.user, search=lambda rows: search_problems(rows, query), sort=sort, show=show)
        table_error = ""
    except problem_table.BadTableQuery as error:
        table_error, sort, show = str(error), "position", "all"
        entries, verified_by = problem_table.problem_table(
            version, request.user, search=lambda rows: search_problems(rows, query))
    page = Paginator(entries, PAGE_SIZE).get_page(request.GET.get("page"))
    rows = [(entry, problem_table.table_row(entry)) for entry in page.object_list]

    def link(**changes) -> str:
        state = {"q": query, "sort": sort, "show": show} | changes
        return urlencode({key: value for key, value in state.items() if value and value != DEFAULT_TABLE.get(key)})

    # A column's header sorts by it, highest first (position: first first); clicking it again reverses the order.
    sort_links = {column: "?" + link(sort=("-" + column if column != "position" else column)
                                     if sort != ("-" + column if column != "position" else column)
                                     else (column if column != "position" else "-position"))
                  for column in problem_table.SORTS}
    return {"page": page, "rows": rows, "query": query, "sort": sort, "show": show, "table_error": table_error,
            "page_query": link(), "sort_links": sort_links, "show_label": problem_table.SHOWS[show],
            "shows": problem_table.SHOWS, "table_verified_by": results.VERIFIED_BY[verified_by],
            "table_is_standins": verified_by == results.STANDIN}


def _version_context(request, promptset: Promptset, version: PromptsetVersion | None) -> dict:
    context = {"promptset": promptset, "version": version,
               "versions": promptset.versions.select_related("parent").order_by("-number"),
               "can_curate": promptset.is_editable_by(request.user), "describe_rule": describe_rule}
    if version is not None:
        context.update(_problems_page(request, version))
        context["rule_description"] = describe_rule(version.rule)
        context["curation_form"] = CurationForm()
    return context


@login_required
def promptset_detail(request, pk):
    promptset = _visible_promptset(request, pk)
    # A split's held-out eval part is never the headline: the page leads with what to train on.
    context = _version_context(request, promptset, promptset.training_version)
    context["version_rows"] = [(v, describe_rule(v.rule)) for v in context["versions"]]
    return render(request, "promptsets/detail.html", context)


@login_required
def version_detail(request, pk, number):
    promptset = _visible_promptset(request, pk)
    version = get_object_or_404(PromptsetVersion, promptset=promptset, number=number)
    context = _version_context(request, promptset, version)
    context["children"] = version.children.order_by("number")
    return render(request, "promptsets/version.html", context)


@login_required
def export_version(request, pk, number, file_format):
    version = get_object_or_404(PromptsetVersion, promptset=_visible_promptset(request, pk), number=number)
    try:
        return export_response(version, file_format, request.user)
    except UnknownExportFormat as error:
        raise Http404(str(error)) from None


@login_required
@require_POST
def mark_benchmark(request, pk, number):
    """The page's door to what ``POST /api/benchmarks/`` does: the same action, the same owner-only rule."""
    version = get_object_or_404(PromptsetVersion, promptset=_visible_promptset(request, pk), number=number)
    try:
        benchmark = benchmarks.mark_as_benchmark(version, request.user, request.POST.get("name", ""))
    except benchmarks.NotYours as error:
        raise PermissionDenied(str(error)) from None
    messages.success(request, f"{version} is the benchmark “{benchmark.name}”: evaluations on it rank on its leaderboard.")
    return redirect(version)


@login_required
@require_POST
def curate_version(request, pk, number):
    promptset = _owned_promptset(request, pk)
    version = get_object_or_404(PromptsetVersion, promptset=promptset, number=number)
    form = CurationForm(request.POST)
    if form.is_valid():
        try:
            created = versions.curate(version, form.cleaned_data["rule"])
        except versions.CurationRefused as error:
            form.add_error(None, str(error))
        else:
            if len(created) > 1:  # a split: name both parts, so the held-out one is never mistaken for the other
                made = " and ".join(f"v{new.number} ({new.part_label})" for new in created)
                messages.success(request, f"Created {made} from v{version.number}.")
            else:
                messages.success(request, f"Created v{created[0].number} from v{version.number}: "
                                          f"{describe_rule(created[0].rule)}.")
            return redirect(created[0])
    context = _version_context(request, promptset, version)
    context["curation_form"] = form
    context["children"] = version.children.order_by("number")
    return render(request, "promptsets/version.html", context, status=400)




@login_required
def problem_detail(request, pk, problem_pk):
    promptset = _visible_promptset(request, pk)
    problem = get_object_or_404(Problem, pk=problem_pk, promptset=promptset)
    history = results.problem_history(problem, request.user)
    versions = problem.versions.order_by("number")
    return render(request, "promptsets/problem.html", {
        "promptset": promptset, "problem": problem, "history": history,
        "chart": solve_rate_chart(history["series"]),
        "highlighted_header": highlighted_html(problem.header) if problem.header else "",
        "highlighted_statement": highlighted_html(problem.formal_statement),
        "win_rate_verified_by": results.VERIFIED_BY[history["verified_by"]],
        "win_rate_is_standins": history["verified_by"] == results.STANDIN,
        "versions": versions, "can_curate": promptset.is_editable_by(request.user),
        "variants_endpoint": VariantsEndpoint.configured(), "variants_form": VariantsForm(),
    })


@login_required
@require_POST
def problem_variants(request, pk, problem_pk):
    promptset = _owned_promptset(request, pk)
    problem = get_object_or_404(Problem, pk=problem_pk, promptset=promptset)
    endpoint = VariantsEndpoint.configured()
    form = VariantsForm(request.POST)
    if endpoint is None:
        messages.error(request, "No variants endpoint is configured: set PROMPTSET_VARIANTS_BASE_URL to an "
                                "OpenAI-compatible server (e.g. http://host:8000/v1).")
        return redirect(problem)
    if not form.is_valid():
        messages.error(request, "Variants: " + "; ".join(e for errors in form.errors.values() for e in errors))
        return redirect(problem)
    latest = promptset.latest_version
    try:
        statements = request_variants(endpoint, problem.formal_statement, problem.informal_statement,
                                      form.cleaned_data["count"])
        new_version, refused = versions.add_variants(latest, problem, statements, endpoint_model=endpoint.model)
    except VariantsUnavailable as error:
        messages.error(request, str(error))
        return redirect(problem)
    for reason in refused:
        messages.error(request, f"Refused {reason}")
    if new_version is None:
        messages.error(request, "No valid variant came back, so no version was made.")
        return redirect(problem)
    messages.success(request, f"Created v{new_version.number} with {len(new_version.rule['added_keys'])} variants.")
    return redirect(new_version)
