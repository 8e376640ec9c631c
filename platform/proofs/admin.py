"""The Django admin for proof attempts: read-only, since every row is what a rollout produced."""

from django.contrib import admin

from config.read_only_admin import ReadOnlyAdmin
from proofs.models import ProblemHistory, ProofAttempt, RetryFeedback


@admin.register(ProofAttempt)
class ProofAttemptAdmin(ReadOnlyAdmin):
    list_display = ("id", "run", "step", "problem_key", "turn", "verdict", "reward", "format_error",
                    "is_censored", "is_standin_verdict")
    list_filter = ("verdict", "turn", "is_censored", "is_standin_verdict", "format_error")
    search_fields = ("rollout_key", "problem_key", "problem_name", "run__name")
    list_select_related = ("run",)
    show_full_result_count = False


@admin.register(RetryFeedback)
class RetryFeedbackAdmin(ReadOnlyAdmin):
    list_display = ("run", "parent_rollout_key", "created_step")
    search_fields = ("parent_rollout_key", "run__name")
    list_select_related = ("run",)


@admin.register(ProblemHistory)
class ProblemHistoryAdmin(ReadOnlyAdmin):
    list_display = ("statement_hash", "run_name", "step", "round", "is_evaluation", "is_standin", "answers", "scored",
                    "accepted")
    list_filter = ("is_standin", "is_evaluation", "round")
    search_fields = ("statement_hash", "run_name")
    show_full_result_count = False
