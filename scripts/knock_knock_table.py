"""Print the markdown tables of docs/knock_knock_results.md from the JSON written by knock_knock_experiments.sh.

usage: .venv/bin/python scripts/knock_knock_table.py /tmp/knock_results
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from odcore.knock.metrics import privacy_gain

# Paper numbers (Pyrgelis et al. 2018, SFC). Subset prior, §VI-A / Fig. 4 and Fig. 3b (mean AUC; PL of "best").
PAPER_SUBSET = {
    10: {"lr": 0.9, "knn": 0.7, "rf": 0.84, "mlp": 0.9, "best_pl": 0.86},
    50: {"lr": 0.7, "mlp": 0.72},
    100: {"lr": 0.67, "mlp": 0.68, "best": 0.72, "best_pl": 0.44},
}
PAPER_SAME = {10: "AUC 0.64-0.76 (MLP best)", 100: "RF, k-NN ~0.5; MLP best"}
PAPER_DIFF = {5: "LR, MLP 0.71", 10: "-", 100: "all classifiers towards 0.5"}
PAPER_MRE = {  # Table III (SFC)
    "lpa": {"0.01": 131.9, "0.1": 129.3, "1": 114.4, "10": 41.9},
    "gsm": {"0.01": 129.6, "0.1": 94.7, "1": 14.1, "10": 1.4},
    "fpa": {"0.01": 85.9, "0.1": 11.3, "1": 1.1, "10": 0.11},
    "efpag": {"0.01": 57.9, "0.1": 6.1, "1": 0.6, "10": 0.04},
    "lpa-event": {"0.01": 24.7, "0.1": 2.5, "1": 0.2, "10": 0.001},
}
# Figs. 12b/13b, SFC, MLP: mean PG at eps = 10 as given in the text of §VII-C
PAPER_PG10 = {"raw": {"lpa": "~1", "gsm": "~1", "fpa": 0.96, "efpag": 0.92, "lpa-event": "negligible"},
              "noisy": {"gsm": 0.8, "fpa": 0.32, "efpag": 0.15}}


def load(p: Path):
    """The JSON of one run, or None when absent or still being written."""
    try:
        return json.loads(p.read_text())
    except (OSError, ValueError):
        return None


def fmt(v, nd=2):
    if v is None:
        return "–"
    if isinstance(v, str):
        return v
    if v != 0 and abs(v) < 0.1:
        return f"{v:.2g}"
    return f"{v:.{nd}f}" if abs(v) < 1000 else f"{v:.3g}"


def main(out: Path) -> None:
    print("### Subset-of-locations prior (α = 0.2, first week), mean AUC over targets\n")
    print("| m | targets | LR | k-NN | RF | MLP | best | mean PL (best) | paper | s |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for m in (5, 10, 50, 100):
        d = load(out / f"subset_m{m}.json")
        if d is None:
            continue
        a, pl = d["mean_auc"], d["mean_pl"]
        pap = PAPER_SUBSET.get(m, {})
        ptxt = ", ".join(f"{k.replace('_pl', ' PL')} {v}" for k, v in pap.items()) or "high (Fig. 4a)"
        print(f"| {m} | {len(d['per_target'])} | {fmt(a.get('lr'))} | {fmt(a.get('knn'))} | {fmt(a.get('rf'))} | "
              f"{fmt(a.get('mlp'))} | {fmt(a.get('best'))} | {fmt(pl.get('best'))} | {ptxt} | "
              f"{d['seconds']:.0f} |")
    print()
    rfe = [(m, load(out / f"subset_rfe_m{m}.json"), load(out / f"subset_m{m}.json")) for m in (10, 100)]
    rfe = [r for r in rfe if r[1] is not None]
    if rfe:
        print("### Same, with the paper's RFE (down to the 400 training samples) instead of `variance` selection\n")
        print("| m | targets | LR | k-NN | RF | MLP | best | best with `variance` | s |")
        print("|---|---|---|---|---|---|---|---|---|")
        for m, d, v in rfe:
            a = d["mean_auc"]
            vb = fmt(v["mean_auc"]["best"]) if v else "–"
            print(f"| {m} | {len(d['per_target'])} | {fmt(a.get('lr'))} | {fmt(a.get('knn'))} | "
                  f"{fmt(a.get('rf'))} | {fmt(a.get('mlp'))} | {fmt(a.get('best'))} | {vb} | {d['seconds']:.0f} |")
        print()
    for name, key, paper in (("Same groups as released (2a), β = 150, 2 observation weeks, 3rd week inference",
                              "same", PAPER_SAME),
                             ("Different groups than released (2b), 400 groups 75/25", "diff", PAPER_DIFF)):
        rows = [(m, load(out / f"{key}_m{m}.json")) for m in (5, 10, 50, 100)]
        rows = [(m, d) for m, d in rows if d is not None]
        if not rows:
            continue
        print(f"### {name}, mean AUC\n")
        print("| m | targets | LR | k-NN | RF | MLP | best | mean PL (best) | paper | s |")
        print("|---|---|---|---|---|---|---|---|---|---|")
        for m, d in rows:
            a, pl = d["mean_auc"], d["mean_pl"]
            print(f"| {m} | {len(d['per_target'])} | {fmt(a.get('lr'))} | {fmt(a.get('knn'))} | "
                  f"{fmt(a.get('rf'))} | {fmt(a.get('mlp'))} | {fmt(a.get('best'))} | {fmt(pl.get('best'))} | "
                  f"{paper.get(m, '–')} | {d['seconds']:.0f} |")
        print()
    for fname, title in (("mre.json", "MRE (as printed: γ per ROI series; clip to [0, m])"),
                         ("mre_round.json", "MRE, released counts rounded to integers"),
                         ("mre_round_backward.json", "MRE, rounded, FPA/EFPAG with default (unnormalised) transforms"),
                         ("mre_matrix.json", "MRE with γ = 0.1% of the whole released matrix")):
        d = load(out / fname)
        if d is None:
            continue
        print(f"### {title}: m = {d['m']}, {d['n_groups']} groups, Δ = {d['sensitivity']}\n")
        eps = list(next(iter(d["mre"].values())))
        print("| mechanism | " + " | ".join(f"ε={e} ours (median) / paper" for e in eps) + " |")
        print("|---|" + "---|" * len(eps))
        for mech, row in d["mre"].items():
            med = d["mre_median"][mech]
            cells = [f"{fmt(row[e])} ({fmt(med[e])}) / {PAPER_MRE[mech][e]}" for e in eps]
            print(f"| {mech} | " + " | ".join(cells) + " |")
        print()
    pg = {}
    for f in sorted(out.glob("pg_*.json")):
        _, mech, eps, mode = f.stem.split("_")
        d = load(f)
        if d is not None:
            pg[(mech, eps, mode)] = d
    if pg:
        print("### Privacy gain (MLP, perfect prior, m = 500, first week)\n")
        raw_min = min(t["auc_raw"]["mlp"] for d in pg.values() for t in d["per_target"])
        print("Cells: **mean PG** (AUC' floored at 0.5) [mean PG with Eq. 6 as printed] (mean AUC on the noisy "
              f"release). AUC on the raw release (trained on raw) is >= {raw_min:.3f} for every target and cell.\n")
        eps_all = sorted({k[1] for k in pg}, key=float)
        print("| mechanism | adversary | " + " | ".join(f"ε={e}" for e in eps_all) + " | paper ε=10 |")
        print("|---|---|" + "---|" * (len(eps_all) + 1))
        for mech in ("lpa", "gsm", "fpa", "efpag", "lpa-event"):
            for mode in ("raw", "noisy"):
                cells = []
                for e in eps_all:
                    d = pg.get((mech, e, mode))
                    if d is None:
                        cells.append("–")
                        continue
                    a_raw = np.array([t["auc_raw"]["mlp"] for t in d["per_target"]])
                    a_noisy = np.array([t["auc"]["mlp"] for t in d["per_target"]])
                    pg_floor = np.mean(privacy_gain(a_raw, a_noisy))
                    pg_lit = np.mean(privacy_gain(a_raw, a_noisy, literal=True))
                    cells.append(f"**{fmt(pg_floor)}** [{fmt(pg_lit)}] (AUC {fmt(a_noisy.mean())})")
                print(f"| {mech} | trained on {mode} | " + " | ".join(cells) + f" | "
                      f"{PAPER_PG10[mode].get(mech, '–')} |")
        for mech in ("fpa", "efpag"):
            for mode in ("raw", "noisy"):
                d = load(out / f"pgb_{mech}_10_{mode}.json")
                if d is None:
                    continue
                a_raw = np.array([t["auc_raw"]["mlp"] for t in d["per_target"]])
                a_noisy = np.array([t["auc"]["mlp"] for t in d["per_target"]])
                print(f"| {mech}, `--norm backward` (not DP) | trained on {mode} | " + " | ".join(
                    "–" for e in eps_all if e != "10") + f" | **{fmt(np.mean(privacy_gain(a_raw, a_noisy)))}** "
                    f"[{fmt(np.mean(privacy_gain(a_raw, a_noisy, literal=True)))}] (AUC {fmt(a_noisy.mean())}) | "
                    f"{PAPER_PG10[mode].get(mech, '–')} |")
        n = {len(d["per_target"]) for d in pg.values()}
        secs = np.sum([d["seconds"] for d in pg.values()])
        print(f"\n({sorted(n)} targets per cell; {secs:.0f} s in total)\n")


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "/tmp/knock_results"))
