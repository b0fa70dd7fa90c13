"""How the pages' charts look: the lab's one template (:func:`odcore.report.figures.template`), in its projector
version (large, high-contrast type) while projector mode (:mod:`odapp.shared.projector`) is on."""

from __future__ import annotations

import plotly.graph_objects as go

from odapp.shared import projector
from odcore.report import figures

# The one template of every chart (odcore.report.figures.template); projector=True gives large, high-contrast type.
TEMPLATE = figures.template(False)


def projector_mode() -> bool:
    """Whether charts use the projector template (large type, high contrast): :func:`odapp.shared.projector.on`."""
    return projector.on()


def styled(fig: go.Figure, title: str | None = None, *, height: int = 440) -> go.Figure:
    """Apply the lab's template (:func:`odcore.report.figures.template`, projector mode if on) and a title to ``fig``."""
    return figures.style(fig, title, height=height, projector=projector_mode())
