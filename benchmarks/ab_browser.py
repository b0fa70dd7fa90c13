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

``--setup LABEL`` presses the sidebar control whose label contains ``LABEL`` once (``--setup-kind``, a radio by
default: one option down) after the page is drawn and before anything is timed, e.g. ``--setup Zones`` to measure on
H3 hexagons. ``--drag`` also times dragging the page's first map (after the presses): the mouse drags it 240 px in
30 steps 30 ms apart, each step waiting until the page has taken it; reported is the time each step took beyond its
pause (:func:`drag_frames`): about one redraw of the map, the lag a person dragging it feels.

Printed: each round's medians (and the control's presses one by one, in the order they were made: a radio's
options take turns), then per checkout the round medians and their median, for the unchanged rerun, for
the control and (with ``--drag``) for the drag's frames. ``--json FILE`` writes them too.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import tempfile
from pathlib import Path

from benchmarks import bench_browser as bb
from benchmarks import harness

MAP_CANVAS = ".odmap canvas.odmap-over, [data-testid=stDeckGlJsonChart] canvas"   # the map element: its top canvas
# the page's animation frames from now on, [time, interval since the frame before] in ms, at most 600
FRAMES_JS = """() => { window.__odbFrames = []; let last = performance.now();
  const step = (t) => { window.__odbFrames.push([t, t - last]); last = t;
                        if (window.__odbFrames.length < 600) requestAnimationFrame(step); };
  requestAnimationFrame(step); }"""


async def drag_frames(tab, steps: int = 30, step_px: tuple[float, float] = (8.0, 3.0), pause_ms: int = 30) -> dict:
    """Drag the page's first map from 30 % of its width: ``steps`` mouse moves of ``step_px``, ``pause_ms`` apart.

    Each move is handed to the page and waits until the page has taken it, so a map that redraws slowly holds up
    the next move. Returns ``{"step_ms": the time each move took beyond the pause, from the button going down to the
    last move (about the time of one redraw; a few ms where the map keeps up), "long_frame_ms": the median of the
    animation frames over 20 ms drawn from then until 0.8 s after the button went up (0 if none), "frames": all
    frames in that time}``."""
    canvas = tab.locator(MAP_CANVAS).first
    await canvas.wait_for(timeout=bb.TIMEOUT_MS)
    await canvas.scroll_into_view_if_needed()
    await tab.wait_for_timeout(500)
    box = await canvas.bounding_box()
    x0, y0 = box["x"] + box["width"] * 0.3, box["y"] + box["height"] * 0.5
    await tab.mouse.move(x0, y0)
    await tab.evaluate(FRAMES_JS)
    t0 = await tab.evaluate("() => performance.now()")
    await tab.mouse.down()
    for k in range(1, steps + 1):
        await tab.mouse.move(x0 + step_px[0] * k, y0 + step_px[1] * k)
        await tab.wait_for_timeout(pause_ms)
    t1 = await tab.evaluate("() => performance.now()")
    await tab.mouse.up()
    await tab.wait_for_timeout(800)
    frames = [dt for t, dt in await tab.evaluate("() => window.__odbFrames") if t > t0]
    long = [dt for dt in frames if dt > 20]
    return {"step_ms": max((t1 - t0) / steps - pause_ms, 0.0),
            "long_frame_ms": statistics.median(long) if long else 0.0, "frames": len(frames)}


async def _round(browser, app_dir: Path, page: str, control: dict, presses: int, log: Path,
                 setup: dict | None = None, drag: bool = False, first_open: bool = False) -> dict:
    with harness.streamlit_server(log, app_dir=app_dir, timeout_s=120) as url:
        ctx, tab = await bb.new_page(browser)
        try:
            opened = None
            if first_open and page:   # the page opened from the landing page's navigation, as a person does
                await bb._goto_drawn(tab, f"{url}/")
                opened = await bb._first_open(tab, page)
            else:
                await bb._goto_drawn(tab, f"{url}/{page}")
            if setup is not None:
                await bb.press(tab, setup, 0)
            unchanged = [await bb._rerun_unchanged(tab) for _ in range(presses + 1)][1:]
            pressed = [await bb.press(tab, control, i) for i in range(presses + 1)][1:]
            dragged = await drag_frames(tab) if drag else None
        finally:
            await ctx.close()
    out = {"unchanged": statistics.median(r["total"] for r in unchanged),
           "control": statistics.median(r["total"] for r in pressed),
           "presses": [round(r["total"]) for r in pressed]}
    if dragged is not None:
        out["drag"] = dragged["step_ms"]
    if opened is not None:
        out["open"] = opened[0]["total"]
        out["map"] = opened[1] if opened[1] is not None else float("nan")
    return out


async def compare(dirs: list[Path], *, page: str, control: str, kind: str, rounds: int, presses: int,
                  setup: str | None = None, setup_kind: str = "radio", drag: bool = False, first_open: bool = False,
                  echo=print) -> dict:
    """``{dir: {"unchanged": [ms per round], "control": [ms per round]}}`` (and ``"drag"``: the drag's time per
    step, :func:`drag_frames`, per round), rounds in alternating order."""
    from playwright.async_api import async_playwright

    exe = harness.chromium_executable()
    if exe is None:
        raise RuntimeError("no Chromium on this machine (Debian package 'chromium')")
    ctl = {"kind": kind, "index": 0, "label": control}
    first = None if setup is None else {"kind": setup_kind, "index": 0, "label": setup}
    out = {str(d): {"unchanged": [], "control": [], **({"drag": []} if drag else {}),
                    **({"open": [], "map": []} if first_open else {})} for d in dirs}
    with tempfile.TemporaryDirectory(prefix="odlab_ab_") as tmp, bb._run_cache():
        async with async_playwright() as p:
            browser = await p.chromium.launch(executable_path=exe, headless=True, args=harness.CHROMIUM_ARGS)
            try:
                for d in dirs:   # not counted: fills the run's disk cache (see the module's docstring)
                    await _round(browser, d, page, ctl, presses, Path(tmp) / "server.log", first, drag, first_open)
                    echo(f"warm-up round {d}")
                for r in range(rounds):
                    for d in dirs if r % 2 == 0 else dirs[::-1]:
                        got = await _round(browser, d, page, ctl, presses, Path(tmp) / "server.log", first, drag,
                                           first_open)
                        for k, v in got.items():
                            if k == "presses":   # each press of the round: printed, not one of the medians
                                continue
                            out[str(d)][k].append(v)
                        echo(f"round {r + 1} {d}: nothing changed {got['unchanged']:.0f} ms, "
                             f"{control} {got['control']:.0f} ms (each press: {got['presses']})"
                             + (f", map drag {got['drag']:.0f} ms a step" if drag else "")
                             + (f", first open {got['open']:.0f} ms, map drawn {got['map']:.0f} ms" if first_open
                                else ""))
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
    parser.add_argument("--setup", help="part of the label of a sidebar control pressed once before timing")
    parser.add_argument("--setup-kind", default="radio", choices=[k[0] for k in bb.CONTROL_KINDS])
    parser.add_argument("--drag", action="store_true", help="also time dragging the page's first map")
    parser.add_argument("--first-open", action="store_true",
                        help="open the page from the landing page's navigation and time it and its map's first "
                             "drawn frame (bench_browser's first open), before the reruns and presses")
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
                              presses=args.presses, setup=args.setup, setup_kind=args.setup_kind, drag=args.drag,
                              first_open=args.first_open))
    for d, r in out.items():
        print(f"{d}: nothing changed {[round(x) for x in r['unchanged']]} ms, median "
              f"{statistics.median(r['unchanged']):.0f}; {args.control} {[round(x) for x in r['control']]} ms, "
              f"median {statistics.median(r['control']):.0f}"
              + (f"; map drag {[round(x) for x in r['drag']]} ms a step, median {statistics.median(r['drag']):.0f}"
                 if args.drag else "")
              + (f"; first open median {statistics.median(r['open']):.0f} ms, map drawn median "
                 f"{statistics.median(r['map']):.0f} ms" if args.first_open else ""))
    if args.json:
        args.json.write_text(json.dumps({"page": args.page, "control": args.control, "setup": args.setup,
                                         "rounds": args.rounds, "presses": args.presses, "results": out}, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
