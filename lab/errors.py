from core.errors import DomainError


class LabBusy(DomainError):
    code = "lab_busy"
    status = 409
    default_message = "A lab run is already queued or running: one run at a time, so that runs do not skew each other."


class LabNotConfigured(DomainError):
    code = "lab_not_configured"
    status = 503
    default_message = (
        "The race lab has no target: set LAB_TARGET_URL to this server's own address "
        "(make run sets it; behind a proxy, the proxy's)."
    )
