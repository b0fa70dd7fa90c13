"""A class dragging at once: one person drags ε in a real browser while the rest of the class presses ε too.

``python -m benchmarks -k live_crowd`` starts ``python -m odserve --workers 2`` (HAProxy in front of two
Streamlit servers, as for a class: :mod:`odserve`, ``benchmarks/bench_class.py``) on 127.0.0.1, opens the OD
release page once so the city is loaded (the teacher's tab), then:

- **the others**: ``N - 1`` protocol clients (:class:`benchmarks.protocol_client.ProtocolClient`: what a browser tab
  asks of the server, without drawing) in a process of their own, each from its own loopback address
  (``127.0.0.2``, ...: other laptops), open OD release and press its live ε slider one step (the component's
  release: one rerun), wait for the run to finish, think 1-3 s (each its own seeded generator) and press again,
  until the person below is done;
- **the person**: headless Debian Chromium (:mod:`benchmarks.harness`) opens OD release, then Attack, and on each drags ε
  with real pointer moves every 16 ms for 2 s (:func:`benchmarks.bench_browser_live.drag`), lets go, waits for the
  page's rerun and its paint, and drags again; the drags end in turn on two values
  (:func:`benchmarks.bench_browser_live.drag_plan`), so that every release is a real rerun. Last, one "in-page"
  drag per page (:func:`benchmarks.bench_browser_live.drag_in_page`: the value moved every 16 ms by a timer in the
  page, not released): what the page sustains when the moves arrive on time, for each pointer move of the drags
  above is a DevTools round trip from this process, and on a busy machine fewer arrive than a mouse would send.

Reported for the person: frames per second while dragging (median of 1000 / interval between the live component's
painted frames) and the longest freeze (the longest time without a painted frame) per page, both over the drags;
release to paint (from letting go to the end of the page's rerun with the new value, as
:func:`benchmarks.bench_browser_live.release_to_rerun` sees it, and then the next two animation frames: painted) per
release and its median; exceptions shown on the page. For the others: sessions opened, presses (reruns) done, their
errors (a run with an exception, a closed socket, a run not finished in 120 s), and the median and 95th percentile
press-to-finished time; and the requests HAProxy logged with a status other than 200, 101 or 304 (``access.log``),
with those of the person's browser (127.0.0.1) named. The machine's load average (1 min) before, after and at its
highest (sampled every 5 s) is in the notes: on a shared machine the figures say little without it.

``N`` is 10 (``--quick``: 4, one drag fewer per page); ``ODLAB_BENCH_LIVE_CROWD_SESSIONS=30`` sets it (30: the
"no errors" target). Targets (the live-curve design): with 10 sessions the person's frame rate
stays ≥ 30 fps (the drag costs the server nothing), median release to paint < 1 s; with 30 sessions no errors.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np

from benchmarks import harness
from benchmarks.bench_browser_live import (
    drag,
    drag_in_page,
    drag_plan,
    release_to_rerun,
    settle,
    shown_after_release,
)
from benchmarks.protocol_client import ProtocolClient
from odcore.paths import REPO_ROOT

SESSIONS = 10
QUICK_SESSIONS = 4
SESSIONS_ENV = "ODLAB_BENCH_LIVE_CROWD_SESSIONS"
DRAGS_PER_PAGE = 3
QUICK_DRAGS_PER_PAGE = 2
WORKERS = 2
OTHERS_PAGE = "OD_release"
PAGES = (("OD_release", "release"), ("Attack", "attack"))   # (url path, the live component's page name)
EPSILON_FROM, EPSILON_TO, EPSILON_STEP = 0.3, 3.0, 0.01
THINK_S = (1.0, 3.0)

TWO_FRAMES_JS = "() => new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)))"


@contextmanager
def class_server(tmp: Path, workers: int = WORKERS):
    """``python -m odserve --workers`` on a free port of 127.0.0.1, logs in ``tmp``; yields its URL."""
    port = harness.free_port()
    out_path = tmp / "serve.out"
    with open(out_path, "w") as out:
        proc = subprocess.Popen([sys.executable, "-m", "odserve", "--workers", str(workers), "--port", str(port),
                                 "--log-dir", str(tmp / "logs")], cwd=REPO_ROOT, stdout=out, stderr=subprocess.STDOUT)
        try:
            t0 = time.monotonic()
            while "OD Privacy Lab:" not in out_path.read_text():
                if proc.poll() is not None or time.monotonic() - t0 > 300:
                    raise RuntimeError(f"odserve did not start: {out_path.read_text()}")
                time.sleep(0.5)
            yield f"http://127.0.0.1:{port}"
        finally:
            proc.terminate()
            proc.wait(30)


class Others:
    """``n`` protocol clients pressing OD release's live ε slider until :meth:`stop`, in a process of their own (in
    this one, their reading of the server's messages would hold the interpreter while the person's pointer moves are
    due, and the person's frame rate would measure this benchmark). ``opened``; after :meth:`stop`, ``presses`` (ms
    from press to finished run) and ``errors``."""

    def __init__(self, url: str, n: int):
        import multiprocessing

        ctx = multiprocessing.get_context("spawn")   # not a fork of a process that drives a browser
        self.n = n
        self.presses: list[float] = []
        self.errors: list[str] = []
        self._stop, self._opened, self._done = ctx.Event(), ctx.Value("i", 0), ctx.Value("i", 0)
        self._results, sender = ctx.Pipe(duplex=False)
        self._proc = ctx.Process(target=others_main, args=(url, n, self._stop, self._opened, self._done, sender),
                                 daemon=True)

    @property
    def opened(self) -> int:
        return self._opened.value

    def start(self) -> None:
        self._proc.start()

    def wait_open(self, timeout_s: float = 600) -> None:
        """Until every session has opened its page (or failed to)."""
        t0 = time.monotonic()
        while self._opened.value + self._done.value < self.n and time.monotonic() - t0 < timeout_s:
            if not self._proc.is_alive():
                break
            time.sleep(0.5)

    def stop(self) -> None:
        self._stop.set()
        if self._results.poll(THINK_S[1] + 150):
            self.presses, self.errors = self._results.recv()
        else:
            self.errors.append(f"the others' process sent nothing (exit code {self._proc.exitcode})")
        self._proc.join(30)
        if self._proc.is_alive():
            self._proc.terminate()


def others_main(url: str, n: int, stop, opened, done, results) -> None:
    """The others' process (:class:`Others`): ``n`` sessions until ``stop`` is set; sends (presses, errors)."""
    presses: list[float] = []
    errors: list[str] = []

    def count(v) -> None:
        with v.get_lock():
            v.value += 1

    async def session(i: int) -> None:
        rng = np.random.default_rng(2000 + i)
        try:
            async with ProtocolClient(url, source=f"127.0.0.{2 + i}") as c:
                first = await c.open(OTHERS_PAGE)
                errors.extend(f"session {i} open: {e}" for e in first.errors)
                if first.errors:
                    return
                count(opened)
                while not stop.is_set():
                    run = await c.step_epsilon()   # the page's live slider, as the component sends a release
                    presses.append(run.ms)
                    errors.extend(f"session {i} press: {e}" for e in run.errors)
                    if run.errors:
                        return
                    await asyncio.sleep(float(rng.uniform(*THINK_S)))
        except Exception as e:  # opening failed outright (HTTP error, refused connection): an error of the class
            errors.append(f"session {i}: {type(e).__name__}: {e}")
        finally:
            count(done)

    async def everyone() -> None:
        from concurrent.futures import ThreadPoolExecutor

        asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(max_workers=n + 4))   # the page files
        await asyncio.gather(*(session(i) for i in range(n)))

    try:
        asyncio.run(everyone())
    finally:
        results.send((presses, errors))


def release_to_paint(page, shown: tuple[str, str]) -> tuple[float, float]:
    """Seconds from letting go to the page's rerun with the new value finished (``release_to_rerun``) and two
    animation frames later (the browser painted what the rerun sent): (to painted, of which to the rerun's end)."""
    t0 = time.perf_counter()
    rerun = release_to_rerun(page, shown)
    page.evaluate(TWO_FRAMES_JS)
    return time.perf_counter() - t0, rerun


def person(url: str, drags_per_page: int) -> dict:
    """One Chromium session dragging ε on each of :data:`PAGES`: per page the drags' figures and release times."""
    from playwright.sync_api import sync_playwright

    out: dict = {"pages": {}, "exceptions": 0}
    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=harness.chromium_executable(), headless=True, args=harness.CHROMIUM_ARGS)
        pg = b.new_page(viewport={"width": 1400, "height": 1000})
        for path, name in PAGES:
            pg.goto(f"{url}/{path}")
            pg.wait_for_selector(".odlive-range", timeout=300_000)
            pg.wait_for_function(f"() => window.odlive && window.odlive['{name}']", timeout=120_000)
            settle(pg, 300)
            got = out["pages"][path] = {"drags": [], "release_s": [], "rerun_s": [], "values": []}
            for a, z in drag_plan(EPSILON_FROM, EPSILON_TO, drags_per_page, EPSILON_STEP):
                before = pg.evaluate(f"() => window.odlive['{name}'].settings")["epsilon"]
                got["drags"].append(drag(pg, name, "epsilon", start=a, stop=z, release=False))
                settings = pg.evaluate(f"() => window.odlive['{name}'].settings")
                if settings["epsilon"] == before:
                    raise RuntimeError(f"{path}: the drag ended on ε = {before:g}, where it was: nothing to rerun")
                painted, rerun = release_to_paint(pg, shown_after_release(name, settings, "epsilon"))
                got["release_s"].append(painted)
                got["rerun_s"].append(rerun)
                got["values"].append(f"{before:g}->{settings['epsilon']:g}")
                out["exceptions"] += pg.locator("[data-testid='stException']").count()
                settle(pg, 300)
            got["in_page"] = drag_in_page(pg, name, "epsilon", start=EPSILON_FROM, stop=EPSILON_TO)
        b.close()
    return out


class LoadSampler(threading.Thread):
    """The machine's 1-minute load average every ``every_s`` seconds until :meth:`stop`: its highest."""

    def __init__(self, every_s: float = 5.0):
        super().__init__(daemon=True)
        self.every_s, self.peak, self._stop_event = every_s, os.getloadavg()[0], threading.Event()

    def run(self) -> None:
        while not self._stop_event.wait(self.every_s):
            self.peak = max(self.peak, os.getloadavg()[0])

    def stop(self) -> float:
        self._stop_event.set()
        self.join()
        return self.peak


def _run(n: int, drags_per_page: int) -> list[dict]:
    tmp = Path(tempfile.mkdtemp(prefix="odlab_bench_live_crowd_"))
    load_before = os.getloadavg()[0]
    sampler = LoadSampler()
    sampler.start()
    with class_server(tmp) as url:
        async def teacher():
            async with ProtocolClient(url) as first:   # the city loaded once, as the teacher's tab would
                return await first.open(OTHERS_PAGE)

        opened = harness.run_async(teacher())
        if opened.errors:
            raise RuntimeError(f"the page did not open: {opened.errors}")
        others = Others(url, n - 1)
        others.start()
        others.wait_open()
        t0 = time.monotonic()
        try:
            me = person(url, drags_per_page)
        finally:
            others.stop()
        wall = time.monotonic() - t0
    load_after, load_peak = os.getloadavg()[0], sampler.stop()
    case = f"{n} sessions (1 Chromium dragging + {n - 1} pressing), odserve --workers {WORKERS}"
    load = f"load average (1 min) {load_before:.1f} before, {load_after:.1f} after, {load_peak:.1f} at most"
    rows: list[dict] = []
    releases: list[float] = []
    for path, got in me["pages"].items():
        d = got["drags"]
        fps = [r["fps"] for r in d]
        releases += got["release_s"]
        c = f"{case}: {path} ε drags"
        frames = ", ".join(f"{r['frames']}/{r['moves']}" for r in d)
        rows += [
            {"case": c, "metric": "fps (median of each drag)", "value": round(min(fps), 1), "unit": "1/s",
             "note": f"lowest of {len(d)} drags; all: {', '.join(f'{f:.1f}' for f in fps)}; frames/moves "
                     f"{frames}; target ≥ 30; {load}"},
            {"case": c, "metric": "longest freeze", "value": round(max(r["freeze_ms"] for r in d), 1), "unit": "ms",
             "note": "; ".join(f"{r['freeze_ms']:.0f}" for r in d)},
            {"case": c, "metric": "in-page drag: fps (median)", "value": round(got["in_page"]["fps"], 1), "unit": "1/s",
             "note": f"{got['in_page']['frames']} frames for {got['in_page']['moves']} moves; the value moved every "
                     "16 ms by a timer in the page, no DevTools round trip per move"},
            {"case": c, "metric": "in-page drag: longest freeze", "value": round(got["in_page"]["freeze_ms"], 1),
             "unit": "ms"},
            {"case": c, "metric": "release to paint (median)", "value": round(statistics.median(got["release_s"]), 3),
             "unit": "s", "note": "; ".join(f"{v} in {s:.2f} s (rerun over at {r:.2f})" for v, s, r in
                                            zip(got["values"], got["release_s"], got["rerun_s"], strict=True))}]
    presses = sorted(others.presses)
    p95 = presses[min(len(presses) - 1, int(0.95 * len(presses)))] if presses else None
    log = (tmp / "logs" / "access.log").read_text().splitlines()
    bad = [line for line in log if not any(f" {code} " in line for code in (200, 101, 304))]
    mine = [line for line in bad if " 127.0.0.1:" in line]   # the person's Chromium (and the teacher's tab)
    rows += [
        {"case": case, "metric": "release to paint (median, all releases)",
         "value": round(statistics.median(releases), 3), "unit": "s",
         "note": f"{len(releases)} releases; target < 1 s"},
        {"case": case, "metric": "exceptions on the dragging person's pages", "value": me["exceptions"], "unit": ""},
        {"case": case, "metric": "others: sessions opened", "value": others.opened, "unit": "",
         "note": f"of {n - 1}; the class ran {wall:.0f} s; logs in {tmp}"},
        {"case": case, "metric": "others: presses (reruns)", "value": len(presses), "unit": ""},
        {"case": case, "metric": "HAProxy requests not 200/101/304", "value": len(bad), "unit": "",
         "note": f"of {len(log)}; {len(mine)} from 127.0.0.1 (the person's browser): "
                 f"{'; '.join(sorted({line.split()[6] + ' ' + line.rsplit(' ', 2)[-2] for line in mine}))}"},
        {"case": case, "metric": "others: errors", "value": len(others.errors), "unit": "",
         "note": "; ".join(others.errors[:3]) or "target 0"},
        {"case": case, "metric": "others: press to run finished, median",
         "value": round(statistics.median(presses)) if presses else None, "unit": "ms", "note": f"95th: {p95:.0f} ms"
         if presses else ""},
    ]
    print(f"  {case}: {len(presses)} presses by the others, {len(others.errors)} errors {others.errors[:3]}; "
          f"{load}; logs in {tmp}", file=sys.stderr)
    return rows


def run(quick: bool = False) -> list[dict]:
    if harness.chromium_executable() is None:
        return [{"case": "live crowd", "metric": "skipped", "value": None, "unit": "", "note": "no Chromium"}]
    n = int(os.environ.get(SESSIONS_ENV) or (QUICK_SESSIONS if quick else SESSIONS))
    if n < 1:
        raise ValueError(f"{SESSIONS_ENV} must be at least 1, got {n}.")
    return _run(n, QUICK_DRAGS_PER_PAGE if quick else DRAGS_PER_PAGE)
