"""The trace -> weekly OD step on Apache Spark (local mode here, ``spark-submit`` on a cluster).

- Rows are read by Spark (``spark.read.parquet`` / ``csv``: local paths here, any Hadoop-compatible URI on a
  cluster) or created from an in-memory table.
- One Arrow UDF (``mapInPandas``) applies the shared per-row definitions on every executor: the loader's filters,
  the zone object's ``assign`` (pickled to the executors) and the local hour slot
  (:mod:`odcore.od.kernel`). Dropped rows keep a reason code so they are counted, never lost silently.
- The rest is Spark SQL: duplicate removal (file sources), winner takes all per user-hour with ``max_by(cell,
  struct(n, -cell))`` (ties to the lower cell id), trips with ``lead()`` over each user's hours, the week of the
  origin hour from a broadcast slot -> week table, distinct pairs and the distinct-user counts.
- For the user-level release (``bound`` without ``keep_pairs``) the per-person bounding runs in Spark SQL too, and the
  driver receives aggregates only: per-pair counts, the user-weeks by (week, trips, unique_trips), totals.
"""

from __future__ import annotations

import os
import sys
from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from odcore.constants import LAT, LON, TIME, USER
from odcore.data.fingerprint import LANE_KEYS, TraceFingerprint, row_hashes
from odcore.data.traces import DROP_DUPLICATE, BBox, RobustBoxCounts, resolve_mapping
from odcore.errors import ParameterError, TraceFormatError
from odcore.od import kernel as K
from odcore.od.bounding import bounded_counts_sql
from odcore.od.engines.duckdb_engine import bounded_stats
from odcore.od.engines.duckdb_engine import trace_filters as f
from odcore.od.engines.sources import FileSource
from odcore.paths import REPO_ROOT

__all__ = ["SMALL_JOB_JAVA_OPTIONS", "build_od_spark", "spark_session"]

SMALL_JOB_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
"""JVM flags for many small jobs (the tests' tables of a few thousand rows): the quick compiler only and one GC
thread. A short job spends most of its CPU compiling; on big inputs leave the JVM's defaults."""


def spark_session(master: str = "local[2]", driver_memory: str = "2g", shuffle_partitions: int | None = None,
                  java_options: str | None = None):
    """The active SparkSession, or a new one (local mode by default; 127.0.0.1, no UI).

    ``java_options`` go to the driver's JVM when this call starts it (``spark.driver.extraJavaOptions``; in local
    mode the driver runs the tasks too), e.g. ``SMALL_JOB_JAVA_OPTIONS`` for many small jobs. On a cluster,
    ``spark-submit`` has already created the session and its settings win.
    """
    from pyspark.sql import SparkSession

    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    # Python workers (local mode): this interpreter (its packages) and this checkout of odcore. Under spark-submit
    # the cluster's settings (spark.pyspark.python, --archives, --py-files) decide.
    if "PYSPARK_GATEWAY_PORT" not in os.environ:
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ["PYTHONPATH"] = os.pathsep.join(
            p for p in (str(REPO_ROOT), os.environ.get("PYTHONPATH", "")) if p)
    b = SparkSession.builder.appName("odcore-od")
    if "PYSPARK_GATEWAY_PORT" not in os.environ:   # not under spark-submit: our local master and driver memory
        b = b.master(master).config("spark.driver.memory", driver_memory)
    b = (b.config("spark.sql.execution.arrow.pyspark.enabled", "true")
         .config("spark.ui.enabled", "false")
         .config("spark.driver.host", "127.0.0.1")
         .config("spark.driver.bindAddress", "127.0.0.1")
         .config("spark.sql.session.timeZone", "UTC")
         .config("spark.ui.showConsoleProgress", "false")
         .config("spark.sql.execution.arrow.maxRecordsPerBatch", "200000"))
    if java_options and "PYSPARK_GATEWAY_PORT" not in os.environ:
        b = b.config("spark.driver.extraJavaOptions", java_options)
    if shuffle_partitions is not None:
        b = b.config("spark.sql.shuffle.partitions", str(shuffle_partitions))
    elif master.startswith("local"):
        b = b.config("spark.sql.shuffle.partitions", "8")
    spark = b.getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _read(spark, source):
    """(Spark DataFrame of user, time, lat, lon, time unit)."""
    from pyspark.sql import functions as F

    if not isinstance(source, FileSource):
        for col in (USER, TIME, LAT, LON):
            if col not in source.columns:
                raise TraceFormatError(f"traces miss column {col!r}; have {list(source.columns)}.", column=col)
        if len(source) == 0:
            raise TraceFormatError("no trace rows.")
        tbl = pa.table({USER: K.frame_user_array(source[USER]), TIME: K.frame_time_seconds(source[TIME]),
                        LAT: source[LAT].to_numpy(np.float64), LON: source[LON].to_numpy(np.float64)})
        n_parts = max(1, min(spark.sparkContext.defaultParallelism, len(source) // 100_000 + 1))
        return spark.createDataFrame(tbl.to_pandas()).coalesce(n_parts), "s"
    try:
        if source.format == "parquet":
            raw = spark.read.parquet(*source.paths)
        else:
            raw = spark.read.csv(list(source.paths), header=True, inferSchema=True)
    except Exception as exc:  # Spark raises AnalysisException and others for unreadable input
        raise TraceFormatError(f"Spark cannot read the input ({type(exc).__name__}: {exc}).",
                               file=source.display) from None
    mp = resolve_mapping(raw.columns, dict(source.mapping) if source.mapping else None, source.display)
    from pyspark.sql import types as T

    tcol = F.col(f"`{mp.time}`")
    unit = mp.time_unit or "auto"
    if isinstance(raw.schema[mp.time].dataType, T.TimestampType):
        # an instant: hand Python its UTC microseconds (pandas would see a naive session-time value)
        tcol, unit = F.unix_micros(tcol), "us"
    df = raw.select(F.col(f"`{mp.user}`").alias(USER), tcol.alias(TIME),
                    F.col(f"`{mp.lat}`").cast("double").alias(LAT), F.col(f"`{mp.lon}`").cast("double").alias(LON))
    return df, unit


def _spark_filters(source, tz: str, unit: str, bbox) -> K.Filters | None:
    return f(source, tz, unit, bbox)


def _prep_fn(grid, tz: str, filters: K.Filters | None, with_assign: bool):
    """The mapInPandas function: raw batches -> (user, t, lat, lon, slot, cell, drop reason code)."""

    unit_us = filters is not None and filters.time_unit == "us"
    if unit_us:
        filters = replace(filters, time_unit="auto")

    def fn(batches):
        for pdf in batches:
            st = K.PrepStats()
            user = pdf[USER]
            lat = pdf[LAT].to_numpy(np.float64)
            lon = pdf[LON].to_numpy(np.float64)
            n = len(pdf)
            reason = np.zeros(n, np.int8)
            if filters is None:
                t = pdf[TIME].to_numpy(np.int64)
                keep = np.ones(n, bool)
            else:
                tm = pdf[TIME]
                if unit_us:
                    tm = pd.to_datetime(tm, unit="us", utc=True)
                reason, t = K.filter_batch(user.to_numpy(), tm, lat, lon, filters, st)
                keep = reason == 0
            slot = np.zeros(n, np.int64)
            cell = np.full(n, -1, np.int64)
            if not with_assign:
                yield pd.DataFrame({LAT: lat[keep], LON: lon[keep]}).agg(["min", "max", "count"]).T.reset_index()
                continue
            idx = np.flatnonzero(keep)
            if idx.size:
                ok, s, c = K.assign_batch(grid, lat[idx], lon[idx], t[idx], tz, st)
                slot[idx], cell[idx] = s, c
                reason[idx[~ok]] = 4
            yield pd.DataFrame({USER: user, K.T_S: t, LAT: lat, LON: lon, K.SLOT: slot, "cell": cell,
                                "reason": reason})

    return fn


def _box_counts_fn(batches):
    """The mapInPandas function of the robust box's counts (:func:`odcore.od.kernel.sparse_box_counts`)."""
    for pdf in batches:
        yield K.sparse_box_counts(pdf[USER], pdf[TIME], pdf[LAT].to_numpy(np.float64), pdf[LON].to_numpy(np.float64))


def build_od_spark(source, config, *, grid=None, keep_pairs: bool = True, spark=None, master: str = "local[2]",
                   driver_memory: str = "2g", bound: tuple[int, int] | None = None, describe: bool = False,
                   fingerprint: bool = True,
                   aggregates_only: bool | None = None):
    """Weekly unique OD counts of ``source`` (a trace DataFrame or a :class:`FileSource`) computed by Spark.

    Same parameters and result as :func:`odcore.od.engines.duckdb_engine.build_od_duckdb`; ``spark`` is a
    SparkSession (default: the active one, or a local one with ``master`` and ``driver_memory``). ``bound``
    (``(max_pairs, key)``): the per-person bounded counts in Spark SQL (:mod:`odcore.od.bounding`).

    With ``bound`` and ``keep_pairs=False`` (the user-level release) no per-person table reaches the driver, only
    tables whose size does not grow with the number of people: per-pair counts and bounded counts, counts of rows
    per drop reason and per cell, the user-weeks by (week, trips, unique_trips) and the number of people. The
    result then holds aggregates only (``ODData.per_user`` False; :data:`odcore.od.kernel.AGGREGATES_ONLY_REASON`).

    ``aggregates_only``: the driver receives aggregates only, as above (default: with ``bound`` and not
    ``keep_pairs``); ``True`` with ``keep_pairs=False`` and no ``bound`` serves the per-metric release from the
    counts, ``stats["pair_users"]`` the people with at least one pair.

    ``describe`` (a :class:`FileSource`): also what :func:`odcore.data.traces.load_traces` would report of the
    fixes it keeps (after the filters, exact duplicates once, zones not applied), computed by Spark:
    ``stats["traces"]`` (rows, users, first and last time, latitude and longitude range, rows outside the zones),
    ``stats["loader_drops"]`` (rows dropped by reason, duplicates included) and ``stats["fingerprint"]``
    (:func:`odcore.data.fingerprint.trace_fingerprint` of that table, its rows hashed on the executors). Two more
    Spark jobs; one row each reaches the driver.
    """
    from pyspark.sql import types as T

    spark = spark or spark_session(master, driver_memory)
    tz = config.tz
    raw, unit = _read(spark, source)
    bbox = None
    if isinstance(source, FileSource) and source.bbox is not None:
        if isinstance(source.bbox, str) and source.bbox.strip().lower() == "auto":
            parts = (raw.mapInPandas(_box_counts_fn, "axis byte, band long, n long")
                     .groupBy("axis", "band").sum("n").toPandas())
            counts = RobustBoxCounts()
            counts.add_sparse(parts["axis"].to_numpy(), parts["band"].to_numpy(), parts["sum(n)"].to_numpy())
            bbox = K.robust_bbox(counts, source.display)
        else:
            bbox = BBox.parse(source.bbox).as_tuple()
    filters = _spark_filters(source, tz, unit, bbox)
    if grid is None:   # grid from a streaming min/max pass over the kept rows
        if filters is None:
            b = K.Bounds()
            b.update(source[LAT].to_numpy(np.float64), source[LON].to_numpy(np.float64))
        else:
            schema = "index string, min double, max double, count double"
            parts = raw.mapInPandas(_prep_fn(None, tz, filters, False), schema).toPandas()
            b = K.Bounds()
            la = parts[(parts["index"] == LAT) & (parts["count"] > 0)]
            lo = parts[(parts["index"] == LON) & (parts["count"] > 0)]
            if len(la):
                b.update(np.array([la["min"].min(), la["max"].max()]), np.array([lo["min"].min(), lo["max"].max()]))
                b.n = int(la["count"].sum())
        grid = K.fit_zones(b, config)
    utype = raw.schema[USER].dataType
    out_schema = T.StructType([T.StructField(USER, utype), T.StructField(K.T_S, T.LongType()),
                               T.StructField(LAT, T.DoubleType()), T.StructField(LON, T.DoubleType()),
                               T.StructField(K.SLOT, T.LongType()), T.StructField("cell", T.LongType()),
                               T.StructField("reason", T.ByteType())])
    rows = raw.mapInPandas(_prep_fn(grid, tz, filters, True), out_schema).persist()
    try:
        if aggregates_only is None:
            aggregates_only = bound is not None and not keep_pairs
        if aggregates_only and keep_pairs:
            raise ParameterError("aggregates_only=True brings no per-person table to the driver: keep_pairs must be "
                                 "False.")
        od = _stage_b(spark, source, config, grid, rows, keep_pairs, bbox, bound, aggregates_only)
        if describe and isinstance(source, FileSource):
            od = replace(od, stats={**od.stats, **describe_kept(rows, fingerprint)})
        return od
    finally:
        rows.unpersist()


def _fingerprint_fn(batches):
    """The mapInPandas function of the fingerprint: one row of lane sums (32-bit halves) per batch."""
    for pdf in batches:
        fp = TraceFingerprint()
        if len(pdf):
            fp.add(row_hashes(pdf[USER], pdf[K.T_S].to_numpy(np.int64) * 1_000_000_000, pdf[LAT], pdf[LON]))
        yield pd.DataFrame({k: [v] for k, v in fp.partial().items()})


def describe_kept(rows, fingerprint: bool = True) -> dict[str, Any]:
    """``stats["traces"]``, ``stats["loader_drops"]`` and ``stats["fingerprint"]`` of :func:`build_od_spark`'s
    ``describe``, from the prepared rows (``user, t, lat, lon, slot, cell, reason``): the loader keeps the rows of
    reason 0 (in a zone) and 4 (outside every zone: the zones drop them after loading), each distinct row once.
    ``fingerprint`` False: no fingerprint (``stats["fingerprint"]`` None; one Spark job fewer)."""
    from pyspark.sql import functions as F

    raw = rows.where(F.col("reason").isin(0, 4))
    kept = raw.select(USER, K.T_S, LAT, LON, "reason").distinct().persist()
    try:
        a = kept.agg(F.count(F.lit(1)).alias("rows"), F.countDistinct(USER).alias("users"),
                     F.sum((F.col("reason") == 4).cast("long")).alias("outside"),
                     F.min(K.T_S).alias("t_min"), F.max(K.T_S).alias("t_max"), F.min(LAT).alias("lat_min"),
                     F.max(LAT).alias("lat_max"), F.min(LON).alias("lon_min"), F.max(LON).alias("lon_max"),
                     ).collect()[0].asDict()
        cols = ["n"] + [f"l{k}_{h}" for k in range(len(LANE_KEYS)) for h in ("hi", "lo")]
        sums = (kept.select(USER, K.T_S, LAT, LON).mapInPandas(_fingerprint_fn, ", ".join(f"{c} long" for c in cols))
                .agg(*[F.sum(c).alias(c) for c in cols]).collect()[0].asDict()) if fingerprint else None
    finally:
        kept.unpersist()
    n_raw = int(raw.count()) if a["rows"] else 0
    fp = TraceFingerprint.from_halves({k: v or 0 for k, v in sums.items()}) if fingerprint else None
    iso = K.iso_second
    traces = {"rows": int(a["rows"]), "users": int(a["users"]), "outside_zones": int(a["outside"] or 0),
              "time_min": iso(a["t_min"]) if a["rows"] else None, "time_max": iso(a["t_max"]) if a["rows"] else None,
              "lat_range": [float(a["lat_min"]), float(a["lat_max"])] if a["rows"] else None,
              "lon_range": [float(a["lon_min"]), float(a["lon_max"])] if a["rows"] else None}
    drops = {DROP_DUPLICATE: n_raw - int(a["rows"])} if n_raw > a["rows"] else {}
    return {"traces": traces, "loader_drops": drops, "fingerprint": fp.hexdigest() if fp is not None else None}


def _stage_b(spark, source, config, grid, rows, keep_pairs: bool, bbox, bound=None, aggregates_only=False):
    from pyspark.sql import functions as F

    tally = rows.groupBy("reason").agg(F.count(F.lit(1)).alias("n"), F.min(K.SLOT).alias("lo"),
                                       F.max(K.SLOT).alias("hi")).toPandas()
    rows_read = int(tally["n"].sum())
    dropped: dict[str, int] = {}
    for code, n in zip(tally["reason"], tally["n"], strict=True):
        if int(code) > 0:
            name = K.DROP_CODES[int(code) - 1]
            dropped[getattr(grid, "outside_reason", name) if int(code) == 4 else name] = int(n)
    kept = rows.where(F.col("reason") == 0).drop("reason")
    k = tally[tally["reason"] == 0]
    if len(k) == 0:
        raise TraceFormatError("no trace row falls inside the grid.")
    lim = (int(k["lo"].iloc[0]), int(k["hi"].iloc[0]), int(k["n"].iloc[0]))
    sw = spark.createDataFrame(K.slot_week_table(lim[0], lim[1], config.tz))
    F.broadcast(sw).createOrReplaceTempView("slot_week")
    kept.createOrReplaceTempView("rows_in")
    dedupe = isinstance(source, FileSource)
    src = "(SELECT DISTINCT user, t, lat, lon, slot, cell FROM rows_in)" if dedupe else "rows_in"
    q = spark.sql
    pts = q(f"SELECT user, slot, cell, count(*) AS n FROM {src} GROUP BY user, slot, cell")
    rows_dedup = lim[2]
    if dedupe:
        pts = pts.persist()
        rows_dedup = int(pts.agg(F.sum("n")).collect()[0][0])
    pts.createOrReplaceTempView("pts")
    win = q("SELECT user, slot, max_by(cell, struct(n, -cell)) AS cell FROM pts GROUP BY user, slot").persist()
    win.createOrReplaceTempView("win")
    trp = q("SELECT w.user, sw.week, w.cell AS o, w.ncell AS d FROM ("
            " SELECT user, slot, cell, lead(slot) OVER u AS nslot, lead(cell) OVER u AS ncell FROM win"
            " WINDOW u AS (PARTITION BY user ORDER BY slot)) w JOIN slot_week sw ON sw.slot = w.slot "
            "WHERE w.nslot = w.slot + 1 AND w.ncell <> w.cell").persist()
    trp.createOrReplaceTempView("trp")
    prs = q("SELECT DISTINCT week, user, o, d FROM trp").persist()
    prs.createOrReplaceTempView("prs")
    try:
        counts = q("SELECT week, o AS origin, d AS destination, count(*) AS count FROM prs "
                   "GROUP BY week, o, d").toPandas()
        q("SELECT a.week, a.user, coalesce(t.n, 0) AS trips, coalesce(p.n, 0) AS unique_trips FROM "
          "(SELECT DISTINCT sw.week, w.user FROM win w JOIN slot_week sw ON sw.slot = w.slot) a "
          "LEFT JOIN (SELECT week, user, count(*) AS n FROM trp GROUP BY week, user) t "
          "  ON t.week = a.week AND t.user = a.user "
          "LEFT JOIN (SELECT week, user, count(*) AS n FROM prs GROUP BY week, user) p "
          "  ON p.week = a.week AND p.user = a.user").createOrReplaceTempView("uwk")
        if aggregates_only:   # figures of the user-weeks, never the user-weeks themselves
            user_week = None
            hist = q("SELECT week, trips, unique_trips, count(*) AS user_weeks FROM uwk "
                     "GROUP BY week, trips, unique_trips").toPandas()
            n_people, pair_users = (int(v) for v in q(
                "SELECT (SELECT count(DISTINCT user) FROM win), (SELECT count(DISTINCT user) FROM prs)").collect()[0])
        else:
            user_week, hist, n_people = q("SELECT * FROM uwk").toPandas(), None, None
        pairs = q("SELECT week, user, o AS origin, d AS destination FROM prs").toPandas() if keep_pairs else None
        bounded = None
        if bound is not None:   # per-person bounding in Spark SQL: per-pair counts only come back
            week0 = int(q("SELECT min(week) FROM slot_week").collect()[0][0])
            sql = bounded_counts_sql("prs", bound[0], bound[1], week_offset=week0, dialect="spark")
            bounded = q(f"SELECT week - {week0} AS week, o AS origin, d AS destination, raw_count, true_count, "
                        f"bounded_users AS b, user_rows AS u FROM ({sql}) bq").toPandas()
        cell_n = q("SELECT cell, count(*) AS n FROM win GROUP BY cell").toPandas()
        cells = np.sort(cell_n["cell"].to_numpy(np.int64))
        user_hours = int(cell_n["n"].sum())
    finally:
        for df in (prs, trp, win, pts):
            df.unpersist()
    if dedupe and lim[2] > rows_dedup:
        dropped[DROP_DUPLICATE] = int(lim[2] - rows_dedup)
    like = source[USER] if isinstance(source, pd.DataFrame) else None
    stats: dict[str, Any] = {"rows_read": rows_read, "rows_used": int(rows_dedup), "rows_dropped": dropped,
                             "user_hours": int(user_hours), "cells_used": cells, "engine": "spark",
                             "bbox_used": bbox}
    if n_people is not None:
        stats["users"] = n_people
        stats["pair_users"] = pair_users
    if bounded is not None:
        stats.update(bounded_stats(bounded.sort_values(["week", "origin", "destination"])))
    return K.assemble(grid=grid, config=config, counts=counts, user_week=user_week, pairs=pairs, stats=stats,
                      user_like=like, user_week_counts=hist)
