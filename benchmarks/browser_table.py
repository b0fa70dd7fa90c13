"""The tables of the browser benchmark in docs/benchmarks.md, from its results: ``python -m benchmarks.browser_table [FILE]``.

``FILE`` is what ``python -m benchmarks -k browser`` wrote (default ``benchmarks/results.json``). Printed, in
Markdown:

* every page × sidebar control: median input-to-paint in ms (slowest in brackets), **bold** when the median is
  under the target (300 ms), and how many controls meet both targets (median under 300 ms, slowest under 600 ms);
* the same medians as ratios to the floor app measured beside each page (``bench_browser._floor_beside``), with
  that floor in ms: the machine's own speed divided out, so that two runs can be compared when the machine ran at
  different speeds;
* every control against the same run's reference content for what its press redrew
  (``bench_browser.reference_for``): target the reference's median plus 150 ms, and 300 ms where that is less (the
  floor, a small reference), and the slowest press within twice the target;
* the cold-start, first-open and reference rows as they are.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from benchmarks.bench_browser import FLOOR_BESIDE

TARGET_MEDIAN, TARGET_WORST = 300, 600
OVER_REFERENCE = 150   # ms a press may take over the same run's reference content for what it redraws
PAGE_NAMES = {"home": "landing", "OD_release": "OD release", "Privacy_budget": "Privacy budget",
              "Knock_Knock": "Knock Knock", "Release_designer": "Release designer",
              "Play_the_attacker": "Play the attacker", "See_the_noise": "See the noise"}
UNCHANGED = "nothing changed"


def _control(label: str) -> str:
    """Column name of a control's label: ``"ε (per count)"`` -> ``"ε"``; the unchanged rerun -> ``UNCHANGED``."""
    return UNCHANGED if label.startswith("rerun") else label.split(" (")[0].lower()


def collect(rows: list[dict]) -> dict:
    """``{"median", "worst", "ratio"}: {(page, column): value}``, ``"floor": {page: ms}``, pages and columns in the
    order measured."""
    out: dict = {"median": {}, "worst": {}, "ratio": {}, "floor": {}, "pages": [], "columns": []}
    for r in rows:
        if r.get("module", "bench_browser") != "bench_browser" or ": " not in r["case"]:
            continue
        page, label = r["case"].split(": ", 1)
        if page.startswith(("class", "reference", "cold", "sessions")) or label == "first open":
            continue
        if label == FLOOR_BESIDE:
            out["floor"][page] = r["value"]
            continue
        key = (page, _control(label))
        if r["metric"] == "median input-to-paint":
            out["median"][key] = r["value"]
            if r.get("baseline") == FLOOR_BESIDE:
                out["ratio"][key] = r["ratio"]
        elif r["metric"] == "worst input-to-paint":
            out["worst"][key] = r["value"]
        else:
            continue
        out["pages"] += [page] * (page not in out["pages"])
        out["columns"] += [key[1]] * (key[1] not in out["columns"])
    return out


def references(rows: list[dict]) -> dict[str, float]:
    """The reference apps' medians in this run: ``{name: ms}``."""
    return {r["case"].removeprefix("reference: "): r["value"] for r in rows
            if r.get("module", "bench_browser") == "bench_browser" and r["case"].startswith("reference: ")
            and r["metric"] == "median input-to-paint" and r["value"] is not None}


def reference_target(reference: str | None, refs: dict[str, float]) -> float | None:
    """A control's median target: its reference's median plus :data:`OVER_REFERENCE`, at least
    :data:`TARGET_MEDIAN`; None when the run has no such reference."""
    if reference is None or reference not in refs:
        return None
    return max(TARGET_MEDIAN, refs[reference] + OVER_REFERENCE)


def against_references(rows: list[dict]) -> str:
    """Every control against the reference content of what its press redrew: median (slowest) and target, **bold**
    when both the median and the slowest (within twice the target) are met; then how many are."""
    refs = references(rows)
    c = collect(rows)
    cells: dict = {}
    for r in rows:
        if r.get("module", "bench_browser") != "bench_browser" or r.get("metric") != "median input-to-paint" \
                or "reference" not in r or ": " not in r["case"]:
            continue
        page, label = r["case"].split(": ", 1)
        cells[(page, _control(label))] = (r["reference"], reference_target(r["reference"], refs))
    cols = [col for col in c["columns"] if col != UNCHANGED]
    if not cells or not refs:
        return ""
    lines = ["Against the same run's reference content for what each press redrew (median (slowest) ms / target; "
             f"target: the reference's median + {OVER_REFERENCE} ms, at least {TARGET_MEDIAN} ms; the slowest "
             "within twice the target; **bold**: both met):", "", *_header("page", cols)]
    met = total = 0
    used: dict[str, int] = {}
    for page in c["pages"]:
        row = []
        for col in cols:
            m, w = c["median"].get((page, col)), c["worst"].get((page, col))
            ref, target = cells.get((page, col), (None, None))
            if m is None or target is None:
                row.append("–")
                continue
            total += 1
            used[ref] = used.get(ref, 0) + 1
            ok = m <= target and (w is None or w <= 2 * target)
            met += ok
            text = f"{m:,.0f}" + (f" ({w:,.0f})" if w is not None else "") + f" / {target:,.0f}"
            row.append(f"**{text}**" if ok else text)
        lines.append(f"| {PAGE_NAMES.get(page, page)} | " + " | ".join(row) + " |")
    lines += ["", f"{met} of {total} controls meet both. References used: "
                  + ", ".join(f"{name} ({refs[name]:,.0f} ms) for {n}" for name, n in used.items()) + "."]
    return "\n".join(lines)


def _header(first: str, columns: list[str], last: list[str] = ()) -> list[str]:
    names = [first, *columns, *last]
    return ["| " + " | ".join(names) + " |", "|" + "---|" * len(names)]


def tables(rows: list[dict]) -> str:
    c = collect(rows)
    cols = c["columns"]
    lines = _header("page", cols)
    both = under = total = 0
    for page in c["pages"]:
        cells = []
        for col in cols:
            m, w = c["median"].get((page, col)), c["worst"].get((page, col))
            if m is None:
                cells.append("–")
                continue
            if col != UNCHANGED:
                total += 1
                under += m < TARGET_MEDIAN
                both += m < TARGET_MEDIAN and w is not None and w < TARGET_WORST
            text = f"{m:,.0f}"
            cells.append((f"**{text}**" if m < TARGET_MEDIAN else text) + (f" ({w:,.0f})" if w is not None else ""))
        lines.append(f"| {PAGE_NAMES.get(page, page)} | " + " | ".join(cells) + " |")
    lines += ["", f"{both} of {total} controls meet both targets (median under {TARGET_MEDIAN} ms, slowest under "
                  f"{TARGET_WORST} ms); {under} have a median under {TARGET_MEDIAN} ms."]
    if c["ratio"]:
        lines += ["", "Ratio to the floor app measured beside each page (its median in ms in the last column):", ""]
        lines += _header("page", cols, ["floor beside the page"])
        for page in c["pages"]:
            cells = [f"{c['ratio'][(page, col)]:.1f}" if (page, col) in c["ratio"] else "–" for col in cols]
            floor = c["floor"].get(page)
            cells.append(f"{floor:,.0f} ms" if floor is not None else "–")
            lines.append(f"| {PAGE_NAMES.get(page, page)} | " + " | ".join(cells) + " |")
        floors = [f for f in c["floor"].values() if f is not None]
        if floors:
            lines += ["", f"The floor beside the pages: {min(floors):,.0f}–{max(floors):,.0f} ms."]
    against = against_references(rows)
    if against:
        lines += ["", against]
    other = [r for r in rows if r.get("module", "bench_browser") == "bench_browser"
             and (r["case"].startswith(("cold", "reference")) or r["case"].endswith(": first open"))]
    if other:
        lines += ["", "| case | metric | value | note |", "|---|---|---|---|"]
        for r in other:
            value = "–" if r["value"] is None else f"{r['value']:,.0f} {r['unit']}"
            note = (r.get("note") or "").replace("|", "/")
            lines.append(f"| {r['case']} | {r['metric']} | {value} | {note} |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.browser_table", description=__doc__.split("\n")[0])
    parser.add_argument("results", nargs="?", default=str(Path(__file__).resolve().parent / "results.json"))
    args = parser.parse_args(argv)
    path = Path(args.results)
    if not path.is_file():
        parser.error(f"{path}: no such file; run `python -m benchmarks -k browser` first")
    try:
        rows = json.loads(path.read_text())["rows"]
    except (ValueError, KeyError, TypeError) as e:
        parser.error(f"{path}: not the results of `python -m benchmarks` ({type(e).__name__}: {e})")
    print(tables(rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
