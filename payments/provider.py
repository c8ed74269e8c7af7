"""The simulated payment provider, inside the project so that ``make run`` needs nothing more.

A charge is recorded in the provider's own ledger (``ProviderCharge``) and confirmed by a
callback to the site's signed endpoint (``PAYMENT_CALLBACK_URL``, ``POST
/api/payments/callback``), posted by a Celery task as a real provider's webhook would come:
after ``PAYMENT_PROVIDER_DELAY_MS`` (plus up to ``PAYMENT_PROVIDER_JITTER_MS``), a second
time with probability ``PAYMENT_PROVIDER_DUPLICATE_RATE``, or never with probability
``PAYMENT_PROVIDER_LOSS_RATE``. A callback the site did not acknowledge (lost, refused,
answered busy or 503) is sent again by the beat (``provider_resend_due``) once
``PAYMENT_PROVIDER_RESEND_SECONDS`` have passed, as providers retry their webhooks, so that
every charge is resolved in the end. Resends are never dropped; they go in batches, two
queries each, at most ``RESEND_BATCHES`` of ``RESEND_BATCH`` per run.

With no delay the provider answers the charge at once: the caller applies the confirmation
itself, and the callback still comes, as a duplicate.
"""

from __future__ import annotations

import json
import logging
import random
import urllib.error
import urllib.request
from datetime import datetime, timedelta

from celery import current_app
from django.conf import settings
from django.db import transaction
from django.db.models import F, QuerySet
from django.utils import timezone

from .models import ProviderCharge
from .signature import HEADER, callback_sign

logger = logging.getLogger(__name__)

# Sent by name: the tasks (payments.tasks) stand on this module.
CALLBACK_TASK = "payments.tasks.provider_callback"
# Charges sent again per batch (two queries), and batches per beat run: a run sends at most
# 1,000, the rest waits for the next.
RESEND_BATCH = 200
RESEND_BATCHES = 5


def _happens(rate: float) -> bool:
    return rate > 0 and random.random() < rate


def provider_charge(*, reference: str, now: datetime | None = None) -> bool:
    """Charge ``reference``: recorded in the caller's transaction, its callbacks sent once
    that commits. True when the provider confirms it at once (no delay): the caller applies
    the confirmation now."""
    now = now or timezone.now()
    delay_ms = settings.PAYMENT_PROVIDER_DELAY_MS
    if settings.PAYMENT_PROVIDER_JITTER_MS > 0:
        delay_ms += random.randint(0, settings.PAYMENT_PROVIDER_JITTER_MS)
    copies = 1 + _happens(settings.PAYMENT_PROVIDER_DUPLICATE_RATE)
    if _happens(settings.PAYMENT_PROVIDER_LOSS_RATE) or not settings.PAYMENT_CALLBACK_URL:
        copies = 0
    # With nowhere to post, the site confirms it itself: nothing will acknowledge it, and left
    # unacknowledged it would be sent again once a callback URL is set, with every charge the
    # site made before (``provider_unresolved`` for one whose confirmation could not be applied).
    acknowledged_at = None if settings.PAYMENT_CALLBACK_URL else now
    ProviderCharge.objects.create(
        reference=reference,
        sent_at=now + timedelta(milliseconds=delay_ms),
        callbacks=copies,
        acknowledged_at=acknowledged_at,
    )
    if copies:
        transaction.on_commit(lambda: _send(reference, countdown=delay_ms / 1000, copies=copies))
    return provider_confirms_at_once()


def provider_confirms_at_once() -> bool:
    """Whether the provider confirms a charge when it is made (no delay): the caller applies
    the confirmation, and no callback need come (none does without ``PAYMENT_CALLBACK_URL``)."""
    return settings.PAYMENT_PROVIDER_DELAY_MS <= 0


def _send(reference: str, *, countdown: float, copies: int) -> None:
    try:
        for _ in range(copies):
            current_app.send_task(CALLBACK_TASK, args=(reference,), countdown=countdown)
    except Exception:  # the broker out of reach: the resend sends it
        logger.warning("Could not send the callback of charge %s; it is sent again later.", reference)


def provider_refund(*, reference: str, now: datetime | None = None) -> None:
    """The site gives the charge back (in its transaction): the ledger says so."""
    ProviderCharge.objects.filter(reference=reference, refunded_at__isnull=True).update(
        refunded_at=now or timezone.now()
    )


def provider_unresolved(*, reference: str) -> None:
    """The site could not apply the confirmation of a charge made with nowhere to post (its
    order's lock busy): due again, so that a callback URL set before the beat applies it
    posts it. Marked acknowledged as it was made, such a charge was never posted."""
    ProviderCharge.objects.filter(reference=reference).update(acknowledged_at=None)


def provider_resolved_here(*, reference: str, now: datetime | None = None) -> None:
    """The site applied such a charge's confirmation itself later (the beat): acknowledged,
    as its callback would have been."""
    ProviderCharge.objects.filter(reference=reference, acknowledged_at__isnull=True).update(
        acknowledged_at=now or timezone.now()
    )


def provider_callback_post(*, reference: str) -> bool:
    """Post the confirmation of ``reference`` to the site, signed; True when the site
    acknowledged it (a 2xx), which ends the resends. Anything else is logged and the charge
    is sent again later."""
    url = settings.PAYMENT_CALLBACK_URL
    if not url:
        return False
    body = json.dumps({"reference": reference, "status": "confirmed"}).encode()
    request = urllib.request.Request(
        url,
        data=body,
        method="POST",
        headers={"Content-Type": "application/json", HEADER: callback_sign(body)},
    )
    try:
        with urllib.request.urlopen(request, timeout=settings.PAYMENT_CALLBACK_TIMEOUT_SECONDS) as answer:
            acknowledged = 200 <= answer.status < 300
    except urllib.error.HTTPError as exc:
        logger.warning("The site answered the callback of charge %s with %s; sent again later.", reference, exc.code)
        return False
    except OSError as exc:
        logger.warning("The callback of charge %s did not reach the site (%s); sent again later.", reference, exc)
        return False
    if acknowledged:
        charge = ProviderCharge.objects.filter(reference=reference)
        charge.update(acknowledgements=F("acknowledgements") + 1)
        charge.filter(acknowledged_at__isnull=True).update(acknowledged_at=timezone.now())
    return acknowledged


def provider_resend_due(
    *, now: datetime | None = None, batch: int = RESEND_BATCH, batches: int = RESEND_BATCHES
) -> int:
    """Send again the callbacks of the charges nobody acknowledged for
    ``PAYMENT_PROVIDER_RESEND_SECONDS``, oldest first, ``batch`` at a time and at most
    ``batches`` batches (the rest the next run); the number sent. Each batch costs two queries
    however many are due (``_resend_claim``)."""
    if not settings.PAYMENT_CALLBACK_URL:
        return 0
    now = now or timezone.now()
    due = ProviderCharge.objects.filter(
        acknowledged_at__isnull=True, sent_at__lte=now - timedelta(seconds=settings.PAYMENT_PROVIDER_RESEND_SECONDS)
    )
    sent = 0
    for _ in range(batches):
        references = _resend_claim(due, now=now, size=batch)
        for reference in references:
            _send(reference, countdown=0, copies=1)
        sent += len(references)
        if len(references) < batch:
            break
    return sent


def _resend_claim(due: QuerySet, *, now: datetime, size: int) -> list[str]:
    """The references of up to ``size`` charges of ``due``, claimed in one transaction: read
    through the resend index and locked, skipping those another run holds, then moved on
    (``sent_at``) and counted in one UPDATE, so that two runs at once send each once. Their
    callbacks leave after the commit."""
    with transaction.atomic():
        claimed = list(
            due.select_for_update(skip_locked=True).order_by("sent_at").values_list("pk", "reference")[:size]
        )
        if claimed:
            ProviderCharge.objects.filter(pk__in=[pk for pk, _ in claimed]).update(
                sent_at=now, callbacks=F("callbacks") + 1
            )
    return [reference for _, reference in claimed]
