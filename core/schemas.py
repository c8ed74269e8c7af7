"""The API's error body, declared once for every operation's OpenAPI document, and the base
of every input schema."""

from datetime import datetime
from typing import Annotated

from ninja import Schema
from pydantic import AfterValidator, AwareDatetime, ConfigDict

from .errors import InvalidInput
from .window import moment_utc


class ErrorOut(Schema):
    code: str
    message: str


class InputSchema(Schema):
    """A request body. A field the operation does not take is refused (422), not ignored:
    a client that sends ``{"stock": 100}`` to a call that only restocks would otherwise be
    told 200 and believe it had set the stock."""

    model_config = ConfigDict(extra="forbid")


def _utc(value: datetime) -> datetime:
    try:
        return moment_utc(value)
    except InvalidInput as exc:
        # A ValueError becomes pydantic's field error, answered 422 with the field's name.
        raise ValueError(exc.message) from None


# Every time a request sends: with a UTC offset, converted to UTC, and inside the range the
# database stores. Converting a time near year 1 or 9999 to UTC can overflow; checked here,
# that is a 422 on the field rather than an OverflowError where the row is saved.
UtcDatetime = Annotated[AwareDatetime, AfterValidator(_utc)]


def errors(*statuses: int) -> dict[int, type[ErrorOut]]:
    """``{status: ErrorOut}`` for an operation's ``response=`` mapping."""
    return dict.fromkeys(statuses, ErrorOut)


# What every operation that reads a JSON body can also answer: 400 (not JSON), 415 (not sent
# as JSON), 422 (fields wrong, missing or not taken).
BODY_ERRORS = (400, 415, 422)
