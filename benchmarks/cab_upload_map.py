"""A Cabspotting week uploaded in the dashboard to the OD release map drawn, beside ``python -m odcore trips`` on the
same zip, in turn, in one run.

    python -m benchmarks.cab_upload_map --rounds 3

The input is one week of the Cabspotting folder (``$ODCORE_BENCH_CABSPOTTING``, default
``/work/shared/data/cabspotting_sf``) as the zip a person uploads (``new_<cab>.txt`` files, the fixes of the week of
2008-05-19; :func:`tests.browser.test_browser_map.cabspotting_week_zip`), written once to
``$ODCORE_BENCH_DATA/cabspotting_week.zip``. Each round, in alternating order:

- *app*: a freshly started ``streamlit run app.py`` (no cache holds the upload), Debian's headless Chromium (the
  flags of :data:`benchmarks.harness.CHROMIUM_ARGS`) opens the OD release page, picks "Upload a file", sends the zip and
  waits until "Load this file" can be pressed; then from the press (its ``mousedown``) to the painted frame after
  the rerun ends with the page quiet (*page*), and to the painted frame after the map element's last draw
  (*map drawn*; :func:`benchmarks.bench_browser.map_drawn`). The server's CPU seconds over that span are read from
  ``/proc`` (the server process and its children), and the browser's (this benchmark's process tree without the
  server: Chromium and the driver).
- *trips*: ``python -m odcore trips --input cabspotting_week.zip --json`` in a fresh process: wall and CPU seconds
  (the process and the workers it waits for).

With ``--baseline DIR`` the app of another checkout (e.g. the main branch's worktree) runs in each round too, in
the rotating order, so that a change is measured against the code it changes in the same run.

Prints one line per round and the medians, with each app's map-drawn time as a multiple of ``trips``' wall in the
same round.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import harness
from benchmarks.bench_browser import SIDEBAR, map_drawn, new_page, wait_done

REPO = Path(__file__).resolve().parent.parent
DATA = Path(os.environ.get("ODCORE_BENCH_DATA", "/tmp/odcore-bench"))
CABSPOTTING = Path(os.environ.get("ODCORE_BENCH_CABSPOTTING", "/work/shared/data/cabspotting_sf"))
TIMEOUT_MS = 600_000


def week_zip() -> Path:
    """The Cabspotting week as the zip a person uploads (written once)."""
    from tests.browser.test_browser_map import cabspotting_week_zip

    out = DATA / "cabspotting_week.zip"
    if not out.exists():
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = out.with_suffix(".tmp")
        tmp.write_bytes(cabspotting_week_zip(CABSPOTTING))
        tmp.replace(out)
    return out


def run_trips(z: Path) -> dict:
    """Wall and CPU seconds of ``odcore trips`` on the zip, in a fresh process."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    p = subprocess.run([sys.executable, "-m", "odcore", "trips", "--input", str(z), "--json"], cwd=REPO,
                       capture_output=True, text=True)
    wall = time.perf_counter() - t0
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    if p.returncode != 0:
        raise SystemExit(f"trips failed: {p.stderr[-2000:]}")
    return {"wall": wall, "cpu": (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)}


async def _app_round(z: Path, log: Path, app_dir: Path = REPO) -> dict:
    from playwright.async_api import async_playwright

    proc, url = harness.start_server(log, app_dir=app_dir)
    try:
        harness.wait_healthy(proc, url, 120)
        async with async_playwright() as pw:
            browser = await pw.chromium.launch(executable_path=shutil.which("chromium"), args=harness.CHROMIUM_ARGS)
            ctx, page = await new_page(browser, {"width": 1440, "height": 900})
            await page.goto(f"{url}/OD_release", wait_until="commit")
            await page.locator(f"{SIDEBAR} [data-testid=stWidgetLabel]").first.wait_for(timeout=TIMEOUT_MS)
            await wait_done(page, 0, TIMEOUT_MS)
            picker = page.locator("[data-testid=stFileUploaderDropzoneInput]")
            for _ in range(5):      # a click can be lost while the page is busy
                await page.locator(SIDEBAR).get_by_text("Upload a file").click()
                try:
                    await picker.wait_for(state="attached", timeout=10_000)
                    break
                except Exception:  # playwright's TimeoutError: the click started no rerun
                    continue
            await wait_done(page, 0, TIMEOUT_MS)
            await picker.set_input_files(str(z))
            await page.locator("[data-testid=stFileChipName]").first.wait_for(timeout=TIMEOUT_MS)
            await page.locator("[data-testid=stFileChipIconSpinner]").wait_for(state="detached", timeout=TIMEOUT_MS)
            go = page.get_by_role("button", name="Load this file")
            await go.wait_for(timeout=TIMEOUT_MS)
            await wait_done(page, None, TIMEOUT_MS)
            await page.wait_for_timeout(1000)
            cpu0 = harness.tree_cpu_seconds(proc.pid)
            own0 = harness.tree_cpu_seconds(os.getpid(), exclude=proc.pid)
            await page.evaluate("() => { window.__odb.inputT = null; }")
            await go.click()
            await page.locator(SIDEBAR).get_by_text(f"Data: Upload: {z.name}").first.wait_for(timeout=TIMEOUT_MS)
            r = await wait_done(page, None, TIMEOUT_MS)
            await page.locator(".odmap canvas, [data-testid=stDeckGlJsonChart] canvas").first.wait_for(timeout=TIMEOUT_MS)
            drawn = await map_drawn(page)
            cpu1 = harness.tree_cpu_seconds(proc.pid)
            own1 = harness.tree_cpu_seconds(os.getpid(), exclude=proc.pid)
            errors = await page.locator("[data-testid=stException], [data-testid=stAlertContentError]").count()
            await ctx.close()
            await browser.close()
    finally:
        harness.stop_server(proc)
    return {"page": (r["paint"] - r["input"]) / 1000, "map": None if drawn is None else drawn / 1000,
            "server_cpu": cpu1 - cpu0, "browser_cpu": own1 - own0, "errors": errors}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--baseline", type=Path, default=None, metavar="DIR",
                    help="also run the app of this checkout in each round (e.g. the main branch's worktree)")
    a = ap.parse_args(argv)
    z = week_zip()
    print(f"input {z} ({z.stat().st_size / 1e6:.1f} MB); machine load {os.getloadavg()[0]:.1f}", flush=True)
    apps = {"app": REPO, **({"baseline app": a.baseline.resolve()} if a.baseline else {})}
    runs = (*apps, "trips")
    rows: list[dict] = []
    with tempfile.TemporaryDirectory(prefix="odlab-cabmap-") as tmp:
        for k in range(a.rounds):
            order = runs[k % len(runs):] + runs[:k % len(runs)]
            got: dict = {}
            for who in order:
                got[who] = (asyncio.run(_app_round(z, Path(tmp) / f"server{k}.log", apps[who])) if who in apps
                            else run_trips(z))
            tr = got["trips"]
            parts = []
            for who in apps:
                app = got[who]
                app["ratio"] = app["map"] / tr["wall"] if app["map"] else float("nan")
                parts.append(f"{who} page {app['page']:.2f} s, map drawn {app['map'] or float('nan'):.2f} s "
                             f"(x trips {app['ratio']:.2f}), server CPU {app['server_cpu']:.2f} s, browser CPU "
                             f"{app['browser_cpu']:.2f} s, errors "
                             f"{app['errors']}")
            print(f"round {k + 1} ({' then '.join(order)}; load {os.getloadavg()[0]:.1f}): {'; '.join(parts)}; "
                  f"trips {tr['wall']:.2f} s wall, {tr['cpu']:.2f} s CPU", flush=True)
            rows.append(got)
    med = statistics.median
    for who in apps:
        got = [r[who] for r in rows if r[who]["map"]]
        print(f"median {who}: map drawn {med(g['map'] for g in got):.2f} s, page "
              f"{med(g['page'] for g in got):.2f} s, server CPU {med(g['server_cpu'] for g in got):.2f} s, browser CPU "
              f"{med(g['browser_cpu'] for g in got):.2f} s, "
              f"map drawn x trips (per round) {med(g['ratio'] for g in got):.2f}")
    print(f"median trips: {med(r['trips']['wall'] for r in rows):.2f} s wall, "
          f"{med(r['trips']['cpu'] for r in rows):.2f} s CPU")
    return 0


if __name__ == "__main__":
    sys.exit(main())
