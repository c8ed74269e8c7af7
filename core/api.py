"""Helpers the products' APIs share."""

from __future__ import annotations

import json

from django.core.serializers.json import DjangoJSONEncoder
from django.http import HttpResponse
from ninja.errors import HttpError
from ninja.parser import Parser

from .errors import DomainError
from .schemas import answers

FORM_TYPES = ("multipart/form-data", "application/x-www-form-urlencoded")


def json_answer(response: HttpResponse, status: int, body: dict) -> HttpResponse:
    """``body``, made of JSON's own types and datetimes, as the answer with ``status``,
    written into the ``response`` that ninja made for the request (a view's ``response:
    HttpResponse`` parameter) as ninja writes an answer (a datetime as its encoder writes
    one), but without first validating it against the operation's schema.

    For the takes (a purchase, a draw) and the changes of what they hold (a cancel, a claim):
    every request of a sale pays for the validation, which cost about 60 us of CPU in a
    request whose whole script call costs twice that (BENCHMARKS.md). Their answers are a
    few fields built in the view; the tests check them against the documented schemas
    instead (tests/test_api_answers.py, and the live contract test).
    """
    response.status_code = status
    # UTF-8, as the content type says; the encoder is asked only for what JSON has no type for.
    response.content = json.dumps(body, cls=DjangoJSONEncoder).encode()
    return response


class NotJson(DomainError):
    code = "unsupported_media_type"
    status = 415
    default_message = "Send the body as JSON, with 'Content-Type: application/json'."


class MalformedJson(DomainError):
    code = "bad_request"
    status = 400
    default_message = "The body is not valid JSON."


def require_plain_json(request) -> None:
    """Only ``application/json`` itself: for a call a browser could be tricked into sending
    from another site (a login), no variant that a future parser might read more leniently."""
    if request.content_type != "application/json":
        raise NotJson(
            f"Send the body as JSON, with 'Content-Type: application/json' (got {request.content_type or 'none'})."
        )


class JsonParser(Parser):
    """Bodies are JSON, and say so. Without the check a form post was answered with a bare
    "Cannot parse request body", which does not tell a client what to send instead."""

    def parse_body(self, request):
        media_type = request.content_type or ""
        if media_type != "application/json" and not media_type.endswith("+json"):
            raise NotJson(f"Send the body as JSON, with 'Content-Type: application/json' (got {media_type or 'none'}).")
        try:
            return json.loads(request.body)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise MalformedJson(f"The body is not valid JSON ({exc}).") from None


def _declared_length(request) -> int:
    # As Django reads it: a body without a length (or with a bad one) is read as empty.
    try:
        return int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        return 0


def refuse_body(request, *, action: str) -> None:
    """An action that takes no input accepts no body, an empty form, or ``{}``; anything
    else is refused whole (400), so a client that thinks it is sending a choice learns
    it is not."""
    if _declared_length(request) <= 0 or not request.body.strip():
        return
    if request.content_type in FORM_TYPES and not request.POST and not request.FILES:
        return
    try:
        body = json.loads(request.body)
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise HttpError(400, "Cannot parse request body: send no body or {}.") from None
    if body != {}:
        raise HttpError(400, f"A {action} takes no input: the caller is the authenticated user.")


def staff_write(router, method: str, path: str, ok: dict, *, item: bool = False, links: dict | None = None):
    """The decorator of a staff call (tagged ``staff``) that writes from a JSON body: it
    creates or changes an item (``item`` when its ``path`` names one), and the domain may
    refuse it (409). ``ok`` is its successes, ``links`` its OpenAPI links."""
    return router.api_operation(
        [method],
        path,
        response=answers(ok, unsafe=True, staff=True, item=item, body="json", refusals=(409,)),
        tags=["staff"],
        openapi_extra=links,
    )


def staff_read(router, path: str, ok: dict, *, item: bool = False):
    """The decorator of a staff call (tagged ``staff``) that only reads (an item's audit,
    ``item`` when its ``path`` names one)."""
    return router.get(path, response=answers(ok, staff=True, item=item), tags=["staff"])
