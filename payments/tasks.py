"""The simulated provider's Celery tasks (``payments.provider``): a callback, and the beat's
resend of the callbacks nobody acknowledged (``CELERY_BEAT_SCHEDULE``)."""

from __future__ import annotations

from celery import shared_task

from .provider import provider_callback_post, provider_resend_due

TASK_OPTIONS = {"acks_late": True, "reject_on_worker_lost": True, "soft_time_limit": 60, "time_limit": 90}


@shared_task(**TASK_OPTIONS)
def provider_callback(reference: str) -> bool:
    """Post the confirmation of the charge ``reference`` to the site; whether it was
    acknowledged. Run twice, the site resolves the payment once."""
    return provider_callback_post(reference=reference)


@shared_task(**TASK_OPTIONS)
def provider_resend() -> int:
    """Beat: send again the callbacks nobody acknowledged; the number sent."""
    return provider_resend_due()
