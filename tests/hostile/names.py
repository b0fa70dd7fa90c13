"""Names from the data that are markup: user ids, column names, a file name and zone names that would be an image,
a link, HTML or a Streamlit directive if a page wrote them into Markdown or a chart's text as they are, and the
checks that find them in what a page sends to the browser.

Every payload points at ``127.0.0.2`` (:data:`HOST`, a loopback address nothing listens on), so any link, image or
tag made from data names that host; the checks look for it in what a renderer would make of each field, never for the
app's own markup.
"""

from __future__ import annotations

import json
import re

import pandas as pd
from google.protobuf.json_format import MessageToDict
from markdown_it import MarkdownIt

from tests.hostile.generator import rows

HOST = "127.0.0.2"
DIRECTIVE = ":red[odx]"
PAYLOADS = [
    f"![b](http://{HOST}:9/beacon.png)",
    f'=HYPERLINK("http://{HOST}:9/x","click")',
    f"[l](http://{HOST}:9/l)",
    f"<img src=http://{HOST}:9/i.png>",
    f'<a href="http://{HOST}:9/a">a</a>',
    f"{DIRECTIVE} $x$ **b** http://{HOST}:9/auto",
]
FILE_NAME = f"![f](http://{HOST}:9/file.png) <b>x</b>.csv"
ZONE_FILE_NAME = f"![z](http://{HOST}:9/zones.png).geojson"
USER_COLUMN = f"![c](http://{HOST}:9/col.png)"


def user_id(u: int) -> str:
    return f"{PAYLOADS[u % len(PAYLOADS)]}_{u}"


def traces_csv(per_user: int = 8) -> bytes:
    """The hostile generator's base rows (40 people, ``per_user`` hourly fixes each) with every user id a payload and
    the user column named :data:`USER_COLUMN` (CSV-quoted where a payload has commas or quotes)."""
    df = pd.DataFrame(rows(per_user=per_user), columns=["user", "time", "lat", "lon"])
    df["user"] = [user_id(int(u)) for u in df["user"]]
    return df.rename(columns={"user": USER_COLUMN}).to_csv(index=False).encode()


def zones_geojson() -> bytes:
    """A 4 × 4 grid of squares over the base rows' box, each zone named by a payload."""
    feats = []
    for i in range(4):
        for j in range(4):
            s, w = 37.69 + 0.03 * i, -122.48 + 0.03 * j
            ring = [[w, s], [w + 0.03, s], [w + 0.03, s + 0.03], [w, s + 0.03], [w, s]]
            feats.append({"type": "Feature", "properties": {"name": f"{PAYLOADS[(4 * i + j) % len(PAYLOADS)]}z{i}{j}"},
                          "geometry": {"type": "Polygon", "coordinates": [ring]}})
    return json.dumps({"type": "FeatureCollection", "features": feats}).encode()


# ---- what a renderer makes of a field ----------------------------------------------------------------------------

_MD = MarkdownIt("commonmark", {"html": True}).enable(["table", "strikethrough"])
# GitHub's autolink literals (Streamlit renders Markdown with remark-gfm): a scheme or "www." starts a link
_AUTOLINK = re.compile(r"(?i)(https?://|www\.)")
# Plotly's text is a small HTML: <a href>, <b>, <br>, <span style>, ...
_PLOTLY_TAG = re.compile(r"<[^<>]*" + re.escape(HOST))


def markdown_findings(text: str) -> list[str]:
    """What CommonMark (with raw HTML on, as ``unsafe_allow_html``) plus GFM autolinks and Streamlit's colour
    directives make of ``text`` that came from the data: links, images, HTML, autolinks, directives."""
    out = []

    def walk(tokens) -> None:
        for t in tokens:
            target = (t.attrGet("href") or t.attrGet("src") or "") if t.attrs else ""
            if t.type in ("image", "link_open") and HOST in str(target):
                out.append(f"{t.type} {target}")
            elif t.type in ("html_inline", "html_block") and HOST in t.content:
                out.append(f"html {t.content!r}")
            elif t.type == "text" and ((_AUTOLINK.search(t.content) and HOST in t.content) or DIRECTIVE in t.content):
                out.append(f"text {t.content!r}")
            if t.children:
                walk(t.children)

    walk(_MD.parse(text))
    return out


def plotly_findings(spec: str) -> list[str]:
    """Strings of a Plotly figure's JSON that hold a tag naming :data:`HOST` (Plotly draws its text's tags)."""
    out = []

    def walk(v) -> None:
        if isinstance(v, str):
            if _PLOTLY_TAG.search(v):
                out.append(v)
        elif isinstance(v, dict):
            for x in v.values():
                walk(x)
        elif isinstance(v, list):
            for x in v:
                walk(x)

    walk(json.loads(spec))
    return out


# Fields Streamlit renders as Markdown, by proto message; every field of every element is one of these, a field
# checked as a chart, or a field it shows as plain text (PLAIN).
MARKDOWN_FIELDS = {"body", "label", "help", "caption", "captions", "delta", "text"}
MARKDOWN_OPTIONS = {"Radio", "ButtonGroup"}       # their options are Markdown; a select box's are plain text
PLAIN = {("Selectbox", "options"), ("Selectbox", "default"), ("Selectbox", "raw_value"),
         ("MultiSelect", "options"), ("MultiSelect", "default"), ("MultiSelect", "raw_values"),
         # the live curves draw their text on a canvas or set it as textContent (odapp/components/live/live.js)
         ("BidiComponent", "json"), ("TextInput", "default"), ("TextInput", "value"), ("TextInput", "placeholder"),
         ("Code", "code_text"), ("Code", "body")}


def _strings(v, path: tuple[str, ...]):
    if isinstance(v, str):
        yield path, v
    elif isinstance(v, dict):
        for k, x in v.items():
            yield from _strings(x, (*path, k))
    elif isinstance(v, list):
        for x in v:
            yield from _strings(x, path)


def element_findings(proto) -> list[str]:
    """Everything in one element (or block) of a page that would show data as markup in the browser."""
    kind = proto.DESCRIPTOR.name
    d = MessageToDict(proto, preserving_proto_field_name=True)
    out = []
    for path, s in _strings(d, ()):
        key = path[-1] if path else ""
        inner = path[-2] if len(path) > 1 else kind
        where = f"{kind}.{'.'.join(path)}"
        if kind == "PlotlyChart" and key == "spec":
            out += [f"{where}: {x!r}" for x in plotly_findings(s)]
        elif (kind == "DeckGlJsonChart" or (kind == "BidiComponent" and d.get("component_name") == "odlab_map")) \
                and key == "json":       # a map's tooltip: plain text only (the lab's map element sets textContent)
            tip = json.loads(s).get("tooltip") or {}
            if isinstance(tip, dict) and "html" in tip:
                out.append(f"{where}: an html tooltip")
        elif kind == "ArrowTable" or (kind == "Arrow" and key == "data"):
            continue   # tables: checked by table_findings (their cells are bytes here)
        elif (key in MARKDOWN_FIELDS or (key == "options" and kind in MARKDOWN_OPTIONS)
              or (kind == "Metric" and key in ("body", "label", "delta"))):
            out += [f"{where}: {x}" for x in markdown_findings(s)]
        elif (kind, key) in PLAIN or (inner, key) in PLAIN:
            continue
        elif HOST in s:
            out.append(f"{where}: data in a field this check does not know: {s!r}")
    return out


def table_findings(df: pd.DataFrame) -> list[str]:
    """An ``st.table``'s cells and headers are Markdown."""
    out = []
    for v in [*map(str, df.columns), *map(str, df.index), *(str(x) for x in df.to_numpy().ravel())]:
        out += [f"table: {x}" for x in markdown_findings(v)]
    return out


def page_findings(at) -> list[str]:
    """Every finding on the page an AppTest session shows (main area and sidebar)."""
    out = []

    def walk(node) -> None:
        proto = getattr(node, "proto", None)
        if proto is not None and hasattr(proto, "DESCRIPTOR"):
            out.extend(element_findings(proto))
            if getattr(node, "type", "") == "table":
                out.extend(table_findings(node.value))
        for child in getattr(node, "children", {}).values():
            walk(child)

    walk(at._tree)
    return out
