from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from pipelines import actions, lineage, queries
from pipelines.forms import PipelineForm
from pipelines.models import Pipeline
from runs.models import Checkpoint, Run


def _visible(request, pk) -> Pipeline:
    return get_object_or_404(Pipeline.objects.visible_to(request.user).select_related(
        "training_version__promptset", "benchmark_version__promptset"), pk=pk)


@login_required
def pipeline_list(request):
    return render(request, "pipelines/list.html", {"pipelines": Pipeline.objects.visible_to(request.user)[:200]})


@login_required
def launch(request):
    form = PipelineForm(request.POST or None, user=request.user)
    if request.method == "POST" and form.is_valid():
        try:
            pipeline = actions.launch_pipeline(owner=request.user, request=form.request_data())
        except actions.LaunchError as error:
            for field, problems in error.field_errors.items():
                target = field.removesuffix("_id") if field.removesuffix("_id") in form.fields else None
                for problem in problems:
                    form.add_error(target, problem if target else f"{field}: {problem}")
            if not error.field_errors:
                form.add_error(None, str(error))
        else:
            return redirect(pipeline)
    return render(request, "pipelines/launch.html", {"form": form})


@login_required
def detail(request, pk):
    pipeline = _visible(request, pk)
    return render(request, "pipelines/detail.html", {
        "pipeline": pipeline,
        "iterations": queries.iteration_table(pipeline),
        "stages": queries.stages_of(pipeline),
        "corpora": pipeline.corpora.order_by("number"),
        "events": pipeline.events.order_by("-at", "-pk")[:100],
    })


@login_required
def lineage_page(request, pk):
    pipeline = _visible(request, pk)
    return render(request, "pipelines/lineage.html", {"pipeline": pipeline, "edges": lineage.pipeline_edges(pipeline),
                                                      "iterations": queries.iteration_table(pipeline)})


@login_required
def checkpoint(request, pk):
    found = get_object_or_404(Checkpoint.objects.filter(run__in=Run.objects.visible_to(request.user))
                              .select_related("run"), pk=pk)
    return render(request, "pipelines/checkpoint.html", {"checkpoint": found,
                                                         "chain": lineage.checkpoint_lineage(found)})


@login_required
@require_POST
def cancel(request, pk):
    pipeline = _visible(request, pk)
    if actions.cancel_pipeline(pipeline):
        messages.success(request, "Pipeline cancelled, and its current run with it.")
    else:
        messages.error(request, f"The pipeline is {pipeline.get_state_display().lower()}: nothing to cancel.")
    return redirect(pipeline)


@login_required
@require_POST
def retry(request, pk):
    pipeline = _visible(request, pk)
    if actions.retry_stage(pipeline):
        messages.success(request, "The failed stage starts again with a new run.")
    else:
        messages.error(request, f"The pipeline is {pipeline.get_state_display().lower()}: only a failed one retries.")
    return redirect(pipeline)
