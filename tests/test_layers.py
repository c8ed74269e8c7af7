"""Imports run one way, down a ladder of tiers (docs/design.md, "Layout"):

    scripts -> config -> lab -> loadtests, benchmarks -> payments -> orders, lottery, harness
            -> accounts, inventory -> core, locking

A package imports only packages of the tiers below its own, never one of its own tier: no
product imports the other, payments stand on the flash sale's orders, the load tests and
the benchmarks share what they both need through ``harness`` rather than import each other,
and ``core`` and ``locking`` import no project package at all."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TIERS = [
    {"scripts"},
    {"config"},
    {"lab"},
    {"loadtests", "benchmarks"},
    {"payments"},
    {"orders", "lottery", "harness"},
    {"accounts", "inventory"},
    {"core", "locking"},
]
PROJECT = set().union(*TIERS)
# What each package may import of the project (besides itself): every tier below its own.
ALLOWED = {package: set().union(set(), *TIERS[depth + 1 :]) for depth, tier in enumerate(TIERS) for package in tier}
# The largest a module may grow (tests and migrations aside): past it, a reader no longer
# holds the module in mind at once, and it splits along its concerns.
MOST_LINES = 400
BOUNDED = [
    "scripts",
    "config",
    "lab",
    "loadtests",
    "benchmarks",
    "payments",
    "orders",
    "lottery",
    "harness",
    "accounts",
    "inventory",
    "core",
    "locking",
]


def imported_packages(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names & PROJECT


def test_every_top_level_package_stands_on_a_tier():
    packages = {path.parent.name for path in ROOT.glob("*/*.py") if not path.parent.name.startswith(".")}
    assert packages - {"tests"} == PROJECT


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
    """The modules of ``package`` (dotted, ``inventory.redis_lua`` for a sub-package) that
    ``path`` imports, at its top or inside a function: an import deferred into a function
    is a cycle all the same, only hidden."""
    tree = ast.parse(path.read_text(), filename=str(path))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module:
                names.add(node.module.split(".")[0])
            else:
                names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith(f"{package}."):
            names.add(node.module.removeprefix(f"{package}.").split(".")[0])
    return names


def import_cycle(package: str) -> list[str] | None:
    """A cycle among the modules of ``package`` (one level deep), or None."""
    modules = {path.stem: path for path in (ROOT / package.replace(".", "/")).glob("*.py") if path.stem != "__init__"}
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


# The project's packages and their sub-packages (``inventory.strategies``,
# ``inventory.redis_lua``), each of whose modules import each other one way too.
PACKAGES = sorted(
    ".".join(init.parent.relative_to(ROOT).parts)
    for top in PROJECT
    for init in (ROOT / top).rglob("__init__.py")
    if "migrations" not in init.parts
)


def test_the_sub_packages_are_found():
    assert {"inventory", "inventory.redis_lua", "inventory.strategies"} <= set(PACKAGES)


@pytest.mark.parametrize("package", PACKAGES)
def test_the_modules_of_a_package_import_each_other_one_way(package):
    assert import_cycle(package) is None


@pytest.mark.parametrize("package", BOUNDED)
def test_no_module_grows_past_the_bound(package):
    long = {
        str(path.relative_to(ROOT)): lines
        for path in (ROOT / package).rglob("*.py")
        if "migrations" not in path.parts and (lines := len(path.read_text().splitlines())) > MOST_LINES
    }
    assert not long, long
