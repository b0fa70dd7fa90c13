"""Load: N concurrent browser sessions on one server, each uploading a ~50 MB trace file and moving a slider.

``python -m benchmarks -k load`` starts ``streamlit run app.py`` on 127.0.0.1 (:mod:`odapp.live`, the server of the
browser tests), writes one CSV of synthetic traces (``odcore.synth``, ISO times, ~50 MB) and opens ``N`` (default
10, ``ODLAB_BENCH_LOAD_SESSIONS``) headless Chromium sessions at once. Each session picks "Upload a file", sends the
file through the page's file picker, presses "Load this file", waits until the sidebar says the upload is the data
in use, then presses ArrowRight on the ε slider ``ROUNDS`` times, all sessions at the same moment (the driver of
``benchmarks/bench_browser.py``: its instrumented pages, painted-frame wait and barrier).

Reported: the peak resident memory of the server's process tree while the sessions run (sampled every 0.25 s),
the memory before and after, the errors (exceptions drawn in a page, error boxes, timeouts, sessions whose upload
did not become the data in use), the median and worst time from "Load this file" to the painted page and the
median and worst slider input-to-paint. The browsers share the machine's cores with the server, so the times are
pessimistic; memory is the server's alone.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import tempfile
import time
from pathlib import Path

from benchmarks.bench_browser import (
    SIDEBAR,
    Timeout,
    _Barrier,
    _new_page,
    _press,
    _RssSampler,
    _wait_done,
)
from odapp import live

SESSIONS = 10
QUICK_SESSIONS = 2
ROUNDS = 3
TARGET_MB = 50
LOAD_TIMEOUT_MS = 900_000


def make_upload(path: Path, target_mb: float = TARGET_MB) -> tuple[int, int]:
    """Write a CSV of synthetic traces of about ``target_mb`` MB (user, ISO time with Z, lat, lon); return
    (rows, bytes)."""
    from odcore.synth import SynthConfig, generate_city

    users = 1000
    df = generate_city(SynthConfig(users=users, weeks=1), rng=7)
    per_row = len(df.head(2000).to_csv(index=False).encode()) / 2000
    reps = max(1, round(target_mb * 1e6 / per_row / len(df)))
    if reps > 1:   # more users: copies of the city with new user ids (same streets, other people)
        import pandas as pd

        parts = [df.assign(user=df["user"] + k * users) for k in range(reps)]
        df = pd.concat(parts, ignore_index=True)
    out = df.assign(time=df["time"].dt.strftime("%Y-%m-%dT%H:%M:%SZ"))
    out.to_csv(path, index=False)
    return len(out), path.stat().st_size


async def _upload_session(browser, url: str, file: Path, rounds: int, barrier, out: dict) -> None:
    ctx, page = await _new_page(browser, {"width": 1200, "height": 900})
    try:
        # generous waits: while other sessions' uploads are parsed, a rerun can wait minutes for the server
        await page.goto(url, wait_until="commit")
        await page.locator(f"{SIDEBAR} [data-testid=stWidgetLabel]").first.wait_for(timeout=LOAD_TIMEOUT_MS)
        await _wait_done(page, 0, LOAD_TIMEOUT_MS)
        await page.evaluate("() => { window.__odb.inputT = null; }")
        await page.locator(SIDEBAR).get_by_text("Upload a file").click()
        await _wait_done(page, None, LOAD_TIMEOUT_MS)
        await page.locator("[data-testid=stFileUploaderDropzoneInput]").set_input_files(str(file))
        await page.locator("[data-testid=stFileChipName]").first.wait_for(timeout=LOAD_TIMEOUT_MS)
        await page.locator("[data-testid=stFileChipIconSpinner]").wait_for(state="detached", timeout=LOAD_TIMEOUT_MS)
        go = page.get_by_role("button", name="Load this file")
        await go.wait_for(timeout=LOAD_TIMEOUT_MS)
        await _wait_done(page, None, LOAD_TIMEOUT_MS)   # the rerun the upload caused (it enables the button)
        t0 = time.time() * 1000
        await page.evaluate("() => { window.__odb.inputT = null; }")
        await go.click()
        loaded = page.locator(SIDEBAR).get_by_text(f"Data: Upload: {file.name}")
        failed = page.locator("[data-testid=stAlertContentError]")
        await loaded.or_(failed).first.wait_for(timeout=LOAD_TIMEOUT_MS)
        if not await loaded.count():
            raise AssertionError(f"upload refused: {(await failed.first.inner_text())[:150]}")
        r = await _wait_done(page, None, LOAD_TIMEOUT_MS)
        out["load"].append(r["origin"] + r["paint"] - t0)
        idx = await page.locator(f"{SIDEBAR} [data-testid=stSlider]").evaluate_all(
            "(els) => els.findIndex(e => e.innerText.includes('ε'))")
        if idx < 0:
            raise AssertionError("no ε slider in the sidebar")
        for _ in range(rounds):
            await barrier()
            r = await _press(page, {"kind": "slider", "index": idx})
            out["press"].append(r["total"])
            out["exceptions"] += r["exceptions"]
        out["exceptions"] += await page.locator("[data-testid=stException]").count()
        out["error_boxes"] += await page.locator("[data-testid=stAlertContentError]").count()
    except (Timeout, AssertionError, Exception) as e:
        out["errors"].append(f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:200])
    finally:
        await ctx.close()
        await barrier(leave=True)


def _med(xs):
    return statistics.median(xs) if xs else None


async def _run(quick: bool) -> list[dict]:
    from playwright.async_api import async_playwright

    exe = live.chromium_executable()
    if exe is None:
        raise RuntimeError("no Chromium on this machine (Debian package 'chromium')")
    n = int(os.environ.get("ODLAB_BENCH_LOAD_SESSIONS") or (QUICK_SESSIONS if quick else SESSIONS))
    tmp = Path(tempfile.mkdtemp(prefix="odlab_bench_load_"))
    file = tmp / "upload_traces.csv"
    t0 = time.perf_counter()
    n_rows, n_bytes = make_upload(file, 5 if quick else TARGET_MB)
    t_make = time.perf_counter() - t0
    log = tmp / "server.log"
    out = {"load": [], "press": [], "errors": [], "exceptions": 0, "error_boxes": 0}
    proc, url = live.start_server(log)
    try:
        await asyncio.to_thread(live.wait_healthy, proc, url, 120)
        rss_before = live.tree_rss_bytes(proc.pid)
        async with async_playwright() as p:
            browser = await p.chromium.launch(executable_path=exe, headless=True, args=live.CHROMIUM_ARGS)
            try:
                barrier = _Barrier(n)
                t0 = time.perf_counter()
                with _RssSampler(proc.pid) as rss:
                    await asyncio.gather(*(_upload_session(browser, url, file, ROUNDS, barrier, out)
                                           for _ in range(n)))
                wall = time.perf_counter() - t0
            finally:
                await browser.close()
        await asyncio.sleep(5)
        rss_after = live.tree_rss_bytes(proc.pid)
        temp_left = sorted(p.name for p in Path(tempfile.gettempdir()).glob("odlab-session-*"))
    finally:
        live.stop_server(proc)
    case = f"{n} sessions x upload {n_bytes / 1e6:.0f} MB ({n_rows:,} rows) + ε slider"
    errors = len(out["errors"]) + out["exceptions"] + out["error_boxes"] + (n - len(out["load"]))
    detail = "; ".join(sorted(set(out["errors"])))[:400]
    return [
        {"case": case, "metric": "server RSS peak", "value": rss.peak / 2**20, "unit": "MiB", "baseline":
         rss_before / 2**20, "ratio": rss.peak / max(rss_before, 1),
         "note": f"baseline = idle server; 5 s after the sessions closed {rss_after / 2**20:.0f} MiB"},
        {"case": case, "metric": "errors", "value": errors, "unit": "", "baseline": None, "ratio": None,
         "note": (f"{len(out['load'])}/{n} uploads became the data in use; exceptions {out['exceptions']}, "
                  f"error boxes {out['error_boxes']}; {detail or 'no failures'}")},
        {"case": case, "metric": "median load (button to painted page)", "value": _med(out["load"]), "unit": "ms",
         "baseline": None, "ratio": None, "note": f"worst {max(out['load']) if out['load'] else None} ms; "
                                                  f"all {n} sessions at once; wall {wall:.0f} s"},
        {"case": case, "metric": "median ε slider input-to-paint", "value": _med(out["press"]), "unit": "ms",
         "baseline": None, "ratio": None,
         "note": f"worst {max(out['press']) if out['press'] else None} ms; {len(out['press'])} presses; "
                 f"file made in {t_make:.0f} s; session folders left: {len(temp_left)}"},
    ]


def run(quick: bool) -> list[dict]:
    return asyncio.run(_run(quick))
