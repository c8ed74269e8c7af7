"""The restock scenario's call (``locustfiles/restock.py``): staff restock the run's voucher
through the staff API (``PATCH /api/admin/vouchers/{id}``), the answer validated as a take's
is (``loadtests.common``) and kept in the history, whose audit counts a restock answered 200
among the units supplied (``loadtests.history``).

A documented refusal writes no outcome line. Anything else is logged ``error``
(``common.undocumented``), which the verdict counts: a 403 first, a member of staff without
``orders.change_voucher``, whose restocks all fail while the buyers sell the first stock out,
and a run that showed nothing of its claim ("every unit supplied is sold or left") would hold.
"""

from __future__ import annotations

import time

from .common import ERROR, json_object, unavailable_ok, undocumented
from .history_log import RESTOCK, history
from .verdict import VOUCHER

RESTOCKED = "restocked"
# What a restock may be refused with and still be documented (docs/api.md): 409 ``busy``, a
# staff call on a ``redis_lua`` item while its reservations are being written, and 409
# ``supply_limit``, a row supplied its most units, nothing written; and under the fault
# runner a 503 ``unavailable`` with ``Retry-After`` (``common.unavailable_ok``). A 429 is
# not: no staff call is rate limited.
REFUSALS = {409: {"busy", "supply_limit"}}


def restock(user, voucher: int, token: str, units: int) -> str:
    """PATCH a restock of ``units`` onto ``voucher`` as the member of staff of ``token``;
    returns the outcome: ``restocked``, a documented refusal's code, or ``error``."""
    started = time.time()
    with user.client.patch(
        f"/api/admin/vouchers/{voucher}",
        json={"restock": units},
        headers={"Authorization": f"Bearer {token}"},
        name="/api/admin/vouchers/[id] restock",
        catch_response=True,
    ) as response:
        outcome = _restock_judged(response, voucher)
        # Inside the request's block, as a take's is (``common.purchase_answer``).
        history.add(
            start=started, action=RESTOCK, kind=VOUCHER, item=voucher, token=token,
            status=response.status_code or 0, code=outcome, units=units,
        )  # fmt: skip
    return outcome


def _restock_judged(response, voucher: int) -> str:
    body = json_object(response)
    if body is None:  # failed and logged already
        return ERROR
    if response.status_code == 200 and body.get("id") == voucher:
        response.success()
        return RESTOCKED
    if body.get("code") in REFUSALS.get(response.status_code, ()) or unavailable_ok(response, body):
        response.success()
        return body["code"]
    return undocumented(response, f"restock answered {response.status_code} {body}")
