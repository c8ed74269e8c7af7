from django.conf import settings
from django.db import models


class ApiToken(models.Model):
    """A bearer token for API clients. Only its SHA-256 is stored."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    key_hash = models.CharField(max_length=64, unique=True, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"token of {self.user_id} ({self.key_hash[:8]}...)"
