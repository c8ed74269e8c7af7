"""A login in front of the Locust web UI, for a master started with ``--web-login`` (the
compose stack's ``locust-master``): Locust protects every page of its UI then and leaves
who may pass to the locustfile. One account, ``LOCUST_WEB_USERNAME`` (``locust`` unless
set) with ``LOCUST_WEB_PASSWORD``, which has no default: without it the master refuses to
start. Failed logins are throttled as the site's are (``loadtests/login_throttle.py``).
Loaded beside a scenario's locustfile: ``-f loadtests/locustfiles/crowd.py,loadtests/web_login.py``.
"""

from __future__ import annotations

import hmac
import os
import secrets

from flask import Blueprint, Response, redirect, request, session, url_for
from flask_login import UserMixin, login_user
from locust import events

from loadtests.login_throttle import LoginThrottle


class Operator(UserMixin):
    def __init__(self, username: str) -> None:
        self.username = username

    def get_id(self) -> str:
        return self.username


def credentials_match(given: tuple[str, str], expected: tuple[str, str]) -> bool:
    """Both compared in constant time, whichever is wrong."""
    return all([hmac.compare_digest(a.encode(), b.encode()) for a, b in zip(given, expected, strict=True)])


@events.init.add_listener
def web_login_set_up(environment, **_kwargs) -> None:
    web_ui = environment.web_ui
    if web_ui is None or not web_ui.web_login:
        return
    username = os.environ.get("LOCUST_WEB_USERNAME") or "locust"
    password = os.environ.get("LOCUST_WEB_PASSWORD", "")
    if len(password) < 12:
        raise SystemExit("LOCUST_WEB_PASSWORD must be set (12 characters or more) for the web UI's login")
    # The session cookie's key: this process's own, so a restart logs everyone out.
    web_ui.app.config["SECRET_KEY"] = secrets.token_urlsafe(32)
    web_ui.login_manager.user_loader(lambda user_id: Operator(user_id) if user_id == username else None)
    web_ui.auth_args = {"username_password_callback": "/login_submit"}

    blueprint = Blueprint("web_login", __name__)
    throttle = LoginThrottle()

    @blueprint.route("/login_submit", methods=["POST"])
    def login_submit():
        address = request.remote_addr or ""
        # Refused before the password is compared: a flood of guesses finds nothing.
        wait = throttle.retry_after(address)
        if wait:
            return Response(
                f"Too many failed logins: try again in {wait} s.\n",
                status=429,
                headers={"Retry-After": str(wait)},
                mimetype="text/plain",
            )
        given = (request.form.get("username", ""), request.form.get("password", ""))
        if credentials_match(given, (username, password)):
            throttle.success(address)
            login_user(Operator(username))
            return redirect(url_for("locust.index"))
        throttle.failure(address)
        session["auth_error"] = "Wrong username or password."
        return redirect(url_for("locust.login"))

    web_ui.app.register_blueprint(blueprint)
