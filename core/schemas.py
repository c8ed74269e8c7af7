"""The API's error body, declared once for every operation's OpenAPI document."""

from ninja import Schema


class ErrorOut(Schema):
    code: str
    message: str


def errors(*statuses: int) -> dict[int, type[ErrorOut]]:
    """``{status: ErrorOut}`` for an operation's ``response=`` mapping."""
    return dict.fromkeys(statuses, ErrorOut)
