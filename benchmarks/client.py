"""The benchmarks' load client: a small epoll loop in the benchmark's own process that keeps
a number of requests in flight, each a prebuilt byte string on a connection of its own
(``benchmarks.http`` says why it is not Locust), and tallies the answers."""

from __future__ import annotations

import itertools
import json
import selectors
import socket
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field


@dataclass
class Tally:
    """What one run's answers were."""

    answered: int = 0  # by the end of the run
    late: int = 0  # in flight at the end, answered after it (served all the same)
    seconds: float = 0.0
    statuses: Counter = field(default_factory=Counter)
    codes: Counter = field(default_factory=Counter)  # refusal codes of the answers that were not 2xx
    latencies: list[float] = field(default_factory=list)
    ran_out: bool = False  # the buyers ran out before the run's end
    last_taken: float = 0.0  # seconds from the start to the last 2xx answer

    @property
    def rate(self) -> float:
        return self.answered / self.seconds if self.seconds else 0.0

    @property
    def served(self) -> int:
        return self.answered + self.late

    def percentile(self, q: float) -> float:
        if not self.latencies:
            return 0.0
        ordered = sorted(self.latencies)
        return 1000 * ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class _Slot:
    """One request in flight: the bytes left to send, the answer so far, when it was sent."""

    __slots__ = ("unsent", "chunks", "sent_at")

    def __init__(self, request: bytes) -> None:
        self.unsent, self.chunks, self.sent_at = request, [], time.perf_counter()


def _note(tally: Tally, answer: bytes) -> None:
    status = int(answer[9:12]) if answer[:5] == b"HTTP/" else 0
    tally.statuses[status] += 1
    if not 200 <= status < 300:
        try:
            tally.codes[json.loads(answer.split(b"\r\n\r\n", 1)[1]).get("code", "?")] += 1
        except (ValueError, IndexError, AttributeError):
            tally.codes["not JSON" if status else "no answer"] += 1


def load(port: int, requests: Iterator[bytes], concurrency: int, seconds: float) -> Tally:
    """Keep ``concurrency`` requests in flight for ``seconds``, each on a connection of its own
    read until the server closes it; those in flight at the end are still read."""
    selector = selectors.DefaultSelector()
    tally = Tally()
    started = time.perf_counter()
    end = started + seconds
    last_answer = started
    in_flight = 0

    def send(sock: socket.socket, slot: _Slot) -> None:
        slot.unsent = slot.unsent[sock.send(slot.unsent) :]
        selector.modify(sock, selectors.EVENT_WRITE if slot.unsent else selectors.EVENT_READ, slot)

    def open_next() -> None:
        nonlocal in_flight
        request = next(requests, None)
        if request is None:
            tally.ran_out = True
            return
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.setblocking(False)
        slot = _Slot(request)
        # On loopback the handshake is usually over when connect returns: then send at once
        # rather than wait a turn of the loop.
        connected = sock.connect_ex(("127.0.0.1", port)) == 0
        selector.register(sock, selectors.EVENT_WRITE, slot)
        in_flight += 1
        if connected:
            send(sock, slot)

    def finish(sock: socket.socket, slot: _Slot) -> None:
        nonlocal in_flight, last_answer
        selector.unregister(sock)
        sock.close()
        in_flight -= 1
        now = time.perf_counter()
        _note(tally, b"".join(slot.chunks))
        if now > end:
            tally.late += 1
            return
        tally.answered += 1
        tally.latencies.append(now - slot.sent_at)
        last_answer = now
        if slot.chunks and slot.chunks[0][9:10] == b"2":
            tally.last_taken = now - started
        open_next()

    for _ in range(concurrency):
        open_next()
    while in_flight:
        for key, events in selector.select(timeout=5):
            sock, slot = key.fileobj, key.data
            try:
                if events & selectors.EVENT_WRITE:
                    send(sock, slot)
                    continue
                data = sock.recv(65536)
            except OSError:  # refused or reset: no answer
                slot.chunks.clear()
                data = b""
            if data:
                slot.chunks.append(data)
            else:
                finish(sock, slot)
    selector.close()
    tally.seconds = (last_answer if tally.ran_out else end) - started
    return tally


def post_requests(path: str, port: int, tokens: list[str]) -> Iterator[bytes]:
    head = f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: 0\r\nConnection: close\r\n"
    return (f"{head}Authorization: Bearer {token}\r\n\r\n".encode() for token in tokens)


def get_requests(path: str, port: int) -> Iterator[bytes]:
    return itertools.repeat(f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n".encode())
