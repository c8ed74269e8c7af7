"""A reverse proxy in a process of its own, as ``deploy/nginx.conf`` sets one up in front of
gunicorn: it answers on 127.0.0.1, connects to the upstream from 127.0.0.1, and *replaces*
``X-Forwarded-For`` with the address of the peer it saw (``$remote_addr``), whatever the
client sent. ``python -m tests.proxy PORT UPSTREAM_URL``; it prints ``ready`` once it listens.
"""

from __future__ import annotations

import http.client
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "proxy-connection"}


def handler_for(upstream: str) -> type[BaseHTTPRequestHandler]:
    target = urlsplit(upstream)

    class Forward(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.0"

        def forward(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
            headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP_BY_HOP}
            headers = {k: v for k, v in headers.items() if k.lower() != "x-forwarded-for"}
            headers["X-Forwarded-For"] = self.client_address[0]
            connection = http.client.HTTPConnection(
                target.hostname, target.port, timeout=30, source_address=("127.0.0.1", 0)
            )
            try:
                connection.request(self.command, self.path, body=body or None, headers=headers)
                answer = connection.getresponse()
                data = answer.read()
            finally:
                connection.close()
            self.send_response_only(answer.status, answer.reason)
            for key, value in answer.getheaders():
                if key.lower() not in HOP_BY_HOP and key.lower() != "content-length":
                    self.send_header(key, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        do_GET = do_POST = do_PATCH = do_DELETE = forward

        def log_message(self, *args) -> None:  # quiet
            pass

    return Forward


def main() -> None:
    port, upstream = int(sys.argv[1]), sys.argv[2]
    server = ThreadingHTTPServer(("127.0.0.1", port), handler_for(upstream))
    print("ready", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
