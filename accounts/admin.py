from django.contrib import admin
from django.db import transaction

from core.admin import CreatedColumn
from core.moments import moment_text

from .models import ApiToken
from .services import tokens_owners_locked


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

    def delete_queryset(self, request, queryset):
        # The owners locked first, in key order: each token's delete would lock its owner in
        # the tokens' order, against a bulk revocation locking the same users in theirs.
        with transaction.atomic():
            tokens_owners_locked(user_ids=set(queryset.values_list("user_id", flat=True)))
            super().delete_queryset(request, queryset)
