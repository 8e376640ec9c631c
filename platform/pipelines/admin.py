"""The Django admin for pipelines: what the state machine stored is read-only here (editing it would make the pipeline
page disagree with what ran); cancel and retry go through pipelines.actions, as on the pipeline page."""

from django.contrib import admin, messages

from config.read_only_admin import ReadOnlyAdmin
from pipelines import actions
from pipelines.models import CorpusProof, Iteration, Pipeline, PipelineEvent, ProofCorpus


@admin.register(Pipeline)
class PipelineAdmin(admin.ModelAdmin):
    list_display = ("name", "owner", "state", "preset", "verified_by", "created_at")
    list_filter = ("state", "preset", "verified_by")
    search_fields = ("name", "owner__username")
    readonly_fields = ("state", "verified_by", "failure_reason", "stop_reason", "finished_at")
    actions = ["cancel", "retry"]

    @admin.action(description="Cancel the pipeline and its current run")
    def cancel(self, request, queryset):
        done = sum(actions.cancel_pipeline(pipeline) for pipeline in queryset)
        self.message_user(request, f"{done} pipeline(s) cancelled", messages.SUCCESS)

    @admin.action(description="Retry the failed stage")
    def retry(self, request, queryset):
        done = sum(actions.retry_stage(pipeline) for pipeline in queryset)
        self.message_user(request, f"{done} pipeline(s) retried", messages.SUCCESS)


@admin.register(Iteration)
class IterationAdmin(ReadOnlyAdmin):
    list_display = ("pipeline", "number", "stage", "proofs_harvested", "problems_unsolved", "benchmark_solved")
    list_filter = ("stage",)
    search_fields = ("pipeline__name",)


@admin.register(ProofCorpus)
class ProofCorpusAdmin(ReadOnlyAdmin):
    list_display = ("pipeline", "number", "proof_count", "added_count", "refused_count", "verified_by")
    list_filter = ("verified_by",)
    search_fields = ("pipeline__name",)


@admin.register(CorpusProof)
class CorpusProofAdmin(ReadOnlyAdmin):
    list_display = ("corpus", "problem_key", "proof_hash")
    search_fields = ("problem_key",)


@admin.register(PipelineEvent)
class PipelineEventAdmin(ReadOnlyAdmin):
    list_display = ("pipeline", "iteration", "stage", "message", "at")
    list_filter = ("stage",)
    search_fields = ("message", "pipeline__name")
