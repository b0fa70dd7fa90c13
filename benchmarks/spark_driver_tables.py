"""What the Spark engine hands the driver on the user-level release path (``bound=(max_pairs, key)``,
``keep_pairs=False``), for the bundled city's first N people: every ``toPandas``/``collect`` with its columns and
rows. The per-user-week table (one row per active user-week, which the driver received before the path brought
aggregates only) is printed for comparison, from the memory engine.

    python -m benchmarks.spark_driver_tables [N ...]      (default 1000 4000; Spark local[2], Java 17+)
"""

from __future__ import annotations

import sys

import numpy as np
import pandas as pd


def main(sizes: list[int]) -> None:
    from odcore.od.bounding import bounding_key
    from odcore.od.engines import build_od
    from odcore.od.engines.spark_engine import SMALL_JOB_JAVA_OPTIONS, spark_session
    from odcore.od.trips import ODConfig
    from odcore.paths import SAMPLE_DATA_DIR

    city = pd.read_parquet(SAMPLE_DATA_DIR / "synthetic_city.parquet")
    people = np.sort(city["user"].unique())
    spark = spark_session("local[2]", "1g", shuffle_partitions=2, java_options=SMALL_JOB_JAVA_OPTIONS)
    cls = type(spark.range(1))
    seen: list[tuple[str, tuple[str, ...], int]] = []
    for name in ("toPandas", "collect"):
        orig = getattr(cls, name)

        def wrapped(self, *a, _orig=orig, _name=name, **k):
            out = _orig(self, *a, **k)
            seen.append((_name, tuple(self.columns), len(out)))
            return out

        setattr(cls, name, wrapped)
    key = bounding_key(np.random.default_rng(7))
    try:
        for n in sizes:
            df = city[city["user"].isin(people[:n])]
            mem = build_od(df, ODConfig(), engine="memory")
            seen.clear()
            od = build_od(df, ODConfig(), engine="spark", spark=spark, keep_pairs=False, bound=(10, key))
            print(f"{n} people: {len(mem.user_week)} user-weeks, {len(mem.counts)} (week, pair) rows; "
                  f"summary equal to the memory engine's: {od.summary() == mem.summary()}")
            for name, cols, rows in seen:
                print(f"  {name:9s} {rows:>7,d} rows  {', '.join(cols)}")
            print(f"  user column in any: {any('user' in c for _, c, _ in seen)}; largest: "
                  f"{max(r for _, _, r in seen):,d} rows")
    finally:
        spark.stop()


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [1000, 4000])
