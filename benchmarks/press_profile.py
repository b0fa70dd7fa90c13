"""Server CPU of a page's presses, in Streamlit's AppTest (no browser), with a profile.

``python -m benchmarks.press_profile PAGE LABEL V1,V2,...`` opens ``PAGE`` (e.g. ``pages/3_Attack.py``), sets the
sidebar slider or number input whose label contains ``LABEL`` ("Grid cell area", "Seed") to ``V1`` (a warm-up,
not profiled), then to each next value, and prints the wall and CPU milliseconds of each press and a cProfile of
those presses sorted by cumulative time (``N`` lines, environment variable, default 60; ``N=0`` profiles nothing,
for CPU times without the profiler's overhead). The OD tables of a grid are kept on disk
(``odapp.data.disk_cache.disk_cached``): give a run its own ``ODLAB_CACHE_DIR`` and warm it once so that every run reads them
alike. What a person sees is measured by ``python -m benchmarks -k browser``; this tells where the server's part
of a press goes."""

from __future__ import annotations

import cProfile
import os
import pstats
import sys
import time
from pathlib import Path


def main(argv: list[str]) -> int:
    from streamlit.runtime.scriptrunner import script_runner
    from streamlit.testing.v1 import AppTest

    if len(argv) != 3:
        print(__doc__.split("\n\n")[0], "\nusage: python -m benchmarks.press_profile PAGE LABEL V1,V2,...", file=sys.stderr)
        return 2
    page, label, values = Path(argv[0]).resolve(), argv[1], [float(v) for v in argv[2].split(",")]
    lines = int(os.environ.get("N", "60"))
    prof, on = cProfile.Profile(), [False]
    run_script = script_runner.ScriptRunner._run_script

    def profiled(self, *a, **k):   # the page runs in the script runner's thread: profile it there
        if not (on[0] and lines):
            return run_script(self, *a, **k)
        prof.enable()
        try:
            return run_script(self, *a, **k)
        finally:
            prof.disable()

    script_runner.ScriptRunner._run_script = profiled
    at = AppTest.from_file(str(page), default_timeout=300).run()

    def control():
        for w in [*at.sidebar.slider, *at.slider, *at.sidebar.number_input]:
            if label in (w.label or ""):
                return w
        raise SystemExit(f"no slider or number input labelled {label!r} on {page.name}")

    control().set_value(values[0]).run()
    on[0] = True
    for v in values[1:]:
        t, c = time.perf_counter(), time.process_time()
        control().set_value(v).run()
        print(f"{v:g}: {(time.perf_counter() - t) * 1000:.0f} ms, {(time.process_time() - c) * 1000:.0f} CPU ms, "
              f"{len(at.exception)} exceptions")
    if lines:
        pstats.Stats(prof).sort_stats("cumulative").print_stats(lines)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
