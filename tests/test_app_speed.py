"""What keeps a rerun cheap, checked as behaviour (speed itself is measured in benchmarks/bench_browser.py)."""

from __future__ import annotations

import gc
import subprocess
import sys

from odcore.paths import REPO_ROOT


def test_freeze_long_lived_freezes_once_per_new_modules():
    # In a fresh interpreter: the first call freezes, a second with no new module does not, a new import does.
    code = (
        "import gc, sys\n"
        "from odapp import layout\n"
        "assert gc.get_freeze_count() == 0\n"
        "assert layout.freeze_long_lived() and gc.get_freeze_count() > 1000\n"
        "n = gc.get_freeze_count()\n"
        "assert not layout.freeze_long_lived() and gc.get_freeze_count() == n\n"
        "import xml.dom.minidom\n"
        "assert layout.freeze_long_lived() and gc.get_freeze_count() > n\n"
        "garbage = []; garbage.append(garbage); del garbage\n"     # a cycle made after the freeze is still collected
        "assert gc.collect() >= 1\n"
    )
    r = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr


def test_full_collection_after_a_run_skips_the_frozen_modules():
    # What Streamlit's post-run gc.collect(2) scans: far fewer objects once the modules are frozen.
    code = (
        "import gc\n"
        "import odapp.sidebar, odapp.maps, odcore.attack, plotly.graph_objects\n"
        "before = len(gc.get_objects())\n"
        "from odapp import layout\n"
        "layout.freeze_long_lived()\n"
        "after = len(gc.get_objects())\n"
        "assert before > 50_000 and after < before / 10, (before, after)\n"
    )
    r = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    assert gc.isenabled()


def test_tree_cpu_seconds_counts_children_and_excludes_a_subtree():
    # The concurrency benchmark splits CPU between the server's tree and the browsers' with this.
    import os
    import time

    from odapp import live

    burn = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.4: pass\ntime.sleep(30)"
    p = subprocess.Popen([sys.executable, "-c", burn])
    try:
        deadline = time.time() + 60
        while live.tree_cpu_seconds(p.pid) < 0.35 and time.time() < deadline:
            time.sleep(0.1)
        assert live.tree_cpu_seconds(p.pid) >= 0.35
        mine = live.tree_cpu_seconds(os.getpid())
        assert mine - live.tree_cpu_seconds(os.getpid(), exclude=p.pid) >= 0.35
        assert live.tree_rss_bytes(p.pid) > 1_000_000
    finally:
        p.kill()
        p.wait()
