"""The lab's Celery task: one run, one at a time."""

from __future__ import annotations

from celery import shared_task

from .errors import LabBusy
from .execute import LONGEST_RUN_SECONDS, lab_run_execute

RETRY_SECONDS = 5


@shared_task(
    bind=True,
    # Redelivered after a worker died mid-run, or was killed at the hard time limit (which
    # Celery would otherwise acknowledge, leaving the run "running" with its crowd's tokens
    # live); lab_run_execute never runs a run twice: it fails one it finds running (the dead
    # worker's) and leaves one ended alone.
    acks_late=True,
    reject_on_worker_lost=True,
    acks_on_timeout=False,
    soft_time_limit=LONGEST_RUN_SECONDS,
    time_limit=LONGEST_RUN_SECONDS + 30,
)
def lab_run_task(self, run_id: int) -> str:
    try:
        return lab_run_execute(run_id=run_id).status
    except LabBusy as exc:
        # Another run still holds the lab (its worker has not let go yet): try again shortly.
        # Waits as long as a whole run may take.
        raise self.retry(exc=exc, countdown=RETRY_SECONDS, max_retries=LONGEST_RUN_SECONDS // RETRY_SECONDS) from exc
