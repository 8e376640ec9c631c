"""The Django admin for runs: searchable and filterable, with cancel, resume and preempt going
through the same ``runs.actions`` as the run page and the API; the model registry, quotas, the
queue's pause and run priorities (runs/scheduling.py).

What the trainer wrote (events, metrics, evaluations, the state timeline) is read-only here:
editing it would make the run page disagree with what happened.
"""

from django import forms
from django.contrib import admin, messages
from django.db import transaction

from config.read_only_admin import ReadOnlyAdmin
from runs import actions, scheduling
from runs.models import (
    Attempt,
    Checkpoint,
    DeadLetter,
    Evaluation,
    LearnerPlan,
    QueueState,
    Quota,
    RegisteredModel,
    Run,
    RunEvent,
    RunGroup,
    RunStateChange,
    StepMetrics,
)


class RunStateChangeInline(admin.TabularInline):
    model = RunStateChange
    fields = ("state", "reason", "at")
    readonly_fields = fields
    extra = 0
    can_delete = False

    def has_add_permission(self, request, obj=None):
        return False


class _SchedulesAfterSave(admin.ModelAdmin):
    """A changed limit, priority or pause may let queued runs start: schedule once it is committed."""

    def save_model(self, request, obj, form, change):
        super().save_model(request, obj, form, change)
        transaction.on_commit(scheduling.schedule_soon)

    def delete_model(self, request, obj):
        super().delete_model(request, obj)
        transaction.on_commit(scheduling.schedule_soon)


@admin.register(RegisteredModel)
class RegisteredModelAdmin(admin.ModelAdmin):
    list_display = ("name", "source", "name_or_path", "is_enabled", "description")
    list_editable = ("is_enabled",)
    search_fields = ("name", "name_or_path")


@admin.register(Quota)
class QuotaAdmin(_SchedulesAfterSave):
    list_display = ("__str__", "max_concurrent_runs", "max_gpus", "priority")


@admin.register(QueueState)
class QueueStateAdmin(_SchedulesAfterSave):
    list_display = ("is_paused", "reason", "changed_at")

    def has_add_permission(self, request):
        return not QueueState.objects.exists()

    def has_delete_permission(self, request, obj=None):
        return False


class RunAdminForm(forms.ModelForm):
    priority = forms.IntegerField(required=False, help_text="Higher leaves the queue first; blank keeps it as it is.")

    class Meta:
        model = Run
        fields = "__all__"

    def clean_priority(self):
        value = self.cleaned_data.get("priority")
        return self.instance.priority if value is None else value


@admin.register(Run)
class RunAdmin(_SchedulesAfterSave):
    form = RunAdminForm
    list_display = ("id", "name", "owner", "kind", "preset", "state", "priority", "current_step", "attempt",
                    "created_at", "queue_reason")
    list_editable = ("priority",)
    list_filter = ("state", "kind", "preset", "created_at")
    search_fields = ("name", "owner__username", "ray_job_id", "failure_reason")
    date_hierarchy = "created_at"
    list_select_related = ("owner",)
    # The configuration, state and lineage are the trainer's record of what ran: only the name, its
    # priority in the queue and who it is shared with may change. State changes go through the actions.
    readonly_fields = ("owner", "kind", "promptset_version", "preset", "config", "state", "failure_reason",
                       "queued_at", "admitted_at", "queue_reason",
                       "ray_job_id", "cluster", "code_version", "starting_checkpoint", "attempt",
                       "infrastructure_retries", "run_group", "demonstrations_path", "current_step",
                       "created_at", "started_at", "finished_at", "updated_at")
    filter_horizontal = ("shared_with",)
    inlines = [RunStateChangeInline]
    actions = ["cancel_selected", "resume_selected", "preempt"]

    def has_add_permission(self, request):
        return False  # a run is launched from the form, the API or the CLI, which validate its config

    @admin.action(description="Cancel the selected runs (stops their Ray jobs)")
    def cancel_selected(self, request, queryset):
        cancelled = [run for run in queryset if actions.cancel_run(run, reason=f"cancelled by {request.user} (admin)")]
        self._report(request, "cancelled", cancelled, queryset)

    @admin.action(description="Resume the selected runs from their last checkpoint")
    def resume_selected(self, request, queryset):
        resumed = [run for run in queryset if actions.resume_run(run)]
        self._report(request, "queued again", resumed, queryset)

    @admin.action(description="Preempt: stop with a checkpoint and queue again (resumes later)")
    def preempt(self, request, queryset):
        preempted = [run for run in queryset if actions.preempt_run(run, reason=f"preempted by {request.user} (admin)")]
        if preempted:
            self.message_user(request, f"Preempted {', '.join(run.name for run in preempted)}; each resumes from its "
                                       "last checkpoint when the queue admits it again.")
        skipped = queryset.count() - len(preempted)
        if skipped:
            self.message_user(request, f"{skipped} run(s) were not starting or running, so not preempted.",
                              messages.WARNING)

    def _report(self, request, verb, changed, queryset):
        skipped = queryset.count() - len(changed)
        if changed:
            self.message_user(request, f"{len(changed)} run(s) {verb}: {', '.join(run.name for run in changed)}.")
        if skipped:
            self.message_user(request, f"{skipped} run(s) left as they were: their state does not allow it.",
                              level=messages.WARNING)


@admin.register(RunEvent)
class RunEventAdmin(ReadOnlyAdmin):
    list_display = ("id", "run", "seq", "type", "published_at", "stored_at")
    list_filter = ("type",)
    search_fields = ("event_id", "run__name")
    list_select_related = ("run",)
    show_full_result_count = False  # counting millions of events on every page load is slow


@admin.register(StepMetrics)
class StepMetricsAdmin(ReadOnlyAdmin):
    list_display = ("run", "step")
    search_fields = ("run__name",)
    list_select_related = ("run",)


@admin.register(Evaluation)
class EvaluationAdmin(ReadOnlyAdmin):
    list_display = ("run", "step")
    search_fields = ("run__name",)
    list_select_related = ("run",)


@admin.register(Checkpoint)
class CheckpointAdmin(ReadOnlyAdmin):
    list_display = ("run", "step", "path", "created_at", "removed_at")
    search_fields = ("run__name", "path")
    list_select_related = ("run",)


@admin.register(RunGroup)
class RunGroupAdmin(ReadOnlyAdmin):
    """Seeds or a grid launched together: its shared launch fields are what its runs were launched with."""

    list_display = ("name", "owner", "created_at")
    search_fields = ("name", "owner__username")
    list_select_related = ("owner",)


@admin.register(Attempt)
class AttemptAdmin(ReadOnlyAdmin):
    """Each dispatch of a run, as the platform recorded its placement and its end."""

    list_display = ("run", "number", "ended_state", "cause", "ended_at", "retry_at")
    list_filter = ("ended_state", "cause")
    search_fields = ("run__name", "reason")
    list_select_related = ("run",)


@admin.register(RunStateChange)
class RunStateChangeAdmin(ReadOnlyAdmin):
    list_display = ("run", "state", "reason", "at")
    list_filter = ("state",)
    search_fields = ("run__name", "reason")
    list_select_related = ("run",)


@admin.register(DeadLetter)
class DeadLetterAdmin(ReadOnlyAdmin):
    """Entries the ingester could not store, with why: read them to fix the publisher that sent them."""

    list_display = ("created_at", "run", "stream_key", "entry_id", "error")
    list_filter = ("created_at",)
    search_fields = ("error", "entry_id", "run__name")
    list_select_related = ("run",)


@admin.register(LearnerPlan)
class LearnerPlanAdmin(ReadOnlyAdmin):
    """Learner memory plans the launch check made: read-only (a plan is what the code answered; a new torch,
    transformers or plan version makes new ones under a new key), but deletable: the next launch plans again."""

    list_display = ("key_digest", "peak_bytes", "resident_bytes", "micro_batch_tokens", "planning_seconds", "created_at")
    search_fields = ("key",)

    def has_delete_permission(self, request, obj=None):
        return True
