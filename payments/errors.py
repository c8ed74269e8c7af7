from core.errors import DomainError


class BadSignature(DomainError):
    """A callback the provider did not sign (or whose body changed on the way): nothing is done."""

    code = "bad_signature"
    status = 403
    default_message = "The callback's signature does not match its body."
