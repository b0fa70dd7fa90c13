"""``make test``'s order of test files (tests/longest_first.py): the longest listed file of those left goes to the
next free worker, then the files not listed in xdist's own order (most tests first); every file once."""

from __future__ import annotations

from collections import OrderedDict

import pytest

from odcore.paths import REPO_ROOT
from tests import longest_first
from tests.longest_first import LongestFileFirst


class _Config:
    """What the scheduler reads of pytest's configuration: two local workers (``-n 2``)."""

    def getvalue(self, name):
        return {"tx": ["2*popen"]}[name]


class _Worker:
    """What the scheduler sends a worker: the indexes of its tests in the collection."""

    def __init__(self):
        self.sent: list[list[int]] = []

    def send_runtest_some(self, indexes):
        self.sent.append(list(indexes))


def _handed_out(files: dict[str, int], seconds: dict[str, float], monkeypatch) -> list[str]:
    monkeypatch.setattr(longest_first, "SECONDS", seconds)
    collection = [f"{f}::test_{i}" for f, n in files.items() for i in range(n)]
    sched = LongestFileFirst(_Config())
    worker = _Worker()
    sched.registered_collections[worker] = collection
    sched.assigned_work[worker] = {}
    # xdist's own order: most tests first
    for f, n in sorted(files.items(), key=lambda kv: -kv[1]):
        sched.workqueue[f] = OrderedDict((f"{f}::test_{i}", False) for i in range(n))
    order = []
    while sched.workqueue:
        sched._assign_work_unit(worker)
        order.append({collection[i].split("::")[0] for i in worker.sent[-1]})
    assert all(len(o) == 1 for o in order)           # one file per unit of work, all of its tests
    return [o.pop() for o in order]


def test_longest_listed_file_first_then_xdist_order(monkeypatch):
    files = {"tests/many.py": 40, "tests/browser/slow.py": 3, "tests/few.py": 2, "tests/mid.py": 10,
             "tests/serve/long.py": 4}
    got = _handed_out(files, {"tests/serve/long.py": 60.0, "tests/browser/slow.py": 150.0}, monkeypatch)
    assert got == ["tests/browser/slow.py", "tests/serve/long.py", "tests/many.py", "tests/mid.py", "tests/few.py"]


def test_without_figures_it_is_xdist_order(monkeypatch):
    files = {"tests/a.py": 1, "tests/b.py": 7, "tests/c.py": 3}
    assert _handed_out(files, {}, monkeypatch) == ["tests/b.py", "tests/c.py", "tests/a.py"]


@pytest.mark.parametrize("path", sorted(longest_first.SECONDS))
def test_every_listed_file_exists(path):
    assert (REPO_ROOT / path).is_file(), f"{path} is listed in tests/longest_first.py but not in the tree"
