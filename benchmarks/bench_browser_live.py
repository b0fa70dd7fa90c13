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
- ``frames over 100 ms`` and ``rAF fps``: the page's animation frames during the drag, from a
  ``requestAnimationFrame`` loop started just before it (every frame the browser produced, whether or not the
  curves changed): how many intervals between two frames exceeded 100 ms, the longest, and the median rate;
- ``long animation frames``: Chromium's Long Animation Frames API (``PerformanceObserver``, type
  ``long-animation-frame``: frames of 50 ms or more with the scripts that ran in them): how many, the longest, and
  the shares of their time spent in scripts, in forced style and layout, and in rendering (style, layout, paint
  after ``renderStart``; the rest is the main thread waiting), with the slowest script named;
- ``release to rerun``: from letting go to the end of the page's one rerun with the new value (the sidebar's note
  shows it and Streamlit marks the script as no longer running; the maps and plotly charts may still be drawing).
  The drags of one slider end in turn on two values (:func:`drag_plan`), so that every release changes the value
  and is a real rerun (a drag that ended where the last one did would release nothing new).

Each slider is dragged twice over: with real pointer moves (each one a DevTools round trip from this process, so
on a busy machine fewer than 125 moves arrive in 2 s), and "in-page", with the value moved every 16 ms by a timer
in the page (the ``input`` event a moving thumb fires): what the page sustains when the moves arrive on time.

``ODLAB_BENCH_LIVE_PAGES=Attack,OD_release`` keeps the drags of those pages only (to compare two versions of the
component on the pages both have).

Targets (the live-curve design): median ≥ 30 fps, no freeze over 100 ms.
"""

from __future__ import annotations

import itertools
import os
import statistics
import time
from pathlib import Path

from benchmarks import harness

# (url path, the component's page name, the slider dragged, from, to)
DRAGS = (("Attack", "attack", "epsilon", 0.3, 3.0), ("Privacy_budget", "budget", "epsilon", 0.3, 3.0),
         ("OD_release", "release", "epsilon", 0.3, 3.0), ("OD_release", "release", "threshold", 20, 300),
         ("See_the_noise", "noise", "epsilon", 0.3, 3.0), ("See_the_noise", "noise", "count", 20, 280),
         ("Play_the_attacker", "game", "epsilon", 0.3, 3.0), ("Play_the_attacker", "game", "threshold", 20, 300))
SYMBOLS = {"epsilon": "ε", "threshold": "τ", "count": "c"}
PAGES_ENV = "ODLAB_BENCH_LIVE_PAGES"   # e.g. "Attack,OD_release": only the drags of these pages (default: all)
DRAG_S = 2.0
MOVE_MS = 16
STEPS = {"epsilon": 0.01, "threshold": 1, "count": 1}   # the live sliders' steps (odapp/live/view.py)
SECOND_END = 0.2   # the other end of every second drag: this share of the way back from ``stop`` towards ``start``


def drag_plan(start: float, stop: float, n: int, step: float) -> list[tuple[float, float]]:
    """``n`` drags of a slider from ``start``: (from, to) pairs whose ends alternate between ``stop`` and a value
    :data:`SECOND_END` of the way back, on the slider's ``step``, so that no drag ends where the one before did
    (its release would change nothing and rerun nothing).

    >>> drag_plan(0.3, 3.0, 3, 0.01)
    [(0.3, 3.0), (0.3, 2.46), (0.3, 3.0)]
    """
    other = round(round((stop - SECOND_END * (stop - start)) / step) * step, 10)
    return [(start, stop if i % 2 == 0 else other) for i in range(n)]


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


FRAMES_START_JS = """
() => {
  const r = window.__odframes = { t: [], loaf: [], on: true };
  const tick = (t) => { r.t.push(t); if (r.on) requestAnimationFrame(tick); };
  requestAnimationFrame(tick);
  try {
    r.keep = (entries) => {
      for (const e of entries) {
        r.loaf.push({ start: e.startTime, dur: e.duration, blocking: e.blockingDuration,
                      layout: e.scripts.reduce((a, s) => a + (s.forcedStyleAndLayoutDuration || 0), 0),
                      script: e.scripts.reduce((a, s) => a + s.duration, 0),
                      render: e.renderStart ? e.startTime + e.duration - e.renderStart : 0,
                      scripts: e.scripts.map((s) => ({ who: (s.invoker || "") + " " + (s.sourceFunctionName || "")
                                                        + " " + (s.sourceURL || "").split("/").pop(),
                                                       dur: s.duration })) });
      }
    };
    r.obs = new PerformanceObserver((list) => r.keep(list.getEntries()));
    r.obs.observe({ type: "long-animation-frame", buffered: false });
  } catch (e) { r.noLoaf = String(e); }
  return performance.now();
}
"""

FRAMES_STOP_JS = """
() => {
  const r = window.__odframes;
  r.on = false;
  if (r.obs) { r.keep(r.obs.takeRecords()); r.obs.disconnect(); }
  return { t: r.t, loaf: r.loaf };
}
"""


def frames_between(rec: dict, t0: float, t1: float) -> dict:
    """Animation frames (``requestAnimationFrame`` timestamps) and long animation frames between page times ``t0``
    and ``t1``: frames over 100 ms, the longest gap, the median rate."""
    ts = [t for t in rec["t"] if t0 <= t <= t1]
    gaps = [b - a for a, b in itertools.pairwise([t0, *ts, t1])]
    inner = [b - a for a, b in itertools.pairwise(ts)]
    loaf = [e for e in rec["loaf"] if t0 <= e["start"] <= t1]
    worst = max(loaf, key=lambda e: e["dur"], default=None)
    slow = max(worst["scripts"], key=lambda s: s["dur"], default=None) if worst else None
    return {"raf_frames": len(ts), "raf_fps": statistics.median(1000.0 / g for g in inner if g > 0) if inner else 0.0,
            "raf_over_100": sum(g > 100 for g in gaps), "raf_longest": max(gaps) if gaps else t1 - t0,
            "loaf_n": len(loaf), "loaf_longest": worst["dur"] if worst else 0.0,
            "loaf_layout_share": (sum(e["layout"] for e in loaf) / sum(e["dur"] for e in loaf)) if loaf else 0.0,
            "loaf_script_share": (sum(e.get("script", 0) for e in loaf) / sum(e["dur"] for e in loaf)) if loaf else 0.0,
            "loaf_render_share": (sum(e.get("render", 0) for e in loaf) / sum(e["dur"] for e in loaf)) if loaf else 0.0,
            "loaf_script": f"{slow['who'].strip()} {slow['dur']:.0f} ms" if slow else ""}


def drag(page, name: str, control: str = "epsilon", *, start: float = 0.3, stop: float = 3.0,
         seconds: float = DRAG_S, move_ms: int = MOVE_MS, release: bool = True) -> dict:
    """Hold the thumb at ``start`` and move towards ``stop`` every ``move_ms`` for ``seconds``; the paints."""
    x0, y, _ = thumb_x(page, name, start, control)
    x1, _, _ = thumb_x(page, name, stop, control)
    page.mouse.move(x0, y)
    page.mouse.down()
    t_page0 = page.evaluate(FRAMES_START_JS)
    t0 = time.perf_counter()
    moves = 0
    while (el := time.perf_counter() - t0) < seconds:
        page.mouse.move(x0 + (x1 - x0) * el / seconds, y)
        moves += 1
        nxt = t0 + moves * move_ms / 1000
        time.sleep(max(0.0, nxt - time.perf_counter()))
    page.mouse.move(x1, y)   # the end itself: a drag ends on ``stop``, not on the last move before the time was up
    moves += 1
    t_page1 = page.evaluate("() => performance.now()")
    out = paints_between(page, name, t_page0, t_page1, moves)
    out.update(frames_between(page.evaluate(FRAMES_STOP_JS), t_page0, t_page1))
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
    page.evaluate(FRAMES_START_JS)
    t = page.evaluate(IN_PAGE_DRAG_JS, [name, control, start, stop, seconds, move_ms])
    out = paints_between(page, name, t["t0"], t["t1"], t["moves"])
    out.update(frames_between(page.evaluate(FRAMES_STOP_JS), t["t0"], t["t1"]))
    return out


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


SHOWN_IN_SIDEBAR = ("[...document.querySelectorAll('[data-testid=stSidebar] strong')]"
                    ".some(e => e.textContent === t)")
SHOWN_IN_METRIC = "[...document.querySelectorAll('[data-testid=stMetric]')].some(m => m.innerText.includes(t))"


def shown_after_release(name: str, settings: dict, control: str) -> tuple[str, str]:
    """What the page shows once it reran with the released value: a JavaScript test of ``t`` and ``t``. The
    sidebar's note for the page's ε and threshold; See the noise's own ε and count: its 95 % range metric."""
    if name != "noise":
        return SHOWN_IN_SIDEBAR, f"{settings[control]:g}"
    from odcore.report.teaching import noise_picture

    pic = noise_picture(settings["count"], settings["epsilon"], settings["threshold"])
    return SHOWN_IN_METRIC, f"{pic.low:.1f} – {pic.high:.1f}"


def release_to_rerun(page, shown: tuple[str, str], timeout_s: float = 120) -> float:
    """Seconds from letting go (``mouse.up``) to the end of the page's rerun with the new value (``shown``: what it
    shows then, :func:`shown_after_release`, and the script is no longer running)."""
    test, text = shown
    t0 = time.perf_counter()
    page.mouse.up()
    page.wait_for_function(
        f"(t) => {test} && "
        "!['running', 'initial'].includes(document.querySelector('[data-testid=stApp]')"
        ".getAttribute('data-test-script-state'))", arg=text, timeout=timeout_s * 1000, polling=16)
    return time.perf_counter() - t0


def settle(page, timeout_s: float = 180) -> None:
    """Wait until the page's script run is over and its elements are drawn (a drag started while the page is still
    arriving measures the page's loading, not the drag)."""
    page.wait_for_function(
        "() => { const a = document.querySelector('[data-testid=stApp]'); "
        "return a && !['running', 'initial'].includes(a.getAttribute('data-test-script-state')); }",
        timeout=timeout_s * 1000)
    page.wait_for_timeout(1000)


def drag_rows(case: str, r: dict) -> list[dict]:
    return [{"case": case, "metric": "fps (median)", "value": round(r["fps"], 1), "unit": "1/s",
             "note": f"{r['frames']} frames for {r['moves']} moves in {r['span_ms']:.0f} ms; target ≥ 30"},
            {"case": case, "metric": "draw time (median)", "value": round(r["draw_ms"] or 0, 2), "unit": "ms",
             "note": f"max {r['draw_max_ms'] or 0:.1f} ms: the browser's work per frame"},
            {"case": case, "metric": "longest freeze", "value": round(r["freeze_ms"], 1), "unit": "ms",
             "note": "target ≤ 100"},
            {"case": case, "metric": "frames over 100 ms", "value": r["raf_over_100"], "unit": "",
             "note": f"animation frames: {r['raf_frames']}, median {r['raf_fps']:.1f} fps, longest "
                     f"{r['raf_longest']:.0f} ms"},
            {"case": case, "metric": "long animation frames", "value": r["loaf_n"], "unit": "",
             "note": f"≥ 50 ms; longest {r['loaf_longest']:.0f} ms; of their time: scripts "
                     f"{100 * r['loaf_script_share']:.0f} %, forced style/layout {100 * r['loaf_layout_share']:.0f} %, "
                     f"rendering {100 * r['loaf_render_share']:.0f} %; slowest script: {r['loaf_script']}"}]


def run(quick: bool = False) -> list[dict]:
    from playwright.sync_api import sync_playwright

    rows: list[dict] = []
    exe = harness.chromium_executable()
    if exe is None:
        return [{"case": "live drag", "metric": "skipped", "value": None, "unit": "", "note": "no Chromium"}]
    log = Path("/tmp") / "bench_browser_live.log"
    with harness.streamlit_server(log) as url, sync_playwright() as p:
        b = p.chromium.launch(executable_path=exe, headless=True, args=harness.CHROMIUM_ARGS)
        pg = b.new_page(viewport={"width": 1400, "height": 1000})
        only = [p for p in os.environ.get(PAGES_ENV, "").split(",") if p]
        for path, name, control, start, stop in DRAGS:
            if only and path not in only:
                continue
            pg.goto(f"{url}/{path}")
            pg.wait_for_selector(".odlive-range", timeout=180_000)
            pg.wait_for_function(f"() => window.odlive && window.odlive['{name}']", timeout=60_000)
            settle(pg)
            sym = SYMBOLS[control]
            for i, (a, z) in enumerate(drag_plan(start, stop, 1 if quick else 3, STEPS[control])):
                before = pg.evaluate(f"() => window.odlive['{name}'].settings")[control]
                r = drag(pg, name, control, start=a, stop=z, release=False)
                settings = pg.evaluate(f"() => window.odlive['{name}'].settings")
                if settings[control] == before:
                    raise RuntimeError(f"{path}: the drag of {control} ended on {before:g}, where it was: its release "
                                       "would rerun nothing")
                rerun = release_to_rerun(pg, shown_after_release(name, settings, control))
                rows += drag_rows(f"{path} {sym} drag {i + 1}", r)
                rows.append({"case": f"{path} {sym} drag {i + 1}",
                             "metric": "release to rerun", "value": round(rerun, 3), "unit": "s",
                             "note": f"{control} {before:g} -> {settings[control]:g}: the page reruns once"})
                settle(pg)
            for i in range(1 if quick else 3):
                r = drag_in_page(pg, name, control, start=start, stop=stop)
                rows += drag_rows(f"{path} {sym} in-page drag {i + 1}", r)
            pg.reload()
        b.close()
    return rows
