"""Before and after in one run: ``python -m benchmarks.ab_browser [--page P] [--control C] [--rounds R] [--presses N]
DIR_A DIR_B [...]``.

This machine's speed moves between runs by more than a page change does, so a change is judged by measuring both
versions in the same run, one after the other, in alternating order (A B, then B A, ...). Each ``DIR`` is an app
checkout (e.g. a ``git worktree`` of the commit before). For every round and every checkout: a fresh server of that
checkout, page ``P`` opened in a fresh headless Chromium session, 1 + ``N`` reruns with nothing changed (the ``r``
shortcut) and 1 + ``N`` presses of the sidebar control whose label contains ``C``; the first of each is dropped.
Timed as ``python -m benchmarks -k browser`` times a press (``bench_browser``: key press to the painted frame).

Before the rounds, one round of every checkout is run and not counted: the servers of the comparison share a disk
cache folder of their own (``bench_browser._run_cache``), and the first to press a new grid size or zone map builds
its tables there, which the later ones read (as do later presses of the same checkout).

Printed: each round's medians, then per checkout the round medians and their median, for the unchanged rerun and
for the control. ``--json FILE`` writes them too.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
from pathlib import Path

from benchmarks import bench_browser as bb
from odapp import live


async def _round(browser, app_dir: Path, page: str, control: dict, presses: int, log: Path) -> dict:
    with live.streamlit_server(log, app_dir=app_dir, timeout_s=120) as url:
        ctx, tab = await bb._new_page(browser)
        try:
            await bb._goto_drawn(tab, f"{url}/{page}")
            unchanged = [await bb._rerun_unchanged(tab) for _ in range(presses + 1)][1:]
            pressed = [await bb._press(tab, control, i) for i in range(presses + 1)][1:]
        finally:
            await ctx.close()
    return {"unchanged": statistics.median(r["total"] for r in unchanged),
            "control": statistics.median(r["total"] for r in pressed)}


async def compare(dirs: list[Path], *, page: str, control: str, kind: str, rounds: int, presses: int,
                  echo=print) -> dict:
    """``{dir: {"unchanged": [ms per round], "control": [ms per round]}}``, rounds in alternating order."""
    from playwright.async_api import async_playwright

    exe = live.chromium_executable()
    if exe is None:
        raise RuntimeError("no Chromium on this machine (Debian package 'chromium')")
    ctl = {"kind": kind, "index": 0, "label": control}
    out = {str(d): {"unchanged": [], "control": []} for d in dirs}
    with tempfile.TemporaryDirectory(prefix="odlab_ab_") as tmp, bb._run_cache():
        async with async_playwright() as p:
            browser = await p.chromium.launch(executable_path=exe, headless=True, args=live.CHROMIUM_ARGS)
            try:
                for d in dirs:   # not counted: fills the run's disk cache (see the module's docstring)
                    await _round(browser, d, page, ctl, presses, Path(tmp) / "server.log")
                    echo(f"warm-up round {d}")
                for r in range(rounds):
                    for d in dirs if r % 2 == 0 else dirs[::-1]:
                        got = await _round(browser, d, page, ctl, presses, Path(tmp) / "server.log")
                        for k, v in got.items():
                            out[str(d)][k].append(v)
                        echo(f"round {r + 1} {d}: nothing changed {got['unchanged']:.0f} ms, "
                             f"{control} {got['control']:.0f} ms")
            finally:
                await browser.close()
    return out


def main(argv: list[str] | None = None) -> int:
    doc = __doc__.split("\n\n")
    parser = argparse.ArgumentParser(prog="python -m benchmarks.ab_browser", description=doc[1].replace("\n", " "))
    parser.add_argument("dirs", nargs="+", type=Path, help="app checkouts to compare (two or more)")
    parser.add_argument("--page", default="OD_release", help="URL path of the page ('' for the landing page)")
    parser.add_argument("--control", default="ε", help="part of the sidebar control's label")
    parser.add_argument("--kind", default="slider", choices=[k[0] for k in bb.CONTROL_KINDS])
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--presses", type=int, default=5)
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args(argv)
    dirs = [d.resolve() for d in args.dirs]
    missing = [str(d) for d in dirs if not (d / "app.py").is_file()]
    if len(dirs) < 2 or missing:
        parser.error(f"give two or more app checkouts (each with an app.py); not one: {', '.join(missing)}"
                     if missing else "give two or more app checkouts")
    if args.rounds < 1 or args.presses < 1:
        parser.error("--rounds and --presses must be at least 1")
    out = asyncio.run(compare(dirs, page=args.page, control=args.control, kind=args.kind, rounds=args.rounds,
                              presses=args.presses))
    for d, r in out.items():
        print(f"{d}: nothing changed {[round(x) for x in r['unchanged']]} ms, median "
              f"{statistics.median(r['unchanged']):.0f}; {args.control} {[round(x) for x in r['control']]} ms, "
              f"median {statistics.median(r['control']):.0f}")
    if args.json:
        args.json.write_text(json.dumps({"page": args.page, "control": args.control, "rounds": args.rounds,
                                         "presses": args.presses, "results": out}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
