"""AppTest: every page renders on the bundled data, and the shared settings drive the pages.

One AppTest session walks the pages (the caches warm up once), so the whole module stays well under a minute.
"""

from __future__ import annotations

import json

import pytest

from odapp.shared.nav import HOME_FILE
from odapp.shared.state import (
    K_CELL_KM2,
    K_EPSILON,
    K_SOURCE,
    K_SYNTH_USERS,
    K_SYNTH_WEEKS,
    K_THRESHOLD,
    K_WEEK,
)
from odcore.paths import REPO_ROOT
from tests.app.map_element import decks as map_decks

pytestmark = pytest.mark.timeout(300)

PAGES = ["pages/1_Data.py", "pages/2_OD_release.py", "pages/3_Attack.py", "pages/4_Privacy_budget.py",
         "pages/5_Knock_Knock.py", "pages/6_Release_designer.py", "pages/7_Play_the_attacker.py",
         "pages/8_See_the_noise.py", "pages/9_Audit.py"]
SAMPLE = REPO_ROOT / "sample_data" / "synthetic_city.parquet"


def _metric(at, label_start: str) -> str:
    for m in at.metric:
        if m.label.startswith(label_start):
            return m.value
    raise AssertionError(f"no metric starting with {label_start!r}; have {[m.label for m in at.metric]}")


def _live_spec(at, page: str) -> dict:
    """What the live component of ``page`` (its name in ``live_curves``) was sent: its sliders and charts."""

    for e in at.get("bidi_component"):
        if e.proto.component_name == "odlab_live_curves":
            spec = json.loads(e.proto.json)
            if spec.get("page") == page:
                return spec
    raise AssertionError(f"no live component {page!r} on the page")


def _no_errors(at) -> None:
    assert not at.exception, [e.message for e in at.exception]
    assert not at.error, [e.value for e in at.error]


def test_landing_page_has_sidebar_and_tour(at):
    assert at.title[0].value == "OD Privacy Lab"
    assert any("per metric" in m.value for m in at.markdown)
    assert at.session_state[K_EPSILON] == 0.66
    assert at.session_state[K_THRESHOLD] == 100
    assert at.session_state[K_CELL_KM2] == 1.3
    assert any("32 unique trips" in i.value for i in at.info)


@pytest.mark.parametrize("page", PAGES)
def test_every_page_renders(at, page):
    at.switch_page(page).run()
    _no_errors(at)
    assert at.title[0].value
    assert at.markdown[0].value   # the plain-language intro


def test_every_control_has_help(at):
    for page in [*PAGES[:4], *PAGES[6:]]:   # + the teaching pages
        at.switch_page(page).run()
        widgets = [*at.slider, *at.number_input, *at.selectbox, *at.radio, *at.toggle, *at.text_input,
                   *at.button, *at.multiselect]
        missing = [w.label for w in widgets if not getattr(w, "help", None)]
        assert missing == [], f"{page}: controls without help=: {missing}"


def test_epsilon_moves_the_attack_curve_and_persists_across_pages(at):
    at.switch_page("pages/3_Attack.py").run()
    before = _metric(at, "Success with k = 3")
    assert before == "70.7 %"          # exact p_3 at ε = 0.66 (Houssiau et al. report 70.5 % by Monte Carlo)
    assert "w.epsilon" not in [w.key for w in at.sidebar.slider]   # ε is the live curves' slider
    at.session_state[K_EPSILON] = 1.0   # what the live component writes on release (odapp.components.live)
    at.run()
    _no_errors(at)
    after = _metric(at, "Success with k = 3")
    assert after != before
    at.switch_page("pages/4_Privacy_budget.py").run()
    assert at.session_state[K_EPSILON] == 1.0
    assert _metric(at, "ε per count") == "1"
    at.switch_page("pages/8_See_the_noise.py").run()
    assert at.slider(key="w.epsilon").value == 1.0


def test_threshold_changes_what_is_published_and_preset_restores(at):
    at.switch_page("pages/2_OD_release.py").run()
    at.sidebar.button(key="preset").click().run()          # the Google/Bassolas 2019 preset
    _no_errors(at)
    base = _metric(at, "Pairs published")
    assert at.session_state[K_EPSILON] == 0.66
    assert "w.threshold" not in [w.key for w in at.sidebar.slider]   # τ is the live curves' slider here
    at.session_state[K_THRESHOLD] = 20   # what the live component writes on release (odapp.components.live)
    at.run()
    _no_errors(at)
    lower = _metric(at, "Pairs published")
    assert int(lower.split("/")[0].replace(",", "")) > int(base.split("/")[0].replace(",", ""))
    at.sidebar.button(key="preset").click().run()
    assert at.session_state[K_THRESHOLD] == 100
    assert _metric(at, "Pairs published") == base      # same seed, same noise, same release


def test_release_views_and_filters(at):
    at.switch_page("pages/2_OD_release.py").run()
    labels = [b.label for b in at.get("download_button")]   # the week's two reports (odcore report)
    assert "Release report (HTML)" in labels
    assert "Report with the truth — do not share (HTML)" in labels
    for view in ("Raw counts", "Side by side", "Published"):
        at.selectbox(key="rel_view").set_value(view).run()
        _no_errors(at)
    at.toggle(key="rel_faint").set_value(True).run()
    at.number_input(key="rel_topn").set_value(50).run()
    _no_errors(at)
    cells = at.selectbox(key="rel_cell").options
    at.selectbox(key="rel_cell").set_value(int(cells[1].split()[-1])).run()   # one cell's flows only
    _no_errors(at)
    at.toggle(key="rel_basemap").set_value(True).run()
    _no_errors(at)
    assert any("CARTO" in c.value for c in at.caption)                       # the caption names the provider


def test_release_nothing_published_is_explained(at):
    at.switch_page("pages/2_OD_release.py").run()
    at.sidebar.radio(key="w.source").set_value("synth").run()
    next(n for n in at.sidebar.number_input if n.label == "Users").set_value(60)
    next(b for b in at.sidebar.button if b.label == "Generate city").click().run()   # 60 people: no pair has 100
    _no_errors(at)
    warn = " ".join(w.value for w in at.warning)
    assert "Nothing is published this week" in warn
    assert "lower the threshold" in warn
    # the map's legend says nothing is published instead of listing count classes of nothing; side by side shows
    # the suppressed flows in grey on the left
    legend = next(m.value for m in at.markdown if "Level:" in m.value)
    assert "Nothing published at these settings" in legend
    assert "wider and darker" not in legend
    view = at.selectbox(key="rel_view").value
    at.selectbox(key="rel_view").set_value("Side by side").run()
    try:
        decks = map_decks(at)
        assert len(decks) == 2
        assert any(layer["id"] == "suppressed" and layer["data"] for layer in decks[0]["layers"])
        assert "Nothing published at these settings" in next(m.value for m in at.markdown if "Level:" in m.value)
    finally:
        at.selectbox(key="rel_view").set_value(view).run()


def test_data_source_synth_and_week(at):
    at.switch_page("pages/1_Data.py").run()
    at.sidebar.radio(key="w.source").set_value("synth").run()      # default synthetic city first
    _no_errors(at)
    users = next(n for n in at.sidebar.number_input if n.label == "Users")
    users.set_value(300)
    next(n for n in at.sidebar.number_input if n.label == "Weeks").set_value(2)
    next(b for b in at.sidebar.button if b.label == "Generate city").click().run()
    _no_errors(at)
    assert at.session_state[K_SYNTH_USERS] == 300
    assert at.session_state[K_SYNTH_WEEKS] == 2
    assert _metric(at, "People in the data") == "300"
    assert _metric(at, "Weeks") == "2"
    assert len(at.sidebar.selectbox(key="w.week").options) == 2
    at.sidebar.selectbox(key="w.week").set_value(1).run()
    _no_errors(at)
    assert at.session_state[K_WEEK] == 1
    at.switch_page("pages/2_OD_release.py").run()
    _no_errors(at)
    assert at.sidebar.selectbox(key="w.week").value == 1
    at.switch_page("pages/3_Attack.py").run()
    _no_errors(at)
    # back to the bundled sample: one week, so the week is clamped to 0
    at.sidebar.radio(key="w.source").set_value("sample").run()
    _no_errors(at)
    assert at.session_state[K_SOURCE] == "sample"
    assert at.session_state[K_WEEK] == 0


def test_cell_area_rebuilds_the_grid(at):
    at.switch_page("pages/1_Data.py").run()
    cells = next(c.value for c in at.caption if "grid " in c.value and "cells" in c.value)
    at.sidebar.number_input(key="w.cell_km2").set_value(4.0).run()
    _no_errors(at)
    bigger = next(c.value for c in at.caption if "grid " in c.value and "cells" in c.value)
    assert "4.00 km²" in bigger
    assert bigger != cells
    at.sidebar.button(key="preset").click().run()      # the preset puts 1.3 km² back
    assert at.session_state[K_CELL_KM2] == 1.3


def test_attack_population_and_user_picks(at):
    at.switch_page("pages/3_Attack.py").run()
    for pick in ("busiest", "quiet (10th percentile)"):
        at.radio(key="attack_pick").set_value(pick).run()
        _no_errors(at)
    at.toggle(key="attack_population").set_value(True).run()
    _no_errors(at)
    assert any("Median success" in m.value for m in at.markdown)
    at.toggle(key="attack_population").set_value(False).run()


def test_attack_person_is_the_engines_pick(at):
    """The real person of the week (its lookups cached per week, release and seed: odapp.attack.cache.attack_users,
    attack_others) against the engine on the same week: the busiest and the quietest user, their number of unique
    trips, and the exact success of odcore.privacy.attack.user_risk on the counts of everyone else."""
    import numpy as np

    from odapp.attack import cache as attack_cache
    from odapp.data.loading import load_sample
    from odapp.shared.words import pct
    from odcore.od.trips import ODConfig, build_od
    from odcore.privacy.attack import user_risk
    from odcore.report.figures import thin_curve

    at.switch_page("pages/3_Attack.py").run()
    week = int(at.session_state[K_WEEK])
    loaded = load_sample()
    od = build_od(loaded.df, ODConfig(cell_km2=float(at.session_state[K_CELL_KM2]), tz=loaded.tz))
    pairs = od.week_pairs(week)
    counts = od.counts.loc[od.counts["week"] == week].set_index(["origin", "destination"])["count"]
    per_user = pairs.groupby("user").size()
    for pick, q in (("busiest", 1.0), ("quiet (10th percentile)", 0.1)):
        at.radio(key="attack_pick").set_value(pick).run()
        _no_errors(at)
        k = int(np.quantile(per_user.to_numpy(), q, method="nearest"))
        user = per_user.index[int(np.flatnonzero(per_user.to_numpy() == k)[0])]
        assert _metric(at, "User") == str(user)
        mine = pairs.loc[pairs["user"] == user]
        others = counts.loc[list(zip(mine["origin"], mine["destination"], strict=True))].to_numpy(float) - 1.0
        assert len(others) == k
        expected = user_risk(others, float(at.session_state[K_EPSILON]), float(at.session_state[K_THRESHOLD]),
                             roc=True)
        assert _metric(at, "Attack success on this user") == pct(expected.success)
        # their ROC, drawn on the canvas (odapp.live.view.roc): the engine's vertices, thinned as the plotly figure's
        roc = _live_spec(at, "attack_roc")["charts"][0]["series"][0]
        keep = thin_curve(expected.roc.fpr, expected.roc.tpr)
        np.testing.assert_allclose(roc["x"], expected.roc.fpr[keep], rtol=0, atol=1e-6)
        np.testing.assert_allclose(roc["y"], expected.roc.tpr[keep], rtol=0, atol=1e-6)
        assert f"AUC {expected.roc.auc:.3f}" in roc["name"]
        # the cached lookup itself, exactly (the page rounds to 0.1 %, which hides an off-by-one in the counts)
        got = attack_cache.attack_others("test", od.config, week, ("per_metric",), user, _pairs=pairs,
                                  _counts=od.counts.loc[od.counts["week"] == week])
        np.testing.assert_array_equal(np.sort(got), np.sort(others))
        # user-level rows (no counts given): the others' count is the rows' own count of each pair, minus one
        bounded = pairs.loc[pairs["origin"] != pairs["origin"].iloc[0]]
        own = bounded.groupby(["origin", "destination"]).size()
        mine_b = bounded.loc[bounded["user"] == user]
        got = attack_cache.attack_others("test-bounded", od.config, week, ("user_level", 0, 0), user, _pairs=bounded,
                                  _counts=None)
        want = own.loc[list(zip(mine_b["origin"], mine_b["destination"], strict=True))].to_numpy(float) - 1.0
        np.testing.assert_array_equal(np.sort(got), np.sort(want))
    assert attack_cache.attack_users("test", od.config, week, ("per_metric",), _pairs=pairs).equals(per_user)
    at.radio(key="attack_pick").set_value("typical (median trips)").run()


def test_monte_carlo_runs_and_matches_the_exact_curve(at):
    at.switch_page("pages/3_Attack.py").run()
    at.select_slider(key="attack_reps").set_value(500).run()
    at.button(key="attack_run_mc").click().run()
    _no_errors(at)
    cap = [c.value for c in at.caption if "inside the 95 %" in c.value]
    assert cap, "no Monte Carlo summary"
    share = float(cap[0].split("%")[0])
    assert share >= 80          # 71 points, each inside its 95 % Wilson interval with probability ~0.95


def test_knock_knock_small_run(at):
    at.switch_page("pages/5_Knock_Knock.py").run()
    at.multiselect(key="knock_classifiers").set_value(["lr"]).run()
    at.number_input(key="knock_targets").set_value(2)
    at.number_input(key="knock_ntrain").set_value(60)
    at.number_input(key="knock_ntest").set_value(20)
    at.button[0].click().run()
    _no_errors(at)
    auc = float(_metric(at, "Mean AUC"))
    assert 0.0 <= auc <= 1.0
    assert at.dataframe     # per-target table and MRE table


def test_per_user_mode_on_every_page(at):
    at.switch_page("pages/2_OD_release.py").run()
    at.sidebar.selectbox(key="w.mode").set_value("user_level").run()
    _no_errors(at)
    assert _metric(at, "Noise scale") == "15.2"        # max_pairs / ε = 10 / 0.66
    at.sidebar.number_input(key="w.max_pairs").set_value(3).run()
    assert _metric(at, "Noise scale") == "4.55"
    for page in [*PAGES[:4], *PAGES[6:]]:   # + the teaching pages
        at.switch_page(page).run()
        _no_errors(at)
    at.sidebar.selectbox(key="w.mode").set_value("per_metric").run()
    _no_errors(at)


# page -> a page-specific headline metric that must change with the unit (besides the shared unit headline)
UNIT_HEADLINES = {"pages/2_OD_release.py": "Noise scale", "pages/3_Attack.py": "Success with k = 3 trips",
                  "pages/4_Privacy_budget.py": "Attacker right at most"}
# Knock Knock shows no OD guarantee card: its ε is its defence's (odapp.shared.layout.page(headline=False)).
HEADLINE_PAGES = [p for p in PAGES if p != "pages/5_Knock_Knock.py"]


def _headline(at) -> dict:
    labels = [m.label for m in at.metric]
    unit = next(lb for lb in labels if lb.startswith("ε per "))
    return {"unit": unit, "typical": _metric(at, "Typical person's week: ε"),
            "bound": _metric(at, "Bound on any attacker")}


def test_unit_switch_changes_every_page_headline(at):
    at.sidebar.selectbox(key="w.mode").set_value("per_metric").run()
    before = {}
    for page in HEADLINE_PAGES:
        at.switch_page(page).run()
        _no_errors(at)
        before[page] = (_headline(at), _metric(at, UNIT_HEADLINES[page]) if page in UNIT_HEADLINES else None)
    at.sidebar.selectbox(key="w.mode").set_value("user_level").run()
    for page in HEADLINE_PAGES:
        at.switch_page(page).run()
        _no_errors(at)
        head, specific = _headline(at), (_metric(at, UNIT_HEADLINES[page]) if page in UNIT_HEADLINES else None)
        old_head, old_specific = before[page]
        assert old_head["unit"] == "ε per count"
        assert head["unit"] == "ε per person and week"
        assert head["typical"] != old_head["typical"]
        assert head["bound"] != old_head["bound"]
        if specific is not None:
            assert specific != old_specific, page
    # the sidebar speaks the unit and proposes the threshold that fits the noise, with its δ
    assert at.sidebar.slider(key="w.epsilon").label == "ε (privacy parameter per person and week)"
    assert any("δ over 52 weeks" in c.value and "(threshold)" in c.value for c in at.sidebar.caption)
    at.sidebar.number_input(key="w.max_pairs").set_value(20).run()
    at.sidebar.toggle(key="w.fit_threshold").set_value(False).run()
    at.sidebar.number_input(key="w.user_threshold").set_value(100).run()
    assert any("no meaningful guarantee" in w.value for w in at.sidebar.warning)    # τ = 100 is too low at m = 20
    at.sidebar.toggle(key="w.fit_threshold").set_value(True).run()
    at.switch_page(HOME_FILE).run()
    _no_errors(at)
    assert any("Guarantee unit: **per person and week**" in i.value for i in at.info)
    at.sidebar.selectbox(key="w.mode").set_value("per_metric").run()
    assert any("Guarantee unit: **per count**" in i.value for i in at.info)
    _no_errors(at)
    assert at.session_state[K_THRESHOLD] == 100          # the per-count threshold is kept


def test_release_designer_page(at, tmp_path):
    """The default goal on the bundled city: the data-independent max pairs, a verdict that says no useful release
    exists (with what would change it), and the same verdict rows as the guarantee sheet the CLI writes."""
    import html

    from odcore.cli import main

    at.switch_page("pages/6_Release_designer.py").run()
    _no_errors(at)
    assert any("no useful release exists" in w.value for w in at.warning)
    assert not any("Useful." in x.value for x in at.success)
    assert any("What would change it" in m.value for m in at.markdown)
    assert _metric(at, "Max pairs per person and week") == "10"
    assert any("data-independent default" in i.value for i in at.info)
    assert float(_metric(at, "ε per person and week")) <= 1.0                 # the default goal: ε <= 1 per week
    rows = at.table[0].value
    sheet = tmp_path / "sheet.html"
    assert main(["design", "--sheet", str(sheet), "--json"]) == 0             # same data, week, seed, m
    text = sheet.read_text(encoding="utf-8")
    for label, value in zip(rows.index, rows.iloc[:, 0], strict=True):
        assert html.escape(label) in text, label
        assert html.escape(str(value)) in text, (label, value)
    # an attack goal with the data-independent default m = 10
    at.radio(key="design_kind").set_value("attack")
    at.number_input(key="design_p").set_value(0.6)
    at.button[0].click().run()                                                # the form's submit button
    _no_errors(at)
    assert _metric(at, "Max pairs per person and week") == "10"
    assert any("data-independent default" in i.value for i in at.info)
    typical = float(_metric(at, "Attack on a typical person").rstrip(" %"))
    assert 50.0 < typical <= 60.0
    # a risk goal in the regulators' words
    at.radio(key="design_kind").set_value("tpr")
    at.number_input(key="design_r").set_value(0.05)
    at.number_input(key="design_k").set_value(10)
    at.button[0].click().run()
    _no_errors(at)
    assert any("TPR ≤ 0.05 at FPR 0.01" in sh.value for sh in at.subheader)
    tuned_m = True
    assert tuned_m
    labels = [b.label for b in at.get("download_button")]
    assert "Design sheet — do not share (HTML)" in labels


def test_audit_page_runs_the_audit_and_matches_the_engine(at):
    from odapp.shared.state import K_SEED
    from odcore.data.traces import load_traces
    from odcore.od.trips import ODConfig, build_od
    from odcore.privacy.audit import AuditConfig, audit_one_run

    at.switch_page("pages/9_Audit.py").run()
    _no_errors(at)
    at.select_slider(key="audit_canaries").set_value(200).run()
    at.button(key="audit_run").click().run()
    _no_errors(at)
    measured = [m for m in at.metric if m.label.startswith("Measured ε")]
    assert len(measured) == 2
    # the engine on the same week, settings and seed gives the same bound
    week, seed = int(at.session_state[K_WEEK]), int(at.session_state[K_SEED])
    data = build_od(load_traces(SAMPLE).df, ODConfig())
    r = audit_one_run(data.week_pairs(week), AuditConfig(unit="count", canaries=200), week=week, rng=seed)
    assert measured[0].value == f"≥ {r.epsilon_lower:.2f}"
    assert any("Laplace then tau" in str(v) for v in at.dataframe[0].value["strategy"])
