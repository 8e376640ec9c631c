"""The admin's shared helpers, where every app may import them: no app is imported from here, so
nothing circles back (promptsets ← runs ← proofs all use them)."""

from django.contrib import admin


class ReadOnlyAdmin(admin.ModelAdmin):
    """Rows written by the trainer or the ingester: viewable, never added, changed or deleted by hand."""

    def has_add_permission(self, request, obj=None):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False
