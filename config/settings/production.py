"""Production settings: everything from the environment, nothing insecure by default."""

import os

from django.core.exceptions import ImproperlyConfigured

from config.logs import logging_config

from .base import *  # noqa: F403
from .base import SECRET_KEY_FALLBACKS, STORAGES, TRUSTED_PROXIES, VAR_DIR, env_bool, env_int

DEBUG = False
SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "")
if len(SECRET_KEY) < 50:
    raise ImproperlyConfigured("DJANGO_SECRET_KEY must be set to a random string of at least 50 characters")
if any(len(key) < 50 for key in SECRET_KEY_FALLBACKS):
    raise ImproperlyConfigured("each key in DJANGO_SECRET_KEY_FALLBACKS must be at least 50 characters long")
if not os.environ.get("DATABASE_URL"):
    raise ImproperlyConfigured("DATABASE_URL must be set (mysql://user:password@host:3306/name)")

# TLS ends at the proxy in front of gunicorn, which says so in X-Forwarded-Proto.
SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
SECURE_SSL_REDIRECT = env_bool("DJANGO_SECURE_SSL_REDIRECT", True)
if SECURE_SSL_REDIRECT and not TRUSTED_PROXIES:
    # X-Forwarded-Proto is believed from a trusted proxy alone (core.proxied): with none named,
    # every request reads as plain HTTP and the redirect to HTTPS never ends.
    raise ImproperlyConfigured(
        "TRUSTED_PROXIES must name the TLS proxy in front of gunicorn (the address or network it connects "
        "from), or set DJANGO_SECURE_SSL_REDIRECT=false"
    )
SECURE_HSTS_SECONDS = env_int("DJANGO_SECURE_HSTS_SECONDS", 31536000)
SECURE_HSTS_INCLUDE_SUBDOMAINS = True
SECURE_HSTS_PRELOAD = True
SESSION_COOKIE_SECURE = env_bool("DJANGO_SESSION_COOKIE_SECURE", True)
CSRF_COOKIE_SECURE = env_bool("DJANGO_CSRF_COOKIE_SECURE", True)

STATIC_ROOT = VAR_DIR / "static"  # collectstatic writes here (the Dockerfile runs it)
STORAGES = {**STORAGES, "staticfiles": {"BACKEND": "whitenoise.storage.CompressedManifestStaticFilesStorage"}}
WHITENOISE_USE_FINDERS = False

# One JSON object per line, for a log pipeline to index (LOG_FORMAT=text for a person), with
# a line per purchase and draw, per lock and per reservation written (LOG_LEVEL=WARNING for
# only what went wrong).
LOG_FORMAT = os.environ.get("LOG_FORMAT") or "json"
LOG_LEVEL = os.environ.get("LOG_LEVEL") or "INFO"
LOGGING = logging_config(log_format=LOG_FORMAT, level=LOG_LEVEL)
