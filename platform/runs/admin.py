"""The Django admin for runs: searchable and filterable, with cancel and resume going through
the same ``runs.actions`` as the run page and the API.

What the trainer wrote (events, metrics, evaluations, the state timeline) is read-only here:
editing it would make the run page disagree with what happened.
"""

from django.contrib import admin, messages

from runs import actions
from runs.models import Checkpoint, DeadLetter, Evaluation, Run, RunEvent, RunStateChange, StepMetrics


class ReadOnlyAdmin(admin.ModelAdmin):
    """Rows written by the trainer or the ingester: viewable, never added, changed or deleted by hand."""

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


class RunStateChangeInline(admin.TabularInline):
    model = RunStateChange
    fields = ("state", "reason", "at")
    readonly_fields = fields
    extra = 0
    can_delete = False

    def has_add_permission(self, request, obj=None):
        return False


@admin.register(Run)
class RunAdmin(admin.ModelAdmin):
    list_display = ("id", "name", "owner", "kind", "preset", "state", "current_step", "attempt", "created_at")
    list_filter = ("state", "kind", "preset", "created_at")
    search_fields = ("name", "owner__username", "ray_job_id", "failure_reason")
    date_hierarchy = "created_at"
    list_select_related = ("owner",)
    # The configuration, state and lineage are the trainer's record of what ran: only the name and
    # who it is shared with may change. State changes go through the cancel and resume actions.
    readonly_fields = ("owner", "kind", "promptset_version", "preset", "config", "state", "failure_reason",
                       "ray_job_id", "cluster", "code_version", "starting_checkpoint", "attempt", "current_step",
                       "created_at", "started_at", "finished_at", "updated_at")
    filter_horizontal = ("shared_with",)
    inlines = [RunStateChangeInline]
    actions = ["cancel_selected", "resume_selected"]

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
