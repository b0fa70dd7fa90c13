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

Each slider is dragged twice over: with real pointer moves (each one a DevTools round trip from this process, so
on a busy machine fewer than 125 moves arrive in 2 s), and "in-page", with the value moved every 16 ms by a timer
in the page (the ``input`` event a moving thumb fires): what the page sustains when the moves arrive on time.

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
    out = paints_between(page, name, t_page0, t_page1, moves)
    if release:
        page.mouse.up()
    return out


IN_PAGE_DRAG_JS = """
async ([page, control, start, stop, seconds, every]) => {
  const input = document.querySelector(
    `.odlive[data-page='${page}'] .odlive-control[data-name='${control}'] input[type=range]`);
  const t0 = performance.now();
  let moves = 0;
  await new Promise((done) => {
    const id = setInterval(() => {
      const el = performance.now() - t0;
      if (el >= seconds * 1000) { clearInterval(id); done(); return; }
      input.value = start + (stop - start) * el / (seconds * 1000);
      input.dispatchEvent(new Event("input", { bubbles: true }));
      moves++;
    }, every);
  });
  return { t0, t1: performance.now(), moves };
}
"""


def drag_in_page(page, name: str, control: str = "epsilon", *, start: float = 0.3, stop: float = 3.0,
                 seconds: float = DRAG_S, move_ms: int = MOVE_MS) -> dict:
    """The same drag with the slider's value moved every ``move_ms`` by a timer in the page (an ``input`` event,
    what the range input fires under a moving pointer), without the driver's round trip per pointer move: what the
    page itself sustains when the moves arrive on time. Not released (no rerun)."""
    t = page.evaluate(IN_PAGE_DRAG_JS, [name, control, start, stop, seconds, move_ms])
    return paints_between(page, name, t["t0"], t["t1"], t["moves"])


def paints_between(page, name: str, t0: float, t1: float, moves: int) -> dict:
    """Frames painted by the component of page ``name`` between page times ``t0`` and ``t1``: fps (median of
    1000/interval), longest freeze, draw time."""
    rec = page.evaluate(f"() => window.odlive['{name}'] || {{paints: [], draw: []}}")
    kept = [(p, d) for p, d in zip(rec["paints"], rec["draw"], strict=True) if t0 <= p <= t1]
    paints = [p for p, _ in kept]
    draws = [d for _, d in kept]
    out = {"moves": moves, "frames": len(paints), "span_ms": t1 - t0,
           "draw_ms": statistics.median(draws) if draws else None, "draw_max_ms": max(draws) if draws else None}
    gaps = [b - a for a, b in itertools.pairwise([t0, *paints, t1])]
    inner = [b - a for a, b in itertools.pairwise(paints)]
    out["fps"] = statistics.median(1000.0 / g for g in inner) if inner else 0.0
    out["freeze_ms"] = max(gaps) if gaps else out["span_ms"]
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


def drag_rows(case: str, r: dict) -> list[dict]:
    return [{"case": case, "metric": "fps (median)", "value": round(r["fps"], 1), "unit": "1/s",
             "note": f"{r['frames']} frames for {r['moves']} moves in {r['span_ms']:.0f} ms; target ≥ 30"},
            {"case": case, "metric": "draw time (median)", "value": round(r["draw_ms"] or 0, 2), "unit": "ms",
             "note": f"max {r['draw_max_ms'] or 0:.1f} ms: the browser's work per frame"},
            {"case": case, "metric": "longest freeze", "value": round(r["freeze_ms"], 1), "unit": "ms",
             "note": "target ≤ 100"}]


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
                rows += drag_rows(f"{path} {'ε' if control == 'epsilon' else 'τ'} drag {i + 1}", r)
                rows.append({"case": f"{path} {'ε' if control == 'epsilon' else 'τ'} drag {i + 1}",
                             "metric": "release to rerun", "value": round(rerun, 3), "unit": "s",
                             "note": f"to {control} = {value:g}: the page reruns once"})
                time.sleep(1.0)
            for i in range(1 if quick else 3):
                r = drag_in_page(pg, name, control, start=start, stop=stop)
                rows += drag_rows(f"{path} {'ε' if control == 'epsilon' else 'τ'} in-page drag {i + 1}", r)
            pg.reload()
        b.close()
    return rows
