"""The API's error body, declared once for every operation's OpenAPI document, and the base
of every input schema."""

from ninja import Schema
from pydantic import ConfigDict


class ErrorOut(Schema):
    code: str
    message: str


class InputSchema(Schema):
    """A request body. A field the operation does not take is refused (422), not ignored:
    a client that sends ``{"stock": 100}`` to a call that only restocks would otherwise be
    told 200 and believe it had set the stock."""

    model_config = ConfigDict(extra="forbid")


def errors(*statuses: int) -> dict[int, type[ErrorOut]]:
    """``{status: ErrorOut}`` for an operation's ``response=`` mapping."""
    return dict.fromkeys(statuses, ErrorOut)


# What every operation that reads a JSON body can also answer: 400 (not JSON), 415 (not sent
# as JSON), 422 (fields wrong, missing or not taken).
BODY_ERRORS = (400, 415, 422)
