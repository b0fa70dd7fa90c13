"""Charts with their exports: PNG and SVG (plotly + kaleido), the data behind them as CSV, the configuration as JSON.

PNG/SVG are made only when the button is clicked (``st.download_button(data=callable)`` runs it on demand), so
drawing a page never waits for kaleido's headless Chromium.
"""

from __future__ import annotations

import json
import re
from enum import Enum
from typing import Any

import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio
import streamlit as st

# A clean light theme with readable fonts, for the screen and for papers.
FONT = "Inter, 'Source Sans Pro', 'DejaVu Sans', Arial, sans-serif"
PALETTE = ["#1f5fa8", "#d95f02", "#1b9e77", "#7570b3", "#e7298a", "#66a61e", "#a6761d", "#666666"]
# Layout-only template (plotly_white's look): validating it costs ~2 ms per figure instead of ~20 ms for the full
# plotly_white template with its per-trace defaults, which matters when a slider redraws a page of charts.
TEMPLATE = go.layout.Template()
TEMPLATE.layout.update(
    paper_bgcolor="white", plot_bgcolor="white", hovermode="closest",
    hoverlabel={"align": "left"},
    font={"family": FONT, "size": 14, "color": "#1b1f24"},
    title={"font": {"size": 17}, "x": 0.0, "xanchor": "left", "xref": "paper"},
    colorway=PALETTE,
    legend={"bgcolor": "rgba(255,255,255,0.85)", "bordercolor": "#d0d4da", "borderwidth": 1},
    margin={"l": 60, "r": 20, "t": 60, "b": 55},
    xaxis={"gridcolor": "#e6e9ee", "linecolor": "#9aa3ad", "ticks": "outside", "showline": True},
    yaxis={"gridcolor": "#e6e9ee", "linecolor": "#9aa3ad", "ticks": "outside", "showline": True},
)
EXPORT_SIZE = {"width": 900, "height": 540, "scale": 2}


def styled(fig: go.Figure, title: str | None = None, *, height: int = 440) -> go.Figure:
    """Apply the lab's theme (and a title) to ``fig``; returns it."""
    fig.update_layout(template=TEMPLATE, height=height)
    if title:
        fig.update_layout(title_text=title)
    return fig


def slug(text: str) -> str:
    """File-name-safe version of a chart name.

    >>> slug("p_k curve (ε=0.66)")
    'p_k-curve-0.66'
    """
    s = re.sub(r"[^A-Za-z0-9_.]+", "-", text).strip("-")
    return s or "chart"


def figure_image(fig_json: str, fmt: str) -> bytes:
    """Render a figure (its JSON) to ``png`` or ``svg`` bytes through kaleido."""
    fig = pio.from_json(fig_json)
    fig.update_layout(height=EXPORT_SIZE["height"], width=EXPORT_SIZE["width"])
    return fig.to_image(format=fmt, scale=EXPORT_SIZE["scale"] if fmt == "png" else 1)


@st.cache_data(max_entries=32, show_spinner=False)
def _cached_image(fig_json: str, fmt: str) -> bytes:
    return figure_image(fig_json, fmt)


def to_json_text(obj: Any) -> str:
    """JSON text of a configuration (numpy scalars and enums converted)."""
    import numpy as np

    def default(o):
        if isinstance(o, Enum):
            return o.value
        if isinstance(o, np.generic):
            return o.item()
        if isinstance(o, np.ndarray):
            return o.tolist()
        raise TypeError(f"cannot write {type(o).__name__} to JSON")

    return json.dumps(obj, indent=2, default=default, allow_nan=False, ensure_ascii=False)


def export_buttons(name: str, *, fig: go.Figure | None = None, data: pd.DataFrame | None = None,
                   config: dict | None = None, command: str | None = None, key: str | None = None) -> None:
    """A row of download buttons: PNG, SVG (from ``fig``), CSV (``data``) and configuration JSON (``config``).

    ``command`` names the ``python -m odcore`` subcommand that accepts the JSON (:data:`odapp.cli_config.COMMANDS`).
    """
    base = slug(name)
    key = key or base
    cols = st.columns(4)
    if fig is not None:
        cols[0].download_button("PNG", data=lambda: _cached_image(fig.to_json(), "png"), file_name=f"{base}.png",
                                mime="image/png", key=f"dl_png_{key}", on_click="ignore", icon=":material/image:",
                                help="The chart as a PNG image (1800×1080 px), for slides and papers.")
        cols[1].download_button("SVG", data=lambda: _cached_image(fig.to_json(), "svg"), file_name=f"{base}.svg",
                                mime="image/svg+xml", key=f"dl_svg_{key}", on_click="ignore", icon=":material/draw:",
                                help="The chart as a vector SVG image, for papers.")
    if data is not None:
        cols[2].download_button("CSV", data=lambda: data.to_csv(index=False), file_name=f"{base}.csv", mime="text/csv",
                                key=f"dl_csv_{key}", on_click="ignore", icon=":material/table:",
                                help="The numbers behind the chart, one row per plotted point.")
    if config is not None:
        from odapp.cli_config import COMMANDS, command_line

        file_name = f"{base}.config.json"
        how = (f"Reproduce it from a shell: `{COMMANDS[command].format(file=file_name)}` or "
               if command in COMMANDS else "Reproduce it from a shell: ") + \
            (f"`{command_line(command, config)}`" if command else "")
        cols[3].download_button("JSON", data=to_json_text(config), file_name=file_name,
                                mime="application/json", key=f"dl_cfg_{key}", on_click="ignore", icon=":material/settings:",
                                help=f"Every setting behind this chart, as the command line's flags. {how}")


def chart(fig: go.Figure, name: str, *, data: pd.DataFrame | None = None, config: dict | None = None,
          command: str | None = None, key: str | None = None) -> None:
    """Draw a plotly chart with its export buttons underneath."""
    st.plotly_chart(fig, width="stretch", key=f"chart_{key or slug(name)}",
                    config={"displaylogo": False, "toImageButtonOptions": {"format": "png", "scale": 2}})
    export_buttons(name, fig=fig, data=data, config=config, command=command, key=key)


def reproduce(items: list[tuple[str, str, dict]]) -> None:
    """An expander with the shell commands that reproduce this page's figures: ``(what, command, config)``.

    For commands whose ``--config`` reads the exported JSON the short form is shown too.
    """
    from odapp.cli_config import COMMANDS, command_line

    with st.expander("Reproduce from the command line"):
        for what, command, config in items:
            st.markdown(f"**{what}**")
            st.code(command_line(command, config), language="bash", wrap_lines=True)
            if command in COMMANDS:
                st.caption("or, with the downloaded JSON: `" + COMMANDS[command].format(file=f"{slug(what)}.json")
                           + "`")
