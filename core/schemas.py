"""The API's error body and every operation's declared answers (``answers``), the types that
request bodies share, and the base of every input schema."""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import datetime
from decimal import Decimal
from typing import Annotated, Any

from ninja import Schema
from pydantic import AfterValidator, AwareDatetime, BeforeValidator, ConfigDict, Field, WithJsonSchema
from pydantic_core import PydanticCustomError

from .errors import InvalidInput
from .names import NAME_PATTERN, name_problem
from .window import moment_utc


class ErrorOut(Schema):
    code: str
    message: str


class InputSchema(Schema):
    """A request body. A field the operation does not take is refused (422), not ignored:
    a client that sends ``{"stock": 100}`` to a call that only restocks would otherwise be
    told 200 and believe it had set the stock."""

    model_config = ConfigDict(extra="forbid")


# RFC 3339's date-time, which the OpenAPI document promises (``format: date-time``). Pydantic
# alone also takes "0", "1700000000" (seconds since 1970), a space for the T and a time
# without seconds: times the document calls invalid, so a client could not know which of
# its mistakes the server would guess at.
RFC3339 = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}[Tt][0-9]{2}:[0-9]{2}:[0-9]{2}(\.[0-9]+)?([Zz]|[+-][0-9]{2}:[0-9]{2})")


def _rfc3339(value: object) -> object:
    if isinstance(value, datetime):  # a Python caller's own
        return value
    if not isinstance(value, str) or not RFC3339.fullmatch(value):
        raise ValueError("send a date-time as in RFC 3339, such as 2026-01-01T10:00:00+00:00")
    return value


def _utc(value: datetime) -> datetime:
    try:
        return moment_utc(value)
    except InvalidInput as exc:
        # A ValueError becomes pydantic's field error, answered 422 with the field's name.
        raise ValueError(exc.message) from None


# Every time a request sends: an RFC 3339 string with a UTC offset, converted to UTC, and
# inside the range the database stores. Converting a time near year 1 or 9999 to UTC can
# overflow; checked here, that is a 422 on the field rather than an OverflowError where the
# row is saved.
UtcDatetime = Annotated[AwareDatetime, BeforeValidator(_rfc3339), AfterValidator(_utc)]


def _whole(value: object) -> object:
    # JSON Schema's integer, which the document says, is any number without a fraction: 823.0
    # is 823 (a JSON library may write it so), while "823", true and 823.5 are not.
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def whole(least: int, most: int) -> Any:
    """The type of a count in a request (stock, a restock, draws per user): a JSON integer from
    ``least`` to ``most``. Built whole here: constraints given beside ``| None`` in a field
    would reach the document as unknown keywords instead of ``minimum`` and ``maximum``."""
    return Annotated[int, Field(ge=least, le=most, strict=True), BeforeValidator(_whole)]


def text(most: int) -> Any:
    """The type of a name in a request (a voucher's title, a pool's or a prize's name): the
    services strip it and refuse it blank, invisible or holding a control character
    (``core.names``), so the document says that rule as ``NAME_PATTERN``, which is what
    checks it here, and up to ``most`` characters. ``name_problem`` runs first so that a
    refusal says in words what is wrong rather than quoting a pattern thousands of characters
    long."""
    return Annotated[str, Field(min_length=1, max_length=most, pattern=NAME_PATTERN), BeforeValidator(_name_in_words)]


def _name_in_words(value: object) -> object:
    problem = name_problem(value.strip()) if isinstance(value, str) else None
    if problem:
        raise PydanticCustomError("invalid_name", problem)
    return value


MONEY_PATTERN = r"^[0-9]{1,10}(\.[0-9]{1,2})?$"
MONEY_MAX = 9_999_999_999


def _money(value: object) -> object:
    # A JSON number with a fraction is a float, and which floats have two decimals is
    # something neither the client's JSON library nor the document can promise (0.57 is
    # 0.5700000000000001 after one sum): amounts with cents come as strings, whole ones
    # may come as numbers.
    if isinstance(value, Decimal):  # a Python caller's own
        return value
    value = _whole(value)
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ValueError('send a whole number or a string with at most 2 decimals, such as "9.50"')
    if isinstance(value, str) and not re.fullmatch(MONEY_PATTERN, value):
        raise ValueError('send a whole number or a string with at most 2 decimals, such as "9.50"')
    return value


# An amount of money in a request: 0 up to 9,999,999,999.99, at most 2 decimals; the document
# says exactly that, so that every body it calls valid is taken and every other refused.
Money = Annotated[
    Decimal,
    BeforeValidator(_money),
    Field(ge=0, le=Decimal("9999999999.99"), decimal_places=2, allow_inf_nan=False),
    WithJsonSchema(
        {
            "anyOf": [
                {"type": "integer", "minimum": 0, "maximum": MONEY_MAX},
                {"type": "string", "pattern": MONEY_PATTERN},
            ]
        }
    ),
]


def answers(
    ok: dict[int, Any],
    *,
    login: bool = True,
    unsafe: bool = False,
    staff: bool = False,
    item: bool = False,
    body: str | None = None,
    query: bool = False,
    refusals: Iterable[int] = (),
    limited: bool = False,
    stores: bool = True,
) -> dict[int, Any]:
    """An operation's ``response=`` mapping: its successes ``ok`` and every error status its
    code paths can answer, each in the error shape (``ErrorOut``), named by what it does:

    - ``login``: needs a login (a bearer token or a session): 401 ``unauthorized``;
    - ``unsafe``: a POST, PATCH or DELETE that takes a session: its CSRF check reads the body
      and the form (400 ``bad_request`` for too many fields, 413 ``too_large``) and may refuse
      (403 ``csrf_failed``);
    - ``staff``: needs a member of staff with the call's permission: 403 ``forbidden``;
    - ``item``: names an item by id in its path that may not exist, or not be the caller's: 404;
    - ``body``: ``"json"`` reads a JSON body: 400 (not JSON), 413 (too large), 415 (not sent as
      JSON), 422 (fields wrong, missing or not taken); ``"none"`` takes no input and refuses
      any (400), reading it first (413);
    - ``query``: takes query parameters: 422 (a value of the wrong type, out of range or not
      of its pattern);
    - ``refusals``: the domain's own refusals, such as 403 ``not_started`` or 409 ``sold_out``;
    - ``limited``: rate limited: 429 ``rate_limited`` with ``Retry-After``;
    - ``stores``: reads or writes the database or Redis, either of which may be out of reach:
      503 ``unavailable`` with ``Retry-After``.

    The ``Retry-After`` of 429 and 503 is declared once for all (``config.api.JsonApi``).
    """
    statuses: set[int] = set(refusals)
    if login:
        statuses.add(401)
        if unsafe:
            statuses |= {400, 403, 413}
    if staff:
        statuses.add(403)
    if item:
        statuses.add(404)
    if body == "json":
        statuses |= {400, 413, 415, 422}
    elif body == "none":
        statuses |= {400, 413}
    elif body is not None:
        raise ValueError(f"body is 'json', 'none' or None, not {body!r}")
    if query:
        statuses.add(422)
    if limited:
        statuses.add(429)
    if stores:
        statuses.add(503)
    return {**ok, **dict.fromkeys(sorted(statuses), ErrorOut)}
