"""The domain error base class. Each error carries its machine code and its HTTP status,
so the API maps any of them without a table of its own."""

from __future__ import annotations

from typing import ClassVar


class DomainError(Exception):
    """A refusal the caller can act on; nothing was written.

    Subclasses set ``code`` (the ``code`` of the API's error body), ``status`` (the
    HTTP status it answers with), ``default_message``, and ``retry_after`` (seconds, sent
    as ``Retry-After``) when trying again later is the remedy.
    """

    code: ClassVar[str] = "error"
    status: ClassVar[int] = 400
    default_message: ClassVar[str] = "The request could not be completed."
    retry_after: ClassVar[int | None] = None

    def __init__(self, message: str | None = None) -> None:
        self.message = message or self.default_message
        super().__init__(self.message)


class InvalidInput(DomainError):
    """Input that passed the schema but breaks a rule of the domain (an end before a begin)."""

    code = "invalid"
    status = 422
    default_message = "The input is not valid."


class Unavailable(DomainError):
    """What the request needs cannot be had right now (a dependency is down, or a sale's
    state is being rebuilt); nothing was written, and the same request may be sent again."""

    code = "unavailable"
    status = 503
    default_message = "Temporarily unavailable; try again shortly."
    retry_after = 2
