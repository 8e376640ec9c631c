"""What an administrator manages: the model registry, quotas, the queue (pause, priorities, preemption)."""

from django.contrib import admin, messages
from django.db import transaction

from runs import actions, scheduling
from runs.models import ACTIVE_STATES, QueueState, Quota, RegisteredModel, Run


@admin.register(RegisteredModel)
class RegisteredModelAdmin(admin.ModelAdmin):
    list_display = ("name", "source", "name_or_path", "is_enabled", "description")
    list_editable = ("is_enabled",)
    search_fields = ("name", "name_or_path")


class _SchedulesAfterSave(admin.ModelAdmin):
    """A changed limit, priority or pause may let queued runs start: schedule once it is committed."""

    def save_model(self, request, obj, form, change):
        super().save_model(request, obj, form, change)
        transaction.on_commit(scheduling.schedule_soon)

    def delete_model(self, request, obj):
        super().delete_model(request, obj)
        transaction.on_commit(scheduling.schedule_soon)


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


@admin.register(Run)
class RunAdmin(_SchedulesAfterSave):
    list_display = ("name", "owner", "state", "priority", "preset", "queued_at", "queue_reason")
    list_filter = ("state", "preset")
    list_editable = ("priority",)
    search_fields = ("name", "owner__username")
    fields = ("name", "owner", "state", "priority", "queue_reason", "failure_reason", "ray_job_id", "attempt")
    readonly_fields = ("name", "owner", "state", "queue_reason", "failure_reason", "ray_job_id", "attempt")
    actions = ["preempt"]

    def get_queryset(self, request):
        return super().get_queryset(request).select_related("owner")

    def has_add_permission(self, request):
        return False  # runs are launched through the launch contract, never typed into the admin

    @admin.action(description="Preempt: stop with a checkpoint and queue again (resumes later)")
    def preempt(self, request, queryset):
        preempted = [run for run in queryset.filter(state__in=ACTIVE_STATES) if actions.preempt_run(run)]
        skipped = queryset.count() - len(preempted)
        if preempted:
            self.message_user(request, f"Preempted {', '.join(run.name for run in preempted)}; each resumes from its "
                                       "last checkpoint when the queue admits it again.")
        if skipped:
            self.message_user(request, f"{skipped} run(s) were not starting or running, so not preempted.",
                              messages.WARNING)
