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


def module_imports(path: Path, package: str) -> set[str]:
    """The modules of ``package`` that ``path`` imports, at its top or inside a function:
    an import deferred into a function is a cycle all the same, only hidden."""
    tree = ast.parse(path.read_text(), filename=str(path))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module:
                names.add(node.module.split(".")[0])
            else:
                names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith(f"{package}."):
            names.add(node.module.split(".")[1])
    return names


def import_cycle(package: str) -> list[str] | None:
    """A cycle among the modules of ``package`` (one level deep), or None."""
    modules = {path.stem: path for path in (ROOT / package).glob("*.py") if path.stem != "__init__"}
    edges = {name: module_imports(path, package) & modules.keys() - {name} for name, path in modules.items()}
    visiting: list[str] = []
    done: set[str] = set()

    def visit(name: str) -> list[str] | None:
        if name in visiting:
            return visiting[visiting.index(name) :] + [name]
        if name in done:
            return None
        visiting.append(name)
        for other in sorted(edges[name]):
            if cycle := visit(other):
                return cycle
        visiting.pop()
        done.add(name)
        return None

    return next((cycle for name in sorted(modules) if (cycle := visit(name))), None)


@pytest.mark.parametrize("package", sorted(PROJECT))
def test_the_modules_of_a_package_import_each_other_one_way(package):
    assert import_cycle(package) is None
