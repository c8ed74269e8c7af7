import io
import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.base")


def chunked_body_read(app):
    """``app`` reading a chunked request body (``Transfer-Encoding: chunked``, no
    Content-Length) as the body it is. Django reads a body by its Content-Length and read
    such a one as empty (a login answered 422). gunicorn undoes the chunking and says the
    input ends (``wsgi.input_terminated``); this reads it, up to one byte over
    ``DATA_UPLOAD_MAX_MEMORY_SIZE``, and gives Django its length, so that a body over the
    limit is refused as any other (413). Of a body over it, up to as much again is read on
    and dropped before the answer: a connection closed with its body unread is reset, and a
    client still sending is cut off before it reads the 413."""
    from django.conf import settings

    def application(environ, start_response):
        if (
            environ.get("wsgi.input_terminated")
            and not environ.get("CONTENT_LENGTH")
            and "chunked" in environ.get("HTTP_TRANSFER_ENCODING", "").lower()
        ):
            limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE or 2_621_440
            body = environ["wsgi.input"].read(limit + 1)
            if len(body) > limit:
                dropped = 0
                while dropped < limit and (read := environ["wsgi.input"].read(min(65536, limit - dropped))):
                    dropped += len(read)
            environ["wsgi.input"] = io.BytesIO(body)
            environ["CONTENT_LENGTH"] = str(len(body))
        return app(environ, start_response)

    return application


application = chunked_body_read(get_wsgi_application())
