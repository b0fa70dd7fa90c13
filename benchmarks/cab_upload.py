"""The dashboard's upload of a Cabspotting zip, loaded or streamed: ``apply_upload``, the weekly tables of the
default settings (as the sidebar builds them), then those of a second grid (0.5 km², the grid control moved).

    zip -q -0 cabs.zip /work/shared/data/cabspotting_sf/new_*.txt.gz
    /usr/bin/time -v python -m benchmarks.cab_upload cabs.zip loaded
    /usr/bin/time -v python -m benchmarks.cab_upload cabs.zip streamed

Prints the load report's rows, the first grid's pairs and unique trips, and the second grid's CPU and wall seconds.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path


def main(argv: list[str]) -> int:
    import odapp.data.cache  # noqa: F401  (both runs import Streamlit, as the app has it)
    from odapp.data import loading
    from odcore.od.trips import ODConfig

    path, mode = Path(argv[0]), argv[1]
    if mode not in ("loaded", "streamed"):
        raise SystemExit("mode must be loaded or streamed")
    raw = path.read_bytes()
    t0 = time.perf_counter()
    state: dict = {}
    if mode == "loaded":
        loading.stream_upload = lambda *a, **k: None       # the upload as it was: read into a table
    assert loading.apply_upload(state, raw, path.name)
    stored = state[loading.K_UPLOAD_TRACES]
    cfg = ODConfig(tz=stored.cli["tz"])
    cfg2 = ODConfig(tz=cfg.tz, cell_km2=0.5)
    if mode == "loaded":
        from odcore.od.trips import HourIndex, build_od

        df = stored.load().df
        hours = HourIndex.of(df, cfg.tz)
        od = build_od(df, cfg, hours=hours)
        c0, w0 = time.process_time(), time.perf_counter()
        od2 = build_od(df, cfg2, hours=hours)
    else:
        from odapp.data.cache import streamed_od  # as the sidebar builds them (the function, not its cache)

        od = streamed_od.__wrapped__("upload", cfg, stored.cabs, stored.summary)
        c0, w0 = time.process_time(), time.perf_counter()
        od2 = streamed_od.__wrapped__("upload", cfg2, stored.cabs, stored.summary)
    print(f"{mode}: rows read {stored.summary['rows_read']:,}, kept {stored.summary['rows_kept']:,}, dropped "
          f"{stored.summary['rows_dropped']}; pairs {len(od.counts):,}, unique trips {int(od.counts['count'].sum()):,}; "
          f"second grid {len(od2.counts):,} pairs, {time.process_time() - c0:.2f} CPU s, "
          f"{time.perf_counter() - w0:.2f} s; total {time.perf_counter() - t0:.1f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
