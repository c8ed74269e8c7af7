from django.contrib import admin

from core.admin import CreatedColumn
from core.moments import moment_text

from .models import ApiToken


@admin.register(ApiToken)
class ApiTokenAdmin(CreatedColumn, admin.ModelAdmin):
    list_display = ["user", "created", "expires"]
    search_fields = ["user__username"]
    fields = ["user", "created", "expires"]
    readonly_fields = ["user", "created", "expires"]

    @admin.display(description="expires", ordering="expires_at")
    def expires(self, obj) -> str:
        return moment_text(obj.expires_at)

    def has_add_permission(self, request):
        return False
