"""What one user can keep in Redis under Idempotency-Keys, and what the bound costs a request.

    .venv/bin/python -m benchmarks.idempotency_bound [--requests 2000] [--bound 1000]

One user sends ``--requests`` pays, each with a fresh 255-character key, through the claim and
the answer the API makes (``core.idempotency``: the claim's script, then the kept answer), in
the locks' Redis of ``REDIS_URL``, with ``IDEMPOTENCY_KEYS_PER_USER`` set to ``--bound``.
Printed: how many were kept and refused, Redis's own ``MEMORY USAGE`` of a kept record and of
the user's count of live keys, the growth of ``used_memory``, and the median time of a kept
keyed request (its claim and its answer) among the first 100 and the last 100 kept (the count
nearly empty, then nearly full), and of a refused one (its claim alone). The user's keys are deleted after.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import secrets
import statistics
import time

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.test")

# What a pay answers, kept under each key.
BODY = json.dumps({"order_id": 123456, "status": "paid", "payment": "paid"})
USER_ID = 987654321


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--bound", type=int, default=1000)
    args = parser.parse_args(argv)

    import django

    django.setup()
    from django.conf import settings
    from django.http import HttpResponse
    from django.test import RequestFactory

    from core.idempotency import (
        IdempotencyKeysExhausted,
        idempotency_answered,
        idempotency_claim,
        idempotency_client,
        live_key,
    )
    from core.namespace import instance_key

    settings.IDEMPOTENCY_KEYS_PER_USER = args.bound
    client = idempotency_client()
    pattern = instance_key(f"idem:{{user:{USER_ID}}}:*")

    def forget() -> None:
        for key in client.scan_iter(match=pattern, count=1000):
            client.delete(key)

    forget()
    before = client.info("memory")["used_memory"]
    kept_times, refused_times = [], []
    for _ in range(args.requests):
        request = RequestFactory().post("/api/orders/123456/pay", HTTP_IDEMPOTENCY_KEY=secrets.token_hex(128)[:255])
        started = time.perf_counter()
        try:
            idempotency_claim(request, HttpResponse(), action="pay", user_id=USER_ID)
            idempotency_answered(request, HttpResponse(BODY, status=200, content_type="application/json"))
            kept_times.append(time.perf_counter() - started)
        except IdempotencyKeysExhausted:
            refused_times.append(time.perf_counter() - started)
    grown = client.info("memory")["used_memory"] - before
    records = [key for key in client.scan_iter(match=pattern, count=1000) if not key.endswith(b":live")]
    live = live_key(user_id=USER_ID)
    machine = f"{platform.machine()}, {os.cpu_count()} cores; Python {platform.python_version()}"
    print(f"Machine: {machine}; Redis {client.info('server')['redis_version']}; IDEMPOTENCY_KEYS_PER_USER={args.bound}")
    print(f"{args.requests} pays with fresh 255-character keys: {len(kept_times)} kept, {len(refused_times)} refused")
    print(f"{len(records)} records; MEMORY USAGE of one {client.memory_usage(records[0])} B")
    print(f"the user's live count: {client.zcard(live)} members, MEMORY USAGE {client.memory_usage(live)} B")
    print(f"used_memory grew {grown / 1e6:.2f} MB ({grown / max(1, len(records)):.0f} B a record)")
    for name, times in (
        ("kept, the first 100", kept_times[:100]),
        ("kept, the last 100", kept_times[-100:]),
        ("refused", refused_times),
    ):
        if times:
            print(f"median keyed request, {name}: {statistics.median(times) * 1000:.3f} ms")
    forget()


if __name__ == "__main__":
    main()
