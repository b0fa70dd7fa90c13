"""The order in which ``make test`` (``-n 2 --dist loadfile``) hands test files to its two workers: the longest
first, so that no long file starts last and runs alone at the end while the other core idles (the longest-first
rule for two machines: the finish is within a third of the best order's). pytest-xdist's own order is by number of
tests, which puts the browser files (few tests, minutes each) last.

``SECONDS`` holds the files that take longest, as measured in a full run on the idle 2-core machine (docs/benchmarks.md,
"The default test run"); a file not listed counts as shorter than any listed one and follows in xdist's order. A
stale figure only changes the order, never what runs."""

from __future__ import annotations

from xdist.scheduler import LoadFileScheduling

SECONDS = {
}


class LongestFileFirst(LoadFileScheduling):
    """``--dist loadfile`` with the longest file of those left handed to the next free worker."""

    def _assign_work_unit(self, node) -> None:
        if self.workqueue:
            longest = max(self.workqueue, key=lambda f: (SECONDS.get(f, 0.0), len(self.workqueue[f])))
            self.workqueue.move_to_end(longest, last=False)
        super()._assign_work_unit(node)
