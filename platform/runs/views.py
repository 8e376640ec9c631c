from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponseForbidden
from django.shortcuts import get_object_or_404, redirect, render
from django.utils import timezone
from django.views.decorators.http import require_POST

from promptsets.models import Promptset
from runs import (
    actions,
    comparison,
    evaluation_results,
    group_launch,
    launch_plan,
    live,
    queries,
    rollouts,
    run_groups,
    scheduling,
    step_phases,
    warm_start,
)
from runs.checkpoint_files import download_response, folder_size
from runs.forms import LaunchRunForm
from runs.models import FINAL_STATES, QueueState, Run, RunKind, RunState
from trainer.verification.verdicts import Turn, Verdict

RUNS_LISTED = 200
RUNS_COMPARED = 6


def _visible_run(request, pk) -> Run:
    run = get_object_or_404(Run.objects.select_related("promptset_version__promptset", "owner"), pk=pk)
    if not run.is_visible_to(request.user):
        raise Http404("No such run")  # strangers cannot tell a private run exists
    return run


def _listed_runs(request):
    runs = queries.filter_runs(
        Run.objects.visible_to(request.user).select_related("promptset_version__promptset"),
        state=request.GET.get("state", ""), search=request.GET.get("q", ""), sort=request.GET.get("sort", ""),
    )
    return list(runs[:RUNS_LISTED])


@login_required
def run_list(request):
    summaries = queries.run_summaries(_listed_runs(request))
    return render(request, "runs/list.html", {
        "summaries": summaries,
        # With no run yet, the empty list points to the next step: launching, where a promptset exists already.
        "promptset_count": 0 if summaries else Promptset.objects.visible_to(request.user).count(),
        "states": RunState.choices,
        "state": request.GET.get("state", ""),
        "q": request.GET.get("q", ""),
        "sort": request.GET.get("sort", "") or queries.DEFAULT_SORT,
        "sort_columns": [("name", "Name"), ("state", "State"), ("preset", "Preset"), ("step", "Step"),
                         ("created", "Created")],
        # The live refresh asks the API for the same rows the page shows.
        "list_query": {key: request.GET.get(key, "") for key in ("state", "q", "sort")},
        "queue": scheduling.queue_of(request.user),
        "queue_length": scheduling.waiting().count(),
        "queue_state": QueueState.current(),
    })


@login_required
def launch(request):
    form = LaunchRunForm(request.POST or None, user=request.user)
    if request.method == "POST" and form.is_valid():
        try:
            if isinstance(form.launch_request, group_launch.GroupRequest):
                launched = actions.launch_group(owner=request.user, request=form.launch_request)
                messages.success(request, f"Group “{launched.name}” queued: {launched.runs.count()} runs.")
            else:
                launched = actions.launch_run(owner=request.user, request=form.launch_request)
                messages.success(request, f"Run “{launched.name}” queued.")
        except actions.LaunchError as error:
            form.add_launch_error(error)
        else:
            return redirect(launched)
    presets = launch_plan.preset_pages()
    return render(request, "runs/launch.html", {"form": form, "warm_start": warm_start.status(), "presets": presets,
                                                "preset": presets[form.chosen_preset]})


@login_required
def detail(request, pk):
    run = _visible_run(request, pk)
    is_rl = run.kind == RunKind.RL
    has_rollouts = run.kind != RunKind.SFT  # an evaluation's samples are rollouts too
    filters, attempts, next_before = rollouts.page(run, request.GET)  # the proofs app's (runs/rollouts.py)
    if not has_rollouts:
        attempts, next_before = [], None  # an SFT run has no rollouts: no viewer, no filters
    pass_at_k = evaluation_results.latest_evaluation_report(run) if run.kind == RunKind.EVAL else None
    other = None
    if request.GET.get("diff", "").isdigit():
        other = Run.objects.visible_to(request.user).filter(pk=int(request.GET["diff"])).first()
    # Read the last event number before anything else: the WebSocket resends what came after it,
    # so an event stored while this page renders is delivered, not lost.
    last_event_number = queries.last_event_number(run.pk)
    clock = queries.run_clocks([run])[run.pk]
    now = timezone.now()
    checkpoints = queries.checkpoints(run)
    return render(request, "runs/detail.html", {
        "run": run,
        "is_rl": is_rl,
        "has_rollouts": has_rollouts,
        "pass_at_k": pass_at_k,
        "pass_at_k_chart": evaluation_results.curve_chart(pass_at_k),
        "run_context": {"runId": run.pk, "kind": run.kind, "lastEventNumber": last_event_number, "state": run.state,
                        **_card_labels(),
                        **step_phases.page_labels(),
                        "answerMarks": live.ANSWER_MARKS,
                        "filtersAreActive": bool(has_rollouts and filters.is_valid() and filters.active_filters()),
                        "clock": {"trainedS": clock.trained_s, "serverNow": now.timestamp(),
                                  "runningSince": clock.running_since.timestamp() if clock.running_since else None}},
        "filters": filters,
        "filters_are_invalid": has_rollouts and not filters.is_valid(),
        "attempts": attempts,
        "next_before": next_before,
        "series": queries.metric_series(run),
        "logs": queries.log_lines(run),
        "timeline": list(run.state_changes.all()),
        "attempts_shown": run.attempts_shown(),
        "checkpoints": checkpoints,
        "total_steps": clock.total_steps,
        "evaluation_schedule": queries.evaluation_schedule(run, clock.total_steps) if is_rl else "",
        "tracking_links": queries.tracking_links(run),
        "disk_used_bytes": folder_size(run.artifacts_dir),
        "ray_dashboard_url": queries.ray_dashboard_url(run),
        "staleness_bound": step_phases.staleness_bound(run.public_config),
        "step_phases": step_phases.STEP_PHASES,
        "before_any_step": step_phases.BEFORE_ANY_STEP,
        "config_rows": sorted(queries.flatten(run.public_config).items()),
        "compute_precision": queries.compute_precision(run),
        "requested_dtype": (run.public_config.get("model") or {}).get("dtype", ""),
        "rollout_engine": queries.rollout_engine(run),
        "requested_engine": run.public_config.get("rollout") or {},
        "other": other,
        "config_diff": queries.run_differences(run, other) if other else None,
        "other_runs": list(Run.objects.visible_to(request.user).exclude(pk=run.pk).values("pk", "name")[:100]),
        "elapsed_s": clock.elapsed_s(now),
        "resume_step": getattr(run.resume_checkpoint(), "step", None),
        "can_edit": run.is_editable_by(request.user),
        "dead_letters": queries.dead_letter_count(run),
    }, status=400 if has_rollouts and not filters.is_valid() else 200)


@login_required
def compare(request):
    """Runs and groups side by side: a line per run, or per group its seeds' mean and band; the configuration fields
    that differ; the evaluations; the noise verdict between groups. Everything the page shows comes from its URL."""
    return render(request, "runs/compare.html", comparison.page(request.user, request.GET))


@login_required
def group(request, pk):
    """A run group: its cells, each run's state, cancel all, another seed, the comparison and the export."""
    run_group = get_object_or_404(run_groups.visible_groups(request.user), pk=pk)
    return render(request, "runs/group.html", {
        "group": run_group, "cells": run_groups.cells(run_group), "can_edit": run_group.is_editable_by(request.user),
        "is_active": run_group.runs.exclude(state__in=FINAL_STATES).exists(),
    })


@login_required
@require_POST
def cancel_group(request, pk):
    run_group = get_object_or_404(run_groups.visible_groups(request.user), pk=pk)
    if not run_group.is_editable_by(request.user):
        return HttpResponseForbidden("Only the group's owner can cancel it.")
    cancelled = actions.cancel_group(run_group)
    messages.success(request, f"{cancelled} run{'s' if cancelled != 1 else ''} cancelled.")
    return redirect(run_group)


@login_required
@require_POST
def add_group_seed(request, pk):
    run_group = get_object_or_404(run_groups.visible_groups(request.user), pk=pk)
    if not run_group.is_editable_by(request.user):
        return HttpResponseForbidden("Only the group's owner can launch its seeds.")
    try:
        added = actions.launch_another_seed(run_group)
    except actions.LaunchError as error:
        messages.error(request, f"No seed was added: {error}; " + "; ".join(
            message for messages_ in error.field_errors.values() for message in messages_))
    else:
        messages.success(request, f"Another seed queued: {len(added)} run{'s' if len(added) != 1 else ''}.")
    return redirect(run_group)


@login_required
def download_checkpoint(request, pk, step, part):
    return download_response(_visible_run(request, pk), step, part)


@login_required
@require_POST
def cancel(request, pk):
    run = _visible_run(request, pk)
    if not run.is_editable_by(request.user):
        return HttpResponseForbidden("Only the run's owner can cancel it.")
    if actions.cancel_run(run):
        if run.ray_job_id:
            messages.success(request, f"Run cancelled; its Ray job {run.ray_job_id} is being stopped.")
        else:
            messages.success(request, "Run cancelled before it reached the cluster; nothing was running.")
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
        last = run.resume_checkpoint()
        if last is None:
            messages.success(request, "Run queued again. It saved no checkpoint, so it starts again from step 0.")
        else:
            messages.success(request, f"Run queued again; it continues from its checkpoint at step {last.step}.")
    else:
        messages.error(request, f"Only failed or cancelled runs can be resumed; this one is {run.get_state_display()}.")
    return redirect(run)


def _card_labels() -> dict:
    """A live card's labels: the trainer's one list of each, never a copy in JavaScript."""
    return {"verdictLabels": {verdict.value: verdict.label for verdict in Verdict},
            "turnLabels": {turn.value: turn.label for turn in Turn}}


@login_required
def live_rollout(request, pk, rollout_key):
    """One answer followed from its first streamed piece: "being written" until it is stored, then, in place, the
    stored rollout; opened once stored, its proof attempt's page. 404 once it is neither being written nor stored
    (an evaluation answer, forgotten)."""
    run = _visible_run(request, pk)
    # The last event number before looking for the stored rollout: one stored in between comes over the socket.
    last_event_number = queries.last_event_number(run.pk)
    attempt_id, is_stored = queries.stored_attempt(run.pk, rollout_key)
    if attempt_id is not None:
        return redirect("proofs:detail", attempt_id)
    answer = None if is_stored else next(
        (a for a in live.writing_now(run, lambda keys: []) if a["rollout_key"] == rollout_key), None)
    if answer is None and not is_stored:
        raise Http404("No answer with this key is being written or stored in this run")
    return render(request, "runs/live_rollout.html", {
        "run": run, "rollout_key": rollout_key, "answer": answer, "is_stored": is_stored,
        "run_context": {"runId": run.pk, "rolloutKey": rollout_key, "lastEventNumber": last_event_number,
                        "answerMarks": live.ANSWER_MARKS, **_card_labels()},
    })
