"""The pages' charts come from builders cached across reruns and sessions (odapp.shared.charts). A builder that does not take
something its chart shows would return a stale chart once that thing changes. So each page is walked through
settings that change its charts, and at every step the spec each chart sent is compared with the spec of a rerun
with the builders' caches emptied (every figure built afresh): they must be the same. A builder made to ignore one
of its inputs is caught (the last test)."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
import streamlit as st

from odapp.shared import charts

BUILDERS = [f for _, f in inspect.getmembers(charts) if hasattr(f, "clear") and callable(f)]

# A step: (what, how); "how" gets the AppTest and changes one control (or presses one button).
PROJECTOR_ON = ("projector mode", lambda at: at.sidebar.toggle(key="w.projector").set_value(True))
SIDEBAR_STEPS = [
    ("ε", lambda at: at.sidebar.slider(key="w.epsilon").set_value(1.0)),
    ("threshold", lambda at: at.sidebar.slider(key="w.threshold").set_value(150)),
    ("seed", lambda at: at.sidebar.number_input(key="w.seed").increment()),
    PROJECTOR_ON,
    ("per user", lambda at: at.sidebar.selectbox(key="w.mode").set_value("user_level")),
    ("ε per user", lambda at: at.sidebar.slider(key="w.epsilon").set_value(3.0)),
]


def live_setting(key: str, value: float):
    """A step for a page whose slider is its live component's (odapp.components.live): set the setting it writes
    on release."""
    def how(at):
        at.session_state[key] = value
        return at
    return how


def live_epsilon(value: float):
    return live_setting("odlab.epsilon", value)


# the sidebar's steps on a page that holds ε itself, beside its live curves
LIVE_STEPS = [(what, live_epsilon(1.0 if what == "ε" else 3.0)) if what.startswith("ε") else (what, how)
              for what, how in SIDEBAR_STEPS]
# charts on the page when everything is shown (zones compared, every user attacked, the experiment run, a round played)
MOST_CHARTS = {"pages/1_Data.py": 2, "pages/3_Attack.py": 1,
               "pages/5_Knock_Knock.py": 3, "pages/7_Play_the_attacker.py": 2}
# page -> its walk: its own controls and actions, then (for most) the sidebar's
PAGE_WALKS = {
    # two zone systems of squares: the chart and its inputs as with hexagons, without H3's second of assignment at
    # each step
    "pages/1_Data.py": [("zone systems compared", lambda at: at.multiselect(key="zones_compare_pick")
                         .set_value(["square:1.3", "square:5"])),
                        ("compare", lambda at: at.button(key="zones_compare_go").click()),
                        *SIDEBAR_STEPS[:3], PROJECTOR_ON],
    "pages/3_Attack.py": [("prior", lambda at: at.slider(key="attack_prior").set_value(0.3)),
                          ("every user attacked", lambda at: at.toggle(key="attack_population").set_value(True)),
                          *LIVE_STEPS],
    "pages/5_Knock_Knock.py": [("run", lambda at: next(b for b in at.button if "Run" in (b.label or "")).click()),
                               ("another target's ROC", lambda at: at.selectbox(key="knock_roc_target")
                                .select_index(1)),
                               PROJECTOR_ON],
    "pages/7_Play_the_attacker.py": [("a round", lambda at: at.button(key="game_in").click()),
                                     ("another round", lambda at: at.button(key="game_out").click()),
                                     *[(what, live_setting("odlab.threshold", 150)) if what == "threshold"
                                       else (what, how) for what, how in LIVE_STEPS]],
}


def _specs(at) -> list[str]:
    return [el.proto.spec for el in at.get("plotly_chart")]


def _stale(at, builders) -> list[int]:
    """Indices of the charts whose spec differs from the same rerun with every figure built afresh."""
    cached = _specs(at)
    for f in builders:
        f.clear()
    at.run()
    fresh = _specs(at)
    assert len(fresh) == len(cached)
    return [i for i, (a, b) in enumerate(zip(cached, fresh, strict=True)) if a != b]


def _walk(at, page: str, steps, builders=BUILDERS, drawn: list | None = None) -> dict[str, list[int]]:
    """Each step's stale charts (indices); ``drawn`` gets the number of charts at each step."""
    at.switch_page(page).run()
    at.run()   # the second run draws from the caches
    out = {"opened": _stale(at, builders)}
    for what, how in steps:
        how(at).run()
        assert not at.exception, [e.message for e in at.exception]
        out[what] = _stale(at, builders)
        if drawn is not None:
            drawn.append(len(_specs(at)))
    return out


@pytest.fixture
def fresh_at():
    from streamlit.testing.v1 import AppTest

    from odcore.paths import REPO_ROOT

    if not (REPO_ROOT / "sample_data" / "synthetic_city.parquet").is_file():
        pytest.skip("bundled sample missing (make sample-data)")
    app = AppTest.from_file(str(REPO_ROOT / "app.py"), default_timeout=300)
    app.run()
    return app


def test_the_builders_are_found():
    names = {f.__name__ for f in BUILDERS}
    assert {"trips_chart", "weeks_chart", "delta_chart", "curve_chart", "roc_chart", "population_chart",
            "trips_hist_chart", "trips_tu_chart", "zones_compare_chart", "noise_chart", "game_score_chart",
            "llr_chart", "knock_cdf_chart", "knock_pl_chart", "knock_roc_chart"} == names


@pytest.mark.parametrize("page", list(PAGE_WALKS))
def test_cached_charts_equal_charts_built_afresh(fresh_at, page):
    at = fresh_at
    drawn = []
    walked = _walk(at, page, PAGE_WALKS[page], drawn=drawn)
    assert max(drawn) == MOST_CHARTS[page], drawn   # the walk reached every chart of the page
    assert all(not v for v in walked.values()), {k: v for k, v in walked.items() if v}


def test_a_builder_that_ignores_an_input_is_caught(fresh_at, monkeypatch):
    """The check above fails when a builder does not take what its chart shows: here the Attack page's population
    histogram is made to ignore the real person's success (it marks the success it was first given), which a new
    threshold changes."""
    first = {}
    real = charts.population_chart

    @st.cache_resource(show_spinner=False)
    def ignores_person(success, bound, user, *, projector):
        return real(success, bound, first["user_success"], user, projector=projector)

    def population_chart(success, bound, user_success, user, *, projector):
        first.setdefault("user_success", user_success)
        return ignores_person(success, bound, user, projector=projector)

    population_chart.clear = lambda: (ignores_person.clear(), first.clear())
    monkeypatch.setattr(charts, "population_chart", population_chart)
    walked = _walk(fresh_at, "pages/3_Attack.py",
                   [("every user attacked", lambda at: at.toggle(key="attack_population").set_value(True)),
                    ("threshold", lambda at: at.sidebar.slider(key="w.threshold").set_value(150))],
                   [*BUILDERS, population_chart])
    assert walked["opened"] == []
    assert walked["every user attacked"] == []
    assert walked["threshold"] == [0]


def _decoded(v):
    """A plotly spec's array (a list, or numpy's base64 ``{"dtype", "bdata", "shape"}``) as a numpy array."""
    import base64

    import numpy as np

    if isinstance(v, dict) and "bdata" in v:
        a = np.frombuffer(base64.b64decode(v["bdata"]), dtype=v["dtype"])
        return a.reshape([int(x) for x in str(v["shape"]).split(",")]) if "shape" in v else a
    return np.asarray(v, dtype=float)


def test_total_vs_unique_heatmap_shows_every_user_once():
    """The Data page's total-vs-unique chart is a heatmap: each (total, unique) pair's users in its square, at
    (x = total, y = unique), nothing else; the colour is log10 of the users."""
    import json

    import numpy as np
    import pandas as pd

    tu = pd.DataFrame({"trips": [1, 3, 3, 7, 39], "unique_trips": [1, 2, 3, 5, 32], "users": [40, 7, 1, 2, 1]})
    fig = charts.trips_tu_chart.__wrapped__(tu, 39, projector=False)
    hm = json.loads(fig.to_json())["data"][0]
    assert hm["type"] == "heatmap"
    users = _decoded(hm["customdata"])
    x, y = _decoded(hm["x"]), _decoded(hm["y"])
    got = {(int(x[j]), int(y[i])): users[i, j] for i, j in zip(*np.nonzero(~np.isnan(users)), strict=True)}
    assert got == {(t, u): n for t, u, n in tu.itertuples(index=False)}
    np.testing.assert_allclose(_decoded(hm["z"]), np.log10(users))


def test_data_page_heatmap_counts_the_active_users(fresh_at):
    """On the bundled city, the heatmap's users add up to the page's "People located this week"."""
    import json

    import numpy as np

    at = fresh_at
    at.switch_page("pages/1_Data.py").run()
    spec = next(json.loads(c.proto.spec) for c in at.get("plotly_chart")
                if json.loads(c.proto.spec)["data"][0]["type"] == "heatmap")
    active = next(m for m in at.metric if m.label == "People located this week")
    assert np.nansum(_decoded(spec["data"][0]["customdata"])) == int(active.value.replace(",", ""))


def test_delta_figure_is_the_exact_curve_at_the_pages_epsilon():
    # the ε-against-δ file (the page draws the live chart): the engine's curve at the page's ε on its δ axis
    from odcore.privacy.accounting import DELTA_AXIS, epsilon_delta_curve

    fig = charts.delta_figure(0.66, 70, False)
    exact = epsilon_delta_curve(0.66, 70)
    assert [t.name for t in fig.data] == ["basic (any δ)", "advanced", "Rényi-DP bound", "tight"]
    for trace, col in zip(fig.data, ("basic", "advanced", "rdp", "tight"), strict=True):
        np.testing.assert_array_equal(np.asarray(trace.x), DELTA_AXIS)
        np.testing.assert_array_equal(np.asarray(trace.y), exact[col].to_numpy())


@pytest.mark.parametrize("projector", [False, True])
def test_trips_charts_draw_their_data_and_share_a_layout_no_data_changes(projector):
    """The Data page's two trips charts start from a layout made once per projector mode. For several data sets:
    the traces hold the data (read back against a pivot of the input), styling the finished figure again changes
    nothing (the layout made without data is the one styling gives with the data in place), and drawing other data
    in between leaves a chart's figure as it was (the shared layout is not changed by a call)."""
    import json

    import pandas as pd
    import plotly.graph_objects as go
    import plotly.io as pio

    from odcore.report import figures

    def spec(fig):
        return json.loads(pio.to_json(fig, validate=False))

    def restyled(fig, title):
        """Layout of ``fig`` styled again with its data in place, and its own, without the legend (each chart
        places its legend after styling; checked below)."""
        again = go.Figure(fig)
        figures.style(again, title, projector=projector)
        return ({k: v for k, v in spec(again)["layout"].items() if k != "legend"},
                {k: v for k, v in spec(fig)["layout"].items() if k != "legend"})

    rng = np.random.default_rng(8)
    made = []
    for hi in (1, 12, 80):
        hist = pd.DataFrame({"trips_in_week": np.arange(hi + 1), "users_total": rng.integers(0, 900, hi + 1),
                             "users_unique": rng.integers(0, 900, hi + 1)})
        t = rng.integers(0, hi + 1, 50)
        tu = pd.DataFrame({"trips": t, "unique_trips": np.minimum(t, rng.integers(0, hi + 1, 50)),
                           "users": rng.integers(1, 5000, 50)}).drop_duplicates(["trips", "unique_trips"])
        h = charts.trips_hist_chart.__wrapped__(hist, projector=projector)
        assert [tr.name for tr in h.data] == ["total trips", "unique trips"]
        np.testing.assert_array_equal(np.asarray(h.data[0].y), hist["users_total"])
        np.testing.assert_array_equal(np.asarray(h.data[1].y), hist["users_unique"])
        again, own = restyled(h, "Distribution over users")
        assert again == own
        placed = figures.legend_at({"x": 0.99, "xanchor": "right"}, projector)      # at the right, as the app's
        assert {k: spec(h)["layout"]["legend"].get(k) for k in placed} == placed    # legends are placed
        g = charts.trips_tu_chart.__wrapped__(tu, hi, projector=projector)
        heat = g.data[0]
        grid = tu.pivot(index="unique_trips", columns="trips", values="users")
        users = np.asarray(heat.customdata, dtype=float)
        for (u, tt), n in grid.stack().dropna().items():
            assert users[u, tt] == n
            assert np.asarray(heat.z, dtype=float)[u, tt] == pytest.approx(np.log10(n))
        assert np.isnan(users).sum() == users.size - len(tu)            # every other square is empty
        assert list(g.data[1].x) == [0, hi]                               # the diagonal up to hi
        assert (list(g.data[2].x), list(g.data[2].y)) == ([39], [32])     # Houssiau et al.'s 39 -> 32
        again, own = restyled(g, "Total vs unique trips")
        assert again == own
        assert (g.layout.legend.orientation, g.layout.legend.yref) == ("h", "container")   # under the axes
        made.append(((hist, tu, hi), spec(h), spec(g)))
    for (hist, tu, hi), h, g in made:                                     # drawn again after the other data sets
        assert spec(charts.trips_hist_chart.__wrapped__(hist, projector=projector)) == h
        assert spec(charts.trips_tu_chart.__wrapped__(tu, hi, projector=projector)) == g
