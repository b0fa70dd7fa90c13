"""Live curves while ε is dragged: frames per second of each live curve and its longest freeze.

The pages' live component (``odapp/components/live``) draws its curves in the browser at every animation frame in
which the slider's value changed and records when (``window.odlive[...].paints``). This benchmark opens a page in
headless Debian Chromium, holds the slider's thumb and moves the pointer every 16 ms for 2 s (real input events over
the DevTools protocol, as a person's mouse), then reads the paints made during the drag:

- ``fps``: the median over the drag of 1000 / (time between two consecutive painted frames);
- ``frames``: painted frames in the 2 s (each one a changed curve: the component paints only when the value moved);
- ``longest freeze``: the longest time without a painted frame during the drag (pointer moving all along);
- ``draw time``: what one frame costs the browser (interpolating the tables and drawing every curve): the
  component's own share; the rest of a frame's interval is the pointer events' delivery;
- ``release to rerun``: from letting go to the end of the page's one rerun with the new value (the sidebar's note
  shows it and Streamlit marks the script as no longer running; the maps and plotly charts may still be drawing).

Targets (the live-curve design): median ≥ 30 fps, no freeze over 100 ms.
"""

from __future__ import annotations

import itertools
import statistics
import time
from pathlib import Path

from odapp import live

# (url path, the component's page name, the slider dragged, from, to)
DRAGS = (("Attack", "attack", "epsilon", 0.3, 3.0), ("Privacy_budget", "budget", "epsilon", 0.3, 3.0),
         ("OD_release", "release", "epsilon", 0.3, 3.0), ("OD_release", "release", "threshold", 20, 300))
DRAG_S = 2.0
MOVE_MS = 16


def thumb_x(page, name: str, value: float, control: str = "epsilon") -> tuple[float, float, dict]:
    """Screen position of the thumb of slider ``control`` of the live component ``name`` at ``value``, and the
    slider's box."""
    sel = f".odlive[data-page='{name}'] .odlive-control[data-name='{control}'] .odlive-range"
    el = page.locator(sel).first
    el.scroll_into_view_if_needed()
    box = el.bounding_box()
    lo, hi = float(el.get_attribute("min")), float(el.get_attribute("max"))
    # a range input's thumb travels over the width minus its own (~16 px in Chromium)
    pad = 8.0
    x = box["x"] + pad + (value - lo) / (hi - lo) * (box["width"] - 2 * pad)
    return x, box["y"] + box["height"] / 2, box


def drag(page, name: str, control: str = "epsilon", *, start: float = 0.3, stop: float = 3.0,
         seconds: float = DRAG_S, move_ms: int = MOVE_MS, release: bool = True) -> dict:
    """Hold the thumb at ``start`` and move towards ``stop`` every ``move_ms`` for ``seconds``; the paints."""
    x0, y, _ = thumb_x(page, name, start, control)
    x1, _, _ = thumb_x(page, name, stop, control)
    page.mouse.move(x0, y)
    page.mouse.down()
    t_page0 = page.evaluate("() => performance.now()")
    t0 = time.perf_counter()
    moves = 0
    while (el := time.perf_counter() - t0) < seconds:
        page.mouse.move(x0 + (x1 - x0) * el / seconds, y)
        moves += 1
        nxt = t0 + moves * move_ms / 1000
        time.sleep(max(0.0, nxt - time.perf_counter()))
    t_page1 = page.evaluate("() => performance.now()")
    rec = page.evaluate(f"() => window.odlive['{name}'] || {{paints: [], draw: []}}")
    kept = [(p, d) for p, d in zip(rec["paints"], rec["draw"], strict=True) if t_page0 <= p <= t_page1]
    paints = [p for p, _ in kept]
    draws = [d for _, d in kept]
    out = {"moves": moves, "frames": len(paints), "span_ms": t_page1 - t_page0,
           "draw_ms": statistics.median(draws) if draws else None, "draw_max_ms": max(draws) if draws else None}
    gaps = [b - a for a, b in itertools.pairwise([t_page0, *paints, t_page1])]
    inner = [b - a for a, b in itertools.pairwise(paints)]
    out["fps"] = statistics.median(1000.0 / g for g in inner) if inner else 0.0
    out["freeze_ms"] = max(gaps) if gaps else out["span_ms"]
    if release:
        page.mouse.up()
    return out


def release_to_rerun(page, name: str, value_text: str, timeout_s: float = 120) -> float:
    """Seconds from letting go (``mouse.up``) to the end of the page's rerun with the new value (the sidebar's note
    shows it and the script is no longer running)."""
    t0 = time.perf_counter()
    page.mouse.up()
    page.wait_for_function(
        "(t) => [...document.querySelectorAll('[data-testid=stSidebar] strong')].some(e => e.textContent === t) && "
        "!['running', 'initial'].includes(document.querySelector('[data-testid=stApp]')"
        ".getAttribute('data-test-script-state'))", arg=value_text, timeout=timeout_s * 1000, polling=16)
    return time.perf_counter() - t0


def run(quick: bool = False) -> list[dict]:
    from playwright.sync_api import sync_playwright

    rows: list[dict] = []
    exe = live.chromium_executable()
    if exe is None:
        return [{"case": "live drag", "metric": "skipped", "value": None, "unit": "", "note": "no Chromium"}]
    log = Path("/tmp") / "bench_browser_live.log"
    with live.streamlit_server(log) as url, sync_playwright() as p:
        b = p.chromium.launch(executable_path=exe, headless=True, args=live.CHROMIUM_ARGS)
        pg = b.new_page(viewport={"width": 1400, "height": 1000})
        for path, name, control, start, stop in DRAGS:
            pg.goto(f"{url}/{path}")
            pg.wait_for_selector(".odlive-range", timeout=180_000)
            pg.wait_for_function(f"() => window.odlive && window.odlive['{name}']", timeout=60_000)
            for i in range(1 if quick else 3):
                r = drag(pg, name, control, start=start, stop=stop, release=False)
                value = pg.evaluate(f"() => window.odlive['{name}'].settings['{control}']")
                rerun = release_to_rerun(pg, name, f"{value:g}")
                case = f"{path} {'ε' if control == 'epsilon' else 'τ'} drag {i + 1}"
                rows += [{"case": case, "metric": "fps (median)", "value": round(r["fps"], 1), "unit": "1/s",
                          "note": f"{r['frames']} frames for {r['moves']} pointer moves in {r['span_ms']:.0f} ms; "
                                  "target ≥ 30"},
                         {"case": case, "metric": "draw time (median)", "value": round(r["draw_ms"], 2),
                          "unit": "ms", "note": f"max {r['draw_max_ms']:.1f} ms: the browser's work per frame"},
                         {"case": case, "metric": "longest freeze", "value": round(r["freeze_ms"], 1), "unit": "ms",
                          "note": "target ≤ 100"},
                         {"case": case, "metric": "release to rerun", "value": round(rerun, 3), "unit": "s",
                          "note": f"to {control} = {value:g}: the page reruns once"}]
                time.sleep(1.0)
        b.close()
    return rows
