"""The scenarios, in one registry: adding one is a locustfile and one line here.

Each names its locustfile (``loadtests/locustfiles/``, whose docstring tells the
story), the product it runs against (``loadtests.products``) and what it proves.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from .verdict import POOL, VOUCHER

LOCUSTFILES = Path(__file__).resolve().parent / "locustfiles"


@dataclass(frozen=True)
class Scenario:
    name: str
    locustfile: str
    product: str
    proves: str
    # Whether its Locust users serve the crowd of tokens one after another (and can run
    # out of it), rather than sharing a few tokens (``--hammer-buyers``).
    serves_the_crowd: bool = True
    # Whether a buyer tries more than it may (buys twice, draws past the limit): when not,
    # the product's second invariant (duplicate orders, users over the limit) is not tried.
    repeats: bool = False

    @property
    def path(self) -> Path:
        return LOCUSTFILES / self.locustfile


SCENARIOS: dict[str, Scenario] = {
    scenario.name: scenario
    for scenario in (
        Scenario("crowd", "crowd.py", VOUCHER, "a crowd buying once each: no more sold than the stock"),
        Scenario(
            "hammer",
            "hammer.py",
            VOUCHER,
            "a few buyers firing many purchases at once: one order per buyer",
            serves_the_crowd=False,
            repeats=True,
        ),
        Scenario("restock", "restock.py", VOUCHER, "restocks under purchases: every unit supplied is sold or left"),
        Scenario(
            "draw-crowd",
            "draw_crowd.py",
            POOL,
            "a crowd drawing up to the limit: no prize beyond its supply",
            repeats=True,  # each draws until told draw_limit
        ),
        Scenario(
            "draw-hammer",
            "draw_hammer.py",
            POOL,
            "a few users firing many draws at once: nobody over the draw limit",
            serves_the_crowd=False,
            repeats=True,
        ),
    )
}
DEFAULT = "crowd"


def scenarios_named(names: str) -> list[Scenario]:
    """``"all"`` or comma-separated names, in the order given; raises ``KeyError`` naming the unknown ones."""
    if names == "all":
        return list(SCENARIOS.values())
    wanted = [name.strip() for name in names.split(",") if name.strip()]
    unknown = [name for name in wanted if name not in SCENARIOS]
    if unknown:
        raise KeyError(", ".join(unknown))
    return [SCENARIOS[name] for name in wanted]


def scenarios_help() -> str:
    """One line per scenario, for ``--help``."""
    return "\n".join(f"  {s.name:<12} ({s.product}) {s.proves}" for s in SCENARIOS.values())
