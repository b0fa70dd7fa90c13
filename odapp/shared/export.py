"""Charts with their exports: PNG and SVG (plotly + kaleido), the data behind them as CSV, the configuration as JSON.

PNG/SVG are made only when the button is clicked (``st.download_button(data=callable)`` runs it on demand), so
drawing a page never waits for kaleido's headless Chromium.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from enum import Enum
from typing import Any

import numpy as np
import pandas as pd
import plotly.graph_objects as go
import plotly.io as pio
import streamlit as st

from odapp.shared import projector
from odapp.shared.cli_config import COMMANDS, command_line
from odcore.errors import ODCoreError
from odcore.report import figures
from odcore.report.safe_csv import csv_text

EXPORT_SIZE = {"width": 900, "height": 540, "scale": 2}
MIME = {"png": "image/png", "svg": "image/svg+xml", "pdf": "application/pdf"}
# The sizes a chart's image is downloaded at: the screen's (900 × 540 px, PNG at twice that) or one of the paper
# presets of ``python -m odcore figures --preset`` (odcore.report.figures.SIZE_PRESETS: width, height, type, DPI).
SCREEN = "screen"
EXPORT_SIZES = (SCREEN, *figures.SIZE_PRESETS)
EXPORT_SIZE_WORDS = {SCREEN: "Screen (900 × 540 px)", "single-column": "Single column (3.5 in, 8 pt)",
                     "double-column": "Double column (7 in, 9 pt)", "slide": "Slide (16:9, 20 pt)"}


K_EXPORT_SIZE = "odlab.export_size"   # the size chosen in the sidebar: every chart's downloads follow it


def slug(text: str) -> str:
    """File-name-safe version of a chart name.

    >>> slug("p_k curve (ε=0.66)")
    'p_k-curve-0.66'
    """
    s = re.sub(r"[^A-Za-z0-9_.]+", "-", text).strip("-")
    return s or "chart"


def image_export(build, name: str, *, key: str, width_in: float = 7.0, height_in: float = 4.5,
                 label: str = "Download as an image (PNG, SVG, PDF)") -> None:
    """An expander to render ``build()`` (a plotly figure) as PNG/SVG/PDF at a chosen size and DPI, with a status
    line while kaleido works (5–20 s for the first image of the process, about a second after), then a download
    button. Its controls are made only while it is open (:func:`opened_expander`): closed, it is one element instead
    of eleven on every rerun."""
    ss = st.session_state
    box = opened_expander(label, f"img_open_{key}", icon=":material/download:")
    if box is None:
        return
    with box:
        preset = st.selectbox("Size", ("custom", *figures.SIZE_PRESETS), key=f"img_preset_{key}",
                              format_func={"custom": "Width, height and DPI below",
                                           **EXPORT_SIZE_WORDS}.get, width=320,
                              help="A journal column, a page width or a 16:9 slide, laid out as "
                                   "`python -m odcore figures --preset` does (type size, legend, DPI); or your "
                                   "own width, height and DPI.")
        c = st.columns([1, 1, 1, 1.3])
        if preset == "custom":
            w = c[0].number_input("Width (in)", 2.0, 20.0, float(width_in), 0.5, key=f"img_w_{key}",
                                  help="Printed width in inches (a journal column is about 3.5 in, a page 7 in).")
            h = c[1].number_input("Height (in)", 2.0, 20.0, float(height_in), 0.5, key=f"img_h_{key}",
                                  help="Printed height in inches.")
            dpi = c[2].selectbox("DPI (PNG)", [150, 300, 600], index=1, key=f"img_dpi_{key}",
                                 help="Pixels per inch of the PNG (300 for print); SVG and PDF are vector images.")
        else:
            size = figures.SIZE_PRESETS[preset]
            w, h, dpi = size.width_in, size.height_in, size.dpi
        fmt = c[3].radio("Format", ["png", "svg", "pdf"], horizontal=True, key=f"img_fmt_{key}",
                         format_func=str.upper, help="PNG for slides, SVG or PDF for papers (vector, any size).")
        want = (fmt, float(w), float(h), int(dpi), preset)
        if figures.find_browser() is None:
            st.info(figures.NO_BROWSER_MESSAGE, icon=":material/info:")
            return
        if st.button(f"Make the {fmt.upper()}", key=f"img_go_{key}", icon=":material/image:",
                     help="Draw the image (a few seconds: plotly renders it in a headless browser)."):
            figures.keep_image_browser()   # the first image starts Chromium, the next ones reuse it
            with st.status(f"Drawing the {fmt.upper()} ({w:g} × {h:g} in"
                           f"{f', {dpi} dpi' if fmt == 'png' else ''})…", expanded=False) as status:
                try:
                    data = (figures.image_bytes(build(), fmt, width_in=w, height_in=h, dpi=int(dpi))
                            if preset == "custom" else figures.figure_bytes(build(), fmt, figures.SIZE_PRESETS[preset]))
                except ODCoreError as e:   # no browser, one that would not start or answer: say so, keep the page
                    data = None
                    status.update(label=f"No {fmt.upper()}: {e}", state="error")
                else:
                    status.update(label=f"{fmt.upper()} ready: {len(data) / 1024:,.0f} KiB", state="complete")
            if data is not None:
                ss[f"img_data_{key}"] = (want, data)
        made = ss.get(f"img_data_{key}")
        if made and made[0] == want:
            mime = {"png": "image/png", "svg": "image/svg+xml", "pdf": "application/pdf"}[fmt]
            stem = slug(name) if preset == "custom" else f"{slug(name)}_{preset}"
            st.download_button(f"Download {stem}.{fmt}", data=made[1], file_name=f"{stem}.{fmt}",
                               mime=mime, key=f"img_dl_{key}", on_click="ignore", type="primary")


def figure_image(fig_json: str, fmt: str) -> bytes:
    """Render a figure (its JSON) to ``png`` or ``svg`` bytes through kaleido, in the browser the dashboard keeps
    (:func:`odcore.report.figures.keep_image_browser`: only the first image of the process starts Chromium)."""
    figures.require_browser()
    fig = pio.from_json(fig_json)
    fig.update_layout(height=EXPORT_SIZE["height"], width=EXPORT_SIZE["width"])
    figures.keep_image_browser()
    return figures.render_image(fig, fmt, width=EXPORT_SIZE["width"], height=EXPORT_SIZE["height"],
                                scale=EXPORT_SIZE["scale"] if fmt == "png" else 1)


def chart_image(fig_json: str, fmt: str, size: str = SCREEN) -> bytes:
    """A chart (its JSON) as PNG, SVG or PDF bytes at ``size`` (:data:`EXPORT_SIZES`): the screen's size as shown, or
    laid out for a paper or a slide exactly as the figures command does (:func:`odcore.report.figures.figure_bytes`:
    the preset's width and type, title wrapped, legend outside the plot, fonts embedded in SVG)."""
    if size == SCREEN:
        return figure_image(fig_json, fmt)
    if size not in figures.SIZE_PRESETS:
        raise ValueError(f"export size must be one of {', '.join(EXPORT_SIZES)}, got size={size!r}.")
    figures.require_browser()
    figures.keep_image_browser()
    return figures.figure_bytes(pio.from_json(fig_json), fmt, figures.FigureSize.preset(size))


@st.cache_data(max_entries=32, show_spinner=False)
def _cached_image(fig_json: str, fmt: str, size: str = SCREEN) -> bytes:
    return chart_image(fig_json, fmt, size)


def _keep_size() -> None:
    st.session_state[K_EXPORT_SIZE] = st.session_state["w.export_size"]


def export_size() -> str:
    """The size every chart's PNG and SVG buttons give (:data:`EXPORT_SIZES`), chosen in the sidebar."""
    return st.session_state.get(K_EXPORT_SIZE, SCREEN)


def size_choice() -> None:
    """The sidebar's "Chart images" selector (kept across pages under :data:`K_EXPORT_SIZE`): one element for every
    chart of the page, where a selector under each chart added one per chart to every rerun."""
    st.session_state["w.export_size"] = export_size()
    st.selectbox("Chart images (PNG, SVG)", EXPORT_SIZES, key="w.export_size", format_func=EXPORT_SIZE_WORDS.get,
                 on_change=_keep_size,
                 help="The size of the PNG and SVG under every chart: the screen's, or laid out for a journal column, "
                      "a page width or a 16:9 slide (the presets of `python -m odcore figures --preset`).")


def to_json_text(obj: Any) -> str:
    """JSON text of a configuration (numpy scalars and enums converted)."""
    def default(o):
        if isinstance(o, Enum):
            return o.value
        if isinstance(o, np.generic):
            return o.item()
        if isinstance(o, np.ndarray):
            return o.tolist()
        raise TypeError(f"cannot write {type(o).__name__} to JSON")

    return json.dumps(obj, indent=2, default=default, allow_nan=False, ensure_ascii=False)


def button_row():
    """A row of buttons side by side: one horizontal container (one block for the browser to draw, where
    ``st.columns(4)`` makes five; every element and block is a message the browser handles on every rerun)."""
    return st.container(horizontal=True, gap="small")


def export_buttons(name: str, *, fig: go.Figure | Callable[[], go.Figure] | None = None,
                   data: pd.DataFrame | Callable[[], pd.DataFrame] | None = None, config: dict | None = None,
                   command: str | None = None, key: str | None = None, row=None, csv_label: str = "CSV",
                   csv_help: str = "The numbers behind the chart, one row per plotted point.",
                   csv_first_line: str | None = None) -> None:
    """A row of download buttons: PNG, SVG (from ``fig``), CSV (``data``) and configuration JSON (``config``), in
    ``row`` (a :func:`button_row`; a new one if None). ``fig`` and ``data`` may be functions that build them when a
    button is clicked: a chart drawn only for the files then costs nothing on each press of a slider.

    The CSV is spreadsheet-safe (:func:`odcore.report.safe_csv.csv_text`: no cell starts a formula);
    ``csv_first_line`` (e.g. a do-not-share notice) is written before its header as a ``#`` line.

    ``command`` names the ``python -m odcore`` subcommand that accepts the JSON (:data:`odapp.shared.cli_config.COMMANDS`).
    """
    base = slug(name)
    key = key or base
    row = row if row is not None else button_row()
    if projector.on():   # downloads are secondary controls: hidden in projector mode, as its switch says
        return
    if fig is not None and figures.find_browser() is None:
        row.caption("PNG/SVG: no Chrome/Chromium found", help=figures.NO_BROWSER_MESSAGE)
    elif fig is not None:
        size = export_size()
        stem = base if size == SCREEN else f"{base}_{size}"
        what = ("at the screen's size" if size == SCREEN else EXPORT_SIZE_WORDS[size].lower()) + \
            " (Chart images, in the sidebar)"
        for fmt, icon, words in (("png", ":material/image:", "a PNG image" + (" (1800×1080 px)" if size == SCREEN
                                                                               else "")),
                                 ("svg", ":material/draw:", "a vector SVG image (fonts embedded when laid out for "
                                                            "a paper)")):
            row.download_button(fmt.upper(), data=lambda fmt=fmt: _cached_image(
                                    (fig() if callable(fig) else fig).to_json(), fmt, size),
                                file_name=f"{stem}.{fmt}", mime=MIME[fmt], key=f"dl_{fmt}_{key}", on_click="ignore",
                                icon=icon, help=f"The chart as {words}, {what}.")
    if data is not None:
        row.download_button(csv_label, data=lambda: csv_text(data() if callable(data) else data,
                                                             first_line=csv_first_line),
                            file_name=f"{base}.csv", mime="text/csv", key=f"dl_csv_{key}", on_click="ignore",
                            icon=":material/table:", help=csv_help)
    if config is not None:
        file_name = f"{base}.config.json"
        how = (f"Reproduce it from a shell: `{COMMANDS[command].format(file=file_name)}` or "
               if command in COMMANDS else "Reproduce it from a shell: ") + \
            (f"`{command_line(command, config)}`" if command else "")
        row.download_button("JSON", data=to_json_text(config), file_name=file_name,
                            mime="application/json", key=f"dl_cfg_{key}", on_click="ignore", icon=":material/settings:",
                            help=f"Every setting behind this chart, as the command line's flags. {how}")


def chart(fig: go.Figure, name: str, *, data: pd.DataFrame | None = None, config: dict | None = None,
          command: str | None = None, key: str | None = None) -> None:
    """Draw a plotly chart with its export buttons underneath."""
    # theme=None: the lab's template as it is (Streamlit's theme greyed the axis titles and legends below WCAG AA
    # contrast, and set the title's size over the projector's)
    st.plotly_chart(fig, width="stretch", key=f"chart_{key or slug(name)}", theme=None,
                    config={"displaylogo": False, "toImageButtonOptions": {"format": "png", "scale": 2}})
    row = button_row()   # there in both modes, so what follows keeps its place (updated, not rebuilt)
    if not projector.on():   # downloads are secondary controls: hidden in projector mode
        export_buttons(name, fig=fig, data=data, config=config, command=command, key=key, row=row)


def code_caption(text: str) -> None:
    """A caption that names the engine's functions (``odcore.…``): for the analyst, hidden in projector mode."""
    if not projector.on():
        st.caption(text)


def opened_expander(label: str, key: str, *, icon: str | None = None):
    """An expander whose content is made only when it is open (opening it reruns the page): the container if open,
    else None. Closed, it sends nothing to the browser: the shell commands' code blocks would otherwise make every
    page load and run the syntax highlighter (a 1.5 MB script) and send their elements again on every rerun."""
    box = st.expander(label, key=key, on_change="rerun", icon=icon)
    return box if box.open else None


def reproduce(items: list[tuple[str, str, dict]]) -> None:
    """An expander with the shell commands that reproduce this page's figures: ``(what, command, config)``; made
    when it is opened (:func:`opened_expander`).

    For commands whose ``--config`` reads the exported JSON the short form is shown too.
    """
    if projector.on():   # shell commands are for the analyst, not the class: hidden in projector mode
        return
    box = opened_expander("Reproduce from the command line", "reproduce")
    if box is None:
        return
    with box:
        for what, command, config in items:
            st.markdown(f"**{what}**")
            st.code(command_line(command, config), language="bash", wrap_lines=True)
            if command in COMMANDS:
                st.caption("or, with the downloaded JSON: `" + COMMANDS[command].format(file=f"{slug(what)}.json")
                           + "`")
