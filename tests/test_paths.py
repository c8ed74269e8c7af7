"""The paths a reader follows (docs/design.md, "Paths a reader follows"), traced as they
run rather than listed by hand: a ``db_atomic`` purchase and a ``redis_lua`` draw from the
URL's endpoint to the COMMIT (the script's answer under ``redis_lua``), and what becomes of
a ``db_atomic`` order held for its payment, each to its COMMIT: its cancel from the URL's
endpoint, its payment's confirmation from the provider's callback, its expiry from the task
at its deadline (or the beat's sweep).

A path is the files of the products, the payments and ``inventory`` that it enters, in the
order it first enters them, and beside them the files of ``core`` it enters, in the same
order. The libraries below them (``accounts``, ``locking``, ``config``'s Celery app) are
side calls, not listed.

A path never comes back to a file it left: no file is entered again while a call it made
is still running (a callback, such as a lock that runs its caller's release). A strategy's
module and the base sequence that calls its guard, read and write count as one there. The
product's adapter is the file the core calls into on purpose, for what the product says
(its items, what a take is, its check, its record): each path enters it at most as often as
its ``Course`` says, each entry named.

Each path crosses at most eight files and seven of ``core``, save a path that crosses more
files today: its ``Course.files`` is that count, which it may not grow past and which is
lowered as it comes down to eight.
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

import pytest
from django.utils import timezone

from core.namespace import key_prefix
from inventory.items import item_forget
from inventory.tasks import holds_expire, holds_sweep
from lottery.product import POOL
from orders.models import Order, Voucher
from payments.models import Payment
from tests.records import answered_row, answered_rows

from .payments.conftest import callback

ROOT = Path(__file__).resolve().parent.parent
DESIGN = ROOT / "docs" / "design.md"
PATH_PACKAGES = ("orders/", "lottery/", "payments/", "inventory/")
CORE = "core/"
MOST_FILES = 8
MOST_CORE_FILES = 7
# Longer than the horizon of the expiry tasks (HOLD_TASK_HORIZON_SECONDS): no task is sent.
WINDOW = 3600

pytestmark = pytest.mark.django_db(transaction=True)


@dataclass(frozen=True)
class Course:
    """One path: its title in docs/design.md; the function it starts at; the file and
    function whose return is its COMMIT; the strategy and the product's adapter it runs
    through; how often it may enter the adapter; and the most files it may cross."""

    title: str
    start: str
    end: tuple[str, str]
    strategy: str
    adapter: str
    adapter_entries: int
    files: int = MOST_FILES


PURCHASE = Course(
    "A db_atomic purchase",
    "vouchers_purchase",
    ("inventory/take.py", "item_take"),
    "db_atomic",
    "orders/product.py",
    # read; then what a purchase is (take) and the hooks the take calls: admit, check, record.
    adapter_entries=5,
)
DRAW = Course(
    "A redis_lua draw",
    "pools_draw",
    ("inventory/take.py", "item_take"),
    "redis_lua",
    "lottery/product.py",
    # read (the first draw of a second), take and reserved.
    adapter_entries=3,
)
CANCEL = Course(
    "A cancel",
    "orders_cancel",
    ("inventory/holds.py", "hold_release"),
    "db_atomic",
    "orders/product.py",
    # None: the change reads the item as read with the order, and its group from the core's
    # own adapter defaults.
    adapter_entries=0,
    files=12,
)
CONFIRM = Course(
    "A payment's confirmation",
    # The signature is the call's authentication, checked before the body is parsed.
    "_provider_signed",
    ("payments/services.py", "payment_confirm"),
    "db_atomic",
    "orders/product.py",
    # None, as a cancel.
    adapter_entries=0,
    files=9,
)
EXPIRY = Course(
    "An expiry",
    "holds_expire",
    ("inventory/holds.py", "holds_expire_due"),
    "db_atomic",
    "orders/product.py",
    # None: the items are read through the core's defaults.
    adapter_entries=0,
)


class Trace:
    """The project files a call enters from the call of the course's ``start`` until its
    ``end`` returns, the callbacks among them and the entries into the adapter."""

    def __init__(self, course: Course, *, start: str | None = None) -> None:
        self.course = course
        self.start = start or course.start
        self.unit = f"inventory/strategies/{course.strategy}.py"
        self.entered: list[str] = []
        self.callbacks: list[str] = []
        self.adapter_calls: list[str] = []
        self.reached = False
        self._stack: list[str | None] = []
        self._recording = False
        self._bottom = 0

    def _name(self, filename: str) -> str | None:
        if not filename.startswith(str(ROOT)) or "/.venv/" in filename or "/tests/" in filename:
            return None
        return str(Path(filename).relative_to(ROOT))

    def _step(self, name: str | None) -> str | None:
        """The path's step a file belongs to: none for a side call, a strategy with its base."""
        if name is None or not name.startswith((*PATH_PACKAGES, CORE)):
            return None
        return self.unit if name == "inventory/strategies/base.py" else name

    def _profile(self, frame, event, arg) -> None:
        if event == "call":
            name = self._name(frame.f_code.co_filename)
            if frame.f_code.co_name == self.start and name is not None and not (self._recording or self.reached):
                # What runs around the path (the middleware, the task's runner) is no caller.
                self._recording, self._bottom = True, len(self._stack)
            if self._recording and name is not None:
                self.entered.append(name)
                step = self._step(name)
                callers = [self._step(caller) for caller in self._stack[self._bottom :]]
                caller = next((one for one in reversed(callers) if one is not None), None)
                if step not in (None, caller) and step in callers:
                    self.callbacks.append(f"{name}:{frame.f_code.co_name}")
                if step == self.course.adapter and caller != step:
                    self.adapter_calls.append(frame.f_code.co_name)
            self._stack.append(name)
        elif event == "return" and self._stack:
            name = self._stack.pop()
            if self._recording and (name, frame.f_code.co_name) == self.course.end:
                self._recording, self.reached = False, True

    def run(self, call) -> Trace:
        sys.setprofile(self._profile)
        try:
            call()
        finally:
            sys.setprofile(None)
        return self

    def _each(self, *prefixes: str) -> list[str]:
        return [name for name in dict.fromkeys(self.entered) if name.startswith(prefixes)]

    @property
    def files(self) -> list[str]:
        """The path's files, each once, in the order it first enters them."""
        return self._each(*PATH_PACKAGES)

    @property
    def core(self) -> list[str]:
        return self._each(CORE)

    @property
    def side(self) -> list[str]:
        return [name for name in dict.fromkeys(self.entered) if self._step(name) is None]

    def __repr__(self) -> str:
        """What was traced, as docs/design.md lists it, and what else a failure needs."""
        numbered = "\n".join(f"{n}. `{name}`" for n, name in enumerate(self.files, 1))
        core = ", ".join(f"`{name}`" for name in self.core) or "none"
        return (
            f"\ntraced under **{self.course.title}** (docs/design.md, with what each step does):\n"
            f"{numbered}\n\nCore: {core}.\n\n"
            f"{len(self.files)} files (at most {self.course.files}), {len(self.core)} of core "
            f"(at most {MOST_CORE_FILES}); the adapter ({self.course.adapter}) entered "
            f"{len(self.adapter_calls)} times (at most {self.course.adapter_entries}): "
            f"{', '.join(self.adapter_calls)}; callbacks: {', '.join(self.callbacks) or 'none'}; "
            f"side calls: {', '.join(self.side) or 'none'}; the COMMIT reached: {self.reached}"
        )


def documented(title: str) -> tuple[list[str], list[str]]:
    """The files docs/design.md lists under ``title``, in order, and its ``Core:`` line's;
    none where it lists no such path."""
    _, found, after = DESIGN.read_text().partition(f"**{title}**")
    files, core = (after.split("\n\n") + ["", ""])[1:3] if found else ("", "")
    core = core if core.startswith("Core: ") else ""
    return re.findall(r"^\d+\. `([^`]+)`", files, flags=re.M), re.findall(rf"`({CORE}[^`]+)`", core)


def assert_followable(trace: Trace, *, ordered: bool = True) -> None:
    """The trace reached its COMMIT within the course's bounds and is the documented one;
    otherwise the failure says what was traced, in the words of the docs."""
    course = trace.course
    files, core = documented(course.title)
    same = (trace.files, trace.core) == (files, core)
    if not ordered:  # the order the path enters its files in is not the one documented
        same = (sorted(trace.files), sorted(trace.core)) == (sorted(files), sorted(core))
    wrong = {
        "the COMMIT was not reached": not trace.reached,
        "it comes back to a file": bool(trace.callbacks),
        f"it crosses more than {course.files} files": len(trace.files) > course.files,
        # A bound past eight is today's count, lowered as the path comes down to eight.
        f"it crosses fewer than {course.files} files: lower its Course.files": MOST_FILES < course.files
        and len(trace.files) < course.files,
        f"it enters more than {MOST_CORE_FILES} files of core": len(trace.core) > MOST_CORE_FILES,
        f"it enters its adapter more than {course.adapter_entries} times": len(trace.adapter_calls)
        > course.adapter_entries,
        f"docs/design.md lists other files ({', '.join(files) or 'none'}; core: {', '.join(core) or 'none'})": not same,
    }
    if any(wrong.values()):
        pytest.fail("; ".join(what for what, found in wrong.items() if found) + repr(trace), pytrace=False)


def test_a_db_atomic_purchase_is_a_path_a_reader_follows(api_client, make_voucher):
    voucher = make_voucher(strategy="db_atomic", stock=5)
    buyer = api_client()
    trace = Trace(PURCHASE).run(lambda: buyer.post(f"/api/vouchers/{voucher.pk}/purchase"))
    assert_followable(trace)


@pytest.mark.usefixtures("reservations_redis")
@pytest.mark.parametrize("kept", [True, False], ids=["pool kept", "pool read"])
def test_a_redis_lua_draw_is_a_path_a_reader_follows(api_client, make_pool, kept):
    pool = make_pool(strategy="redis_lua", prizes=(("Gold", 5), ("Silver", 5)))
    api_client().post(f"/api/pools/{pool.pk}/draw")  # in a crowd, the pool is kept a second
    if not kept:
        item_forget(POOL, item_id=pool.pk)
    drawer = api_client()
    trace = Trace(DRAW).run(lambda: drawer.post(f"/api/pools/{pool.pk}/draw"))
    # The first draw of a second reads the pool through its adapter before the take.
    assert_followable(trace, ordered=kept)


@pytest.fixture
def held_order(api_client, make_voucher, payment_provider):
    """A buyer's client and their order of a db_atomic voucher that holds it for payment."""
    voucher = make_voucher(strategy="db_atomic", stock=5)
    Voucher.objects.filter(pk=voucher.pk).update(hold_seconds=WINDOW)
    buyer = api_client()
    answer = buyer.post(f"/api/vouchers/{voucher.pk}/purchase")
    assert answer.json()["status"] == "held", answer.content
    return buyer, answer.json()["order_id"]


def test_a_cancel_is_a_path_a_reader_follows(held_order):
    buyer, order_id = held_order
    trace = Trace(CANCEL).run(lambda: buyer.post(f"/api/orders/{order_id}/cancel"))
    assert answered_row(Order, order_id).status == Order.Status.CANCELLED
    assert_followable(trace)


def test_a_payments_confirmation_is_a_path_a_reader_follows(held_order, payment_provider):
    buyer, order_id = held_order
    payment_provider.PAYMENT_PROVIDER_DELAY_MS = 500  # confirmed later, by the callback
    assert buyer.post(f"/api/orders/{order_id}/pay").status_code == 202
    reference = Payment.objects.get().reference
    key_prefix()  # read once per process: a step of no path, whichever test ran first
    trace = Trace(CONFIRM).run(lambda: callback(reference))
    assert answered_row(Order, order_id).status == Order.Status.PAID
    assert_followable(trace)


@pytest.mark.parametrize("task", [holds_expire, holds_sweep], ids=["at the deadline", "the sweep"])
def test_an_expiry_is_a_path_a_reader_follows(held_order, task):
    _, order_id = held_order
    order = answered_row(Order, order_id)
    answered_rows(Order, order_id).update(hold_until=timezone.now() - timedelta(seconds=1))
    arguments = ("voucher", order.voucher_id) if task is holds_expire else ("voucher",)
    trace = Trace(EXPIRY, start=task.__name__).run(lambda: task(*arguments))
    assert answered_row(Order, order_id).status == Order.Status.EXPIRED
    assert_followable(trace)
