from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponseForbidden
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from runs import actions
from runs.forms import LaunchRunForm
from runs.models import Run


def _visible_run(request, pk) -> Run:
    run = get_object_or_404(Run.objects.select_related("promptset_version__promptset", "owner"), pk=pk)
    if not run.is_visible_to(request.user):
        raise Http404("No such run")  # strangers cannot tell a private run exists
    return run


@login_required
def run_list(request):
    runs = Run.objects.visible_to(request.user).select_related("promptset_version__promptset")[:200]
    return render(request, "runs/list.html", {"runs": runs})


@login_required
def launch(request):
    form = LaunchRunForm(request.POST or None, user=request.user, initial={"preset": "cpu-demo"})
    if request.method == "POST" and form.is_valid():
        run = actions.launch_run(
            owner=request.user, name=form.cleaned_data["name"],
            promptset_version=form.cleaned_data["promptset_version"], preset=form.cleaned_data["preset"],
            overrides=form.overrides(),
        )
        messages.success(request, f"Run “{run.name}” queued.")
        return redirect(run)
    return render(request, "runs/launch.html", {"form": form})


@login_required
def detail(request, pk):
    run = _visible_run(request, pk)
    recent_attempts = list(run.proof_attempts.order_by("-pk")[:100])
    last_event = run.events.order_by("-pk").values_list("pk", flat=True).first() or 0
    return render(request, "runs/detail.html", {
        "run": run,
        "attempts": recent_attempts,
        "metrics": list(run.step_metrics.all()),
        "timeline": list(run.state_changes.all()),
        "last_event_id": last_event,
        "can_edit": run.is_editable_by(request.user),
    })


@login_required
@require_POST
def cancel(request, pk):
    run = _visible_run(request, pk)
    if not run.is_editable_by(request.user):
        return HttpResponseForbidden("Only the run's owner can cancel it.")
    if actions.cancel_run(run):
        messages.success(request, "Run cancelled; its Ray job is being stopped.")
    else:
        messages.error(request, f"The run has already ended ({run.get_state_display()}).")
    return redirect(run)


@login_required
@require_POST
def resume(request, pk):
    run = _visible_run(request, pk)
    if not run.is_editable_by(request.user):
        return HttpResponseForbidden("Only the run's owner can resume it.")
    if actions.resume_run(run):
        messages.success(request, "Run queued again; it continues from its last checkpoint.")
    else:
        messages.error(request, f"Only failed or cancelled runs can be resumed; this one is {run.get_state_display()}.")
    return redirect(run)
