"""The sidebar's data source: the bundled city, a synthetic city, an upload (traces, cab files) or a counts folder;
the data in use, loaded through the caches, what the loader left out, and this session's private files."""

from __future__ import annotations

import zoneinfo
from pathlib import Path

import numpy as np
import pandas as pd
import streamlit as st

from odapp.data import cache as data_cache
from odapp.data import private
from odapp.data.loading import (
    K_UPLOAD_DIR,
    Loaded,
    StreamedLoaded,
    UploadOptions,
    apply_upload,
    sample_ref,
    synth_ref,
    unpack_counts_zip,
)
from odapp.shared.persist import bound
from odapp.shared.state import (
    DATA_SOURCE_LABELS,
    K_COUNTS_DIR,
    K_DATASET,
    K_SEED,
    K_SOURCE,
    K_SYNTH_EXTENT,
    K_SYNTH_USERS,
    K_SYNTH_WEEKS,
    K_UPLOAD_ERROR,
    K_UPLOAD_TRACES,
    K_ZONE_FILE,
    K_ZONE_LABEL,
    DatasetRef,
    DataSource,
)
from odapp.shared.words import plain
from odcore.data.traces import TraceFormat, region_left_out_words
from odcore.errors import ODCoreError, ParameterError
from odcore.od.odtable import MANIFEST, is_counts_folder

K_UPLOAD_GEN = "odlab.upload_generation"   # bumps after each good upload (fresh uploader widget)
K_UPLOAD_PENDING = "odlab.upload_pending"   # UploadOptions of a pressed "Load this file" not read yet


def source_controls() -> None:
    ss = st.session_state
    bound(K_SOURCE, st.radio, label="Data source", options=[s.value for s in DataSource],
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
        bound(K_COUNTS_DIR, st.text_input, label="Counts folder",
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
    named at start (``python -m odserve --counts-dir``); no path on the server can be typed."""
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
                                                 lambda: data_cache.upload_cab_traces(cabs).df)
        df = data_cache.upload_traces(stored.path).df
        return ss[K_DATASET], Loaded(df, stored.summary, stored.cli)
    if source == DataSource.COUNTS and _counts_path(ss):
        if not counts_path_allowed(_counts_path(ss), ss):
            raise ParameterError("this class server reads no folder named by path: upload the counts folder as a "
                                 "zip, or pick one the teacher made available.")
        return counts_dataset(_counts_path(ss))
    if source == DataSource.SYNTH:
        ref = synth_ref(ss[K_SYNTH_USERS], ss[K_SYNTH_WEEKS], ss[K_SYNTH_EXTENT], ss[K_SEED])
        return ref, data_cache.synth_traces(ref.synth_users, ref.synth_weeks, ref.synth_extent_km, ref.synth_seed)
    ref = sample_ref()
    return ref, data_cache.sample_traces(ref.id)


def counts_dataset(path: str) -> tuple[DatasetRef, Loaded]:
    """A counts folder as the data in use: no traces (an empty table), its manifest as the summary."""
    if not path.strip():
        raise ParameterError("type the path of a folder written by `python -m odcore trips --counts-out DIR`.")
    if not is_counts_folder(path):
        raise ParameterError(f"{path} is not an OD counts folder (no manifest.json of kind odcore-od-counts); "
                             "write one with `python -m odcore trips --input TRACES --counts-out DIR`.")
    stamp = (Path(path) / MANIFEST).stat().st_mtime_ns
    ref = DatasetRef(id=f"counts:{path}:{stamp}", kind=DataSource.COUNTS.value, label=f"OD counts folder {path}")
    od = data_cache.counts_folder(ref.id, path)
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


def place_caption(summary: dict) -> None:
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


def name_session_files(ss) -> None:
    """Name this session's private folder for its end (:func:`odapp.data.cache.session_files`). When the browser came back
    after its connection closed, the folder was removed with its uploads: they are forgotten, with a note."""
    named = ss.get(K_UPLOAD_DIR)
    live = named if named and Path(named).is_dir() else ""
    ss[K_UPLOAD_DIR] = data_cache.session_files(live)
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
