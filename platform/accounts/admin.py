"""The Django admin for API tokens: list, search and revoke (delete); a token is issued on the
"API tokens" page or with ``manage.py create_api_token``, since its raw value is shown only once."""

from django.contrib import admin

from accounts.models import ApiToken


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ("name", "user", "hint", "created_at", "last_used_at")
    search_fields = ("name", "user__username", "hint")
    list_select_related = ("user",)
    readonly_fields = ("user", "name", "hint", "created_at", "last_used_at")
    exclude = ("digest",)

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False
