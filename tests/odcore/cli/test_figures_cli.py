"""``python -m odcore figures``: every figure of the paper set is written at the single-column preset, with its
config and data; in each SVG (measured in a headless Chromium) the title and the legend lie inside the canvas and
the legend box touches no plotted line; fonts are embedded; a config file redraws its figure."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from odcore.cli import main
from odcore.cli.figures import DATA_FIGURES, FIGURES, file_stem
from odcore.report import figures

# one kaleido Chromium for the module's images (tests/conftest.py: image_server)
pytestmark = [pytest.mark.timeout(900), pytest.mark.usefixtures("image_server")]

# The boxes of the title (the first annotation: odcore.report.figures.for_paper), the legend, the canvas, every
# bar, and 201 points along every plotted line, in the page's pixels.
MEASURE = """() => {
  const svg = document.querySelector('svg');
  const box = e => { if (!e) return null; const r = e.getBoundingClientRect();
                     return [r.left, r.top, r.right, r.bottom]; };
  // the plot area: plotly's clip rectangle of the x-y subplot (in the canvas's coordinates)
  const clipRect = document.querySelector('clipPath.axesclip[id$="xy"] rect');
  let area = box(svg);
  if (clipRect) { const t = svg.getScreenCTM(), a = n => +clipRect.getAttribute(n);
    area = [t.e + a('x'), t.f + a('y'), t.e + a('x') + a('width'), t.f + a('y') + a('height')]; }
  const lines = [];
  for (const p of document.querySelectorAll('.scatterlayer path.js-line')) {
    const n = p.getTotalLength(); if (!n) continue;
    const m = p.getScreenCTM(); const pts = [];
    for (let i = 0; i <= 200; i++) { const q = p.getPointAtLength(n * i / 200);
      const x = m.a * q.x + m.c * q.y + m.e, y = m.b * q.x + m.d * q.y + m.f;
      if (x >= area[0] && x <= area[2] && y >= area[1] && y <= area[3]) pts.push([x, y]); }
    lines.push(pts);
  }
  // what is drawn is clipped to the plot area (a bar from 0 on a log axis reaches far below it)
  const clip = b => [Math.max(b[0], area[0]), Math.max(b[1], area[1]), Math.min(b[2], area[2]), Math.min(b[3], area[3])];
  const bars = [...document.querySelectorAll('.barlayer .point path')].map(e => clip(box(e)))
    .filter(b => b[2] - b[0] > 0.5 && b[3] - b[1] > 0.5);
  const title = document.querySelector('.infolayer .annotation[data-index="0"] .annotation-text-g');
  // a legend drawn of annotations and shapes (odcore.report.figures.flow_map_figure) is framed by an annotation
  // with a border and no text; the texts of its rows are the other annotations it holds
  const notes = [...document.querySelectorAll('.infolayer .annotation')];
  const frame = notes.find(a => { const t = a.querySelector('.annotation-text'), r = a.querySelector('rect.bg');
    return t && !t.textContent.trim() && r && parseFloat(r.style.strokeWidth) > 0; });
  const legend = document.querySelector('.infolayer .legend .bg')
    || (frame && frame.querySelector('rect.bg')) || document.querySelector('.infolayer .legend');
  const texts = notes.filter(a => a !== frame && a.getAttribute('data-index') !== '0' && a.textContent.trim())
    .map(a => ({text: a.textContent.trim(), box: box(a.querySelector('.annotation-text-g'))}));
  return {canvas: box(svg), title: box(title),
          titleText: title ? title.textContent : null,
          legend: box(legend), framed: !!frame, area, texts, lines, bars};
}"""


def measure(page, svg_path: Path) -> dict:
    page.goto(svg_path.resolve().as_uri())
    page.wait_for_timeout(100)
    return page.evaluate(MEASURE)


def inside(box, canvas, tol: float = 0.5) -> bool:
    return (box[0] >= canvas[0] - tol and box[1] >= canvas[1] - tol and box[2] <= canvas[2] + tol
            and box[3] <= canvas[3] + tol)


def points_in(box, lines) -> int:
    x0, y0, x1, y1 = box
    return sum(1 for pts in lines for x, y in pts if x0 < x < x1 and y0 < y < y1)


def overlap(a, b) -> bool:
    return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


@pytest.fixture(scope="module")
def paper_set(tmp_path_factory):
    if figures.find_browser() is None:
        pytest.skip("no Chromium: figures cannot be drawn")
    out = tmp_path_factory.mktemp("figures")
    assert main(["figures", "--out", str(out), "--preset", "single-column", "--formats", "svg"]) == 0
    return out


@pytest.mark.slow
def test_every_figure_written_with_config_and_data(paper_set):
    for name in FIGURES:
        stem = file_stem(name)   # DO_NOT_SHARE_ for the figures drawn from the data itself
        for ext in ("svg", "csv", "json"):
            assert (paper_set / f"{stem}.{ext}").stat().st_size > 0, (name, ext)
        cfg = json.loads((paper_set / f"{stem}.json").read_text())
        assert cfg["only"] == name
        assert cfg["preset"] == "single-column"
        # a shareable figure's config names neither the data's path nor the noise seed
        assert ("seed" in cfg) == (name in DATA_FIGURES)
        svg = (paper_set / f"{stem}.svg").read_text()
        assert "@font-face" in svg, f"{name}: font not embedded"
        assert "DejaVu Sans" in svg, f"{name}: not in the paper font"
        assert 'width="336"' in svg, f"{name}: not 3.5 in wide"


@pytest.mark.slow
@pytest.mark.browser
def test_titles_and_legends_inside_and_clear_of_lines(paper_set, browser):
    page = browser.new_page(viewport={"width": 1400, "height": 4000})
    try:
        for name in FIGURES:
            m = measure(page, paper_set / f"{file_stem(name)}.svg")
            assert m["title"] is not None, f"{name}: no title"
            assert m["titleText"], f"{name}: empty title"
            assert inside(m["title"], m["canvas"]), f"{name}: title {m['title']} outside {m['canvas']}"
            assert m["legend"] is not None, f"{name}: no legend"
            assert inside(m["legend"], m["canvas"]), f"{name}: legend {m['legend']} outside {m['canvas']}"
            assert m["lines"] or m["bars"], f"{name}: no plotted line or bar found"
            assert points_in(m["legend"], m["lines"]) == 0, f"{name}: the legend covers a plotted line"
            assert points_in(m["title"], m["lines"]) == 0, f"{name}: the title covers a plotted line"
            assert not any(overlap(m["legend"], b) for b in m["bars"]), f"{name}: the legend covers a bar"
            assert not overlap(m["legend"], m["area"]), f"{name}: legend {m['legend']} over the plot {m['area']}"
            if m["framed"]:   # a legend of annotations: each text in its frame or in the plot, never cut
                for t in m["texts"]:
                    assert inside(t["box"], m["legend"]) or inside(t["box"], m["area"]), (name, t)
    finally:
        page.close()


def flow_map_example():
    """A flow map of 64 zones with every class of both scales, suppressed flows and a long two-line title."""
    from tests.odcore.report.test_figures import example_map_frames

    cells, flows = example_map_frames()
    return figures.flow_map_figure(
        cells, flows, title="Published OD flows, week 0 (from 2024-01-08)", count_label="noisy count",
        class_edges=[100.0, 300.0, 500.0, 700.0, 900.0],
        subtitle="ε = 0.66, threshold 100, noise scale 1.52, 1.3 km² cells, 34 largest flows",
        level="nearby zones merged within 4.2 km (80 places)")


# every size the map is exported at: the paper presets (the figures command, the app's image buttons) and its own
# sizes (`release --map-size`, default 8 × 6 in; the journal column 3.5 × 2.6 in of the flow-map requirement)
# The journal column and the map's own 3.5 × 2.6 in in every run; the other presets and sizes with -m slow.
MAP_SIZES = [size if size in ("single-column", "3.5x2.6") else pytest.param(size, marks=pytest.mark.slow)
             for size in [*figures.SIZE_PRESETS, "3.5x2.6", "6x4.5", "8x6"]]


@pytest.mark.browser
@pytest.mark.parametrize("size", MAP_SIZES)
def test_flow_map_title_and_legend_inside_the_canvas_and_off_the_map(browser, tmp_path, size):
    """The flow map at every size it is exported at: its title and its framed legend lie inside the canvas, the
    legend outside the map's data area and clear of every drawn flow, each legend row inside the frame, every text at
    least 7 pt, every class of both scales listed."""
    from tests.odcore.report.test_figures import svg_texts

    if figures.find_browser() is None:
        pytest.skip("no Chromium")
    fig = flow_map_example()
    if size in figures.SIZE_PRESETS:
        svg = figures.figure_bytes(fig, "svg", figures.FigureSize.preset(size))
    else:
        w, h = (float(v) for v in size.split("x"))
        svg = figures.image_bytes(fig, "svg", width_in=w, height_in=h)
    path = tmp_path / "map.svg"
    path.write_bytes(svg)
    page = browser.new_page(viewport={"width": 1400, "height": 1400})
    try:
        m = measure(page, path)
    finally:
        page.close()
    assert m["titleText"].startswith("Published OD flows"), m["titleText"]
    assert inside(m["title"], m["canvas"]), f"title {m['title']} outside {m['canvas']}"
    assert m["framed"], "no legend frame"
    assert inside(m["legend"], m["canvas"]), f"legend {m['legend']} outside {m['canvas']}"
    assert not overlap(m["legend"], m["area"]), f"legend {m['legend']} over the map {m['area']}"
    assert not overlap(m["title"], m["area"]), f"title {m['title']} over the map {m['area']}"
    assert m["lines"], "no drawn flow or zone found"
    assert points_in(m["legend"], m["lines"]) == 0
    rows = [t for t in m["texts"] if not inside(t["box"], m["area"])]
    for t in rows:
        assert inside(t["box"], m["legend"]), f"legend row {t['text']!r} {t['box']} outside its frame {m['legend']}"
    shown = {t["text"] for t in rows}
    for lab in ["100–300", "300–500", "500–700", "700–900", "0.0–0.2", "0.2–0.4", "0.4–0.6", "0.6–0.8", "0.8–1.0",
                "suppressed (6)", "place (size: people)", "Flows: noisy count"]:
        assert lab in shown, f"legend entry {lab!r} missing from {sorted(shown)}"
    small = [(t, s) for t, _, _, s in svg_texts(svg.decode()) if s < 7 * 96 / 72 - 1e-6]
    assert not small, f"text under 7 pt: {small}"


@pytest.mark.browser
def test_the_check_sees_a_legend_over_a_curve(browser, tmp_path):
    """The measurement can fail: the dashboard's figure with its legend inside the plot, drawn as it is (not laid
    out for paper), has the legend over the curve."""
    import plotly.graph_objects as go

    if figures.find_browser() is None:
        pytest.skip("no Chromium")
    fig = go.Figure()
    fig.add_scatter(x=[0, 1, 2, 3], y=[0, 1, 2, 3], mode="lines", name="a line under the legend")
    fig.add_scatter(x=[0, 3], y=[3, 3], mode="lines", name="another")
    figures.style(fig, "A title")
    fig.update_layout(legend={"x": 0.5, "y": 0.5, "xanchor": "center", "yanchor": "middle"})
    fig.add_annotation(text="A title", x=0, y=1, xref="paper", yref="paper", showarrow=False)
    bad = tmp_path / "bad.svg"
    bad.write_bytes(figures.image_bytes(fig, "svg", width_in=3.5, height_in=2.8))
    page = browser.new_page()
    try:
        m = measure(page, bad)
    finally:
        page.close()
    assert points_in(m["legend"], m["lines"]) > 0
    good = tmp_path / "good.svg"
    good.write_bytes(figures.figure_bytes(fig, "svg", figures.FigureSize.preset("single-column")))
    page = browser.new_page()
    try:
        m = measure(page, good)
    finally:
        page.close()
    assert points_in(m["legend"], m["lines"]) == 0
    assert inside(m["legend"], m["canvas"])
    assert inside(m["title"], m["canvas"])


def test_config_redraws_its_figure(tmp_path):
    """A figure's JSON config, given back with --config, draws the same numbers (here with a PDF, whose fonts
    Chromium embeds)."""
    if figures.find_browser() is None:
        pytest.skip("no Chromium")
    a, b = tmp_path / "a", tmp_path / "b"
    assert main(["figures", "--out", str(a), "--only", "fig1_per_person", "--epsilon", "1.5", "--max-pairs", "4",
                 "--formats", "pdf", "--preset", "double-column"]) == 0
    assert main(["figures", "--config", str(a / "fig1_per_person.json"), "--out", str(b)]) == 0
    pd.testing.assert_frame_equal(pd.read_csv(a / "fig1_per_person.csv"), pd.read_csv(b / "fig1_per_person.csv"))
    assert b"/FontFile2" in (b / "fig1_per_person.pdf").read_bytes() or b"/FontFile" in (
        b / "fig1_per_person.pdf").read_bytes()
    cfg = json.loads((b / "fig1_per_person.json").read_text())
    assert cfg["epsilon"] == 1.5
    assert cfg["max_pairs"] == 4
    assert cfg["preset"] == "double-column"


def test_bad_flags_name_the_flag(tmp_path, capsys):
    assert main(["figures", "--out", str(tmp_path), "--only", "nonsense"]) == 2
    assert "--only" in capsys.readouterr().err
    assert main(["figures", "--out", str(tmp_path), "--size", "3.5by2"]) == 2
    assert "--size" in capsys.readouterr().err
    assert not any(tmp_path.iterdir())


def test_preset_names_on_the_command_line_are_the_figures_presets():
    from odcore.constants import SIZE_PRESET_NAMES
    from odcore.report.figures import SIZE_PRESETS

    assert tuple(SIZE_PRESETS) == SIZE_PRESET_NAMES
