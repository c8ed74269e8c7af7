"""The documentation holds together: the README stays a front door that links every page,
and every relative link in the README, BENCHMARKS.md and docs/*.md leads to a file (and a
heading, when it names one) of this repository."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
PAGES = [README, ROOT / "BENCHMARKS.md", *sorted((ROOT / "docs").glob("*.md"))]
# The pages the README must lead to: where what it leaves out is written.
LINKED_FROM_README = [
    "docs/design.md",
    "docs/strategies.md",
    "docs/loadtests.md",
    "docs/faults.md",
    "docs/api.md",
    "docs/configuration.md",
    "docs/operations.md",
    "docs/locking.md",
    "docs/security.md",
    "BENCHMARKS.md",
]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.MULTILINE | re.DOTALL)
HEADING = re.compile(r"^#{1,6} +(.+?) *$", re.MULTILINE)


def links(page: Path) -> list[str]:
    """Every link and image target of a page, outside its code blocks."""
    return LINK.findall(FENCE.sub("", page.read_text()))


def anchors(page: Path) -> set[str]:
    """The anchors of a page's headings, as the repository's host makes them."""
    found: set[str] = set()
    for heading in HEADING.findall(FENCE.sub("", page.read_text())):
        slug = re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")
        anchor, n = slug, 0
        while anchor in found:
            n += 1
            anchor = f"{slug}-{n}"
        found.add(anchor)
    return found


def test_the_readme_is_a_front_door_of_at_most_300_lines():
    lines = len(README.read_text().splitlines())
    assert lines <= 300, f"README.md has {lines} lines: move the detail to a page under docs/ and link it"


def test_the_readme_links_every_page_that_holds_what_it_leaves_out():
    targets = {target.split("#", 1)[0] for target in links(README)}
    assert not [page for page in LINKED_FROM_README if page not in targets]
    assert {f"docs/{page.name}" for page in (ROOT / "docs").glob("*.md")} <= targets


def test_every_relative_link_leads_to_a_file_and_heading_of_the_repository():
    broken = []
    for page in PAGES:
        for target in links(page):
            where = f"{page.relative_to(ROOT)}: {target}"
            if re.match(r"[a-z][a-z0-9+.-]*:|/", target):
                broken.append(f"{where} (points outside the repository)")
                continue
            path, _, anchor = target.partition("#")
            resolved = (page.parent / path).resolve() if path else page
            if not resolved.is_relative_to(ROOT) or not resolved.exists():
                broken.append(f"{where} (no such file)")
            elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
                broken.append(f"{where} (no such heading)")
    assert not broken, "\n".join(broken)


def test_links_outside_code_blocks_and_anchors_as_the_host_makes_them(tmp_path):
    page = tmp_path / "page.md"
    page.write_text(
        "# A page\n\n## `redis_lua`: reserved in Redis, written by Celery\n\n"
        "[here](#redis_lua-reserved-in-redis-written-by-celery)\n```sh\n[not a link](nowhere.md)\n```\n"
    )
    assert links(page) == ["#redis_lua-reserved-in-redis-written-by-celery"]
    assert anchors(page) == {"a-page", "redis_lua-reserved-in-redis-written-by-celery"}


# A file of the repository named in the text (`config/gunicorn.py`), and a test named with
# its file (`tests/test_serve.py::test_...`). Paths under var/ are made by a run.
NAMED_FILE = re.compile(r"(?<![\w/.<-])((?:[a-z_]+/)+[\w.-]+\.(?:py|yml|json|sh|md|html|txt))\b")
NAMED_TEST = re.compile(r"(tests/[\w/]+\.py)::(\w+)")


def test_every_file_and_test_a_page_names_exists():
    missing = []
    for page in PAGES:
        text = page.read_text()
        for path in NAMED_FILE.findall(text):
            if not path.startswith("var/") and not (ROOT / path).exists():
                missing.append(f"{page.relative_to(ROOT)}: {path}")
        for path, test in NAMED_TEST.findall(text):
            source = ROOT / path
            if not source.exists() or not re.search(rf"def {test}\b", source.read_text()):
                missing.append(f"{page.relative_to(ROOT)}: {path}::{test}")
    assert not missing, "\n".join(missing)


def test_the_api_pages_holds_name_the_call_that_pays_a_held_order():
    """Paying was once no call of the API, and the holds' section said so after it was one."""
    page = (ROOT / "docs" / "api.md").read_text()
    holds = page.split("## Holds: pay by and claim by", 1)[1].split("\n## ", 1)[0]
    assert "`POST /api/orders/{id}/pay`" in holds
    assert "not a call of this API" not in page
