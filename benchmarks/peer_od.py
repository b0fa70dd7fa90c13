"""The peer: Cabspotting raw files -> weekly distinct-user OD in one plain DuckDB SQL query, and the engines on the
same grid, so their tables can be compared row for row.

The query (:data:`PEER_SQL`) is what a data engineer would write: ``read_csv`` over the gzipped cab files (the cab id
from the file name), a fixed city box, a grid in degrees, hour = Unix time // 3600, winner takes all per cab-hour
(ties to the lower cell), a trip to another cell in the next hour, distinct cabs per (week, origin, destination) with
the week of the origin hour's local Monday. Its rules are the engines' (Houssiau et al. 2022, Methods; the hour and
week rules of :mod:`odcore.od.hours`): hours of UTC and of a zone with whole-hour offsets start at the same instants
(America/Los_Angeles), exact duplicate fixes are dropped, and the grid is :class:`DegreeGrid`, a zone object the
engines take as ``grid=`` (its cell of a point is the same floating-point arithmetic as the SQL's).

Command line (each run is one process, so the scale benchmark measures its wall time and peak memory)::

    python -m benchmarks.peer_od peer   --input /work/shared/data/cabspotting_sf --out peer.parquet [--no-dedupe]
    python -m benchmarks.peer_od memory --input /work/shared/data/cabspotting_sf --out memory.parquet [--workers 2]
    python -m benchmarks.peer_od memory-processes --input ... --out memory-processes.parquet
    python -m benchmarks.peer_od memory-loaded --input ... --out memory-loaded.parquet
    python -m benchmarks.peer_od duckdb --input ... --out duckdb.parquet

A folder of trace Parquet files (``python -m odcore synth --out DIR``) is read by :data:`PEER_SQL_PARQUET` on the
synthetic city's fixed box (:data:`SYNTH_BOX`, UTC); ``peer``, ``memory`` and ``duckdb`` take it as ``--input``.

The Cabspotting folder as one Parquet file of generic column names (:data:`CAB_PARQUET_MAPPING`: ``vehicle, ts,
lat_deg, lon_deg``; 10,006,896 fixes, sorted by cab and time, as an operator's export would be) is written by
``make-cab-parquet``; ``peer``, ``memory`` and ``duckdb`` read it with that column mapping on the Cabspotting box
and grid (``--place cabspotting``), and ``floor`` is the read-and-sort floor (DuckDB reads the four columns and
sorts them by user and time; the rows are handed over and dropped)::

    python -m benchmarks.peer_od make-cab-parquet --input /work/shared/data/cabspotting_sf --out /tmp/cabs.parquet
    python -m benchmarks.peer_od peer --input /tmp/cabs.parquet --place cabspotting --out peer.parquet
    python -m benchmarks.peer_od floor --input /tmp/cabs.parquet --place cabspotting

Every run writes the table ``week_start, origin, destination, count`` sorted by those columns.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

CABSPOTTING_BOX = (37.4545, -122.57035, 37.9249, -122.12845)
"""South, west, north, east of the San Francisco area: the robust box (``bbox="auto"``) the loader finds for the
534-cab Cabspotting folder (it clips the GPS glitches at latitudes 33 and 50)."""
CABSPOTTING_TZ = "America/Los_Angeles"
SYNTH_BOX = (33.5232, -84.6598, 33.9748, -84.1162)
"""South, west, north, east of the synthetic city (``odcore synth``'s default centre, Atlanta, and extent): its
points are clipped to 1.2 x 20 km from the centre, so this box of +-25 km (0.2258 deg of latitude, 0.2718 deg of
longitude at 33.749 N) holds every one of them."""
SYNTH_TZ = "UTC"
CELL_KM2 = 1.3
EARTH_RADIUS_M = 6_371_008.8
COLUMNS = ["week_start", "origin", "destination", "count"]


@dataclass(frozen=True)
class DegreeGrid:
    """Cells of ``dlat`` x ``dlon`` degrees from the south-west corner of a box: the grid of :data:`PEER_SQL`.

    Cell id ``row * n_cols + col`` with ``row = floor((lat - south) / dlat)``, ``col = floor((lon - west) / dlon)``;
    -1 outside. The zone interface of :mod:`odcore.space.zones` the engines need (``assign``, ``n_cells``,
    ``outside_reason``).
    """

    south: float
    west: float
    dlat: float
    dlon: float
    n_rows: int
    n_cols: int
    kind = "degrees"
    outside_reason = "outside_grid"

    @classmethod
    def of_box(cls, box: tuple[float, float, float, float], cell_km2: float = CELL_KM2) -> DegreeGrid:
        """Cells of about ``cell_km2`` km² at the box's middle latitude, covering the box (edges included)."""
        s, w, n, e = box
        side = math.sqrt(cell_km2) * 1000.0
        dlat = math.degrees(side / EARTH_RADIUS_M)
        dlon = dlat / math.cos(math.radians((s + n) / 2))
        return cls(s, w, dlat, dlon, math.floor((n - s) / dlat) + 1, math.floor((e - w) / dlon) + 1)

    @property
    def n_cells(self) -> int:
        return self.n_rows * self.n_cols

    def assign(self, lat, lon) -> np.ndarray:
        r = np.floor((np.asarray(lat, np.float64) - self.south) / self.dlat)
        c = np.floor((np.asarray(lon, np.float64) - self.west) / self.dlon)
        with np.errstate(invalid="ignore"):
            ok = (r >= 0) & (r < self.n_rows) & (c >= 0) & (c < self.n_cols)
        out = np.where(ok, r, 0).astype(np.int64) * self.n_cols + np.where(ok, c, 0).astype(np.int64)
        out[~ok] = -1
        return out


_FIXES_CAB = """
WITH fixes AS (                         -- one row per GPS fix; exact duplicate fixes once (DISTINCT)
    SELECT DISTINCT regexp_extract(filename, 'new_([^/]*?)\\.txt', 1) AS cab, t, lat, lon
    FROM read_csv($files, delim = ' ', header = false, auto_detect = false, filename = true,
                  columns = {'lat': 'DOUBLE', 'lon': 'DOUBLE', 'occupancy': 'TINYINT', 't': 'BIGINT'})
    WHERE lat BETWEEN $south AND $north AND lon BETWEEN $west AND $east
),"""

_FIXES_PARQUET = """
WITH fixes AS (                         -- one row per fix of the trace Parquet files (user, time, lat, lon)
    SELECT "{user}" AS cab, epoch_ms("{time}") // 1000 AS t, "{lat}" AS lat, "{lon}" AS lon
    FROM read_parquet($files)
    WHERE "{lat}" BETWEEN $south AND $north AND "{lon}" BETWEEN $west AND $east
),"""
NAMES = {"user": "user", "time": "time", "lat": "lat", "lon": "lon"}
CAB_PARQUET_MAPPING = {"user": "vehicle", "time": "ts", "lat": "lat_deg", "lon": "lon_deg"}
"""Column names of the Cabspotting Parquet file (:func:`write_cab_parquet`): none of them is a name the loader
recognises by itself, so every reader is given this mapping."""

_REST = """
cells AS (                              -- hour and grid cell of each fix
    SELECT cab, t // 3600 AS hour,
           CAST(floor((lat - $south) / $dlat) AS BIGINT) * $n_cols
             + CAST(floor((lon - $west) / $dlon) AS BIGINT) AS cell
    FROM fixes
),
winners AS (                            -- the most used cell of each cab-hour, ties to the lower cell
    SELECT cab, hour, cell
    FROM (SELECT cab, hour, cell, count(*) AS n FROM cells GROUP BY ALL)
    QUALIFY row_number() OVER (PARTITION BY cab, hour ORDER BY n DESC, cell) = 1
),
trips AS (                              -- a move to another cell in the next hour, in the origin hour's week
    SELECT cab, hour, cell AS origin,
           lead(cell) OVER w AS destination, lead(hour) OVER w AS next_hour
    FROM winners
    WINDOW w AS (PARTITION BY cab ORDER BY hour)
)
SELECT CAST(date_trunc('week', timezone($tz, to_timestamp(hour * 3600))) AS DATE) AS week_start,
       origin, destination, count(DISTINCT cab) AS count
FROM trips
WHERE next_hour = hour + 1 AND destination <> origin
GROUP BY ALL
ORDER BY ALL
"""
PEER_SQL = _FIXES_CAB + _REST

PEER_SQL_PARQUET = _FIXES_PARQUET.format(**NAMES) + _REST
"""The same query on trace Parquet files (a ``synth --out`` folder): the user column as the cab, Unix seconds of
the timestamp. No DISTINCT of the fixes: the synthetic city has one fix per user-hour at most, and the
Cabspotting file none twice (the engines find no duplicate row in either)."""


def peer_sql_parquet(mapping: dict[str, str] | None = None) -> str:
    """:data:`PEER_SQL_PARQUET` on files whose columns are named by ``mapping`` (``user, time, lat, lon`` keys)."""
    return _FIXES_PARQUET.format(**{**NAMES, **(mapping or {})}) + _REST


def write_cab_parquet(folder: str | Path, out: str | Path, mapping: dict[str, str] = CAB_PARQUET_MAPPING) -> int:
    """The cab files of ``folder`` as one Parquet file ``out`` (user id from the file name, time as a UTC
    timestamp, lat, lon; columns named by ``mapping``), sorted by user and time; returns its rows."""
    import duckdb

    m = {**NAMES, **mapping}
    con = duckdb.connect()
    con.execute("SET enable_progress_bar = false")
    tmp = Path(str(out) + ".tmp")
    con.execute(f"""COPY (SELECT regexp_extract(filename, 'new_([^/]*?)\\.txt', 1) AS "{m['user']}",
                        to_timestamp(t) AS "{m['time']}", lat AS "{m['lat']}", lon AS "{m['lon']}"
                   FROM read_csv($files, delim = ' ', header = false, auto_detect = false, filename = true,
                                 columns = {{'lat': 'DOUBLE', 'lon': 'DOUBLE', 'occupancy': 'TINYINT', 't': 'BIGINT'}})
                   ORDER BY 1, 2) TO '{tmp}' (FORMAT parquet)""", {"files": cab_files(folder)})
    tmp.replace(out)
    return int(con.execute(f"SELECT count(*) FROM read_parquet('{out}')").fetchall()[0][0])


def floor_rows(files: list[str], mapping: dict[str, str] | None = None, batch_rows: int = 1_000_000) -> int:
    """The read-and-sort floor: DuckDB reads the four columns of ``files`` and sorts them by user and time; the
    sorted rows come to Python in Arrow batches, which are dropped. Returns the rows."""
    import duckdb

    m = {**NAMES, **(mapping or {})}
    con = duckdb.connect()
    con.execute("SET enable_progress_bar = false")
    listed = "[" + ", ".join("'" + f.replace("'", "''") + "'" for f in files) + "]"
    reader = con.sql(f'SELECT "{m["user"]}", epoch_ms("{m["time"]}") // 1000 AS t, "{m["lat"]}", "{m["lon"]}" '
                     f"FROM read_parquet({listed}) ORDER BY 1, 2").to_arrow_reader(batch_rows)
    return sum(b.num_rows for b in reader)


PEER_SQL_NO_DEDUPE = PEER_SQL.replace("SELECT DISTINCT regexp_extract", "SELECT regexp_extract", 1)
"""The query without the DISTINCT of the fixes: the same table when no cab has two identical fixes (the loader reports
none in the Cabspotting folder), in about two thirds of the CPU time and a third of the memory."""


def cab_files(folder: str | Path) -> list[str]:
    return sorted(str(p) for p in Path(folder).glob("new_*.txt*"))


def parquet_files(folder: str | Path) -> list[str]:
    if Path(folder).is_file():
        return [str(folder)]
    return sorted(str(p) for p in Path(folder).glob("*.parquet"))


def is_parquet_folder(folder: str | Path) -> bool:
    """A trace Parquet file, or a folder of them (``odcore synth --out``), rather than cab files."""
    if Path(folder).is_file():
        return str(folder).lower().endswith(".parquet")
    return bool(parquet_files(folder)) and not cab_files(folder)


PLACES = {"synth": (SYNTH_BOX, SYNTH_TZ, None), "cabspotting": (CABSPOTTING_BOX, CABSPOTTING_TZ, CAB_PARQUET_MAPPING)}
"""Box, time zone and column mapping of a Parquet input (``--place``)."""


def peer_params(files: list[str], grid: DegreeGrid, box=CABSPOTTING_BOX, tz: str = CABSPOTTING_TZ) -> dict:
    s, w, n, e = box
    return {"files": files, "south": s, "west": w, "north": n, "east": e, "dlat": grid.dlat, "dlon": grid.dlon,
            "n_cols": grid.n_cols, "tz": tz}


def peer_table(files: list[str], grid: DegreeGrid, *, box=CABSPOTTING_BOX, tz: str = CABSPOTTING_TZ,
               threads: int | None = None, dedupe: bool = True, parquet: bool = False,
               mapping: dict[str, str] | None = None):
    """:data:`PEER_SQL` (``dedupe=False``: :data:`PEER_SQL_NO_DEDUPE`; ``parquet``: :data:`PEER_SQL_PARQUET`, its
    columns named by ``mapping``) on ``files`` -> pandas ``week_start, origin, destination, count``."""
    import duckdb

    con = duckdb.connect()
    if threads:
        con.execute(f"SET threads = {int(threads)}")
    sql = peer_sql_parquet(mapping) if parquet else PEER_SQL if dedupe else PEER_SQL_NO_DEDUPE
    df = con.execute(sql, peer_params(files, grid, box, tz)).df()
    df["week_start"] = df["week_start"].astype(str)
    return df[COLUMNS].astype({"origin": np.int64, "destination": np.int64, "count": np.int64})


def engine_table(folder: str | Path, grid: DegreeGrid, engine: str, *, box=CABSPOTTING_BOX,
                 tz: str = CABSPOTTING_TZ, workers: int | None = None, group_bytes: int | None = None,
                 pool: str = "threads", mapping: dict[str, str] | None = None):
    """``engine`` on the same box and grid -> the table of :func:`peer_table`.

    ``memory`` streams the folder in groups of cab files on ``workers`` threads (``memory-processes``: worker
    processes; :func:`odcore.od.engines.cab_stream.build_od_cabspotting`); ``memory-loaded`` loads the whole folder first
    (:func:`odcore.data.traces.load_traces`) and runs the memory engine on the table; ``duckdb`` takes the loaded
    table too. A folder of trace Parquet files (:func:`is_parquet_folder`) is streamed by the engine itself
    (``memory``: :func:`odcore.od.engines.memory_stream.build_od_memory_stream`; ``duckdb``: its own scan), with
    the box as a fixed ``bbox`` filter and ``mapping`` as the column mapping)."""
    from odcore.od.trips import ODConfig

    if is_parquet_folder(folder):
        from odcore.od.engines import build_od, file_source

        opts = {"workers": workers} if workers and engine == "memory" else {}
        od = build_od(file_source(folder, bbox=box, tz=tz, mapping=mapping), ODConfig(tz=tz), grid=grid,
                      engine=engine, keep_pairs=False, **opts)
    elif engine in ("memory", "memory-processes"):
        from odcore.od.engines.cab_stream import GROUP_BYTES, build_od_cabspotting

        od = build_od_cabspotting(folder, ODConfig(tz=tz), grid=grid, bbox=box, keep_pairs=False, workers=workers,
                                  group_bytes=group_bytes or GROUP_BYTES,
                                  pool="processes" if engine == "memory-processes" else pool)
    else:
        from odcore.data.traces import load_traces
        from odcore.od.engines import build_od

        tr = load_traces(folder, format="cabspotting", bbox=box, tz=tz)
        od = build_od(tr, ODConfig(tz=tz), grid=grid, engine=engine.removesuffix("-loaded"), keep_pairs=False)
    c = od.counts
    starts = np.asarray(od.week_starts)
    df = c.assign(week_start=starts[c["week"].to_numpy()])[COLUMNS]
    df = df.sort_values(COLUMNS[:3], kind="stable").reset_index(drop=True)
    return df.astype({"origin": np.int64, "destination": np.int64, "count": np.int64})


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.peer_od", description=__doc__.split("\n\n")[0])
    ap.add_argument("who", choices=["peer", "memory", "memory-processes", "memory-loaded", "duckdb", "floor",
                                    "make-cab-parquet"])
    ap.add_argument("--input", required=True, help="Cabspotting folder (new_<cab>.txt[.gz] files), a trace "
                    "Parquet file or a folder of them (odcore synth --out)")
    ap.add_argument("--place", choices=sorted(PLACES), default="synth",
                    help="a Parquet input's box, time zone and column mapping (default: %(default)s)")
    ap.add_argument("--out", default=None, help="write the table here (.parquet)")
    ap.add_argument("--no-dedupe", action="store_true", help="peer: the query without DISTINCT of the fixes")
    ap.add_argument("--workers", type=int, default=None, help="memory: worker threads or processes (default 2)")
    a = ap.parse_args(argv)
    t0 = time.perf_counter()
    if a.who == "make-cab-parquet":
        if not a.out:
            ap.error("make-cab-parquet needs --out FILE.parquet")
        rows = write_cab_parquet(a.input, a.out)
        print(json.dumps({"who": a.who, "rows": rows, "out": a.out, "seconds": round(time.perf_counter() - t0, 3)}))
        return 0
    if is_parquet_folder(a.input):
        if a.who not in ("peer", "memory", "duckdb", "floor"):
            ap.error(f"{a.who} reads Cabspotting folders only")
        box, tz, mapping = PLACES[a.place]
        grid = DegreeGrid.of_box(box)
        if a.who == "floor":
            rows = floor_rows(parquet_files(a.input), mapping)
            print(json.dumps({"who": a.who, "rows": rows, "seconds": round(time.perf_counter() - t0, 3),
                              "cpus": os.cpu_count()}))
            return 0
        if a.who == "peer":
            df = peer_table(parquet_files(a.input), grid, box=box, tz=tz, parquet=True, mapping=mapping)
        else:
            df = engine_table(a.input, grid, a.who, box=box, tz=tz, workers=a.workers, mapping=mapping)
    else:
        if a.who == "floor":
            ap.error("floor reads Parquet inputs only")
        grid = DegreeGrid.of_box(CABSPOTTING_BOX)
        if a.who == "peer":
            df = peer_table(cab_files(a.input), grid, dedupe=not a.no_dedupe)
        else:
            df = engine_table(a.input, grid, a.who, workers=a.workers)
    wall = time.perf_counter() - t0
    if a.out:
        df.to_parquet(a.out, index=False)
    print(json.dumps({"who": a.who, "rows": len(df), "sum_count": int(df["count"].sum()), "seconds": round(wall, 3),
                      "cpus": os.cpu_count()}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
