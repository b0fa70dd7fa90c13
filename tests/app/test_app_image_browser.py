"""The dashboard's chart images (odapp.shared.export.chart_image) share one image browser for the life of the process:
the first image starts Chromium, the next ones reuse it."""

from __future__ import annotations

import plotly.graph_objects as go
import pytest

from odapp.shared import export
from odcore.report import figures

pytestmark = [pytest.mark.timeout(240),
              pytest.mark.skipif(figures.find_browser() is None, reason="no Chrome/Chromium on this machine: kaleido "
                                 "cannot draw PNG/SVG (Debian package 'chromium')")]


def test_the_dashboard_keeps_one_image_browser_for_every_chart():
    figures.release_image_browser()
    assert figures.image_browser_pid() is None
    try:
        a = go.Figure(go.Scatter(x=[1, 2, 3], y=[2, 1, 3], name="a"))
        b = go.Figure(go.Bar(x=["x", "y"], y=[4, 5], name="b"))
        svg = export.chart_image(a.to_json(), "svg")
        pid = figures.image_browser_pid()
        assert pid is not None                                    # kept after the image, with no block holding it
        png = export.chart_image(b.to_json(), "png", "slide")
        assert figures.image_browser_pid() == pid                 # the second chart: the same browser
        assert svg.lstrip().startswith(b"<svg")
        assert png[:8] == b"\x89PNG\r\n\x1a\n"
    finally:
        figures.release_image_browser()
    assert figures.image_browser_pid() is None
