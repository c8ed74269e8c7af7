"""The simulated provider's Celery tasks (``payments.provider``): a callback, and the beat's
resend of the callbacks nobody acknowledged; and the site's own beat task for the
confirmations no callback brings (``CELERY_BEAT_SCHEDULE``)."""

from __future__ import annotations

from celery import shared_task

from .provider import provider_callback_post, provider_resend_due
from .services import payments_unapplied_confirm

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


@shared_task(**TASK_OPTIONS)
def unapplied_confirm() -> int:
    """Beat: with no callback URL, confirm the payments whose confirmation found the order's
    strategy busy; the number resolved."""
    return payments_unapplied_confirm()
