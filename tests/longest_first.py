"""The order in which ``make test`` (``-n 2 --dist loadfile``) hands test files to its two workers: the longest
first, so that no long file starts last and runs alone at the end while the other core idles (the longest-first
rule for two machines: the finish is within a third of the best order's). pytest-xdist's own order is by number of
tests, which puts the browser files (few tests, minutes each) last.

``SECONDS`` holds the files that take longest, in seconds of one worker, rounded from the per-file sums of the run
recorded in docs/benchmarks.md ("The default test run on the idle machine, file by file"); only their order
matters. A file not listed counts as shorter than any listed one and follows in xdist's order. A stale figure
changes the order, never what runs."""

from __future__ import annotations

from xdist.scheduler import LoadFileScheduling

SECONDS = {
    "tests/odcore/od/test_engines.py": 95,
    "tests/browser/test_browser.py": 82,
    "tests/browser/test_browser_live.py": 33,
    "tests/browser/test_browser_export.py": 32,
    "tests/odcore/report/test_image_browser.py": 30,
    "tests/app/test_app_speed.py": 28,
    "tests/serve/test_serve.py": 26,
    "tests/odcore/report/test_figures.py": 23,
    "tests/app/test_charts.py": 22,
    "tests/serve/test_session_memory.py": 22,
    "tests/app/test_app_pages.py": 21,
    "tests/app/test_ahead.py": 21,
    "tests/app/test_app_zones.py": 19,
    "tests/odcore/report/test_handover.py": 15,
    "tests/app/test_app_export.py": 15,
    "tests/odcore/data/test_hostile.py": 14,
    "tests/odcore/privacy/test_release_reference.py": 13,
    "tests/app/test_app_nav.py": 13,
    "tests/browser/test_browser_guide.py": 12,
    "tests/odcore/space/test_zones.py": 11,
    "tests/browser/test_browser_hostile.py": 11,
    "tests/odcore/privacy/test_design.py": 11,
    "tests/odcore/report/test_release_report.py": 10,
    "tests/odcore/privacy/test_live_tables.py": 10,
    "tests/benchmarks/test_peer_od.py": 9,
    "tests/app/test_app_teaching.py": 9,
    "tests/odcore/cli/test_figures_cli.py": 8,
    "tests/odcore/knock/test_knock_experiment.py": 8,
    "tests/odcore/privacy/test_design_verdict.py": 8,
    "tests/odcore/cli/test_cli_release.py": 7,
}


class LongestFileFirst(LoadFileScheduling):
    """``--dist loadfile`` with the longest file of those left handed to the next free worker."""

    def _assign_work_unit(self, node) -> None:
        if self.workqueue:
            longest = max(self.workqueue, key=lambda f: (SECONDS.get(f, 0.0), len(self.workqueue[f])))
            self.workqueue.move_to_end(longest, last=False)
        super()._assign_work_unit(node)
