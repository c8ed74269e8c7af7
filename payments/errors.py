from core.errors import DomainError


class BadSignature(DomainError):
    """A callback the provider did not sign (or whose body changed on the way): nothing is done."""

    code = "bad_signature"
    status = 403
    default_message = "The callback's signature does not match its body."


class SignatureExpired(DomainError):
    """A callback signed too long ago (or too far ahead): an overheard one gone stale."""

    code = "signature_expired"
    status = 403
    default_message = "The callback's signature is older than the tolerance (or its time is ahead of ours)."


class SignatureReplayed(DomainError):
    """A callback whose signature was accepted before: a copy, not the provider's new post."""

    code = "signature_replayed"
    status = 403
    default_message = "This signed callback was accepted before; the provider signs each post afresh."
