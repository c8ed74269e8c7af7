"""Imports run one way: config -> lab -> loadtests and benchmarks (which import each
other) -> products (orders, lottery) -> accounts and inventory -> core -> locking (core
imports it for its Redis client: the rate limits). No product imports the other; nothing
imports upward (docs/design.md, "Layout")."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PROJECT = {
    "config", "core", "accounts", "inventory", "orders", "lottery", "locking", "lab", "loadtests", "benchmarks"
}  # fmt: skip
PRODUCTS_AND_BELOW = {"core", "inventory", "accounts", "locking", "orders", "lottery"}
# What each package may import of the project (besides itself).
ALLOWED = {
    "core": {"locking"},
    "locking": set(),
    "accounts": {"core", "locking"},
    "inventory": {"core", "locking"},
    "orders": {"core", "inventory", "accounts", "locking"},
    "lottery": {"core", "inventory", "accounts", "locking"},
    # The load tests drive both products; the lab runs the load tests from the web UI.
    "loadtests": PRODUCTS_AND_BELOW | {"benchmarks"},
    "benchmarks": PRODUCTS_AND_BELOW | {"loadtests"},
    "lab": PRODUCTS_AND_BELOW | {"loadtests", "benchmarks"},
    "config": PROJECT,
}


def imported_packages(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names & PROJECT


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_a_package_imports_only_what_lies_below_it(package):
    wrong = {}
    for path in (ROOT / package).rglob("*.py"):
        if "migrations" in path.parts:
            continue
        upward = imported_packages(path) - ALLOWED[package] - {package}
        if upward:
            wrong[str(path.relative_to(ROOT))] = sorted(upward)
    assert not wrong, wrong
