"""The JSON API under /api/: routers from each app, and one error shape for all.

Errors are ``{"code": ..., "message": ...}``; a domain error carries its own status
(``core.errors.DomainError.status``).
"""

from django.http import Http404
from ninja import NinjaAPI
from ninja.errors import AuthenticationError, HttpError, ValidationError

from accounts.api import router as auth_router
from accounts.auth import api_auth
from core.errors import DomainError
from lottery.api import router as lottery_router
from orders.api import router as orders_router

api = NinjaAPI(
    title="Flash sale and prize draw API",
    version="1.0",
    auth=api_auth,
    urls_namespace="api",
    docs_url="/docs",
)
api.add_router("", auth_router)
api.add_router("", orders_router)
api.add_router("", lottery_router)


@api.get("/ping", auth=None, tags=["health"])
def ping(request):
    """A no-op JSON answer: the load tests' baseline for what the server costs per request."""
    return {"ok": True}


def error(request, status: int, code: str, message: str, **extra):
    return api.create_response(request, {"code": code, "message": message, **extra}, status=status)


@api.exception_handler(DomainError)
def on_domain_error(request, exc: DomainError):
    return error(request, exc.status, exc.code, exc.message)


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
    fields = ", ".join(".".join(str(p) for p in e.get("loc", ())[1:]) or "body" for e in exc.errors)
    return error(request, 422, "invalid", f"Invalid input: {fields}.", errors=exc.errors)


@api.exception_handler(HttpError)
def on_http_error(request, exc: HttpError):
    code = {400: "bad_request", 405: "method_not_allowed"}.get(exc.status_code, "error")
    return error(request, exc.status_code, code, exc.message)
