"""The two paths a reader follows (docs/design.md, "Two paths"): a ``db_atomic`` purchase and
a ``redis_lua`` draw, each from the URL's endpoint to the COMMIT (the script's answer under
``redis_lua``), traced as they run rather than listed by hand.

The path is the files of the products and of ``inventory`` that the take enters, in the
order it first enters them. The libraries below them that a step calls and that answer at
once (``core``: the rate limit, the window's check, the memo, the Redis script's runner,
metrics; ``accounts``; ``locking``; ``config``'s Celery app) are side calls, listed apart.

Each path crosses at most eight files and never comes back to a file it left: no file is
entered again while a call it made is still running (a callback, such as the check and
the record a strategy calls), except the product's own adapter. A strategy's module and
the base sequence that calls its guard, read and write count as one there.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

import pytest

from inventory.items import item_forget
from lottery.product import POOL

ROOT = Path(__file__).resolve().parent.parent
DESIGN = ROOT / "docs" / "design.md"
PATH_PACKAGES = ("orders/", "lottery/", "inventory/")
MOST_FILES = 8

pytestmark = pytest.mark.django_db(transaction=True)


class Trace:
    """The project files a request enters from the call of the function ``start`` until the
    take (``inventory.take.item_take``) returns, and the callbacks among them."""

    def __init__(self, *, start: str, strategy: str, adapter: str) -> None:
        self.start, self.adapter = start, adapter
        self.unit = f"inventory/strategies/{strategy}.py"
        self.entered: list[str] = []
        self.callbacks: list[str] = []
        self._stack: list[str | None] = []
        self._recording = False

    def _name(self, filename: str) -> str | None:
        if not filename.startswith(str(ROOT)) or "/.venv/" in filename or "/tests/" in filename:
            return None
        return str(Path(filename).relative_to(ROOT))

    def _step(self, name: str | None) -> str | None:
        """The path's step a file belongs to: none for a side call, a strategy with its base."""
        if name is None or not name.startswith(PATH_PACKAGES):
            return None
        return self.unit if name == "inventory/strategies/base.py" else name

    def _profile(self, frame, event, arg) -> None:
        if event == "call":
            name = self._name(frame.f_code.co_filename)
            if frame.f_code.co_name == self.start and name is not None:
                self._recording = True
            if self._recording and name is not None:
                self.entered.append(name)
                step = self._step(name)
                callers = [self._step(caller) for caller in self._stack]
                caller = next((one for one in reversed(callers) if one is not None), None)
                if step not in (None, caller, self.adapter) and step in callers:
                    self.callbacks.append(name)
            self._stack.append(name)
        elif event == "return" and self._stack:
            name = self._stack.pop()
            if self._recording and name == "inventory/take.py" and frame.f_code.co_name == "item_take":
                self._recording = False

    def run(self, call) -> Trace:
        sys.setprofile(self._profile)
        try:
            call()
        finally:
            sys.setprofile(None)
        return self

    @property
    def files(self) -> list[str]:
        """The path's files, each once, in the order the take first enters them."""
        return [name for name in dict.fromkeys(self.entered) if name.startswith(PATH_PACKAGES)]

    @property
    def side(self) -> list[str]:
        return [name for name in dict.fromkeys(self.entered) if not name.startswith(PATH_PACKAGES)]


def documented(title: str) -> list[str]:
    """The files docs/design.md lists under ``title``, in order."""
    section = DESIGN.read_text().split(f"**{title}**", 1)[1].split("\n\n", 1)[1].split("\n\n", 1)[0]
    return re.findall(r"^\d+\. `([^`]+)`", section, flags=re.M)


def test_a_db_atomic_purchase_crosses_at_most_eight_files_and_never_comes_back(api_client, make_voucher):
    voucher = make_voucher(strategy="db_atomic", stock=5)
    buyer = api_client()
    trace = Trace(start="vouchers_purchase", strategy="db_atomic", adapter="orders/product.py")
    trace.run(lambda: buyer.post(f"/api/vouchers/{voucher.pk}/purchase"))
    assert trace.entered[-1] == "inventory/strategies/base.py"  # traced to the take's COMMIT
    assert len(trace.files) <= MOST_FILES, trace.files
    assert trace.callbacks == []
    assert trace.files == documented("A db_atomic purchase"), trace.side


@pytest.mark.usefixtures("reservations_redis")
@pytest.mark.parametrize("kept", [True, False], ids=["pool kept", "pool read"])
def test_a_redis_lua_draw_crosses_at_most_eight_files_and_never_comes_back(api_client, make_pool, kept):
    pool = make_pool(strategy="redis_lua", prizes=(("Gold", 5), ("Silver", 5)))
    api_client().post(f"/api/pools/{pool.pk}/draw")  # in a crowd, the pool is kept a second
    if not kept:
        item_forget(POOL, item_id=pool.pk)
    drawer = api_client()
    trace = Trace(start="pools_draw", strategy="redis_lua", adapter="lottery/product.py")
    trace.run(lambda: drawer.post(f"/api/pools/{pool.pk}/draw"))
    assert "inventory/redis_lua/client.py" in trace.entered  # traced to the script's answer
    assert len(trace.files) <= MOST_FILES, trace.files
    assert trace.callbacks == []
    # The first draw of a second reads the pool through its adapter before the take.
    assert (trace.files if kept else sorted(trace.files)) == (
        documented("A redis_lua draw") if kept else sorted(documented("A redis_lua draw"))
    ), trace.side
