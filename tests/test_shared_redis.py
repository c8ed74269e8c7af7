"""The test workers share Redis databases, each under its own instance namespace
(``config.settings.test``): a test that deletes keys by a pattern other than its own
instance's takes other workers' sale states, queued tasks and counters mid-test. Twice such
a pattern cost a fresh clone's run (a ``FLUSHDB`` of the reservations' database, then a
``*res:{group:*`` scan): no test scans the shared databases by a pattern not its own."""

from __future__ import annotations

import re
from pathlib import Path

TESTS = Path(__file__).resolve().parent
# A scan whose pattern is a literal opening with a wildcard: every instance's keys.
ANY_INSTANCE = re.compile(r"""scan_iter\(\s*match\s*=\s*["']\*""")


def test_no_test_scans_a_shared_redis_by_every_instances_keys():
    found = [
        f"{path.relative_to(TESTS.parent)}:{number}"
        for path in sorted(TESTS.rglob("*.py"))
        if path != Path(__file__).resolve()  # whose own check below spells one out
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if ANY_INSTANCE.search(line)
    ]
    assert not found, f"scan by core.namespace.instance_key(...) instead: {found}"


def test_the_check_finds_a_scan_of_every_instance():
    assert ANY_INSTANCE.search('for key in client.scan_iter(match="*res:{group:*"):')
    assert not ANY_INSTANCE.search('for key in client.scan_iter(match=instance_key("res:{group:*")):')
