from core.errors import DomainError


class LabBusy(DomainError):
    code = "lab_busy"
    status = 409
    default_message = "A lab run is already queued or running: one run at a time, so that runs do not skew each other."
