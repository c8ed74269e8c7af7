"""The reads beside the take, named ``WATCH`` first so that the take's figures leave them out:
an open tab's polls of the pages (``locustfiles/watched.py``) and the honest buyer's look at
the stock (``locustfiles/hoarding.py``).

A documented answer writes no outcome line; anything else is logged ``error``
(``common.undocumented``), as a take's is, which the verdict counts: the watched scenario
claims that tabs cost the take nothing, and a tab answered 500 is a tab not served.
"""

from __future__ import annotations

import os

from .common import WATCH, json_object, unavailable_ok, undocumented


def page_watched(user, path: str, name: str) -> bool:
    """GET the page at ``path`` as an open tab polls it; whether it was served. A page answers
    200; under the fault runner also the outage's page, 503 with ``Retry-After``
    (``core.outage``: a dependency down on purpose). Anything else is an error."""
    with user.client.get(path, name=f"{WATCH} {name}", catch_response=True) as response:
        if response.status_code == 200:
            response.success()
            return True
        if (
            response.status_code == 503
            and response.headers.get("Retry-After")
            and os.environ.get("LOADTEST_UNAVAILABLE_OK")
        ):
            response.success()
            return False
        undocumented(response, f"{name} answered {response.status_code}")
        return False


def stock_read(user, voucher: int, token: str) -> int | None:
    """The voucher's stock, as ``GET /api/vouchers/{id}`` answers it to the buyer of
    ``token``; None when it did not say (the fault runner's 503, or an error, logged)."""
    with user.client.get(
        f"/api/vouchers/{voucher}",
        headers={"Authorization": f"Bearer {token}"},
        name=f"{WATCH} /api/vouchers/[id]",
        catch_response=True,
    ) as response:
        body = json_object(response)
        if body is None:
            return None
        if response.status_code == 200 and isinstance(body.get("stock"), int):
            response.success()
            return body["stock"]
        if unavailable_ok(response, body):
            response.success()
            return None
        undocumented(response, f"reading voucher {voucher} answered {response.status_code} {body}")
        return None
