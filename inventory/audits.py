"""What an item's audit is, whatever its product (docs/design.md, "Invariants"): the
figures read from the database, and whether every invariant holds."""

from __future__ import annotations

from dataclasses import asdict


class Audit:
    """The base of a product's audit, a frozen dataclass of figures that says ``ok``."""

    ok: bool

    def as_dict(self) -> dict:
        return {**asdict(self), "ok": self.ok}
