"""The order in which ``make test`` (``-n 2 --dist loadfile``) hands test files to its two workers: the longest
first, so that no long file starts last and runs alone at the end while the other core idles (the longest-first
rule for two machines: the finish is within a third of the best order's). pytest-xdist's own order is by number of
tests, which puts the browser files (few tests, minutes each) last.

``SECONDS`` holds the files that take longest, in seconds of one worker, rounded from the per-file sums of the runs
recorded in docs/benchmarks.md ("The default test run, file by file"); only their order matters. A file not listed
counts as shorter than any listed one and follows in xdist's order. A stale figure changes the order, never what
runs."""

from __future__ import annotations

from xdist.scheduler import LoadFileScheduling

SECONDS = {
    "tests/browser/test_browser.py": 150,
    "tests/odcore/od/test_engines.py": 110,
    "tests/browser/test_browser_live.py": 70,
    "tests/browser/test_browser_export.py": 68,
    "tests/serve/test_session_memory.py": 60,
    "tests/app/test_app_speed.py": 54,
    "tests/odcore/report/test_handover.py": 53,
    "tests/odcore/privacy/test_release_reference.py": 51,
    "tests/odcore/data/test_hostile.py": 45,
    "tests/serve/test_serve.py": 40,
    "tests/odcore/privacy/test_release.py": 39,
    "tests/odcore/cli/test_figures_cli.py": 38,
    "tests/app/test_ahead.py": 37,
    "tests/browser/test_browser_guide.py": 36,
    "tests/odcore/knock/test_knock_experiment.py": 36,
    "tests/odcore/privacy/test_design.py": 35,
    "tests/odcore/space/test_zones.py": 33,
    "tests/app/test_app_pages.py": 32,
    "tests/benchmarks/test_peer_od.py": 29,
    "tests/odcore/cli/test_cli_release.py": 27,
    "tests/odcore/report/test_facts.py": 27,
    "tests/odcore/od/test_cab_stream.py": 25,
    "tests/app/test_app_export.py": 23,
    "tests/browser/test_browser_hostile.py": 21,
    "tests/odcore/od/test_trips.py": 21,
    "tests/app/test_charts.py": 21,
    "tests/odcore/privacy/test_design_verdict.py": 20,
    "tests/app/test_app_nav.py": 20,
}


class LongestFileFirst(LoadFileScheduling):
    """``--dist loadfile`` with the longest file of those left handed to the next free worker."""

    def _assign_work_unit(self, node) -> None:
        if self.workqueue:
            longest = max(self.workqueue, key=lambda f: (SECONDS.get(f, 0.0), len(self.workqueue[f])))
            self.workqueue.move_to_end(longest, last=False)
        super()._assign_work_unit(node)
