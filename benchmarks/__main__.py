"""Run every ``benchmarks/bench_*.py`` and print a table of figures.

Each module exposes ``run(quick: bool) -> list[dict]`` with rows
``{"case", "metric", "value", "unit", "baseline", "ratio", "note"}``. Ratios compare against a baseline measured
in the same run. Results are written to ``benchmarks/results.json`` together with the machine's core count.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import platform
import sys
import time
import traceback
from pathlib import Path

HERE = Path(__file__).resolve().parent


def discover(selector: str | None) -> list[str]:
    names = sorted(p.stem for p in HERE.glob("bench_*.py"))
    if selector:
        names = [n for n in names if selector in n]
    return names


def _fmt(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="smaller sizes (smoke run)")
    parser.add_argument("-k", dest="selector", help="only modules whose name contains this")
    parser.add_argument("--out", default=str(HERE / "results.json"), help="where to write the JSON results")
    args = parser.parse_args(argv)

    sys.path.insert(0, str(HERE.parent))
    machine = {"cores": os.cpu_count(), "python": platform.python_version(), "platform": platform.platform()}
    print(f"machine: {machine['cores']} cores, Python {machine['python']}, {machine['platform']}")
    rows: list[dict] = []
    failed = 0
    for name in discover(args.selector):
        mod = importlib.import_module(f"benchmarks.{name}")
        t0 = time.perf_counter()
        try:
            got = mod.run(quick=args.quick)
        except Exception:  # a failing case is reported, the others still run
            traceback.print_exc()
            failed += 1
            got = [{"case": name, "metric": "error", "value": None, "unit": "", "note": "raised, see above"}]
        for r in got:
            r.setdefault("module", name)
        rows.extend(got)
        print(f"[{name}] {time.perf_counter() - t0:.1f} s", file=sys.stderr)

    header = ("module", "case", "metric", "value", "unit", "baseline", "ratio", "note")
    table = [[_fmt(r.get(h)) for h in header] for r in rows]
    widths = [max(len(h), *(len(t[i]) for t in table)) if table else len(h) for i, h in enumerate(header)]
    print("  ".join(h.ljust(w) for h, w in zip(header, widths, strict=True)))
    for t in table:
        print("  ".join(c.ljust(w) for c, w in zip(t, widths, strict=True)))
    Path(args.out).write_text(json.dumps({"machine": machine, "quick": args.quick, "rows": rows}, indent=2,
                                         default=str))
    print(f"wrote {args.out}")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
