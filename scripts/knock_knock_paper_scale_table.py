"""Print the markdown table of docs/knock_knock.md from the runs of scripts/knock_knock_paper_scale.sh.

A finished run is read from its JSON; an interrupted one from its log, whose progress lines give each finished
target's AUC (to 3 decimals; targets are played in turn from the three mobility thirds, so the finished ones are a
balanced sample).

usage: .venv/bin/python scripts/knock_knock_paper_scale_table.py /tmp/knock_paper_scale
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from odcore.knock.metrics import privacy_loss

CLASSIFIERS = ("lr", "knn", "rf", "mlp")
# name, setting, the paper's figures (Pyrgelis et al. 2018, SFC, as its text states them)
RUNS = (
    ("subset_m10", "§VI-A subset of locations, α = 0.2, m = 10, first week",
     "LR 0.9, k-NN 0.7, RF 0.84, MLP 0.9; best: PL 0.86 (Figs. 3b, 4)"),
    ("subset_m100", "§VI-A subset of locations, α = 0.2, m = 100, first week",
     "LR 0.67, MLP 0.68, best 0.72; best: PL 0.44 (Figs. 3b, 4)"),
    ("period_week", "§VI-C same groups, β = 150, m = 100, MLP: one week (3rd week; observed weeks 1-2)",
     "MLP 0.62; PL 0.25 (Fig. 11b, d)"),
    ("period_day_monday", "§VI-C same, one day: Monday of week 3 (observed the 2 Mondays before)",
     "MLP 0.54 (\"from 0.62 to 0.54\" for a day); PL 0.1 (Fig. 11b, d)"),
    ("period_day_saturday", "§VI-C same, one day: Saturday of week 3 (observed the 2 Saturdays before)",
     "as Monday: \"no significant difference\"; PL 0.1"),
    ("period_8h_monday", "§VI-C same, 8 hours: Monday 08:00-16:00 of week 3",
     "PL 0.09, no significant difference from a day (Fig. 11d)"),
    ("period_8h_saturday", "§VI-C same, 8 hours: Saturday 08:00-16:00 of week 3",
     "PL 0.09, as Monday"),
)
LINE = re.compile(r"\] (\d+)/(\d+) target (\S+) \((\w+)\): AUC (.*)$")


def per_target(out: Path, name: str) -> tuple[list[dict[str, float]], list[str], int, dict | None]:
    """(AUC dicts, mobility thirds, targets asked for, the JSON if the run finished)."""
    try:
        d = json.loads((out / f"{name}.json").read_text())
        return ([t["auc"] for t in d["per_target"]], [t["mobility"] for t in d["per_target"]],
                len(d["per_target"]), d)
    except (OSError, ValueError, KeyError):
        pass
    aucs, thirds, total = [], [], 0
    try:
        text = (out / f"{name}.log").read_text()
    except OSError:
        return [], [], 0, None
    for line in text.splitlines():
        m = LINE.search(line)
        if m:
            total = int(m.group(2))
            thirds.append(m.group(4))
            aucs.append({k: float(v) for k, v in (kv.split("=") for kv in m.group(5).split())})
    return aucs, thirds, total, None


def fmt(xs: list[float]) -> str:
    if not xs:
        return "–"
    a = np.asarray(xs)
    half = 1.96 * a.std(ddof=1) / np.sqrt(len(a)) if len(a) > 1 else float("nan")
    return f"{a.mean():.2f} ± {half:.2f}"


def main(out: Path) -> None:
    print("| setting | targets done / asked (high, mild, somewhat) | LR | k-NN | RF | MLP | best | mean PL (best) "
          "| paper (mean AUC unless PL) | s (wall) |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name, label, paper in RUNS:
        aucs, thirds, total, d = per_target(out, name)
        if not aucs:
            print(f"| {label} | 0 / 150 | – | – | – | – | – | – | {paper} | – |")
            continue
        cols = [fmt([a[c] for a in aucs if c in a]) if c in aucs[0] else "–" for c in CLASSIFIERS]
        best = [max(a.values()) for a in aucs]
        pl = float(np.mean(privacy_loss(np.asarray(best))))
        counts = ", ".join(str(thirds.count(t)) for t in ("high", "mild", "somewhat"))
        done = f"{len(aucs)} / {total} ({counts})" + ("" if d is not None else ", run stopped: from its log")
        secs = f"{d['seconds']:.0f}" if d is not None else "–"
        print(f"| {label} | {done} | {' | '.join(cols)} | {fmt(best)} | {pl:.2f} | {paper} | {secs} |")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/knock_paper_scale"))
