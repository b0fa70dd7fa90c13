"""Loading the data in use: bundled sample, synthesised city or an upload (bytes + name, testable without UI).

The loaded traces are identified by a small :class:`~odcore.state.DatasetRef` whose ``id`` is content-derived, so
everything computed from them can be cached on ``(dataset id, frozen config, seed)``.
"""

from __future__ import annotations

import hashlib
import io
import json
import pickle
import shutil
import uuid
import zipfile
from collections.abc import Callable, MutableMapping
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from odapp.data import private
from odapp.data.parse_queue import UPLOAD_QUEUE, ParseQueue
from odapp.shared.state import (
    K_DATASET,
    K_SOURCE,
    K_UPLOAD_ERROR,
    K_UPLOAD_TRACES,
    DatasetRef,
    DataSource,
)
from odcore.data.synth import SynthConfig, generate_city
from odcore.data.traces import load_traces, unpack_cabspotting
from odcore.data.validate import check_grid_size, check_member_name
from odcore.errors import ODCoreError, TraceFormatError
from odcore.od.engines.cab_stream import stream_cabspotting
from odcore.od.odtable import MANIFEST, is_counts_folder
from odcore.paths import REPO_ROOT, SAMPLE_DATA_DIR

SAMPLE_FILE = SAMPLE_DATA_DIR / "synthetic_city.parquet"


@dataclass(frozen=True)
class Loaded:
    """Traces in the engine's schema plus what loading them did (rows read, kept, dropped and why)."""

    df: pd.DataFrame = field(repr=False)
    summary: dict
    cli: dict = field(default_factory=dict)
    """Loader flags of ``python -m odcore`` (snake_case keys) that read the same traces the same way."""

    @property
    def tz(self) -> str:
        """Time zone of local hours and week starts (as the CLI resolves ``--tz auto``)."""
        return self.cli.get("tz", "UTC")


@dataclass(frozen=True)
class UploadOptions:
    """How to read an upload: format (``"auto"`` detects it from the name), column mapping, time zone, offset and
    bounding box -- the same defaults as ``python -m odcore`` (``--tz auto``, ``--bbox auto``)."""

    format: str = "auto"
    mapping: tuple[tuple[str, str], ...] = ()   # (engine column, file column) pairs; empty = detect
    tz: str = "auto"          # "auto": the format's zone, a zone the file states, else the zone of the coordinates
    time_offset_s: int = 0
    bbox: str = "auto"        # "auto": robust percentile box (clips far GPS glitches); "none"; or "S,W,N,E"
    region: str = "auto"      # "auto": the densest region when the data spans more than a city; "all"; "N"; a box

    def mapping_dict(self) -> dict[str, str] | None:
        m = {k: v for k, v in self.mapping if v}
        return m or None


def sample_ref() -> DatasetRef:
    """Handle on the bundled synthetic city; its id changes when the file is regenerated."""
    try:
        st_ = SAMPLE_FILE.stat()
        stamp = f"{st_.st_size}:{st_.st_mtime_ns}"
    except FileNotFoundError:
        stamp = "missing"
    return DatasetRef(id=f"sample:{stamp}", kind=DataSource.SAMPLE.value, label="Bundled synthetic city")


def synth_ref(users: int, weeks: int, extent_km: float, seed: int) -> DatasetRef:
    return DatasetRef(
        id=f"synth:{int(users)}:{int(weeks)}:{float(extent_km):g}:{int(seed)}", kind=DataSource.SYNTH.value,
        label=f"Synthetic city ({int(users):,} users, {int(weeks)} weeks, {float(extent_km):g} km, seed {int(seed)})",
        synth_users=int(users), synth_weeks=int(weeks), synth_extent_km=float(extent_km), synth_seed=int(seed))


def upload_ref(data: bytes, name: str, options: UploadOptions) -> DatasetRef:
    h = hashlib.sha256(data)
    h.update(json.dumps([name, options.format, list(options.mapping), options.tz, options.time_offset_s,
                         options.bbox, options.region]).encode())
    return DatasetRef(id=f"upload:{h.hexdigest()[:20]}", kind=DataSource.UPLOAD.value, label=f"Upload: {name}")


def _summary_of(traces) -> dict:
    s = traces.summary() if hasattr(traces, "summary") else {}
    return dict(s)


def load_sample() -> Loaded:
    """Read the bundled sample through the engine's loader (raises :class:`TraceFormatError` when missing)."""
    if not SAMPLE_FILE.is_file():
        raise TraceFormatError("the bundled sample is missing; regenerate it with `make sample-data`.",
                               file=str(SAMPLE_FILE))
    t = load_traces(SAMPLE_FILE, tz="auto")   # its time column states UTC, the synthetic city's clock
    try:
        rel = str(SAMPLE_FILE.relative_to(REPO_ROOT))
    except ValueError:
        rel = str(SAMPLE_FILE)
    return Loaded(t.df, _summary_of(t), {"input": rel, "format": "parquet", "tz": "UTC", "bbox": "none"})


def load_synth(users: int, weeks: int, extent_km: float, seed: int) -> Loaded:
    """Synthesise a city with :func:`odcore.data.synth.generate_city` (every row is kept: nothing to drop)."""
    cfg = SynthConfig(users=int(users), weeks=int(weeks), extent_km=float(extent_km))
    df = generate_city(cfg, rng=int(seed))
    summary = {"source": f"odcore.data.synth seed={int(seed)}", "format": "synthetic", "rows_read": len(df),
               "rows_kept": len(df), "rows_dropped": {}, "users": int(df["user"].nunique()),
               "time_min": df["time"].min().isoformat(), "time_max": df["time"].max().isoformat()}
    out = f"synthetic_{int(users)}u_{int(weeks)}w_{float(extent_km):g}km_seed{int(seed)}.parquet"
    make = (f"python -m odcore synth --users {int(users)} --weeks {int(weeks)} --extent-km {float(extent_km):g} "
            f"--seed {int(seed)} --out {out}")
    return Loaded(df, summary, {"input": out, "format": "parquet", "tz": "UTC", "bbox": "none", "_make": make})


def read_upload(data: bytes, name: str, options: UploadOptions = UploadOptions()) -> Loaded:
    """Read uploaded bytes with :func:`odcore.data.traces.load_traces`.

    Raises
    ------
    TraceFormatError
        The file cannot be read; the message names the file (and row/column when known) and what is expected.
    """
    if not data:
        raise TraceFormatError("the file is empty; upload a CSV, Parquet, JSON or zip file of traces.", file=name)
    # With tz "auto" the loader names the zone (the format's, the file's, or the one at the data's centre) and
    # focuses on the densest region of a set wider than a city, as `python -m odcore --tz auto --region auto` does.
    bbox = None if options.bbox.strip().lower() in ("", "none", "off") else options.bbox
    region = options.region.strip() or "auto"
    t = load_traces(io.BytesIO(data), format=options.format, mapping=options.mapping_dict(), tz=options.tz,
                    time_offset_s=options.time_offset_s, name=name, bbox=bbox, region=region)
    return Loaded(t.df, _summary_of(t), upload_cli(name, t.report.format, t.report.tz or "UTC", options))


def upload_load_options(options: UploadOptions) -> dict:
    """The :func:`odcore.data.traces.load_traces` options :func:`read_upload` reads an upload with (but the format,
    the column mapping and the file name)."""
    bbox = None if options.bbox.strip().lower() in ("", "none", "off") else options.bbox
    return {"tz": options.tz, "time_offset_s": options.time_offset_s, "bbox": bbox,
            "region": options.region.strip() or "auto"}


def upload_cli(name: str, fmt: str, tz: str, options: UploadOptions) -> dict:
    """The ``python -m odcore`` loader flags that read an upload as :func:`read_upload` reads it."""
    lo = upload_load_options(options)
    cli = {"input": name, "format": fmt, "tz": tz, "time_offset": float(options.time_offset_s),
           "bbox": options.bbox if lo["bbox"] is not None else "none", "region": lo["region"]}
    for role, column in (options.mapping_dict() or {}).items():  # same flags as `python -m odcore --user-col ...`
        cli["time_unit" if role == "time_unit" else f"{role}_col"] = column
    return cli


@dataclass(frozen=True)
class StreamedCabs:
    """A Cabspotting upload kept as its cab files in the session folder and streamed by the memory engine
    (:mod:`odcore.od.engines.cab_stream`) for each zone system, never loaded whole for the weekly counts."""

    folder: str
    name: str
    options: tuple[tuple[str, object], ...]   # upload_load_options, as a hashable key
    fingerprint: str = ""                     # trace_fingerprint of the loader's table of these fixes

    @property
    def load_options(self) -> dict:
        return dict(self.options)

    @property
    def keep_dir(self) -> str:
        """Where the streamed engine keeps the parsed fixes between passes (``keep_dir``: another zone system
        reads them instead of parsing the cab files again)."""
        return str(Path(self.folder) / ".fixes")

    def first_od(self, od_config):
        """The weekly OD data the upload's own pass built (:func:`stream_upload`: the default zones, every pair and
        the fixes per zone, as :func:`odapp.data.cache.streamed_od` builds them) when ``od_config`` is its config; else
        None. The sidebar's first request after an upload then costs no second pass over the fixes."""
        try:
            with open(first_od_path(Path(self.folder)), "rb") as fh:
                config, od = pickle.load(fh)
        except (OSError, pickle.UnpicklingError, EOFError):
            return None
        return od if config == od_config else None


FIRST_OD = ".first_od.pkl"
"""The upload pass's OD data beside a Cabspotting upload's folder (written by the server, read by it)."""


def first_od_path(folder: Path) -> Path:
    """Where :func:`stream_upload` keeps the upload pass's OD data: beside the unpacked folder in the session's
    private folder, never inside it, so no file of the upload can take its place."""
    return folder.with_name(folder.name + FIRST_OD)


class StreamedLoaded:
    """:class:`Loaded` of a streamed Cabspotting upload: the loader's summary and flags without the table; ``df``
    is read (``load``, through the app's cache) only when a page needs every fix (Knock Knock series, the zone
    comparison)."""

    def __init__(self, cabs: StreamedCabs, summary: dict, cli: dict, load: Callable[[], pd.DataFrame]):
        self.cabs, self.summary, self.cli, self._load = cabs, summary, cli, load

    @property
    def tz(self) -> str:
        return self.cli.get("tz", "UTC")

    @property
    def df(self) -> pd.DataFrame:
        return self._load()


def stream_upload(state: MutableMapping, data: bytes, name: str, options: UploadOptions,
                  ref: DatasetRef) -> StoredUpload | None:
    """A Cabspotting upload (a zip of cab files, or one cab file) unpacked into the session folder and streamed
    once for its load report (:func:`odcore.od.engines.cab_stream.stream_cabspotting`: the same report, summary and
    fingerprint as :func:`read_upload`); None for any other upload (or a cab file given another format)."""
    if options.format not in ("auto", "cabspotting") or not data:
        return None
    folder = session_folder(state) / f"cabs_{ref.id.replace(':', '_')}"
    if not folder.is_dir():
        tmp = folder.with_name(folder.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        if not unpack_cabspotting(io.BytesIO(data), tmp, name=name, format=options.format):
            return None
        tmp.replace(folder)
    lo = upload_load_options(options)
    try:
        # the pass that reads the report also builds the default zones' tables, as the sidebar asks for them
        traces, od = stream_cabspotting(folder, name=Path(name).name, keep_pairs=True, fingerprint=True,
                                        cell_points=True, keep_dir=folder / ".fixes", **lo)
    except ODCoreError:
        shutil.rmtree(folder, ignore_errors=True)
        raise
    kept = first_od_path(folder)
    try:
        tmp = kept.with_name(kept.name + ".tmp")
        with open(tmp, "wb") as fh:
            pickle.dump((od.config, od), fh, protocol=pickle.HIGHEST_PROTOCOL)
        tmp.replace(kept)
    except OSError:   # not kept: the sidebar's request runs the pass again
        kept.unlink(missing_ok=True)
    del od
    cabs = StreamedCabs(str(folder), Path(name).name, tuple(sorted(lo.items())), traces.fingerprint or "")
    return StoredUpload(str(folder), traces.summary(), upload_cli(name, "cabspotting", traces.report.tz, options),
                        cabs)


K_SESSION_UID = "odlab.session_uid"    # a random id of this session (its place in the upload queue)
K_UPLOAD_DIR = "odlab.upload_dir"       # the path of this session's private folder (odapp.data.private)


@dataclass(frozen=True)
class StoredUpload:
    """The last good upload of a session, kept once: its traces as Parquet in the session's temporary folder.

    Session state holds only this handle (a path and the small summary); the table is read back through one
    bounded server-wide cache (:func:`odapp.data.cache.upload_traces`), so an upload costs one copy in memory however
    many widgets, pages and reruns use it, and none once it falls out of the cache.
    """

    path: str
    summary: dict
    cli: dict = field(default_factory=dict)
    cabs: StreamedCabs | None = None
    """A Cabspotting upload: its cab files (``path`` is their folder), streamed rather than loaded."""

    def load(self) -> Loaded:
        """The traces (read from the Parquet file; a Cabspotting upload's by the loader, from its folder)."""
        if self.cabs is not None:
            t = load_traces(self.cabs.folder, format="cabspotting", **self.cabs.load_options)
            return Loaded(t.df, self.summary, self.cli)
        return Loaded(pd.read_parquet(self.path), self.summary, self.cli)


def session_folder(state: MutableMapping) -> Path:
    """This session's private folder (0700, inside the server's: :mod:`odapp.data.private`), created on first use. The app
    names it at each run (:func:`odapp.data.cache.session_files`, removed when the browser's connection closes); a
    session without one (a test's state) gets a new one, removed by the sweeper or when the process exits."""
    d = state.get(K_UPLOAD_DIR)
    if not d or not Path(str(d)).is_dir():
        d = str(private.new_session_folder())
        state[K_UPLOAD_DIR] = d
    private.touch(Path(d))
    return Path(d)


COUNTS_ZIP_MAX_BYTES = 2 << 30


"""Most bytes an uploaded counts folder may unpack to."""


def unpack_counts_zip(state: MutableMapping, data: bytes, name: str) -> str:
    """An uploaded zip of a folder written by ``trips --counts-out``, unpacked into the session's private folder;
    returns the folder holding its manifest. Raises :class:`~odcore.errors.TraceFormatError` naming the file when
    it is not a zip, a member points outside it (zip slip), it unpacks to more than
    :data:`COUNTS_ZIP_MAX_BYTES`, or it holds no counts folder."""
    folder = session_folder(state)
    target = folder / f"counts_{hashlib.sha256(data).hexdigest()[:16]}"
    if not target.is_dir():
        tmp = target.with_name(target.name + ".tmp")
        shutil.rmtree(tmp, ignore_errors=True)
        try:
            with zipfile.ZipFile(io.BytesIO(data)) as z:
                infos = [i for i in z.infolist() if not i.is_dir()]
                for i in infos:
                    check_member_name(i.filename, name)
                if sum(i.file_size for i in infos) > COUNTS_ZIP_MAX_BYTES:
                    raise TraceFormatError(f"unpacks to more than {COUNTS_ZIP_MAX_BYTES >> 30} GiB; upload a "
                                           "smaller counts folder.", file=name)
                z.extractall(tmp, members=infos)
        except zipfile.BadZipFile:
            shutil.rmtree(tmp, ignore_errors=True)
            raise TraceFormatError("is not a zip file: upload the counts folder as a zip.", file=name) from None
        except BaseException:
            shutil.rmtree(tmp, ignore_errors=True)
            raise
        for old in folder.glob("counts_*"):      # the session's earlier counts upload
            if old != tmp:
                shutil.rmtree(old, ignore_errors=True)
        tmp.replace(target)
    found = sorted(m.parent for m in target.rglob(MANIFEST) if is_counts_folder(m.parent))
    if not found:
        shutil.rmtree(target, ignore_errors=True)
        raise TraceFormatError("holds no OD counts folder (a manifest.json written by `python -m odcore trips "
                               "--counts-out DIR`).", file=name)
    return str(found[0])


def store_upload(state: MutableMapping, loaded: Loaded, ref: DatasetRef) -> StoredUpload:
    """Write the traces once as Parquet in the session folder (replacing the previous upload's file)."""
    folder = session_folder(state)
    path = folder / f"{ref.id.replace(':', '_')}.parquet"
    forget_uploads(folder, keep=path)
    if not path.is_file():
        tmp = path.with_suffix(".tmp")
        loaded.df.to_parquet(tmp, index=False)
        tmp.replace(path)
    return StoredUpload(str(path), loaded.summary, loaded.cli)


def forget_uploads(folder: Path, keep: Path) -> None:
    """Remove the session folder's earlier uploads (Parquet files and unpacked cab folders) but ``keep``."""
    for old in folder.iterdir():
        if old == keep:
            continue
        if old.suffix == ".parquet":
            old.unlink(missing_ok=True)
        elif old.is_dir() and old.name.startswith("cabs_"):
            shutil.rmtree(old, ignore_errors=True)


def apply_upload(state: MutableMapping, data: bytes, name: str, options: UploadOptions = UploadOptions(), *,
                 on_wait: Callable[[int], None] | None = None, queue: ParseQueue | None = None) -> bool:
    """Load an upload into ``state``; on failure keep the previous data and store the error message.

    The file is read and stored through ``queue`` (default :data:`UPLOAD_QUEUE`, one upload at a time server-wide);
    ``on_wait(n)`` is called while ``n`` uploads are ahead. Returns ``True`` when the upload became the data in
    use (``state[K_UPLOAD_TRACES]`` is then a :class:`StoredUpload`). The message in ``state[K_UPLOAD_ERROR]`` says
    what is wrong and how to fix it; the sidebar and the main area show it with ``st.error``.
    """
    ref = upload_ref(data, name, options)
    session = state.setdefault(K_SESSION_UID, uuid.uuid4().hex)
    with (queue or UPLOAD_QUEUE).slot(on_wait, key=(session, ref.id)):
        try:
            stored = stream_upload(state, data, name, options, ref)   # a Cabspotting upload: streamed
            if stored is None:
                loaded = read_upload(data, name, options)
        except ODCoreError as exc:
            state[K_UPLOAD_ERROR] = (f"Could not read {name!r}: {exc} — check the format and the column mapping "
                                     "below (user, time, lat, lon); the previous data stays loaded.")
            return False
        if stored is None:
            stored = store_upload(state, loaded, ref)
            del loaded
        else:
            forget_uploads(session_folder(state), keep=Path(stored.path))
    state[K_UPLOAD_TRACES] = stored
    state[K_DATASET] = ref
    state[K_SOURCE] = DataSource.UPLOAD.value
    state.pop(K_UPLOAD_ERROR, None)
    return True


def grid_check(loaded: Loaded, cell_km2: float) -> str | None:
    """The warning of :func:`odcore.data.validate.check_grid_size` for the loaded points (raises over the limit)."""
    summary = loaded.summary
    if summary.get("lat_range") and summary.get("lon_range"):
        lat, lon = summary["lat_range"], summary["lon_range"]
    else:
        lat, lon = loaded.df["lat"].to_numpy(), loaded.df["lon"].to_numpy()
    _, warning = check_grid_size(lat, lon, cell_km2, what="grid cell area")
    return warning
