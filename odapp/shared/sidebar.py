"""The shared settings in the sidebar of every page (values kept across pages under explicit keys).

``render()`` draws the controls, loads the data in use (cached on its id) and returns a :class:`PageContext`.
"""

from __future__ import annotations

import functools
import zoneinfo
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import streamlit as st

from odapp import cache
from odapp.data import private
from odapp.data.loading import (
    K_UPLOAD_DIR,
    Loaded,
    StreamedLoaded,
    UploadOptions,
    apply_upload,
    grid_check,
    sample_ref,
    synth_ref,
    unpack_counts_zip,
)
from odapp.data.zones_ui import data_box, zone_controls, zone_spec
from odapp.shared import ahead, export, guide, projector
from odapp.shared.errors import engine_errors
from odapp.shared.state import (
    DATA_SOURCE_LABELS,
    EPSILON_RANGE,
    K_BEFORE,
    K_CELL_KM2,
    K_COUNTS_DIR,
    K_DATASET,
    K_EPSILON,
    K_FIT_THRESHOLD,
    K_MAX_PAIRS,
    K_MODE,
    K_SEED,
    K_SOURCE,
    K_SYNTH_EXTENT,
    K_SYNTH_USERS,
    K_SYNTH_WEEKS,
    K_THRESHOLD,
    K_UPLOAD_ERROR,
    K_UPLOAD_TRACES,
    K_USER_THRESHOLD,
    K_WEEK,
    K_WEEK_FOR,
    K_ZONE_FILE,
    K_ZONE_LABEL,
    SEED_MAX,
    THRESHOLD_RANGE,
    USER_DELTA,
    USER_THRESHOLD_MAX,
    USER_WEEKS,
    DatasetRef,
    DataSource,
    Settings,
    apply_preset,
    init_state,
    is_bassolas_preset,
    widget_key,
)
from odapp.shared.words import epsilon_label, plain, sci
from odcore.data.traces import TraceFormat, region_left_out_words
from odcore.errors import ODCoreError, ParameterError
from odcore.od.odtable import MANIFEST, is_counts_folder
from odcore.od.trips import ODConfig
from odcore.privacy.accounting import delta_parts

K_UPLOAD_GEN = "odlab.upload_generation"   # bumps after each good upload (fresh uploader widget)
K_UPLOAD_PENDING = "odlab.upload_pending"   # UploadOptions of a pressed "Load this file" not read yet

MODE_LABELS = {"per_metric": "per metric (as Google did)", "user_level": "per user (bounded contribution)"}
MODE_LABELS_PROJECTOR = {"per_metric": "per metric (Google's)", "user_level": "per user (bounded)"}
"""The same choices in projector mode, short enough for the sidebar's select box at a projector's large type (a
select box shows its choice on one line; the longer words were cut, "per user (bounded co")."""


def week_label(w: int, *, starts, short: bool = False) -> str:
    """A week's choice: "Week 3 (from Mon 2024-01-29)", in projector mode "Week 3, 2024-01-29" (its Monday)."""
    if w >= len(starts):
        return f"Week {w}"
    return f"Week {w}, {starts[w]}" if short else f"Week {w} (from Mon {starts[w]})"


@dataclass(frozen=True)
class PageContext:
    """What a page needs: the frozen settings, the loaded traces and their weekly OD data."""

    settings: Settings
    loaded: Loaded
    od: object   # odcore.od.oddata.ODData
    od_config: object  # odcore.od.oddata.ODConfig
    next: Settings | None = None   # the person's likely next setting (:func:`odapp.shared.ahead.next_settings`)
    tour: object = None   # the sidebar's first slot, where the guided tour's step goes (:func:`odapp.shared.guide.panel`)


def _copy_to_persistent(key: str) -> None:
    st.session_state[key] = st.session_state[widget_key(key)]


def _bound(key: str, widget: Callable, **kwargs):
    """Draw ``widget`` under the widget key of ``key``, always starting from the persistent value.

    Streamlit forgets a widget's state when a page that does not draw it runs (and a page switch makes new
    widgets), so the persistent key is the source of truth: it is copied into the widget key before drawing, and a
    change of the widget is copied back by the ``on_change`` callback, which runs before the script.
    """
    wk = widget_key(key)
    st.session_state[wk] = st.session_state[key]
    return widget(key=wk, on_change=_copy_to_persistent, args=(key,), **kwargs)


def _source_controls() -> None:
    ss = st.session_state
    _bound(K_SOURCE, st.radio, label="Data source", options=[s.value for s in DataSource],
           format_func=lambda v: DATA_SOURCE_LABELS[DataSource(v)],
           help="Where the traces come from. The bundled synthetic city opens instantly; a synthesised city "
                "uses odcore's generator with the parameters below; an upload reads your own traces "
                "(CSV, Parquet, JSON, GeoJSON, zip of these) with a column mapping.")
    source = ss[K_SOURCE]
    if source == DataSource.SYNTH:
        with st.form("synth_form", border=False):
            users = st.number_input("Users", 100, 50_000, int(ss[K_SYNTH_USERS]), step=100,
                                    help="How many synthetic people live in the city.")
            weeks = st.number_input("Weeks", 1, 12, int(ss[K_SYNTH_WEEKS]),
                                    help="How many Monday-weeks of traces to generate.")
            extent = st.number_input("City radius (km)", 2.0, 60.0, float(ss[K_SYNTH_EXTENT]), step=1.0,
                                     help="How far from the centre people live and go; with 1.3 km² cells a "
                                          "12 km radius gives a few hundred cells.")
            if st.form_submit_button("Generate city", help="Synthesise the city with these parameters and the "
                                                           "seed below (same seed, same city)."):
                ss[K_SYNTH_USERS], ss[K_SYNTH_WEEKS], ss[K_SYNTH_EXTENT] = int(users), int(weeks), float(extent)
    elif source == DataSource.UPLOAD:
        _upload_controls()
    elif source == DataSource.COUNTS and private.class_mode():
        _class_counts_controls()
    elif source == DataSource.COUNTS:
        _bound(K_COUNTS_DIR, st.text_input, label="Counts folder",
               placeholder="/path/to/folder written by trips --counts-out",
               help="A folder written by `python -m odcore trips ... --counts-out DIR` (any engine, e.g. a Spark "
                    "job on a cluster): weekly distinct-user counts per zone pair, zones and a manifest. The "
                    "release, budget and map pages work from it; pages that need each person's pairs or traces "
                    "say why they cannot.")
        if not _counts_path(ss):
            st.info("No folder given yet: the bundled synthetic city stays in use.")


K_COUNTS_ERROR = "odlab.counts_error"


def _class_counts_controls() -> None:
    """Serving a class: a counts folder comes as an upload (a zip of the folder), or from the folder the teacher
    named at start (``python -m odserve.launcher --counts-dir``); no path on the server can be typed."""
    ss = st.session_state
    choices = class_counts_choices()
    if choices:
        names = list(choices)
        current = next((n for n, p in choices.items() if p == _counts_path(ss)), None)
        pick = st.selectbox("Counts folder from the teacher", ["—", *names],
                            index=0 if current is None else 1 + names.index(current), key="w.counts_pick",
                            help="The counts folders the teacher made available when starting the class server.")
        if pick != "—" and choices[pick] != _counts_path(ss):
            ss[K_COUNTS_DIR] = choices[pick]
    up = st.file_uploader("Counts folder (zip)", type=["zip"], key="w.counts_zip",
                          help="A zip of a folder written by `python -m odcore trips ... --counts-out DIR`; it is "
                               "unpacked into this session's private folder, removed when you leave.")
    if up is not None and ss.get("odlab.counts_zip_seen") != (up.name, up.size):
        ss["odlab.counts_zip_seen"] = (up.name, up.size)
        try:
            ss[K_COUNTS_DIR] = unpack_counts_zip(ss, up.getvalue(), up.name)
            ss.pop(K_COUNTS_ERROR, None)
        except ODCoreError as exc:
            ss[K_COUNTS_ERROR] = f"Could not use {up.name!r}: {exc}"
    if ss.get(K_COUNTS_ERROR):
        st.error(plain(ss[K_COUNTS_ERROR]), icon="⚠️")
    if not _counts_path(ss):
        st.info("No counts folder chosen yet: the bundled synthetic city stays in use.")


def class_counts_choices() -> dict[str, str]:
    """``{name: path}`` of the counts folders under the teacher's ``--counts-dir`` (itself when it is one)."""
    root = private.teacher_counts_dir()
    if root is None or not root.is_dir():
        return {}
    if is_counts_folder(root):
        return {root.name: str(root)}
    return {p.name: str(p) for p in sorted(root.iterdir()) if p.is_dir() and is_counts_folder(p)}


def counts_path_allowed(path: str, ss) -> bool:
    """Serving a class, a counts folder must be inside the teacher's ``--counts-dir`` or this session's private
    folder (an upload); elsewhere any folder may be typed."""
    if not private.class_mode():
        return True
    roots = [r for r in (private.teacher_counts_dir(), ss.get(K_UPLOAD_DIR)) if r]
    return any(private.within(path, r) for r in roots)


def _counts_path(ss) -> str:
    """The counts folder's path as typed, or "" while none is given (the bundled city stays in use)."""
    return str(ss.get(K_COUNTS_DIR, "") or "").strip()


def _upload_controls() -> None:
    ss = st.session_state
    # A new key after each good upload: the widget lets go of the file's bytes (the traces are kept once, as
    # Parquet in the session folder; see odapp.data.loading.StoredUpload).
    up = st.file_uploader("Trace file", key=f"w.upload_file.{ss.get(K_UPLOAD_GEN, 0)}",
                          help="One row per location fix or check-in with a user id, a time, a latitude and a "
                               "longitude: CSV (optionally gzipped), Parquet, Cabspotting cab files or a "
                               "check-ins + POI pair, alone or in a zip.")
    with st.expander("Reading options (format, columns, time zone)"):
        fmt = st.selectbox("Format", [f.value for f in TraceFormat], key="w.upload_format",
                           help="'auto' guesses from the file name and first line. csv/parquet: a table with "
                                "user, time, lat, lon columns; cabspotting: 'lat lon occupancy unix_time' per "
                                "cab; checkins: 'user poi unix_time' plus a POI file in the same zip.")
        cols = {}
        for col, hint in (("user", "user id"), ("time", "timestamp (ISO text or unix seconds)"),
                          ("lat", "latitude, WGS84 degrees"), ("lon", "longitude, WGS84 degrees")):
            cols[col] = st.text_input(f"Column for {col}", key=f"w.upload_col_{col}", placeholder="detect",
                                      help=f"Name of the column holding the {hint}; leave empty to detect it.")
        unit = st.selectbox("Time unit", ["auto", "iso", "s", "ms"], key="w.upload_time_unit",
                            help="auto: numbers are Unix seconds, text is ISO 8601; or force ISO text, Unix "
                                 "seconds (s) or milliseconds (ms).")
        tz = st.selectbox("Time zone", time_zone_choices(), key="w.upload_tz",
                          help="Zone of timestamps written without an offset, and of local hours and Monday week "
                               "starts; 'auto' = the format's zone (Cabspotting: America/Los_Angeles), else the "
                               "zone a zone-aware time column states, else the zone at the centre of the data "
                               "(looked up offline from the coordinates), as the command line's --tz auto. Local "
                               "times in a daylight-saving gap are read with the offset before the change, "
                               "repeated hours as their first occurrence; both are counted.")
        offset = st.number_input("Time offset (seconds)", value=0, step=3600, key="w.upload_offset",
                                 help="Added to every timestamp, e.g. 28800 for check-in sets that are 8 h early.")
        bbox = st.text_input("Bounding box", "auto", key="w.upload_bbox",
                             help="Keep points inside south,west,north,east (degrees). 'auto' = the robust box "
                                  "of the command line (0.5-99.5 percentiles widened by 25 %), which drops far "
                                  "GPS glitches so one stray fix does not stretch the grid; 'none' keeps all.")
        region = st.text_input("Region", "auto", key="w.upload_region",
                               help="For data wider than a city (a country or the world): 'auto' keeps the "
                                    "densest region of people's home places, a number N the N-th densest (the "
                                    "list shows after loading), 'all' keeps everything (a very large grid), or "
                                    "a box south,west,north,east.")
    if st.button("Load this file", disabled=up is None, key="w.upload_go",
                 help="Read the file; if it cannot be read, the data loaded before stays in use."):
        mapping = tuple((k, v.strip()) for k, v in cols.items() if v.strip())
        if mapping or unit != "auto":
            mapping = (*mapping, ("time_unit", unit))
        # Kept until the file is read: a rerun while it waits in the queue (another widget moved, a second press)
        # resumes the load instead of losing the button's one-run press.
        ss[K_UPLOAD_PENDING] = UploadOptions(format=fmt, mapping=mapping, tz=tz or "auto",
                                             time_offset_s=int(offset), bbox=bbox.strip() or "auto",
                                             region=region.strip() or "auto")
    if ss.get(K_UPLOAD_PENDING) is not None and up is None:   # the file was removed before its turn
        ss.pop(K_UPLOAD_PENDING)
    elif ss.get(K_UPLOAD_PENDING) is not None:
        note = st.empty()

        def queued(n: int) -> None:
            note.info(f"Queued: {n} upload{'s' if n > 1 else ''} ahead of yours (the server reads one file at a "
                      "time); yours starts when they are done.", icon="⏳")

        try:   # Streamlit's stop/rerun (BaseException) keeps the request for the next run; an error ends it
            with st.spinner(f"Reading {plain(up.name)}…"):
                ok = apply_upload(ss, up.getvalue(), up.name, ss[K_UPLOAD_PENDING], on_wait=queued)
        except Exception:
            ss.pop(K_UPLOAD_PENDING, None)
            raise
        ss.pop(K_UPLOAD_PENDING, None)
        note.empty()
        if ok:
            ss[K_UPLOAD_GEN] = ss.get(K_UPLOAD_GEN, 0) + 1
    if ss.get(K_UPLOAD_ERROR):
        st.error(plain(ss[K_UPLOAD_ERROR]), icon="⚠️")
    elif K_UPLOAD_TRACES not in ss:
        st.info("No file loaded yet: the bundled synthetic city stays in use.")


def _user_threshold() -> float:
    """Per-user mode: the threshold fitted to the noise (proposed by default) or set by hand, and its δ, by the one
    rule of the CLI's ``release`` and ``budget`` (:func:`odcore.privacy.accounting.delta_parts`: the person's δ over
    :data:`USER_WEEKS` weeks is at most :data:`USER_DELTA`, half for the Laplace part, half for the threshold)."""
    ss = st.session_state
    eps, m = float(ss[K_EPSILON]), int(ss[K_MAX_PAIRS])
    fitted = int(delta_parts(eps, USER_DELTA, USER_WEEKS, max_pairs=m).threshold)
    _bound(K_FIT_THRESHOLD, st.toggle, label=f"Fit the threshold to the noise (δ ≤ {sci(USER_DELTA, '.0e')})",
           help=f"Propose the smallest threshold whose share of δ (Google's LaplacePartitionSelection: the chance "
                f"that a pair only one person makes is published, over {USER_WEEKS} weekly releases) is at most "
                f"half of {USER_DELTA:.0e}, as `python -m odcore release` and `budget` do. Switch off to set it by "
                "hand.")
    if ss[K_FIT_THRESHOLD]:
        tau = float(fitted)
        st.markdown(f"Threshold: **{fitted:,}** (fitted to noise {m}/ε)")
    else:
        _bound(K_USER_THRESHOLD, st.number_input, label="Threshold (suppress noisy counts below)", min_value=1,
               max_value=USER_THRESHOLD_MAX, step=10,
               help=f"Pairs whose noisy count is below this are not published; {fitted:,} would keep δ ≤ "
                    f"{USER_DELTA:.0e} over {USER_WEEKS} weeks.")
        tau = float(ss[K_USER_THRESHOLD])
    parts = delta_parts(eps, USER_DELTA, USER_WEEKS, max_pairs=m, threshold=tau)
    text = (f"δ over {USER_WEEKS} weeks: **{sci(parts.total, '.2g')}** = {sci(parts.laplace, '.2g')} (Laplace) + "
            f"{sci(parts.threshold_cost, '.2g')} (threshold)")
    if parts.warnings():
        st.warning(f"{text} — " + " ".join(parts.warnings()))
    else:
        st.caption(text)
    return tau


def time_zone_choices() -> list[str]:
    """'auto', 'UTC', then every IANA zone name (the select box is searchable)."""
    return ["auto", "UTC", *sorted(z for z in zoneinfo.available_timezones() if "/" in z)]


def current_dataset() -> tuple[DatasetRef, Loaded]:
    """The data in use, loaded through the caches (an upload lives in the session)."""
    ss = st.session_state
    source = ss[K_SOURCE]
    if source == DataSource.UPLOAD and K_UPLOAD_TRACES in ss and K_DATASET in ss \
            and ss[K_DATASET].kind == DataSource.UPLOAD:
        stored = ss[K_UPLOAD_TRACES]
        if getattr(stored, "cabs", None) is not None:    # a Cabspotting upload: streamed, its table read if asked
            cabs = stored.cabs
            return ss[K_DATASET], StreamedLoaded(cabs, stored.summary, stored.cli,
                                                 lambda: cache.upload_cab_traces(cabs).df)
        df = cache.upload_traces(stored.path).df
        return ss[K_DATASET], Loaded(df, stored.summary, stored.cli)
    if source == DataSource.COUNTS and _counts_path(ss):
        if not counts_path_allowed(_counts_path(ss), ss):
            raise ParameterError("this class server reads no folder named by path: upload the counts folder as a "
                                 "zip, or pick one the teacher made available.")
        return counts_dataset(_counts_path(ss))
    if source == DataSource.SYNTH:
        ref = synth_ref(ss[K_SYNTH_USERS], ss[K_SYNTH_WEEKS], ss[K_SYNTH_EXTENT], ss[K_SEED])
        return ref, cache.synth_traces(ref.synth_users, ref.synth_weeks, ref.synth_extent_km, ref.synth_seed)
    ref = sample_ref()
    return ref, cache.sample_traces(ref.id)


def counts_dataset(path: str) -> tuple[DatasetRef, Loaded]:
    """A counts folder as the data in use: no traces (an empty table), its manifest as the summary."""
    if not path.strip():
        raise ParameterError("type the path of a folder written by `python -m odcore trips --counts-out DIR`.")
    if not is_counts_folder(path):
        raise ParameterError(f"{path} is not an OD counts folder (no manifest.json of kind odcore-od-counts); "
                             "write one with `python -m odcore trips --input TRACES --counts-out DIR`.")
    stamp = (Path(path) / MANIFEST).stat().st_mtime_ns
    ref = DatasetRef(id=f"counts:{path}:{stamp}", kind=DataSource.COUNTS.value, label=f"OD counts folder {path}")
    od = cache.counts_folder(ref.id, path)
    m = od.stats["manifest"]
    st_ = m.get("stats") or {}
    empty = pd.DataFrame({"user": np.empty(0, np.int64), "time": pd.DatetimeIndex([], tz="UTC"),
                          "lat": np.empty(0), "lon": np.empty(0)})
    summary = {"source": m.get("source"), "format": "od-counts-folder", "users": m.get("users"),
               "rows_read": st_.get("rows_read"), "rows_kept": st_.get("rows_used"),
               "rows_dropped": st_.get("rows_dropped", {}), "engine": m.get("engine"), "counts_folder": path}
    return ref, Loaded(empty, summary, {"input": path, "tz": od.config.tz})


TZ_SOURCES = {"format": "the format's documentation", "file": "stated by the file",
              "coordinates": "looked up from the coordinates", "given": "as set in Reading options"}


def _place_caption(summary: dict) -> None:
    """Where and when the data is read: the region kept (of those found) and the local time zone."""
    regions, rank = summary.get("regions") or [], summary.get("region")
    if rank and regions:
        r = regions[int(rank) - 1]
        others = "; ".join(f"#{x['rank']} {x['users']:,} ({plain(x['tz'])})" for x in regions[:5] if x["rank"] != rank)
        st.caption(f"Region #{rank} of {len(regions)} (the data spans more than a city): {r['users']:,} people's "
                   f"home places around {r['lat']:.2f}, {r['lon']:.2f}." + (f" Others: {others}; pick one with "
                                                                             "Reading options → Region." if others
                                                                             else ""))
    note = region_left_out_words(summary.get("region"), summary.get("region_left_out"),
                                 "Reading options → Region → all")
    if note:
        st.caption(note)
    tz = summary.get("tz")
    if tz:
        st.caption(f"Local time: {plain(tz)} ({TZ_SOURCES.get(summary.get('tz_source'), 'as read')}).")


def _session_files(ss) -> None:
    """Name this session's private folder for its end (:func:`odapp.cache.session_files`). When the browser came back
    after its connection closed, the folder was removed with its uploads: they are forgotten, with a note."""
    named = ss.get(K_UPLOAD_DIR)
    live = named if named and Path(named).is_dir() else ""
    ss[K_UPLOAD_DIR] = cache.session_files(live)
    if not named or live:
        return
    lost = []
    stored = ss.get(K_UPLOAD_TRACES)
    if stored is not None and private.within(stored.path, named):
        ss.pop(K_UPLOAD_TRACES)
        lost.append("trace file")
        if ss.get(K_DATASET) is not None and ss[K_DATASET].kind == DataSource.UPLOAD:
            ss.pop(K_DATASET)
    if ss.get(K_ZONE_FILE) and private.within(ss[K_ZONE_FILE], named):
        ss.pop(K_ZONE_FILE)
        ss.pop(K_ZONE_LABEL, None)
        lost.append("zone file")
    if _counts_path(ss) and private.within(_counts_path(ss), named):
        ss[K_COUNTS_DIR] = ""
        lost.append("counts folder")
    if lost:
        ss[K_UPLOAD_ERROR] = (f"Your upload ({', '.join(lost)}) was removed from the server when your connection "
                              "closed (uploads are kept only while you are connected): upload it again.")


def render(live: tuple[str, ...] = ()) -> PageContext:
    """Draw the shared sidebar; load the data; return the frozen settings and data for the page.

    ``live``: the settings ("epsilon", "threshold") whose slider the page draws itself, beside its live curves
    (:mod:`odapp.components.live`); the sidebar then says where it is instead of drawing a second one."""
    ss = st.session_state
    init_state(ss)
    _session_files(ss)
    # above the settings: the tour's step beside the page's picture, not above it; a slot its box takes the place of
    # (a container would wrap that box in a block of its own: one more message on every rerun)
    tour = st.sidebar.empty()
    with st.sidebar:
        st.header("Settings")
        st.button("Google/Bassolas 2019 setting", on_click=apply_preset, args=(ss,), type="primary", key="preset",
                  width="stretch",
                  help="ε = 0.66 per metric, noisy counts below 100 removed, ~1.3 km² grid cells: the release "
                       "Google shared with Bassolas et al. (their reply, Nature Communications 2022).")
        if is_bassolas_preset(ss):
            st.caption("✓ Google/Bassolas 2019 setting")
        _source_controls()
        with engine_errors("Could not load the data",
                           "Pick the bundled synthetic city or fix the file, then try again."):
            ref, loaded = current_dataset()
        box = data_box(loaded.summary)
        zone_controls(ss, _bound, box)
        zones, zones_label = zone_spec(ss, box)
        with engine_errors("Could not load the data",
                           "Pick the bundled synthetic city or fix the file, then try again."):
            if ref.kind == DataSource.COUNTS:   # the folder fixes zones and weeks
                od = cache.counts_folder(ref.id, loaded.cli["input"])
                od_config = od.config
                grid_warning = None
                st.caption(f"Zones and weeks come from the counts folder ({plain(od.grid.to_dict().get('spec', ''))}); "
                           "the zone controls above do not apply.")
            else:
                od_config = ODConfig(cell_km2=float(ss[K_CELL_KM2]), tz=loaded.tz, zones=zones)
                grid_warning = grid_check(loaded, od_config.cell_km2) if zones is None else None
                if isinstance(loaded, StreamedLoaded):
                    od = cache.streamed_od(ref.id, od_config, loaded.cabs, _summary=loaded.summary)
                else:
                    od = cache.od_data(ref.id, od_config, _df=loaded.df)
        ss[K_DATASET] = ref
        n_weeks = max(1, len(od.week_starts))
        busiest, people = od.busiest_week()
        chosen_for = (ref.id, od_config.zones, od_config.tz)
        if ss.get(K_WEEK_FOR) != chosen_for:     # new data: start on its busiest week, never an empty one
            ss[K_WEEK_FOR] = chosen_for
            ss[K_WEEK] = busiest
            ss[widget_key(K_WEEK)] = busiest
        if ss[K_WEEK] >= n_weeks:
            ss[K_WEEK] = n_weeks - 1
            ss[widget_key(K_WEEK)] = n_weeks - 1
        _bound(K_WEEK, st.selectbox, label="Week", options=list(range(n_weeks)),
               format_func=functools.partial(week_label, starts=od.week_starts, short=projector.on()),
               help="Which Monday-to-Sunday week is released (each week is a separate release). New data "
                    "opens on its busiest week: the one with most people who make at least one trip.")
        if n_weeks > 1 and people:
            st.caption(f"Week {busiest} is the busiest: {people:,} people with at least one trip"
                       + (" (shown by default)." if int(ss[K_WEEK]) == busiest else "."))
        _place_caption(loaded.summary)
        user_mode = ss[K_MODE] == "user_level"
        if "epsilon" in live:
            st.markdown(f"{epsilon_label(ss[K_MODE])}: **{float(ss[K_EPSILON]):g}** — drag it on the page, above "
                        "the curves.")
        else:
            _bound(K_EPSILON, st.slider, label=epsilon_label(ss[K_MODE]), min_value=EPSILON_RANGE[0],
                   max_value=EPSILON_RANGE[1], step=EPSILON_RANGE[2],
                   help="Per person and week: the whole week of one person is protected at this ε (each count gets "
                        "noise max_pairs/ε). Per count: Laplace noise of scale 1/ε on every count, protecting one trip "
                        "of one person; Google used 0.66." if user_mode else
                        "Laplace noise of scale 1/ε is added to every count. Smaller ε: more noise, stronger "
                        "protection. Google used 0.66.")
        _bound(K_MODE, st.selectbox, label="Guarantee unit", options=list(MODE_LABELS),
               format_func=(MODE_LABELS_PROJECTOR if projector.on() else MODE_LABELS).get,
               help="'per metric' protects one trip of one user in one week (Google's reading); 'per user' "
                    "bounds each user's whole contribution so the guarantee covers a person.")
        if ss[K_MODE] == "user_level":
            _bound(K_MAX_PAIRS, st.number_input, label="Max pairs per user and week", min_value=1,
                   max_value=200, step=1,
                   help="Each user keeps at most this many of their unique pairs per week; the noise scale "
                        "becomes max_pairs/ε so the whole week is ε-DP per user.")
            threshold = _user_threshold()
        elif "threshold" in live:
            st.markdown(f"Threshold (suppress noisy counts below): **{float(ss[K_THRESHOLD]):g}** — drag it on the "
                        "page, above the curves.")
            threshold = float(ss[K_THRESHOLD])
        else:
            _bound(K_THRESHOLD, st.slider, label="Threshold (suppress noisy counts below)",
                   min_value=THRESHOLD_RANGE[0], max_value=THRESHOLD_RANGE[1], step=THRESHOLD_RANGE[2],
                   help="Pairs whose noisy count is below this are not published. Google used 100.")
            threshold = float(ss[K_THRESHOLD])
        _bound(K_SEED, st.number_input, label="Seed", min_value=0, max_value=SEED_MAX, step=1,
               help="Seed of every random draw (noise, synthesis, Monte Carlo): same seed, same numbers.")
        st.caption(f"Data: {plain(ref.label)}")
        projector.toggle()
        export.size_choice()
        guide.reopen_button()
    # In the main area too: the sidebar's messages are below the fold.
    if ss[K_SOURCE] == DataSource.UPLOAD and ss.get(K_UPLOAD_ERROR):
        st.error(plain(ss[K_UPLOAD_ERROR]), icon="⚠️")
    if grid_warning:
        st.warning(f"Very large grid: {grid_warning}", icon="⚠️")
    projector.apply()
    settings = Settings(dataset=ref, week=int(ss[K_WEEK]), cell_km2=float(ss[K_CELL_KM2]),
                        epsilon=float(ss[K_EPSILON]), threshold=threshold, seed=int(ss[K_SEED]),
                        mode=str(ss[K_MODE]), max_pairs=int(ss[K_MAX_PAIRS]), zones=zones,
                        zones_label=zones_label)
    nxt = ahead.next_settings(ss.get(K_BEFORE), settings)
    ss[K_BEFORE] = settings
    if nxt is not None and nxt.cell_km2 != settings.cell_km2 and not ahead.grid_ahead(
            loaded, counts=ref.kind == DataSource.COUNTS):
        nxt = None
    ctx = PageContext(settings=settings, loaded=loaded, od=od, od_config=od_config, next=nxt, tour=tour)
    ahead.after(ctx)   # at least the next grid's tables; a page with heavier work asks again with it
    return ctx
