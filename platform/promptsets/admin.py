"""The Django admin for promptsets.

Versions and their problems are immutable (a run points at a version, and curation makes new
ones), so only a promptset's name, description and visibility can be edited here.
"""

from django.contrib import admin

from config.read_only_admin import ReadOnlyAdmin
from promptsets.models import Benchmark, Problem, Promptset, PromptsetUpload, PromptsetVersion


@admin.register(Promptset)
class PromptsetAdmin(admin.ModelAdmin):
    list_display = ("name", "owner", "is_public", "created_at")
    list_filter = ("is_public", "created_at")
    search_fields = ("name", "description", "owner__username")
    readonly_fields = ("owner", "created_at")

    def has_add_permission(self, request):
        return False  # promptsets come from an upload or an import, which validate every row


@admin.register(PromptsetVersion)
class PromptsetVersionAdmin(ReadOnlyAdmin):
    list_display = ("promptset", "number", "problem_count", "parent", "created_at")
    search_fields = ("promptset__name",)
    list_select_related = ("promptset", "parent")


@admin.register(Problem)
class ProblemAdmin(ReadOnlyAdmin):
    list_display = ("problem_key", "name", "promptset", "source", "source_win_rate")
    list_filter = ("source",)
    search_fields = ("problem_key", "name", "formal_statement", "informal_statement")
    list_select_related = ("promptset",)
    show_full_result_count = False


@admin.register(PromptsetUpload)
class PromptsetUploadAdmin(ReadOnlyAdmin):
    """Uploads as the worker checked them: progress, the report, the child's peak memory."""

    list_display = ("name", "owner", "source", "filename", "state", "rows_read", "bytes_total", "peak_memory_bytes",
                    "created_at")
    list_filter = ("state", "source")
    search_fields = ("name", "filename", "owner__username", "failure")
    list_select_related = ("owner",)


@admin.register(Benchmark)
class BenchmarkAdmin(ReadOnlyAdmin):
    """Benchmarks are made by create_benchmarks or by a version's owner, never here."""

    list_display = ("name", "version", "reference_key", "is_shipped", "created_at")
    list_filter = ("is_shipped",)
    list_select_related = ("version", "version__promptset")
