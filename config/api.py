"""The JSON API under /api/: routers from each app, and one error shape for all.

Errors are ``{"code": ..., "message": ...}``; a domain error carries its own status
(``core.errors.DomainError.status``). Everything under /api/ answers JSON, also a path
that is not there, a method a path does not take and a server error: a client of a JSON
API should never have to parse an HTML page.
"""

import logging
from functools import wraps

from django.conf import settings
from django.core.exceptions import RequestDataTooBig, SuspiciousOperation
from django.core.signals import got_request_exception
from django.http import Http404, HttpResponseNotAllowed
from django.urls import URLPattern, re_path
from django.views.decorators.csrf import csrf_exempt
from ninja import NinjaAPI, Schema
from ninja.errors import AuthenticationError, HttpError, ValidationError

from accounts.api import router as auth_router
from accounts.auth import api_auth
from core.api import JsonParser
from core.csp import SWAGGER_UI_POLICY, csp_replace
from core.errors import DomainError
from core.idempotency import HEADER as IDEMPOTENCY_KEY
from core.idempotency import REPLAYED, idempotency_answered, idempotency_outcome_unknown
from core.outage import DependencyDown, dependency_down, dependency_down_noted, outcome_unknown
from core.schemas import answers
from lottery.api import router as lottery_router
from orders.api import router as orders_router
from payments.api import router as payments_router

logger = logging.getLogger("django.request")

DESCRIPTION = """\
Flash sales and prize draws that never oversell.

**Vouchers and purchases.** `GET /api/vouchers` lists vouchers with their stock, sale
window, stock-control strategy and state (`upcoming`, `live`, `ended`).
`POST /api/vouchers/{id}/purchase` (no body) buys one for the caller: one order per
buyer, never more orders than stock. `GET /api/orders` lists the caller's orders, newest
first, a page at a time (`limit`, 50 by default, at most 100; the next page is the answer's
`Link` header, `rel="next"`, absent on the last page).

**Pools and draws.** `GET /api/pools/{id}` shows a prize pool with each prize's stock and
its probability now: `stock / (sum of stock + no_prize_weight)`. `POST /api/pools/{id}/draw`
(no body) draws once for the caller, up to the pool's draws per user; "no prize" counts as
a draw. `GET /api/draws` lists the caller's draws, a page at a time as the orders.

**Holds.** A voucher with a payment window (`payment_window_seconds`) sells each unit `held`
for its buyer until `pay_by`, and a pool with a claim window (`claim_window_seconds`) holds
each prize won until `claim_by`. `POST /api/orders/{id}/cancel` puts a held order's unit back
on sale; `POST /api/draws/{id}/claim` makes a held prize the winner's. Past the deadline the
unit goes back by itself (`expired`, `forfeited`). A record not held is refused 409 in the
words of its state: `expired`, `cancelled`, `forfeited`, `already_paid`, `already_claimed`,
`nothing_held`, or `pending` (with `Retry-After`) while a `redis_lua` record is not written.
An item caps the holds one user may abandon (cancel, or let lapse: `abandon_limit`, 2 by
default) and pauses their takes after each (`abandon_cooldown_seconds`, 60 by default): past
the cap a take is refused 409 `abandon_limit`, within the pause 429 `cooling_down` with
`Retry-After`.

**Payments.** A voucher with a payment window sells its orders `held` until their `pay_by`:
`POST /api/orders/{id}/pay` pays one, 200 `paid` when the payment provider confirms at once,
202 while its confirmation is on the way (`GET /api/orders/{id}` shows the outcome). An
order not held is refused 409 `expired`, `cancelled` or `already_paid`, nothing charged; a
confirmation that arrives after the hold ended is refunded (the order's `refund`), never
sold. `POST /api/payments/callback` is the provider's, signed.

**Staff calls** (`/api/admin/...`) create vouchers, pools and prizes, change a window, a
strategy or a pool's rules, restock (a relative, guarded update that never races buyers)
and audit the invariants (`.../audit`). Each asks, as the admin site does, for an active
member of staff with the model permission of the call (`orders.add_voucher`,
`orders.change_voucher`, `lottery.add_pool`, `lottery.change_pool`, `lottery.add_prize`,
`lottery.change_prize`; an audit the view or change permission of the voucher or pool);
anyone else gets 403 `forbidden`.

**Auth.** `POST /api/auth/login` with `{"username", "password"}` as `application/json`
answers a bearer token: send `Authorization: Bearer <token>`. A token expires (see
`expires_at` in `GET /api/auth/tokens`); `POST /api/auth/logout` revokes the one it is sent
with, `DELETE /api/auth/tokens/{id}` any of the caller's, and a password change all of them.
A browser on this site (Origin or Referer this site or a trusted origin) also gets a
session, which then sends its CSRF token in `X-CSRFToken` on unsafe methods; a login from
another origin is 403 `csrf_failed`. Reading vouchers and pools needs no login.

**Errors.** Every refusal is `{"code", "message"}` with its HTTP status, for example
409 `sold_out`, `already_purchased`, `draw_limit`, `pool_empty`, `abandon_limit`, `busy` or `supply_limit`;
403 `not_started`, `ended` or `forbidden`; 401 `unauthorized`; 404 `not_found`; 405
`method_not_allowed`; 422 `invalid` (also for a field the call does not take); 429
`rate_limited` or `cooling_down` and 503 `unavailable`, all with `Retry-After` in seconds. Bodies are JSON:
anything else is 415 `unsupported_media_type`, JSON that does not parse is 400
`bad_request`, and a body over 2.5 MB (`DATA_UPLOAD_MAX_MEMORY_SIZE`) is 413 `too_large`.
Each operation below lists every status it can answer.

**Retries.** A purchase, a draw, a pay, a cancel and a claim take an `Idempotency-Key` header
(1 to 255 visible ASCII characters, a new one per attempt): the same request sent again with it gets the first
answer again (`Idempotent-Replayed: true`) and does nothing twice, also while the first
still runs (it waits for it, or answers 409 `idempotency_in_progress` with `Retry-After`); after
a first request that never answered (its process died), 409 `idempotency_interrupted`.
Another request under a used key is 422 `idempotency_key_reused`. Keys are kept a bounded time
(24 hours by default), and a user keeps a bounded number of them (1,000 by default): a new key
past it is 429 `idempotency_keys_exhausted` with `Retry-After`.
"""


class JsonApi(NinjaAPI):
    """A NinjaAPI whose every URL answers JSON.

    Ninja answers a method a path does not take with its own plain-text 405, and a path
    it does not know falls through to Django's HTML 404 (or, with DEBUG, the technical
    page). Here the path views are wrapped to answer those in the error shape, and one
    last pattern catches every other path under the API's prefix. The interactive docs
    (Swagger UI) get the policy they need (core.csp), every other view the default.
    """

    @property
    def urls(self):
        patterns, app_name, namespace = super().urls
        wrapped = [URLPattern(p.pattern, _view(p), p.default_args, p.name) for p in patterns]
        # Django tries the patterns in order, and a sale's requests are nearly all purchases
        # and draws: matched first, they skip a dozen regular expressions each (about 1 us
        # apiece). No other path overlaps theirs, so the order changes nothing else.
        wrapped.sort(key=lambda pattern: pattern.name not in HOT_OPERATIONS)
        return [*wrapped, re_path(r"", csrf_exempt(_not_found), name="not-found")], app_name, namespace

    def get_openapi_schema(self, *, path_prefix=None, path_params=None):
        """The document, with what every 429 and 503 carries said once: ``Retry-After``; and
        on an operation that takes an ``Idempotency-Key``, that any answer may be a replay
        (``Idempotent-Replayed``) and a 409 may say when to come back
        (``idempotency_in_progress``)."""
        schema = super().get_openapi_schema(path_prefix=path_prefix, path_params=path_params)
        for operations in schema["paths"].values():
            for operation in operations.values():
                keyed = any(parameter["name"] == IDEMPOTENCY_KEY for parameter in operation.get("parameters", ()))
                for status, response in operation["responses"].items():
                    headers = response.setdefault("headers", {})
                    if int(status) in RETRY_AFTER_STATUSES:
                        headers["Retry-After"] = RETRY_AFTER
                    elif keyed and int(status) == 409:
                        headers["Retry-After"] = {**RETRY_AFTER, "required": False}
                    if keyed:
                        headers[REPLAYED] = IDEMPOTENT_REPLAYED
                    if not headers:
                        del response["headers"]
        return schema


# The URL names of the operations a sale's crowd calls (``JsonApi.urls``).
HOT_OPERATIONS = ("vouchers_purchase", "pools_draw")

# A refusal that trying again later remedies says when, in whole seconds.
RETRY_AFTER_STATUSES = (429, 503)
RETRY_AFTER = {
    "description": "Seconds to wait before sending the request again.",
    "required": True,
    "schema": {"type": "integer", "minimum": 1},
}

# On an answer sent again for a retry with the same Idempotency-Key (core.idempotency).
IDEMPOTENT_REPLAYED = {
    "description": "true when this is the first answer to this Idempotency-Key, sent again.",
    "required": False,
    "schema": {"type": "string", "enum": ["true"]},
}


api = JsonApi(
    title="Flash sales and prize draws API",
    version="1.0",
    description=DESCRIPTION,
    auth=api_auth,
    parser=JsonParser(),
    urls_namespace="api",
    docs_url="/docs",
)
api.add_router("", auth_router)
api.add_router("", orders_router)
api.add_router("", lottery_router)
api.add_router("", payments_router)


class PingOut(Schema):
    ok: bool


@api.get("/ping", response=answers({200: PingOut}, login=False, stores=False), auth=None, tags=["health"])
def ping(request):
    """A no-op JSON answer: the load tests' baseline for what the server costs per request."""
    return {"ok": True}


def error(request, status: int, code: str, message: str, **extra):
    return api.create_response(request, {"code": code, "message": message, **extra}, status=status)


def _not_found(request, *args, **kwargs):
    return error(request, 404, "not_found", f"Nothing at {request.path}: the API is described at /api/docs.")


def _view(pattern: URLPattern):
    view = _json_errors(pattern.callback)
    return csp_replace(SWAGGER_UI_POLICY)(view) if pattern.name == "openapi-view" else view


def _json_errors(view):
    @wraps(view)  # keeps csrf_exempt: ninja checks CSRF itself, for sessions only
    def wrapped(request, *args, **kwargs):
        try:
            response = view(request, *args, **kwargs)
        except Http404:  # raised by ninja's root view, outside its exception handlers
            return _not_found(request)
        if isinstance(response, HttpResponseNotAllowed):
            allowed = ", ".join(sorted(method.strip() for method in response["Allow"].split(",")))
            message = f"{request.method} is not allowed here; {request.path} takes {allowed}."
            response = error(request, 405, "method_not_allowed", message)
            response["Allow"] = allowed
        # The answer as sent, a refusal or a server error included: kept under the request's
        # Idempotency-Key when it holds one.
        idempotency_answered(request, response)
        return response

    return wrapped


@api.exception_handler(DomainError)
def on_domain_error(request, exc: DomainError):
    if outcome_unknown(exc):  # a 503 raised from what may have acted (a Redis script timed out)
        idempotency_outcome_unknown(request)
    response = error(request, exc.status, exc.code, exc.message)
    if exc.retry_after is not None:
        response["Retry-After"] = str(exc.retry_after)
    return response


@api.exception_handler(Http404)
def on_not_found(request, exc):
    return error(request, 404, "not_found", "Not found.")


@api.exception_handler(AuthenticationError)
def on_unauthenticated(request, exc: AuthenticationError):
    message = (
        exc.message
        if exc.message != "Unauthorized"
        else "Log in: send 'Authorization: Bearer <token>' or use a session."
    )
    return error(request, 401, "unauthorized", message)


@api.exception_handler(ValidationError)
def on_invalid(request, exc: ValidationError):
    problems = "; ".join(f"{_field(e)}: {_problem(e)}" for e in exc.errors)
    return error(request, 422, "invalid", f"Invalid input: {problems}.", errors=exc.errors)


def _field(error_item: dict) -> str:
    # ("body", "payload", "stock") names "stock": the source and the view's parameter name
    # mean nothing to a client.
    loc = [str(part) for part in error_item.get("loc", ())]
    return ".".join(loc[2:] if loc[:1] == ["body"] else loc[1:]) or "body"


def _problem(error_item: dict) -> str:
    if error_item.get("type") == "extra_forbidden":
        return "not a field this call takes"
    return error_item.get("msg", "invalid")


@api.exception_handler(HttpError)
def on_http_error(request, exc: HttpError):
    # Ninja wraps whatever the body parser raised in a 400 of its own; ours says what to send.
    if isinstance(exc.__cause__, DomainError):
        return on_domain_error(request, exc.__cause__)
    code = {400: "bad_request", 405: "method_not_allowed"}.get(exc.status_code, "error")
    return error(request, exc.status_code, code, exc.message)


def too_large_message() -> str:
    return f"The request body is larger than the {settings.DATA_UPLOAD_MAX_MEMORY_SIZE} bytes this server takes."


@api.exception_handler(SuspiciousOperation)
def on_suspicious(request, exc: SuspiciousOperation):
    # Raised where the body or the form is first read (the parser, or the CSRF check of a
    # session): the client's fault, not the server's. Logged as Django logs it, on one line.
    logging.getLogger(f"django.security.{exc.__class__.__name__}").warning(
        "%s (%s %s)", exc, request.method, request.path
    )
    if isinstance(exc, RequestDataTooBig):
        return error(request, 413, "too_large", too_large_message())
    return error(request, 400, "bad_request", str(exc))


@api.exception_handler(Exception)
def on_server_error(request, exc: Exception):
    # Redis, the database or the broker out of reach is neither the client's doing nor a
    # bug: 503 with Retry-After (core.outage), and a warning rather than a traceback per request.
    dependency = dependency_down(exc)
    if outcome_unknown(exc):
        idempotency_outcome_unknown(request)
    if dependency is not None:
        dependency_down_noted(dependency, exc, f"{request.method} {request.path}")
        return on_domain_error(request, DependencyDown(dependency))
    # What Django does for an unhandled exception (log it, send the signal that error
    # reporters and the test client listen to), but answered in the error shape.
    logger.error(
        "Internal Server Error: %s", request.path, exc_info=exc, extra={"status_code": 500, "request": request}
    )
    got_request_exception.send(sender=None, request=request)
    return error(request, 500, "server_error", "The server failed to answer; the error is logged.")
