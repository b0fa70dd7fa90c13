"""What keeps a rerun cheap, checked as behaviour (speed itself is measured in benchmarks/bench_browser.py)."""

from __future__ import annotations

import collections
import gc
import itertools
import subprocess
import sys

import pytest

from odcore.paths import REPO_ROOT
from tests.app import cache_modules
from tests.app.map_element import decks, map_elements


def test_freeze_long_lived_freezes_once_per_new_modules():
    # In a fresh interpreter: the first call freezes, a second with no new module does not, a new import does.
    code = (
        "import gc, sys\n"
        "from odapp.shared import layout\n"
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
        "import odapp.shared.sidebar, odapp.maps.od_map, odcore.privacy.attack, plotly.graph_objects\n"
        "before = len(gc.get_objects())\n"
        "from odapp.shared import layout\n"
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

    from benchmarks import harness

    burn = "import time\nt = time.process_time()\nwhile time.process_time() - t < 0.4: pass\ntime.sleep(30)"
    p = subprocess.Popen([sys.executable, "-c", burn])
    try:
        deadline = time.time() + 60
        while harness.tree_cpu_seconds(p.pid) < 0.35 and time.time() < deadline:
            time.sleep(0.1)
        assert harness.tree_cpu_seconds(p.pid) >= 0.35
        mine = harness.tree_cpu_seconds(os.getpid())
        assert mine - harness.tree_cpu_seconds(os.getpid(), exclude=p.pid) >= 0.34   # 0.01 s ticks, float subtraction
        assert harness.tree_rss_bytes(p.pid) > 1_000_000
    finally:
        p.kill()
        p.wait()


HEAVY = {"PlotlyChart", "DeckGlJsonChart", "Arrow", "Dataframe", "ArrowTable", "BidiComponent"}   # + live curves
PAGES = ["pages/1_Data.py", "pages/2_OD_release.py", "pages/3_Attack.py", "pages/4_Privacy_budget.py",
         "pages/5_Knock_Knock.py", "pages/6_Release_designer.py", "pages/7_Play_the_attacker.py",
         "pages/8_See_the_noise.py"]


def _children(node) -> list[tuple]:
    """``(key, child)`` of an AppTest node (a block's children are a dict, the root's a list)."""
    ch = getattr(node, "children", None)
    return list(ch.items() if isinstance(ch, dict) else enumerate(ch or []))


def _heavy_positions(at) -> list[tuple[tuple, str]]:
    """Positions (delta paths) of the page's charts, maps and tables, in page order."""
    out = []

    def walk(node, path):
        for k, c in _children(node):
            walk(c, (*path, k))
        p = getattr(node, "proto", None)
        if p is not None and p.DESCRIPTOR.name in HEAVY:
            out.append((path, p.DESCRIPTOR.name))

    walk(at.main, ())
    return out


@pytest.mark.parametrize("page", PAGES)
def test_charts_keep_their_place_when_projector_mode_or_the_unit_changes(at, page):
    """Streamlit's browser side matches elements by position: a chart or map that moves because something above it
    appeared or vanished is rebuilt from scratch (plotly's first draw, deck.gl's shaders) instead of updated. So
    projector mode and the guarantee unit, which add or hide text and buttons, must not move them."""
    at.switch_page(page).run()
    before = _heavy_positions(at)
    assert before, "no chart, map or table found"
    at.sidebar.toggle(key="w.projector").set_value(True).run()
    projector = _heavy_positions(at)
    at.sidebar.toggle(key="w.projector").set_value(False).run()
    at.sidebar.selectbox(key="w.mode").set_value("user_level").run()
    per_user = _heavy_positions(at)
    at.sidebar.selectbox(key="w.mode").set_value("per_metric").run()
    assert not at.exception, [e.message for e in at.exception]
    for other in (projector, per_user):
        common = min(len(before), len(other))
        assert other[:common] == before[:common]


def test_od_release_map_keeps_its_place_when_nothing_is_published(at):
    # The default synthetic city publishes nothing in week 0 at threshold 100: the page then says why above the map
    # and drops the noise note above the chart. Neither may move the map or the chart.
    at.switch_page("pages/2_OD_release.py").run()
    before = _heavy_positions(at)
    at.sidebar.radio(key="w.source").set_value("synth").run()
    assert not at.exception, [e.message for e in at.exception]
    assert any("nothing" in w.value.lower() or "no pair" in w.value.lower() for w in at.warning), \
        [w.value for w in at.warning]
    after = _heavy_positions(at)
    at.sidebar.radio(key="w.source").set_value("sample").run()
    assert [p for p in after if p[1] != "Dataframe"] == [p for p in before if p[1] != "Dataframe"]


def test_data_map_keeps_its_place_when_zones_drop_points(at):
    # The bundled districts drop the points outside them: the Data page then lists the drop reasons above the map.
    at.switch_page("pages/1_Data.py").run()
    before = [p for p in _heavy_positions(at) if p[1] != "Dataframe"]
    at.sidebar.radio(key="w.zone_kind").set_value("file").run()
    at.sidebar.button(key="w.zone_bundled").click().run()
    assert not at.exception, [e.message for e in at.exception]
    after = _heavy_positions(at)
    at.sidebar.radio(key="w.zone_kind").set_value("square").run()
    assert any(p[1] == "Dataframe" for p in after), after            # the drop reasons are listed
    assert [p for p in after if p[1] != "Dataframe"] == before


def test_landing_page_computes_the_od_release_first_view_ahead(monkeypatch):
    """The landing page has the OD release page's first view computed (in the server's idle time): opening that page
    then computes nothing — the same functions, arguments and cache entries as the page (its map widgets' defaults
    are :data:`odapp.release.view.MAP_DEFAULTS`). If the page asked for anything else, it would compute it here."""
    import collections

    import streamlit as st
    from streamlit.testing.v1 import AppTest

    import odapp.release.cache
    import odcore.privacy.release
    import odcore.report.figures
    from odapp.shared import ahead

    if not (REPO_ROOT / "sample_data" / "synthetic_city.parquet").is_file():
        pytest.skip("bundled sample missing (make sample-data)")
    monkeypatch.setattr(ahead, "_started", set())
    start = ahead.start
    monkeypatch.setattr(ahead, "start", lambda ctx: start(ctx, background=False))   # no race with a thread
    calls = collections.Counter()

    def counting(f, name):
        def counted(*a, **k):
            calls[name] += 1
            return f(*a, **k)
        return counted

    # patched where the dashboard's cache calls them (it imports the names)
    for mod, name in [(odapp.release.cache, "release_with_report"), (odapp.release.cache, "cell_release_probability"),
                      (odapp.release.cache, "release_maps"), (odcore.report.figures, "release_curve_figure")]:
        monkeypatch.setattr(mod, name, counting(getattr(mod, name), name))
    st.cache_resource.clear()
    at = AppTest.from_file(str(REPO_ROOT / "app.py"), default_timeout=300).run()
    assert not at.exception, [e.message for e in at.exception]
    assert calls == {"release_with_report": 1, "cell_release_probability": 1, "release_maps": 1,
                     "release_curve_figure": 1}
    at.run()                                              # a landing page rerun does not compute it again,
    at.sidebar.number_input(key="w.cell_km2").set_value(2.0).run()   # nor does another grid (once per dataset)
    assert not at.exception, [e.message for e in at.exception]
    assert sum(calls.values()) == 4
    at.sidebar.number_input(key="w.cell_km2").set_value(1.3).run()
    calls.clear()
    at.switch_page("pages/2_OD_release.py").run()
    assert not at.exception, [e.message for e in at.exception]
    assert len(map_elements(at)) == 1
    # the live curves and their code and tables (the plotly figure is for the downloads)
    assert sorted(e.proto.component_name for e in at.get("bidi_component")) == ["odlab_live_curves", "odlab_live_data",
                                                                                 "odlab_map"]
    assert sum(calls.values()) == 0, calls                # all of it was ready
    at.number_input(key="rel_topn").set_value(310).run()  # the check itself can fail: a new map is computed
    assert calls == {"release_maps": 1}


def test_another_seed_draws_its_arcs_on_the_cells_layers_made_before(at, monkeypatch):
    """A new seed (each person in a class has their own) changes the release's noise, so the map's arcs and the
    published view's zones (those of published pairs), but not the shaded zones of the analysis views: their
    layers, and their JSON, are made once per week and release settings."""
    import odapp.maps.od_map
    import odapp.maps.zones

    made = collections.Counter()
    real = odapp.maps.zones.grid_layers

    def counted(*a, **k):
        made["grid_layers"] += 1
        return real(*a, **k)

    for module in (odapp.maps.zones, odapp.maps.od_map):   # the zone layers of the analysis and published views
        monkeypatch.setattr(module, "grid_layers", counted)
    at.switch_page("pages/2_OD_release.py").run()
    assert not at.exception, [e.message for e in at.exception]
    first = decks(at)[0]
    made.clear()
    seed = at.sidebar.number_input(key="w.seed")
    seed.set_value(seed.value + 1).run()
    assert not at.exception, [e.message for e in at.exception]
    after = decks(at)[0]
    assert made["grid_layers"] == 1                  # the published zones of the new release, nothing else
    assert [x for x in first["layers"] if x["id"] == "flows"] != [x for x in after["layers"] if x["id"] == "flows"]
    at.selectbox(key="rel_view").set_value("Raw counts").run()      # every observed zone, shaded
    try:
        first = decks(at)[0]
        made.clear()
        seed.set_value(seed.value + 1).run()
        assert not at.exception, [e.message for e in at.exception]
        after = decks(at)[0]
        assert made["grid_layers"] == 0
        cells = [x for x in first["layers"] if x["id"].startswith("cells")]
        assert cells
        assert cells == [x for x in after["layers"] if x["id"].startswith("cells")]
    finally:
        at.selectbox(key="rel_view").set_value("Published").run()


@pytest.mark.parametrize(("page", "key", "command"), [("pages/2_OD_release.py", "reproduce", "python -m odcore release"),
                                                      ("pages/5_Knock_Knock.py", "knock_full_cli",
                                                       "python -m odcore knock")])
def test_command_line_boxes_are_made_only_when_opened(at, page, key, command):
    """Closed, the expander sends no code block (no syntax highlighter loaded, no elements re-sent on each rerun);
    opened, it shows the command, as before."""
    at.switch_page(page).run()
    assert not at.exception, [e.message for e in at.exception]
    assert not at.code
    at.session_state[key] = True          # what opening it in the browser sets
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    assert any(c.value.startswith(command) for c in at.code), [c.value for c in at.code]
    at.session_state[key] = False
    at.run()


def test_designer_sends_its_candidates_and_files_only_when_asked(at):
    """The Release designer's table of candidates is made when its box is opened, and its two files (report, sheet)
    when their buttons are clicked: closed and unclicked, a rerun sends neither (both are checked as files in
    tests/browser/test_browser_export.py)."""
    at.switch_page("pages/6_Release_designer.py").run()
    assert not at.exception, [e.message for e in at.exception]
    assert not at.dataframe
    buttons = {b.label: b for b in at.get("download_button")}
    for label in ("Design report (JSON)", "Design sheet — do not share (HTML)"):
        assert buttons[label].proto.deferred_file_id, label          # made on the click, not on the rerun
    at.session_state["design_candidates"] = True          # what opening it in the browser sets
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    table = at.dataframe[0].value
    assert {"max_pairs", "relative_error", "useful"} <= set(table.columns)
    assert 10 in set(table["max_pairs"])                  # the data-independent default is always a candidate
    at.session_state["design_candidates"] = False
    at.run()


def test_map_image_box_is_made_only_when_opened_and_draws_the_map(at):
    """The OD release map's image export (odapp.shared.export.image_export) sends its eleven controls only while it is open;
    opened, it draws the map to an SVG through kaleido and offers it for download."""
    from odcore.report.figures import find_browser

    at.switch_page("pages/2_OD_release.py").run()
    assert not at.exception, [e.message for e in at.exception]
    assert not [n for n in at.number_input if n.key == "img_w_od_map"]
    assert [e for e in at.expander if e.label.startswith("Download this map as an image")]
    at.session_state["img_open_od_map"] = True          # what opening it in the browser sets
    at.run()
    assert not at.exception, [e.message for e in at.exception]
    assert at.number_input(key="img_w_od_map").value == 8
    if find_browser() is None:
        pytest.skip("no Chrome/Chromium: kaleido cannot draw the image (Debian package 'chromium')")
    at.radio(key="img_fmt_od_map").set_value("svg").run()
    at.button(key="img_go_od_map").click().run()
    assert not at.exception, [e.message for e in at.exception]
    want, svg = at.session_state["img_data_od_map"]
    assert want[0] == "svg"
    assert svg.lstrip().startswith(b"<svg")
    assert [b for b in at.get("download_button") if b.proto.label.endswith(".svg")]
    at.session_state["img_open_od_map"] = False
    at.run()
    assert not [n for n in at.number_input if n.key == "img_w_od_map"]


def _nodes(node) -> int:
    """Elements and blocks under ``node``: each one is a message the browser handles on every rerun."""
    kids = [c for _, c in _children(node)]
    return len(kids) + sum(_nodes(c) for c in kids)


# Measured in Chromium on this 2-core machine without a GPU (docs/benchmarks.md, "Reference apps"): the floor app plus
# 60 captions, one message each, took 50-70 ms more per press than the same text in one caption. Counted here
# (AppTest's tree) before the reruns were trimmed: 101-124 on Data, OD release, Attack, Privacy budget and Release
# designer; after: 58-97 on every page.
MESSAGE_BUDGET = 100


@pytest.mark.parametrize("page", PAGES)
def test_a_rerun_sends_few_elements(at, page):
    """A page's elements and blocks (sidebar and main) stay within the budget: a metric's reading is its delta, not
    a caption of its own; button rows are one horizontal container, not columns; closed boxes make nothing."""
    at.switch_page(page).run()
    assert not at.exception, [e.message for e in at.exception]
    n = _nodes(at.main) + _nodes(at.sidebar)
    assert n <= MESSAGE_BUDGET, f"{page}: {n} elements and blocks in one rerun"
    assert not _metric_then_caption(at.main), "a metric's reading is a caption of its own (use odapp.shared.layout.metric)"


def _metric_then_caption(node) -> list:
    """Metrics directly followed by a caption in the same block."""
    kids = [c for _, c in _children(node)]
    pairs = [a for a, b in itertools.pairwise(kids)
             if type(a).__name__ == "Metric" and type(b).__name__ == "Caption"]
    return pairs + [x for c in kids for x in _metric_then_caption(c)]


def test_the_cached_functions_key_a_config_on_every_field_of_it():
    # odapp.shared.caching hashes the frozen configs by their fields' repr (Streamlit's dataclasses.asdict took ~0.1 ms a
    # config): the names must be the configs' real types, every field must count, and every cached function of the
    # module must use the hashing.
    import dataclasses
    import importlib

    from streamlit import type_util
    from streamlit.runtime.caching.cache_utils import CachedFunc

    from odapp.shared import caching
    from odcore.od.trips import ODConfig
    from odcore.privacy.release import Mode, ReleaseConfig

    for name in caching.CONFIG_TYPES:
        module, cls = name.rsplit(".", 1)
        assert type_util.get_fqn_type(getattr(importlib.import_module(module), cls)()) == name
    user = ReleaseConfig(mode=Mode.USER_LEVEL, max_pairs=2)
    pairs = [(ODConfig(), ODConfig(cell_km2=1.4)), (ODConfig(), ODConfig(tz="Europe/London")),
             (ODConfig(), ODConfig(zones="h3:8")), (ReleaseConfig(), ReleaseConfig(epsilon=0.7)),
             (ReleaseConfig(), ReleaseConfig(threshold=90)), (user, ReleaseConfig(mode=Mode.USER_LEVEL, max_pairs=3)),
             (ReleaseConfig(epsilon=2.0, max_pairs=None), ReleaseConfig(epsilon=2.0, mode=Mode.USER_LEVEL,
                                                                         max_pairs=1))]
    covered = collections.defaultdict(set)
    for a, b in pairs:   # each pair differs in one field (two for the mode: per person needs max pairs)
        changed = {f.name for f in dataclasses.fields(a) if getattr(a, f.name) != getattr(b, f.name)}
        covered[type(a)] |= changed
        assert caching.config_key(a) != caching.config_key(b), changed
        assert caching.config_key(a) == caching.config_key(dataclasses.replace(a))
    for cls in (ODConfig, ReleaseConfig):   # a new field needs a pair here
        assert covered[cls] == {f.name for f in dataclasses.fields(cls)}
    assert caching.config_key(ReleaseConfig(epsilon=0.66)) != caching.config_key(ReleaseConfig(epsilon=0.6600000001))
    assert caching.config_key(ODConfig()) != caching.config_key(ReleaseConfig())
    funcs = [f for m in cache_modules() for f in vars(m).values() if isinstance(f, CachedFunc)]
    assert len(funcs) >= 38
    assert all(f._info.hash_funcs == caching.HASH_FUNCS for f in funcs)
