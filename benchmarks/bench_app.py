"""Dashboard latency: time from setting a sidebar widget (or the setting a page's live slider writes on release,
``odlab.*``) to the end of the rerun, via AppTest, after a first load.

Target: a slider change redraws in under 300 ms on the bundled sample. Each case moves a slider to values
not seen before (so the caches of what depends on it miss, as for a user) and reports the median and the worst
rerun; the baseline is a rerun with nothing changed on the same page (everything cached), measured in the same run.
"""

from __future__ import annotations

import statistics
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CASES = [
    # (page, widget key, values to set in turn)
    ("pages/3_Attack.py", "odlab.epsilon", [0.70, 0.75, 0.80, 0.85, 0.90, 0.95, 1.00, 1.05, 1.10, 1.15]),
    ("pages/2_OD_release.py", "odlab.epsilon", [0.70, 0.75, 0.80, 0.85, 0.90, 0.95, 1.00, 1.05, 1.10, 1.15]),
    ("pages/2_OD_release.py", "odlab.threshold", [90, 80, 70, 60, 50, 110, 120, 130, 140, 150]),
    ("pages/1_Data.py", "w.epsilon", [0.50, 0.55, 0.60, 0.65, 0.45, 0.40, 0.35, 0.30, 0.25, 0.20]),
    ("pages/4_Privacy_budget.py", "odlab.epsilon", [0.70, 0.75, 0.80, 0.85, 0.90, 0.95, 1.00, 1.05, 1.10, 1.15]),
]


def _set(at, key: str, value) -> None:
    """A sidebar widget (``w.*``) as a person sets it, or a page's live setting (``odlab.*``) as its component
    writes it on release (odapp.components.live)."""
    if key.startswith("odlab."):
        at.session_state[key] = value
    else:
        at.slider(key=key).set_value(value)


def _timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def run(quick: bool) -> list[dict]:
    from streamlit.testing.v1 import AppTest

    n = 3 if quick else 10
    rows: list[dict] = []
    at = AppTest.from_file(str(REPO / "app.py"), default_timeout=300)
    first = _timed(at.run)
    rows.append({"case": "app.py first load (sample: 25,000 users, 1.66 M rows)", "metric": "time",
                 "value": first * 1000, "unit": "ms", "baseline": None, "ratio": None,
                 "note": "reads the Parquet sample and builds the weekly OD data once"})
    for page, key, values in CASES:
        at.switch_page(page).run()
        at.run()
        base = statistics.median(_timed(at.run) for _ in range(3))
        times = []
        for v in values[:n]:
            _set(at, key, v)
            times.append(_timed(at.run))
            if at.exception:
                raise RuntimeError(f"{page}: {at.exception[0].message}")
        med = statistics.median(times)
        name = f"{Path(page).stem}: move {key.split('.', 1)[1]}"
        rows.append({"case": name, "metric": "median redraw", "value": med * 1000, "unit": "ms",
                     "baseline": "rerun with nothing changed", "ratio": med / base,
                     "note": f"baseline {base * 1000:.0f} ms; {len(times)} new values; target < 300 ms"})
        rows.append({"case": name, "metric": "worst redraw", "value": max(times) * 1000, "unit": "ms",
                     "baseline": None, "ratio": None, "note": ""})
        _set(at, key, 0.66 if key.endswith("epsilon") else 100)
        at.run()
    return rows
