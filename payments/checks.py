from django.conf import settings
from django.core.checks import Error, register


@register()
def provider_settings_check(app_configs, **kwargs):
    # A provider that confirms late confirms only by its callback: with nowhere to post it,
    # every pay would stay requested and its charge kept.
    if settings.PAYMENT_PROVIDER_DELAY_MS > 0 and not settings.PAYMENT_CALLBACK_URL:
        return [
            Error(
                f"PAYMENT_PROVIDER_DELAY_MS is {settings.PAYMENT_PROVIDER_DELAY_MS} and PAYMENT_CALLBACK_URL is unset.",
                hint="Set PAYMENT_CALLBACK_URL to this site's /api/payments/callback, or the delay to 0.",
                id="payments.E001",
            )
        ]
    return []
