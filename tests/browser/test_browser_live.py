"""The live curves in a real headless Chromium: while ε is dragged the browser draws, between two grid points of the
server's tables, the values of the exact engine within the stated error (odcore.privacy.live); on release the page
reruns once with the new ε. One screenshot taken during the drag is read pixel by pixel; the others (``live_*.png``)
are taken for the docs, under ``make screenshots``. The browser benchmark's drags end on a new value each time (every release a rerun)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from benchmarks.bench_browser_live import DRAGS, STEPS, drag_plan, thumb_x
from odcore.privacy import accounting as acc
from odcore.privacy import attack, live
from tests.browser.test_browser import _frames, _metric, _open, _run
from tests.conftest import keep_screenshot, screenshot_dir


def browser_test(f):
    """A test in headless Chromium (marked ``browser``), with time for pages that tabulate on a busy machine."""
    return pytest.mark.browser(pytest.mark.timeout(900)(f))


def test_benchmark_drags_end_on_a_new_value_each_time():
    """Each drag of a slider in ``python -m benchmarks -k browser_live`` ends where the one before did not, by many
    slider steps (more than the thumb's pixel), so its release changes the page's value and reruns it: drags that all
    ended at ``stop`` released the same value from the second on and measured a rerun that never happened."""
    for _, _, control, start, stop in DRAGS:
        step = STEPS[control]
        plan = drag_plan(start, stop, 6, step)
        assert len(plan) == 6
        assert {a for a, _ in plan} == {start}
        ends = [z for _, z in plan]
        assert all(abs(b - a) >= 20 * step for a, b in itertools.pairwise(ends)), (control, ends)
        assert all(min(start, stop) < z <= max(start, stop) for z in ends), (control, ends)
        assert all(abs(z / step - round(z / step)) < 1e-6 for z in ends), (control, ends)   # on the slider's steps
        assert ends[0] == stop
        assert abs(ends[0] - start) >= 20 * step   # the first one moves too (from the thumb pressed at ``start``)

TARGET = 0.93   # the pointer stops near here: near the middle of a grid cell of every table (odcore.privacy.live)


# The live component ``name`` has painted at its slider ``control``'s value (odapp/components/live/live.js: an input
# event asks for a frame; the frame's paint records its settings in ``window.odlive[name]``).
PAINTED_AT_JS = """([name, control]) => {
  const i = document.querySelector(`.odlive[data-page='${name}'] .odlive-control[data-name='${control}'] .odlive-range`);
  const r = (window.odlive || {})[name];
  return !!i && !!r && !!r.settings && r.settings[control] === parseFloat(i.value);
}"""


def hold_at(page, name: str, value: float, control: str = "epsilon", start: float = 0.66) -> dict:
    """Press the thumb at ``start``, move the pointer to ``value`` in 11 steps, one frame each, and keep holding;
    what the browser drew once it has painted at the last step (and the components that follow it with it)."""
    x0, y, _ = thumb_x(page, name, start, control)
    x1, _, _ = thumb_x(page, name, value, control)
    page.mouse.move(x0, y)
    page.mouse.down()
    for f in np.linspace(0, 1, 12)[1:]:
        page.mouse.move(x0 + (x1 - x0) * f, y)
        _frames(page, 1)
    page.wait_for_function(PAINTED_AT_JS, arg=[name, control], timeout=60_000, polling="raf")
    _frames(page)   # the followers repaint on the leader's event, in the next frame
    return page.evaluate(f"() => window.odlive['{name}']")


SHOWN = {  # where a released value shows: in a metric, or as the sidebar's bold value
    "metric": "(t) => [...document.querySelectorAll('[data-testid=stMetric]')].some(m => m.innerText.includes(t))",
    "sidebar": "(t) => [...document.querySelectorAll('[data-testid=stSidebar] strong')]"
               ".some(s => s.textContent === t)"}


def let_go(page, where: str, text: str) -> None:
    """Let go of the thumb (the page's setting, one rerun) and wait until the page shows ``text`` (in a metric, or
    as the sidebar's bold value) and its run is over."""
    with _run(page):
        page.mouse.up()
        page.wait_for_function(SHOWN[where], arg=text, timeout=120_000)


def between_grid_points(grid: np.ndarray, e: float) -> bool:
    """``e`` lies well inside a cell of ``grid`` (15-85 % of the way in log ε), not on or next to a grid point."""
    i = int(np.searchsorted(grid, e)) - 1
    t = (np.log(e) - np.log(grid[i])) / (np.log(grid[i + 1]) - np.log(grid[i]))
    return 0.15 < t < 0.85


def relative_error(drawn, exact) -> float:
    d, x = np.asarray(drawn, dtype=float), np.asarray(exact, dtype=float)
    ok = np.isfinite(x) & (x > 0)
    return float(np.max(np.abs(d[ok] - x[ok]) / x[ok]))


@browser_test
def test_attack_curve_follows_the_pointer(streamlit_url, page):
    _open(page, f"{streamlit_url}/Attack", "Attack")
    page.wait_for_function("() => window.odlive && window.odlive['attack']", timeout=60_000)
    got = hold_at(page, "attack", TARGET)
    e = float(got["settings"]["epsilon"])
    assert abs(e - TARGET) < 0.03
    assert between_grid_points(live.ATTACK_GRID, e)
    keep_screenshot(page.locator(".odlive").first, "live_attack_drag.png")
    drawn = np.asarray(got["values"]["attack"]["success"])
    exact = attack.success_curve(e, 70)
    assert np.max(np.abs(drawn - exact)) <= live.ATTACK_ERROR
    # not the curve of a grid point: it lies between the two grid curves around ε, away from both
    i = int(np.searchsorted(live.ATTACK_GRID, e))
    lo, hi = (attack.success_curve(float(g), 70) for g in live.ATTACK_GRID[i - 1:i + 1])
    assert np.all((drawn >= lo - 1e-9) & (drawn <= hi + 1e-9))
    gap = np.max(hi - lo)
    assert min(np.max(drawn - lo), np.max(hi - drawn)) > 0.15 * gap > 0
    assert got["values"]["attack"]["bound"][0] == pytest.approx(np.exp(e) / (1 + np.exp(e)), abs=1e-12)
    # the real person's chart follows the same slider: read at the pointer's ε from its own table
    person = page.evaluate("() => window.odlive['attack_person']")
    assert person["settings"]["epsilon"] == pytest.approx(e)
    xs, ys = person["x"]["person"]["person"], person["values"]["person"]["person"]
    assert person["values"]["person"]["person@epsilon"] == pytest.approx(float(np.interp(e, xs, ys)), abs=1e-9)
    keep_screenshot(page.locator(".odlive").nth(1), "live_attack_person_drag.png")
    assert _metric(page, "Success with k = 3 trips") == "70.7 %"   # the page waits for the release
    let_go(page, "metric", f"{100 * attack.success_curve(e, 3)[3]:.1f} %")   # release: the page's ε, one rerun
    assert page.locator("[data-testid='stException']").count() == 0
    assert page.locator("[data-testid='stSidebar'] strong").filter(has_text=f"{e:g}").count() == 1


ATTACK_Y = (0.45, 1.01)   # the Attack chart's y axis (odapp/live/view.py, attack: "ymin", "ymax")
BLUE = np.array([31, 119, 180])   # the p_k curve: the component's first colour (live.js PALETTE[0]), on white


def curve_row(png: np.ndarray, x: int) -> float:
    """Where the blue curve crosses column ``x`` of an RGB screenshot (in canvas y, the pixel rows' centres) by
    how much blue each pixel holds (an antialiased line is blue blended with the white background; grey grid lines
    and the orange bound are not on that blend)."""
    col = png[:, x, :3].astype(float)
    a = (255 - col[:, 0]) / (255 - BLUE[0])   # the share of blue, from red
    on_blend = np.all(np.abs(col - (255 - a[:, None] * (255 - BLUE))) < 25, axis=1)
    w = np.where(on_blend & (a > 0.3), np.clip(a, 0, 1), 0.0)
    assert w.sum() > 1, f"no curve in column {x}"
    return float(np.sum(w * (np.arange(len(w)) + 0.5)) / w.sum())   # a pixel row's centre: its index + ½


def grid_row(png: np.ndarray, x: int, near: float) -> float:
    """Where a grey horizontal grid line near row ``near`` crosses column ``x`` (pixel rows' centres, weighted by
    how dark their grey is)."""
    rows = np.arange(max(0, int(near) - 4), min(png.shape[0], int(near) + 6))
    px = png[rows, x, :3].astype(float)
    w = np.where(np.ptp(px, axis=1) < 8, 255 - px.mean(axis=1), 0.0)   # grey: red, green and blue alike
    assert w.sum() > 5, f"no grid line near row {near:.1f} in column {x}"
    return float(np.sum(w * (rows + 0.5)) / w.sum())


@browser_test
def test_attack_screenshot_shows_the_curve_between_grid_points(streamlit_url, page):
    """A screenshot taken while the pointer holds ε inside a cell of the p_k table shows the curve at the pointer's ε:
    read off the PNG's pixels (k = 8..16), the curve lies within a pixel of where the exact engine puts it at that ε,
    and away from where the curve of either grid point around it lies (what a picture stepping from grid point to
    grid point would show; about 3 px either side at ε ≈ 0.93). The readout shows the value at the pointer, not
    either grid point's."""
    from PIL import Image

    _open(page, f"{streamlit_url}/Attack", "Attack")
    page.wait_for_function("() => window.odlive && window.odlive['attack']", timeout=60_000)
    got = hold_at(page, "attack", TARGET)
    e = float(got["settings"]["epsilon"])
    assert between_grid_points(live.ATTACK_GRID, e)
    shot = screenshot_dir() / "live_attack_between_grid_points.png"
    shot.parent.mkdir(parents=True, exist_ok=True)
    canvas = page.locator(".odlive canvas").first
    box = canvas.bounding_box()
    canvas.screenshot(path=str(shot))
    readout = page.locator(".odlive-readout").first.inner_text()
    png = np.asarray(Image.open(shot).convert("RGB"))
    lay = got["layout"]["attack"]
    # one CSS pixel a pixel (device scale factor 1); the picture starts at the whole pixel the canvas starts in
    assert abs(png.shape[0] - lay["height"]) <= 1, (png.shape, lay)
    assert abs(png.shape[1] - lay["width"]) <= 1, (png.shape, lay)
    left, top, right, bottom = lay["plot"]
    ks = np.asarray(got["x"]["attack"]["success"], dtype=float)

    def col(k: int) -> int:   # the picture's column the point k of the curve falls in
        return int(round(box["x"]) - int(box["x"]) + left + (k - ks.min()) / (ks.max() - ks.min()) * (right - left))

    def row(y: float) -> float:   # the chart's own y of probability y (live.js, drawChart's Y)
        return bottom - (y - ATTACK_Y[0]) / (ATTACK_Y[1] - ATTACK_Y[0]) * (bottom - top)

    # where the chart's rows sit in the picture: from its grey grid lines at 80, 90 and 100 % (not from the curve)
    shift = np.mean([grid_row(png, int(left) + 4, row(t)) - row(t) for t in (0.8, 0.9, 1.0)])
    # the picture starts at the whole pixel the canvas's box starts in; Chromium draws the canvas from the nearest one
    print(f"canvas box {box}, plot {lay['plot']}, rows shifted by {shift:.2f} px in the picture")
    assert round(box["y"]) - int(box["y"]) - 0.3 <= shift <= round(box["y"]) - int(box["y"]) + 0.3, (shift, box)

    i = int(np.searchsorted(live.ATTACK_GRID, e))
    g_lo, g_hi = live.ATTACK_GRID[i - 1], live.ATTACK_GRID[i]
    exact, lo, hi = (attack.success_curve(float(x), 70) for x in (e, g_lo, g_hi))
    # k = 8..16: where the two grid curves lie 4.5-6.5 px apart at ε ≈ 0.93, clear of the p_3 readout's label
    for k in range(8, 17):
        seen = curve_row(png, col(k)) - shift
        print(f"k={k}: curve at row {seen:.2f}; exact at ε={e:g}: {row(exact[k]):.2f}; grid ε={g_lo:.4f}: "
              f"{row(lo[k]):.2f}, ε={g_hi:.4f}: {row(hi[k]):.2f}")
        assert abs(row(hi[k]) - row(lo[k])) > 4, k   # the two grid points' curves: apart on the screen
        assert abs(seen - row(exact[k])) < 1.0, (k, seen, row(exact[k]))
        assert min(abs(seen - row(lo[k])), abs(seen - row(hi[k]))) > 1.2, (k, seen, row(lo[k]), row(hi[k]))

    def pct(v: float) -> str:
        return f"{100 * v:.1f} %"

    drawn3 = float(got["values"]["attack"]["success"][3])
    assert abs(drawn3 - exact[3]) <= live.ATTACK_ERROR
    assert f"p_3: {pct(drawn3)}" in readout.replace("\xa0", " "), readout   # each reading kept whole by no-break spaces
    assert pct(drawn3) not in (pct(lo[3]), pct(hi[3])), (drawn3, lo[3], hi[3])
    page.mouse.up()

@browser_test
def test_budget_curves_follow_the_pointer(streamlit_url, page):
    _open(page, f"{streamlit_url}/Privacy_budget", "Privacy budget")
    page.wait_for_function("() => window.odlive && window.odlive['budget']", timeout=120_000)
    got = hold_at(page, "budget", TARGET)
    e = float(got["settings"]["epsilon"])
    assert between_grid_points(live.BUDGET_GRID, e)
    assert between_grid_points(live.WEEKS_GRID, e)
    keep_screenshot(page.locator(".odlive").first, "live_budget_drag.png")
    trips = acc.epsilon_vs_trips(e, 70, 1e-6)
    v = got["values"]["trips"]
    assert relative_error(v["tight"], trips["tight"]) <= live.BUDGET_ERROR
    assert relative_error(v["rdp"], trips["rdp"]) <= live.BUDGET_ERROR
    assert np.asarray(v["basic"]) == pytest.approx(trips["basic"].to_numpy(), rel=1e-12)
    assert np.asarray(v["advanced"]) == pytest.approx(trips["advanced"].to_numpy(), rel=1e-9)
    weeks = acc.epsilon_over_weeks(e, 70, 52, 1e-6, interval=acc.weeks_interval(e), lower=False)   # as the page
    w = got["values"]["weeks"]
    assert relative_error(w["tight"], weeks["tight"]) <= live.BUDGET_ERROR
    assert np.asarray(w["basic"]) == pytest.approx(weeks["basic"].to_numpy(), rel=1e-12)
    by_delta = acc.epsilon_delta_curve(e, 70)   # ε against δ, one user-week of 70 counts
    d = got["values"]["delta"]
    assert np.asarray(got["x"]["delta"]["tight"]) == pytest.approx(by_delta["delta"].to_numpy(), rel=1e-12)
    assert relative_error(d["tight"], by_delta["tight"]) <= live.BUDGET_ERROR
    assert relative_error(d["rdp"], by_delta["rdp"]) <= live.BUDGET_ERROR
    assert np.asarray(d["basic"]) == pytest.approx(by_delta["basic"].to_numpy(), rel=1e-12)
    assert np.asarray(d["advanced"]) == pytest.approx(by_delta["advanced"].to_numpy(), rel=1e-9)
    let_go(page, "sidebar", f"{e:g}")
    assert page.locator("[data-testid='stException']").count() == 0


@browser_test
def test_release_curve_and_published_counts_follow_both_sliders(streamlit_url, page):
    """OD release: the release probability is the exact formula at the pointer's ε and τ; the counts published use
    the seed's draws scaled to ε (coherent noise), so after release the page publishes exactly as many pairs as the
    browser counted while the pointer was there."""
    from odcore.privacy.release import release_probability

    _open(page, f"{streamlit_url}/OD_release", "OD release")
    page.wait_for_function("() => window.odlive && window.odlive['release']", timeout=120_000)
    assert page.locator("[data-testid='stSidebar'] [data-testid='stSlider']").filter(has_text="ε").count() == 0
    for control, target, start in (("epsilon", 1.4, 0.66), ("threshold", 60, 100)):
        got = hold_at(page, "release", target, control, start)
        v = got["settings"]
        assert abs(v[control] - target) < (0.05 if control == "epsilon" else 8)
        keep_screenshot(page.locator(".odlive").first, f"live_release_{control}_drag.png")
        x = np.asarray(got["x"]["release"]["release_prob"])
        drawn = np.asarray(got["values"]["release"]["release_prob"])
        assert x.max() >= 2 * v["threshold"] - 1e-9   # the axis follows τ
        assert drawn == pytest.approx(release_probability(x, v["epsilon"], v["threshold"]), abs=1e-12)
        counted = int(got["values"]["published"]["published"])
        let_go(page, "sidebar", f"{v[control]:g}")
        assert page.locator("[data-testid='stException']").count() == 0
        shown = int(_metric(page, "Pairs published").replace(",", ""))
        assert counted == shown, (control, v)


@browser_test
def test_noise_picture_follows_the_pointer(streamlit_url, page):
    """See the noise: while ε or the true count is dragged, the picture is the exact Laplace density of what is
    published (the same points as the page's plotly export) and the readouts are the release probability and the
    95 % range; on release the page's metrics show the same numbers."""
    from odapp.shared.words import pct
    from odcore.privacy.release import release_probability
    from odcore.report.teaching import noise_picture

    _open(page, f"{streamlit_url}/See_the_noise", "See the noise")
    page.wait_for_function("() => window.odlive && window.odlive['noise']", timeout=60_000)
    for control, target, start in (("epsilon", 1.4, 0.66), ("count", 104, 120)):
        got = hold_at(page, "noise", target, control, start)
        v = got["settings"]
        assert abs(v[control] - target) < (0.05 if control == "epsilon" else 3)
        assert v["threshold"] == 100
        keep_screenshot(page.locator(".odlive").first, f"live_noise_{control}_drag.png")
        c, e = v["count"], v["epsilon"]
        pic, other = noise_picture(c, e, 100), noise_picture(95, e, 100)   # the second count: threshold − 5
        dens = pic.density()
        x, drawn = np.asarray(got["x"]["noise"]["count"]), np.asarray(got["values"]["noise"]["count"])
        assert x == pytest.approx(dens["noisy_count"].to_numpy(), abs=1e-9)
        assert drawn == pytest.approx(dens["density"].to_numpy(), rel=1e-12)
        read = got["values"]["noise"]
        assert read["published"] == pytest.approx(float(release_probability(c, e, 100)), abs=1e-12)
        assert (read["low"], read["high"]) == pytest.approx((pic.low, pic.high), abs=1e-9)
        assert read["other_published"] == pytest.approx(other.p_published, abs=1e-12)
        let_go(page, "metric", f"{pic.low:.1f} – {pic.high:.1f}")   # release: the page's setting, one rerun
        assert page.locator("[data-testid='stException']").count() == 0
        assert _metric(page, "Published") == pct(pic.p_published)


@browser_test
def test_game_pairs_follow_both_sliders(streamlit_url, page):
    """Play the attacker: the chance that each known pair is published with and without the person, at the
    pointer's ε and threshold, is the exact release probability of the others' counts; on release the page's ε and
    threshold are the pointer's and the new game deals the same first round (same pairs)."""
    from odcore.privacy.release import release_probability

    _open(page, f"{streamlit_url}/Play_the_attacker", "Play the attacker")
    page.wait_for_function("() => window.odlive && window.odlive['game']", timeout=60_000)
    assert page.locator("[data-testid='stSidebar'] [data-testid='stSlider']").count() == 0   # both on the page
    counts = None
    for control, target, start in (("epsilon", 0.2, 0.66), ("threshold", 60, 100)):
        got = hold_at(page, "game", target, control, start)
        v = got["settings"]
        assert abs(v[control] - target) < (0.05 if control == "epsilon" else 8)
        keep_screenshot(page.locator(".odlive").first, f"live_game_{control}_drag.png")
        g = got["values"]["game"]
        c = np.asarray(g["out#counts"], dtype=float)
        if counts is not None:
            assert c == pytest.approx(counts)   # the same pairs after the first release
        counts = c
        assert c.size >= 1
        assert np.all(c >= 0)
        assert np.all(c == np.round(c))
        p_out = release_probability(c, v["epsilon"], v["threshold"])
        p_in = release_probability(c + 1, v["epsilon"], v["threshold"])
        assert np.asarray(g["out"]) == pytest.approx(p_out, abs=1e-12)
        assert np.asarray(g["in"]) == pytest.approx(p_in, abs=1e-12)
        assert (g["expected_out"], g["expected_in"]) == pytest.approx((p_out.sum(), p_in.sum()), abs=1e-9)
        let_go(page, "sidebar", f"{v[control]:g}")
        assert page.locator("[data-testid='stException']").count() == 0
        assert page.get_by_text(f"(threshold {v['threshold']:g}; each count has noise of scale "
                                f"{1 / v['epsilon']:.3g})").count() >= 1
