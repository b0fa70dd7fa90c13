"""The next press computed ahead (odapp.shared.ahead): which setting is next, the worker's manners, and that a page's press
onto the setting computed ahead computes nothing its work named."""

from __future__ import annotations

import dataclasses
import sys
import threading
import time

import pytest

from odapp.data.zones_ui import square_label
from odapp.shared import ahead
from odapp.shared.state import CELL_KM2_RANGE, SEED_MAX, DatasetRef, Settings
from odcore.paths import REPO_ROOT
from tests.app import cache_modules

SAMPLE = REPO_ROOT / "sample_data" / "synthetic_city.parquet"
S = Settings(dataset=DatasetRef(id="d", kind="sample", label="d"), week=0, cell_km2=1.3, epsilon=0.66,
             threshold=100.0, seed=0, zones_label=square_label(1.3))


def grid(v: float) -> Settings:
    return dataclasses.replace(S, cell_km2=v, zones_label=square_label(v))


def test_next_settings_continue_the_last_change_and_nothing_else():
    up = grid(1.4)
    assert ahead.next_settings(S, up) == grid(1.5)
    assert ahead.next_settings(up, S) == grid(1.2)
    s1 = dataclasses.replace(S, seed=1)
    assert ahead.next_settings(S, s1) == dataclasses.replace(S, seed=2)
    assert ahead.next_settings(s1, S) is None                      # no seed below 0
    assert ahead.next_settings(dataclasses.replace(S, seed=SEED_MAX - 1),
                               dataclasses.replace(S, seed=SEED_MAX)) is None
    lo, hi, step = CELL_KM2_RANGE
    assert ahead.next_settings(grid(hi - step), grid(hi)) is None
    assert ahead.next_settings(grid(lo + step), grid(lo)) is None
    # nothing changed, a first run, two things changed, another control, zones instead of squares
    assert ahead.next_settings(S, S) is None
    assert ahead.next_settings(None, S) is None
    assert ahead.next_settings(S, dataclasses.replace(grid(1.4), seed=1)) is None
    assert ahead.next_settings(S, dataclasses.replace(S, epsilon=0.7)) is None
    h3 = dataclasses.replace(S, zones="h3:8")
    assert ahead.next_settings(h3, dataclasses.replace(h3, cell_km2=1.4)) is None
    assert ahead.next_settings(grid(1.3), grid(1.4)).zones_label == "square cells of 1.5 km²"
    # steps land on the control's own values (no 1.5000000000000002)
    v = 1.3
    for _ in range(30):
        nxt = ahead.next_settings(grid(round(v - 0.1, 1)), grid(v))
        assert nxt.cell_km2 == round(v + 0.1, 1)
        v = nxt.cell_km2


def test_the_worker_waits_for_every_run_to_end_and_the_newest_wish_replaces_an_older_one(monkeypatch):
    monkeypatch.setattr(ahead, "enabled", True)
    monkeypatch.setattr(ahead, "_pending", [])
    monkeypatch.setattr(ahead, "_worker", None)
    done, release = [], threading.Event()
    run = threading.Thread(target=release.wait, name=ahead.SCRIPT_THREAD)   # a page's run in progress
    run.start()
    try:
        assert ahead.script_running()
        assert ahead.submit(lambda: done.append("old"))
        assert ahead.submit(lambda: done.append("new"))
        time.sleep(0.3)
        assert done == []                      # not while a script runs
    finally:
        release.set()
        run.join()
    for _ in range(100):
        if done:
            break
        time.sleep(0.02)
    assert done == ["new"]
    monkeypatch.setattr(ahead, "enabled", False)
    assert not ahead.submit(lambda: done.append("off"))


class _Bodies:
    """The functions of the app's ``cache.py`` modules whose bodies ran during a page's run (a cached function's body runs only
    on a miss), recorded in the script's thread."""

    def __init__(self):
        self.ran: set[str] = set()

    def _prof(self, frame, event, arg):
        if event == "call" and frame.f_code.co_filename.endswith("/cache.py") and "/odapp/" in frame.f_code.co_filename:
            self.ran.add(frame.f_code.co_name)

    def __enter__(self):
        threading.setprofile(self._prof)
        return self

    def __exit__(self, *exc):
        threading.setprofile(None)
        sys.setprofile(None)


def press_after_ahead(monkeypatch, page: str, key: str, values: list):
    """Run ``page`` in AppTest and press the sidebar number input ``key`` to each of ``values`` (three steps the same
    way). The second press comes with nothing computed ahead; before the third, what the page queued is computed
    (in this thread). Returns the cached functions computed by the third press and by the second."""
    import streamlit as st
    from streamlit.testing.v1 import AppTest

    if not SAMPLE.is_file():
        pytest.skip("bundled sample missing (make sample-data)")
    queued = []
    monkeypatch.setattr(ahead, "enabled", True)
    monkeypatch.setattr(ahead, "submit", lambda job: queued.append(job) or True)
    st.cache_resource.clear()
    st.cache_data.clear()
    at = AppTest.from_file(str(REPO_ROOT / "pages" / page), default_timeout=300).run()
    ran = []
    for i, v in enumerate(values):
        if i == 2:
            assert queued, "nothing was queued ahead"
            queued[-1]()
        queued.clear()
        with _Bodies() as b:
            at.sidebar.number_input(key=key).set_value(v).run()
        assert not at.exception, [e.message for e in at.exception]
        ran.append(b.ran)
    return ran[2], ran[1]


def cached_functions() -> set[str]:
    """The names of the app's cached functions (Streamlit's wrappers have ``clear``), in every ``cache`` module."""
    return {n for m in cache_modules() for n, f in vars(m).items()
            if callable(getattr(f, "clear", None)) and not isinstance(f, type)}


PRESSES = [   # page, control, three steps (the last pressed after the work queued ahead), what a step computes
    ("0_Home.py", "w.cell_km2", [1.4, 1.5, 1.6], {"od_data"}),
    ("9_Audit.py", "w.cell_km2", [1.4, 1.5, 1.6], {"selection_table"}),
    ("9_Audit.py", "w.seed", [1, 2, 3], {"selection_table"}),
    ("6_Release_designer.py", "w.cell_km2", [1.4, 1.5, 1.6], {"design_report", "frontier_chart"}),
    ("6_Release_designer.py", "w.seed", [1, 2, 3], {"design_report", "frontier_chart"}),
    ("1_Data.py", "w.cell_km2", [1.4, 1.5, 1.6], {"od_summary", "trace_density_map"}),
    ("2_OD_release.py", "w.cell_km2", [1.4, 1.5, 1.6], {"week_release", "release_cells", "release_map", "release_curve",
                                                   "live_release"}),
    ("2_OD_release.py", "w.seed", [1, 2, 3], {"week_release", "release_map", "live_release"}),
    ("3_Attack.py", "w.cell_km2", [1.4, 1.5, 1.6], {"attack_pairs", "attack_others", "user_risk", "live_person"}),
    ("3_Attack.py", "w.seed", [1, 2, 3], {"attack_pairs"}),
    ("7_Play_the_attacker.py", "w.cell_km2", [1.4, 1.5, 1.6], {"attacker_pool", "game_theory"}),
    ("7_Play_the_attacker.py", "w.seed", [1, 2, 3], {"attacker_pool", "game_theory"}),
    ("5_Knock_Knock.py", "w.seed", [1, 2, 3], {"knock_mre"}),
]


@pytest.mark.parametrize(("page", "key", "values", "heavy"), PRESSES)
def test_a_press_finds_everything_its_page_computes_computed_ahead(monkeypatch, page, key, values, heavy):
    """Pressing onto the setting queued ahead runs no cached function's body (every one was a hit); the step before
    it, with nothing computed ahead, runs the page's heavy ones (the check sees a miss)."""
    after, cold = press_after_ahead(monkeypatch, page, key, values)
    assert heavy <= cold
    assert not after & cached_functions(), after


def test_a_grid_step_onto_a_very_large_grid_is_not_built_ahead(monkeypatch):
    """Stepping the cell area down on data that spans a country: the next grid, over the warning's size, is built
    only if the person asks for it (the sidebar then says why it is large), never speculatively."""
    import pandas as pd

    from odapp.data import cache as data_cache
    from odapp.data.loading import Loaded
    from odapp.shared.sidebar import PageContext
    from odcore.errors import ParameterError

    monkeypatch.setattr(data_cache, "od_data", lambda *a, **k: pytest.fail("the grid was built ahead"))
    for lat, lon in (([36.0, 60.0], [-10.0, 30.0]), ([-60.0, 70.0], [-180.0, 180.0])):   # Europe, the world
        loaded = Loaded(pd.DataFrame({"lat": lat, "lon": lon}), {}, {})
        ctx = PageContext(settings=grid(1.3), loaded=loaded, od=None, od_config=None)
        with pytest.raises(ParameterError):
            ahead.context_for(ctx, grid(1.2))


def test_the_next_grid_is_built_ahead_only_for_a_trace_table_of_modest_size(monkeypatch):
    import pandas as pd

    from odapp.data.loading import Loaded, StreamedLoaded

    small = Loaded(pd.DataFrame({"lat": [1.0] * 10}), {}, {})
    assert ahead.grid_ahead(small)
    assert not ahead.grid_ahead(small, counts=True)             # an OD counts folder: its zones are fixed
    monkeypatch.setattr(ahead, "GRID_AHEAD_MAX_ROWS", 9)
    assert not ahead.grid_ahead(small)                          # a large upload: only when asked for
    streamed = StreamedLoaded(object(), {}, {}, load=lambda: pytest.fail("a streamed upload's fixes were read"))
    assert not ahead.grid_ahead(streamed)
