from django.contrib import admin

from runs.models import DeadLetter


@admin.register(DeadLetter)
class DeadLetterAdmin(admin.ModelAdmin):
    """Entries the ingester could not store, with why: read them to fix the publisher that sent them."""

    list_display = ("created_at", "run", "stream_key", "entry_id", "error")
    list_filter = ("run",)
    search_fields = ("error", "entry_id")
    readonly_fields = ("run", "stream_key", "entry_id", "raw_payload", "error", "created_at")
