"""odcore.report.figures: the one template, tick helpers, the flow map figure and its image files (app and CLI)."""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import pytest

from odcore.paths import REPO_ROOT
from odcore.report import figures

# one kaleido Chromium for the module's images (tests/conftest.py: image_server)
pytestmark = pytest.mark.usefixtures("image_server")

NEEDS_BROWSER = pytest.mark.skipif(figures.find_browser() is None, reason="no Chrome/Chromium on this machine: "
                                   "kaleido cannot draw PNG/SVG (Debian package 'chromium'; .ci/run installs it)")

def _cells_and_flows():
    sq = [[-84.40, 33.75], [-84.39, 33.75], [-84.39, 33.76], [-84.40, 33.76]]
    cells = pd.DataFrame({"cell": [1, 2], "polygon": [sq, [[x + 0.05, y] for x, y in sq]], "value": [0.9, np.nan]})
    flows = pd.DataFrame({"o_lon": [-84.395, -84.345], "o_lat": [33.755, 33.755], "d_lon": [-84.345, -84.395],
                          "d_lat": [33.755, 33.755], "count": [120.4, 310.0]})
    return cells, flows


def test_template_switches_to_projector_sizes():
    small, big = figures.template(False), figures.template(True)
    assert big.layout.font.size > small.layout.font.size >= 14
    assert small.layout.xaxis.tickfont.color == figures.INK          # axis text in full ink, not pale grey
    assert big.layout.xaxis.automargin
    assert big.layout.yaxis.automargin


def test_template_is_built_once_and_figures_get_copies():
    import plotly.graph_objects as go

    assert figures.template(False) is figures.template(False)      # cached: ~50 ms saved per chart and rerun
    fig = figures.style(go.Figure(), "t")
    fig.layout.template.layout.font.size = 99                        # a page changing its figure ...
    assert figures.template(False).layout.font.size == 15            # ... leaves the shared template alone


def test_ticks_are_round():
    assert figures.nice_ticks(85_700) == [0, 20_000, 40_000, 60_000, 80_000, 100_000]
    vals, labels = figures.log_ticks(1e-28, 1e-2)
    assert labels[0] in ("10⁻²⁸", "10⁻²⁶")
    assert labels[-1] == "10⁻²"
    assert all(v > 0 for v in vals)
    assert figures.nice_km(30) == 5
    assert figures.nice_km(0.8) == 0.1


def test_integer_bins_have_no_comb():
    v = np.repeat(np.arange(300), 100)                # every integer 100 times: every full bin the same count
    h, e = figures.integer_bins(v, 299, max_bins=80)
    assert np.all(np.diff(e) == np.diff(e)[0])
    assert float(np.diff(e)[0]).is_integer()
    assert len(set(h[:-1].tolist())) == 1
    comb, _ = np.histogram(v, bins=80, range=(0, 299))  # float-edged bins: 3 or 4 integers per bin
    assert comb.max() / comb.min() > 1.3


def test_arcs_bend_right_so_reciprocal_flows_separate():
    bx, by = figures.arc_points(np.array([0.0, 10.0]), np.array([0.0, 0.0]), np.array([10.0, 0.0]),
                                np.array([0.0, 0.0]))
    mid = bx.shape[1] // 2
    assert by[0, mid] < 0 < by[1, mid]                # A→B below the line, B→A above it


@NEEDS_BROWSER
def test_flow_map_svg_and_png_have_legend_scale_bar_and_resolution():
    cells, flows = _cells_and_flows()
    fig = figures.flow_map_figure(cells, flows, title="Test flows", count_label="noisy count")
    svg = figures.image_bytes(fig, "svg", width_in=6, height_in=4).decode()
    for text in ("Test flows", "Flows: noisy count", "place (size: people)", " km<", "Zones: chance at least",
                 "do not share"):
        assert text in svg, text
    png = figures.image_bytes(fig, "png", width_in=6, height_in=4, dpi=200)
    from PIL import Image

    im = Image.open(io.BytesIO(png))
    assert im.size == (1200, 800)
    assert round(im.info["dpi"][0]) == 200
    with pytest.raises(ValueError, match="dpi"):
        figures.image_bytes(fig, "png", dpi=5)
    with pytest.raises(ValueError, match="format"):
        figures.image_bytes(fig, "gif")


def svg_texts(svg: str) -> list[tuple[str, float, float, float]]:
    """Every text of a plotly SVG as ``(text, x, y, font size in px)``, in the SVG's own px (1/96 in): each <text>
    with its own ``x``/``y`` and the translations of the groups around it."""
    import xml.etree.ElementTree as ET

    ns = "{http://www.w3.org/2000/svg}"
    out = []

    def shift(el) -> tuple[float, float]:
        m = re.search(r"translate\(\s*([-\d.e]+)[ ,]+([-\d.e]+)", el.get("transform", ""))
        return (float(m.group(1)), float(m.group(2))) if m else (0.0, 0.0)

    def walk(el, dx: float, dy: float) -> None:
        sx, sy = shift(el)
        dx, dy = dx + sx, dy + sy
        if el.tag == f"{ns}text":
            size = re.search(r"font-size:\s*([\d.]+)px", el.get("style", ""))
            text = "".join(el.itertext()).strip()
            if text:
                out.append((text, dx + float(el.get("x", 0)), dy + float(el.get("y", 0)),
                            float(size.group(1)) if size else 0.0))
            for sub in el.iter(f"{ns}tspan"):   # a tspan may set its own (smaller) size
                s2 = re.search(r"font-size:\s*([\d.]+)px", sub.get("style", ""))
                if s2 and "".join(sub.itertext()).strip():
                    out.append(("".join(sub.itertext()).strip(), dx + float(el.get("x", 0)),
                                dy + float(el.get("y", 0)), float(s2.group(1))))
            return
        for ch in el:
            walk(ch, dx, dy)

    walk(ET.fromstring(svg), 0.0, 0.0)
    return out


def example_map_frames() -> tuple[pd.DataFrame, pd.DataFrame]:
    """64 square zones with a value each (every zone class) and 40 random flows between them, 34 published (every
    count class between 100 and 900): the cells and flows of a test map."""
    rng = np.random.default_rng(3)
    sq = [[x * 0.012 - 84.45, y * 0.011 + 33.70] for x, y in ((0, 0), (1, 0), (1, 1), (0, 1))]
    cells = pd.DataFrame({"cell": range(64), "polygon": [[[a + 0.012 * (i % 8), b + 0.011 * (i // 8)] for a, b in sq]
                                                        for i in range(64)],
                          "value": np.r_[np.linspace(0, 1, 63), 0.3]})
    a, b = rng.integers(0, 64, 40), rng.integers(0, 64, 40)
    flows = pd.DataFrame({"o_lon": -84.45 + 0.012 * (a % 8 + 0.5), "o_lat": 33.70 + 0.011 * (a // 8 + 0.5),
                          "d_lon": -84.45 + 0.012 * (b % 8 + 0.5), "d_lat": 33.70 + 0.011 * (b // 8 + 0.5),
                          "count": rng.uniform(100, 900, 40), "released": np.arange(40) < 34})
    return cells, flows


@NEEDS_BROWSER
def test_single_column_svg_has_its_legend_outside_the_map_every_class_and_readable_type():
    """A map at 3.5 × 2.6 in (a journal column): every text at least 7 pt, the legend below the map's data area
    (never over it; the figure grows taller for it), every class of both scales listed (the four count classes, the five zone classes), the suppressed
    flows and the places explained."""
    import xml.etree.ElementTree as ET

    cells, flows = example_map_frames()
    edges = [100.0, 300.0, 500.0, 700.0, 900.0]
    fig = figures.flow_map_figure(cells, flows, title="OD flows, week 0: published: noisy count ≥ 100",
                                  count_label="noisy count", class_edges=edges,
                                  subtitle="ε = 0.66, threshold 100, noise scale 1.52, 1.3 km² cells · Bundled city",
                                  level="nearby zones merged within 4.2 km (80 places)")
    svg = figures.image_bytes(fig, "svg", width_in=3.5, height_in=2.6).decode()
    root = ET.fromstring(svg)
    assert float(root.get("width")) == 336                                         # 3.5 in at 96 px/in
    assert float(root.get("height")) >= 250
    texts = svg_texts(svg)
    assert texts
    small = [(t, s) for t, _, _, s in texts if s < 7 * 96 / 72 - 1e-6]
    assert not small, f"text under 7 pt: {small}"
    # the map's data area: plotly's clip rectangle of the x-y plot
    clip = re.search(r'<clipPath class="axesclip" id="clip[^"]*xy"><rect x="([\d.]+)" y="[\d.]+" '
                     r'width="([\d.]+)"', svg)
    assert clip, "no plot area in the SVG"
    x0, w = (float(v) for v in clip.groups())
    labels = ["100–300", "300–500", "500–700", "700–900", "0.0–0.2", "0.2–0.4", "0.4–0.6", "0.6–0.8", "0.8–1.0",
              "suppressed (6)", "place (size: people)", "Flows: noisy count"]
    found = {t: (x, y) for t, x, y, _ in texts}
    y0, h = (float(v) for v in re.search(r'<clipPath class="axesclip" id="clip[^"]*xy"><rect x="[\d.]+" '
                                         r'y="([\d.]+)" width="[\d.]+" height="([\d.]+)"', svg).groups())
    height = float(root.get("height"))
    for lab in labels:
        assert lab in found, f"legend entry {lab!r} missing"
        x, y = found[lab]
        assert x >= x0 + w or y >= y0 + h, f"{lab!r} at ({x:.0f}, {y:.0f}) is over the map"
        assert y <= height, f"{lab!r} below the image"
    assert any(t == "1 km" or t.endswith(" km") for t in found), "no scale bar label"
    for t, x, _, _ in texts:   # nothing starts beyond the image's right edge
        assert x < 336, t


def test_empty_flow_map_says_why():
    cells, flows = _cells_and_flows()
    fig = figures.flow_map_figure(cells, flows.iloc[:0], title="Nothing", empty_note="Nothing published")
    assert any(a.text == "Nothing published" for a in fig.layout.annotations)


def test_release_curve_axes():
    tc = np.r_[np.ones(80_000), np.arange(1, 400)]
    fig, curve = figures.release_curve_figure(tc, 0.66, 100)
    assert fig.layout.yaxis2.type == "log"
    assert fig.layout.yaxis2.range[0] < 0.0 <= fig.layout.yaxis2.range[0] + 0.1
    assert fig.layout.yaxis.range[0] == 0
    assert curve["release_prob"].between(0, 1).all()
    # the threshold's dotted line and its label, as add_vline(annotation_position="top left") draws them
    ref = go.Figure().add_vline(x=100, line_dash="dot", line_color=figures.INK, annotation_text="threshold 100",
                                annotation_position="top left")
    assert [s.to_plotly_json() for s in fig.layout.shapes] == [s.to_plotly_json() for s in ref.layout.shapes]
    assert [a.to_plotly_json() for a in fig.layout.annotations] == [a.to_plotly_json() for a in ref.layout.annotations]


@NEEDS_BROWSER
def test_cli_release_map_png_and_svg(tmp_path):
    png, svg = tmp_path / "m.png", tmp_path / "m.svg"
    r = subprocess.run([sys.executable, "-m", "odcore", "release", "--week", "0", "--seed", "1", "--out",
                        str(tmp_path / "out"), "--map", f"{png},{svg}", "--map-size", "6x4.5", "--map-dpi", "150",
                        "--json"], capture_output=True, text=True, cwd=REPO_ROOT, timeout=300)
    assert r.returncode == 0, r.stderr
    s = json.loads(r.stdout)
    assert s["files"]["map"] == [str(png), str(svg)]
    from PIL import Image

    assert Image.open(png).size == (900, 675)
    assert png.stat().st_size > 50_000
    text = svg.read_text()
    assert "Flows: noisy count" in text
    assert "Published OD flows, week 0" in text
    assert "5 km" in text
    csv = pd.read_csv(tmp_path / "out" / "published.csv", nrows=5)
    assert "origin_lat" in csv
    assert "raw_count" not in csv
    assert "true_count" not in csv


def test_cli_release_map_bad_name(tmp_path):
    r = subprocess.run([sys.executable, "-m", "odcore", "release", "--week", "0", "--out", str(tmp_path / "o"),
                        "--map", str(tmp_path / "m.gif")], capture_output=True, text=True, cwd=REPO_ROOT, timeout=300)
    assert r.returncode == 2
    assert "must end in .png, .svg or .pdf" in r.stderr


def test_thin_curve_keeps_the_shape_of_an_exact_roc():
    """The Attack page draws an exact ROC (thousands of vertices) with thin_curve's points: ends kept, far fewer
    points, and every dropped vertex within tol of the drawn polyline (checked by interpolation)."""
    from odcore.privacy.attack import user_risk

    ur = user_risk(np.r_[np.zeros(5), np.arange(1, 60) * 3.0], 0.66, 100, roc=True)
    x, y = np.asarray(ur.roc.fpr), np.asarray(ur.roc.tpr)
    keep = figures.thin_curve(x, y)
    assert keep[0] == 0
    assert keep[-1] == len(x) - 1
    assert (np.diff(keep) > 0).all()
    assert len(keep) < len(x) / 2, (len(keep), len(x))
    # ROC x is non-decreasing: the drawn line at every dropped vertex's x is within 2·tol of its y
    drawn = np.interp(x, x[keep], y[keep])
    assert np.abs(drawn - y).max() < 4e-3
    # a curve that needs every point keeps every point
    xs = np.linspace(0, 1, 50)
    assert len(figures.thin_curve(xs, xs**2)) == 50


def test_marker_lines_are_what_add_vline_and_add_hline_draw():
    a = go.Figure()
    a.add_scatter(x=[0, 70], y=[0, 50])
    a.add_vline(x=21, line_dash="dot", line_color="#888", annotation_text="n = 21")
    a.add_vline(x=7, line_dash="dash", annotation_text="median", annotation_position="top left")
    a.add_hline(y=7, line_dash="dot", line_color="#d95f02", annotation_text="ε = 7")
    b = go.Figure()
    b.add_scatter(x=[0, 70], y=[0, 50])
    b.update_layout(**figures.marker_lines([(21, {"dash": "dot", "color": "#888"}, "n = 21", "left"),
                                            (7, {"dash": "dash"}, "median", "right")],
                                           [(7, {"dash": "dot", "color": "#d95f02"}, "ε = 7")]))
    assert a.layout.shapes == b.layout.shapes
    assert a.layout.annotations == b.layout.annotations


def test_svg_embeds_the_bold_face_where_text_is_bold():
    """A bold line (the flow map's legend titles) gets DejaVu Sans Bold embedded: without it a viewer fakes bold from
    the regular face, narrower than plotly measured, and the line drifts off its place."""
    from pathlib import Path

    if not Path(figures.PAPER_FONT_BOLD_FILE).is_file():
        pytest.skip("no DejaVu Sans Bold")
    plain = b'<svg xmlns="http://www.w3.org/2000/svg"><text>1 km</text></svg>'
    bold = b'<svg xmlns="http://www.w3.org/2000/svg"><text><tspan style="font-weight:bold">Flows</tspan></text></svg>'
    assert figures.embed_svg_fonts(plain).count(b"@font-face") == 1
    out = figures.embed_svg_fonts(bold)
    assert out.count(b"@font-face") == 2
    assert b"font-weight:bold;src:url(data:font/ttf;base64," in out
