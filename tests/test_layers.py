"""Imports run one way, down a ladder of tiers (docs/design.md, "Layout"):

    scripts -> config -> lab -> loadtests, benchmarks -> payments -> orders, lottery, harness
            -> accounts, inventory -> core, locking

A package imports only packages of the tiers below its own, never one of its own tier: no
product imports the other, payments stand on the flash sale's orders, the load tests and
the benchmarks share what they both need through ``harness`` rather than import each other,
and ``core`` and ``locking`` import no project package at all.

Within a package the modules import each other one way too, those of its sub-packages
(``inventory/strategies/``) with them: no module imports one that imports it back, whether
both stand in one folder or not, at the top or deferred into a function."""

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


def module_name(path: Path, root: Path = ROOT) -> str:
    """A module's dotted name (``inventory.strategies.base``); a package's, of its ``__init__``."""
    parts = path.relative_to(root).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def module_imports(path: Path, name: str, modules: set[str]) -> set[str]:
    """The ``modules`` that the module ``name`` (at ``path``) imports, at its top or inside
    a function: an import deferred into a function is a cycle all the same, only hidden.
    ``from x import y`` imports the module ``x.y`` where there is one, else ``x``; relative
    imports are read from where the module stands (``..models`` from a sub-package)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    here = name if path.name == "__init__.py" else name.rpartition(".")[0]
    targets = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = here.rsplit(".", node.level - 1)[0] if node.level else ""
            module = ".".join(part for part in (base, node.module) if part)
            for alias in node.names:
                submodule = f"{module}.{alias.name}"
                targets.add(submodule if submodule in modules else module)
    found = set()
    for target in targets:
        while target and target not in modules:
            target = target.rpartition(".")[0]
        found.add(target)
    return found & modules - {name}


def import_cycle(package: str, *, root: Path = ROOT) -> list[str] | None:
    """A cycle among the modules of ``package``, those of its sub-packages (and theirs)
    included, within one or across them, or None."""
    paths = {module_name(path, root): path for path in (root / package).rglob("*.py") if "migrations" not in path.parts}
    edges = {name: module_imports(path, name, paths.keys()) for name, path in paths.items()}
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

    return next((cycle for name in sorted(paths) if (cycle := visit(name))), None)


@pytest.mark.parametrize("package", sorted(PROJECT))
def test_the_modules_of_a_package_import_each_other_one_way(package):
    assert import_cycle(package) is None


# Two packages whose modules import each other round: inside a sub-package (an import
# deferred into a function), and from a sub-package to its parent and back.
CYCLES = {
    "inside a sub-package": {
        "shop/strategies/base.py": "from . import pick\n",
        "shop/strategies/pick.py": "def pick():\n    from shop.strategies.base import Base\n",
    },
    "across a sub-package": {
        "shop/holds.py": "from .strategies.base import Base\n",
        "shop/strategies/base.py": "from ..holds import hold_release\n",
    },
}


@pytest.mark.parametrize("files", CYCLES.values(), ids=CYCLES.keys())
def test_a_cycle_in_a_sub_package_is_found(tmp_path, files):
    for name, text in {"shop/__init__.py": "", "shop/strategies/__init__.py": "", **files}.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    cycle = import_cycle("shop", root=tmp_path)
    assert cycle is not None and set(cycle) == {module_name(tmp_path / name, tmp_path) for name in files}


@pytest.mark.parametrize("package", BOUNDED)
def test_no_module_grows_past_the_bound(package):
    long = {
        str(path.relative_to(ROOT)): lines
        for path in (ROOT / package).rglob("*.py")
        if "migrations" not in path.parts and (lines := len(path.read_text().splitlines())) > MOST_LINES
    }
    assert not long, long
