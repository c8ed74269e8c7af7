"""What the documentation says of the code, checked against the code: the demo's vouchers
as docs/operations.md lists them, and the scripts as the README's layout names them. Both
were once out of date (the held voucher missing; two of three scripts missing)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from config.management.commands.seed_demo import DEMO_CLAIM_POOL, DEMO_POOL, DEMO_POOLS, DEMO_VOUCHERS

ROOT = Path(__file__).resolve().parent.parent


def seed_demo_entry() -> str:
    """docs/operations.md's entry of ``seed_demo``, up to the next command."""
    page = (ROOT / "docs" / "operations.md").read_text()
    return page.split("- `seed_demo`:", 1)[1].split("\n- `", 1)[0]


def test_the_demo_vouchers_the_operations_page_lists_are_those_seed_demo_makes():
    entry = seed_demo_entry()
    listed = re.findall(r'^\s*- "([^"]+)":', entry, re.MULTILINE)
    assert sorted(listed) == sorted(DEMO_VOUCHERS), "docs/operations.md's demo vouchers and seed_demo's differ"
    for pool in DEMO_POOLS:
        assert f'"{pool}"' in entry, pool


def test_each_demo_voucher_is_said_with_its_supply_and_whether_it_holds_for_payment():
    entry = seed_demo_entry()
    for title, (supply, _, window) in DEMO_VOUCHERS.items():
        line = re.search(rf'^\s*- "{re.escape(title)}":(.*?)(?=^\s*- "|\Z)', entry, re.MULTILINE | re.DOTALL)[1]
        assert f"{supply} units" in line, title
        assert ("held ten minutes" in line) == (window == 600) and (window in (0, 600)), title


LAYOUTS = ["README.md", "docs/design.md"]


def layout(page: str = "README.md") -> dict[str, str]:
    """A page's layout block (under "## Layout"): each top-level folder with its text."""
    block = (ROOT / page).read_text().split("## Layout", 1)[1].split("```", 2)[1]
    entries: dict[str, str] = {}
    for line in block.splitlines():
        named = re.match(r"([\w.-]+/)\s+(.*)", line)
        if named:
            folder = named[1]
            entries[folder] = named[2]
        elif entries and line.strip():
            entries[folder] += " " + line.strip()
    return entries


@pytest.mark.parametrize("page", LAYOUTS)
def test_the_layout_names_every_script_and_no_other(page):
    text = layout(page)["scripts/"]
    named = set(re.findall(r"[\w-]+\.(?:py|sh)", text))
    present = {path.name for path in (ROOT / "scripts").iterdir() if path.is_file()}
    assert named == present, f"{page}'s scripts/ names {sorted(named)}; scripts/ holds {sorted(present)}"


@pytest.mark.parametrize("page", LAYOUTS)
def test_the_layout_names_every_top_level_package(page):
    packages = {f"{path.parent.name}/" for path in ROOT.glob("*/__init__.py")} - {"tests/"}
    assert packages <= set(layout(page)), sorted(packages - set(layout(page)))


API_CALL = re.compile(r"`(GET|POST|PATCH|DELETE) (/api/[^`\s]+)`")


def test_every_api_call_the_claim_walk_through_names_is_an_operation_of_the_document():
    from django.test import Client

    def shape(method: str, path: str) -> tuple[str, str]:
        return method.lower(), re.sub(r"{[^}]+}", "{}", path)

    paths = Client().get("/api/openapi.json").json()["paths"]
    operations = {shape(method, path) for path, methods in paths.items() for method in methods}
    named = API_CALL.findall((ROOT / "docs" / "claims.md").read_text())
    assert len(named) >= 8
    missing = [f"{method} {path}" for method, path in named if shape(method, path) not in operations]
    assert not missing, missing


def test_the_readme_is_read_in_ten_minutes():
    words = len((ROOT / "README.md").read_text().split())
    assert words <= 1_000, f"README.md has {words} words: move the detail to a page under docs/ and link it"


def test_the_tour_opens_the_demos_own_items_and_says_how_to_run_and_test():
    readme = (ROOT / "README.md").read_text()
    tour = readme.split("## A five-minute tour", 1)[1].split("\n## ", 1)[0]
    quoted = set(re.findall(r'"([^"]+)"', tour))
    demo = {*DEMO_VOUCHERS, *DEMO_POOLS}
    toured = {"Coffee for 1 cent", "Bakery box, pay within ten minutes", DEMO_POOL, DEMO_CLAIM_POOL}
    assert toured <= demo
    assert quoted & demo == toured
    assert "make run" in readme and "make test" in readme
