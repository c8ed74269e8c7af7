"""The lab's Celery task: one run, one at a time."""

from __future__ import annotations

from celery import shared_task

from .errors import LabBusy
from .services import BOUNDS, LANE_OVERHEAD_SECONDS, lab_run_execute

# The longest run: every strategy of the registry at the longest duration.
_LONGEST = 10 * (BOUNDS["duration"][1] + LANE_OVERHEAD_SECONDS)


@shared_task(
    bind=True,
    # Redelivered after a worker died mid-run; lab_run_execute leaves a run that is no
    # longer queued alone, so a redelivery never runs it twice.
    acks_late=True,
    reject_on_worker_lost=True,
    soft_time_limit=_LONGEST,
    time_limit=_LONGEST + 30,
)
def lab_run_task(self, run_id: int) -> str:
    try:
        return lab_run_execute(run_id=run_id).status
    except LabBusy as exc:
        # Another run still holds the lab (its worker has not let go yet): try again shortly.
        raise self.retry(exc=exc, countdown=5, max_retries=120) from exc
