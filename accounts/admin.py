from django.contrib import admin

from .models import ApiToken


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    list_display = ["user", "created_at", "expires_at"]
    search_fields = ["user__username"]
    readonly_fields = ["user", "created_at", "expires_at"]

    def has_add_permission(self, request):
        return False
