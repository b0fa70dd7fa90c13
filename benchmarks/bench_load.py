"""Load: N concurrent browser sessions on one server, each uploading a ~50 MB trace file and moving a slider.

``python -m benchmarks -k load`` starts ``streamlit run app.py`` on 127.0.0.1 (:mod:`benchmarks.harness`, the server of the
browser tests), writes one CSV of synthetic traces (``odcore.data.synth``, ISO times, ~50 MB) and opens ``N`` (default
10, ``ODLAB_BENCH_LOAD_SESSIONS``) headless Chromium sessions at once. Every session uploads its own copy of the file
(same rows, its own name, so each upload is a different dataset with its own caches, as ten people with ten files
would be): it picks "Upload a file", sends the file through the page's file picker, presses "Load this file",
waits until the sidebar says the upload is the data in use, then presses ArrowRight on the ε slider ``ROUNDS``
times, all sessions at the same moment (the driver of ``benchmarks/bench_browser.py``: its instrumented pages,
painted-frame wait and barrier).

Every session has its own deadline (``ODLAB_BENCH_LOAD_TIMEOUT_S``, default 420 s from the start of the sessions);
a session that passes it is stopped and counted as an error of kind ``timeout`` with the step it was in. A line is
printed as each session ends and every 30 s while they run (phases, server memory), and a summary always at the
end, so a run that goes wrong still says where.

Reported: the peak resident memory of the server's process tree while the sessions run (sampled every 0.25 s),
the memory before and after, the errors by kind (``timeout`` in a step, ``refused`` upload with its message,
``exception`` drawn in a page, ``error-box``, ``crash`` of the browser page), the median and worst time from
"Load this file" to the painted page, how long uploads waited in the server's parse queue (the page says
"queued, N ahead"), and the median and worst slider input-to-paint. The browsers share the machine's cores with
the server, so the times are pessimistic; memory is the server's alone.
"""

from __future__ import annotations

import asyncio
import os
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

from benchmarks import harness
from benchmarks.bench_browser import (
    SIDEBAR,
    STARTED_JS,
    Barrier,
    RssSampler,
    new_page,
    press,
    wait_done,
)
from odcore.report.safe_csv import csv_text, write_csv

SESSIONS = 10
QUICK_SESSIONS = 2
ROUNDS = 3
TARGET_MB = 50
SESSION_TIMEOUT_S = 420
HEARTBEAT_S = 30
BARRIER_WAIT_S = 60
CLICK_RETRY_S = 15


def make_upload(path: Path, target_mb: float = TARGET_MB) -> tuple[int, int]:
    """Write a CSV of synthetic traces of about ``target_mb`` MB (user, ISO time with Z, lat, lon); return
    (rows, bytes)."""
    from odcore.data.synth import SynthConfig, generate_city

    users = 1000
    df = generate_city(SynthConfig(users=users, weeks=1), rng=7)
    per_row = len(csv_text(df.head(2000)).encode()) / 2000
    reps = max(1, round(target_mb * 1e6 / per_row / len(df)))
    if reps > 1:   # more users: copies of the city with new user ids (same streets, other people)
        import pandas as pd

        parts = [df.assign(user=df["user"] + k * users) for k in range(reps)]
        df = pd.concat(parts, ignore_index=True)
    out = df.assign(time=df["time"].dt.strftime("%Y-%m-%dT%H:%M:%SZ"))
    write_csv(out, path)
    return len(out), path.stat().st_size


# The press was taken: a rerun started after it, or the script is running now (a press while it runs makes no new
# state change; pressing again would only restart it, and put a queued upload back in the line).
BUSY_JS = ("() => (" + STARTED_JS.removeprefix("() => ") + ") || document.querySelector('[data-testid=stApp]')"
           "?.getAttribute('data-test-script-state') === 'running'")


def _say(msg: str) -> None:
    print(msg, flush=True)


class _Session:
    """What one session did: the step it is in, its times and its errors (kind, step, message)."""

    def __init__(self, i: int, file: Path, budget: float):
        self.i, self.file, self.budget = i, file, budget
        self.deadline = time.monotonic() + budget
        self.step = "start"
        self.load_ms: float | None = None
        self.queued = False
        self.press: list[float] = []
        self.errors: list[tuple[str, str, str]] = []
        self.done = False
        self.shots: Path | None = None

    def left_ms(self) -> float:
        """Milliseconds to this session's deadline (at least 1)."""
        return max(1.0, (self.deadline - time.monotonic()) * 1000)

    def line(self) -> str:
        press = ", ".join(f"{p:.0f}" for p in self.press) or "-"
        load = f"{self.load_ms / 1000:.1f} s" if self.load_ms is not None else "-"
        errs = "; ".join(f"{k} in {s}: {m}" for k, s, m in self.errors) or "no errors"
        return (f"session {self.i:2d}: load {load}{' (was queued)' if self.queued else ''}, "
                f"ε presses [{press}] ms; {errs}")


async def _upload_session(browser, url: str, s: _Session, rounds: int, barrier) -> None:
    ctx, page = await new_page(browser, {"width": 1200, "height": 900})

    async def steps():
        s.step = "open page"
        await page.goto(url, wait_until="commit", timeout=s.left_ms())
        await page.locator(f"{SIDEBAR} [data-testid=stWidgetLabel]").first.wait_for(timeout=s.left_ms())
        await wait_done(page, 0, s.left_ms())
        s.step = "pick upload"
        picker = page.locator("[data-testid=stFileUploaderDropzoneInput]")
        for k in range(5):   # a click can be lost while the page is busy: click again until the picker is there
            s.step = f"pick upload (click {k + 1})"
            await page.locator(SIDEBAR).get_by_text("Upload a file").click(timeout=s.left_ms())
            try:
                await picker.wait_for(state="attached", timeout=min(CLICK_RETRY_S * 1000, s.left_ms()))
                break
            except Exception:  # playwright's TimeoutError: the click started no rerun
                if time.monotonic() > s.deadline:
                    raise
        s.step = "pick upload (page settles)"
        await wait_done(page, 0, s.left_ms())
        s.step = "send file"
        await picker.set_input_files(str(s.file), timeout=s.left_ms())
        await page.locator("[data-testid=stFileChipName]").first.wait_for(timeout=s.left_ms())
        await page.locator("[data-testid=stFileChipIconSpinner]").wait_for(state="detached", timeout=s.left_ms())
        go = page.get_by_role("button", name="Load this file")
        await go.wait_for(timeout=s.left_ms())
        await wait_done(page, None, s.left_ms())   # the rerun the upload caused (it enables the button)
        s.step = "load file"
        t0 = time.time() * 1000
        for k in range(5):   # a press can be lost while the page is busy: press again until a rerun starts
            await page.evaluate("() => { window.__odb.inputT = null; }")
            await go.click(timeout=s.left_ms())
            try:
                await page.wait_for_function(BUSY_JS, timeout=min(CLICK_RETRY_S * 1000, s.left_ms()),
                                             polling=100)
                break
            except Exception:  # playwright's TimeoutError: the press started no rerun
                if time.monotonic() > s.deadline:
                    raise
                s.step = f"load file (press {k + 2})"
        loaded = page.locator(SIDEBAR).get_by_text(f"Data: Upload: {s.file.name}")
        failed = page.locator("[data-testid=stAlertContentError]")
        queued = page.get_by_text("ahead of yours")
        end = loaded.or_(failed).first
        while True:   # note whether the page said it was queued, until the upload is in use or refused
            try:
                await end.wait_for(timeout=min(1000.0, s.left_ms()))
                break
            except Exception:  # playwright's TimeoutError: not there yet
                if time.monotonic() > s.deadline:
                    raise
                s.queued = s.queued or bool(await queued.count())
        if not await loaded.count():
            s.errors.append(("refused", s.step, (await failed.first.inner_text())[:150]))
            return
        r = await wait_done(page, None, s.left_ms())
        s.load_ms = r["origin"] + r["paint"] - t0
        s.step = "move ε"
        idx = await page.locator(f"{SIDEBAR} [data-testid=stSlider]").evaluate_all(
            "(els) => els.findIndex(e => e.innerText.includes('ε'))")
        if idx < 0:
            s.errors.append(("missing", s.step, "no ε slider in the sidebar"))
            return
        for k in range(rounds):
            s.step = f"wait for the others (round {k + 1})"
            await barrier()
            s.step = f"move ε (round {k + 1})"
            r = await press(page, {"kind": "slider", "index": idx})
            s.press.append(r["total"])
            if r["exceptions"]:
                s.errors.append(("exception", s.step, f"{r['exceptions']} exception(s) drawn in the page"))
        s.step = "check page"
        n_exc = await page.locator("[data-testid=stException]").count()
        n_box = await page.locator("[data-testid=stAlertContentError]").count()
        if n_exc:
            s.errors.append(("exception", s.step, f"{n_exc} exception(s) in the page at the end"))
        if n_box:
            text = await page.locator("[data-testid=stAlertContentError]").first.inner_text()
            s.errors.append(("error-box", s.step, f"{n_box} error box(es): {text[:150]}"))

    try:
        await asyncio.wait_for(steps(), timeout=max(0.001, s.deadline - time.monotonic()))
    except TimeoutError:
        try:   # the page's last script states (is a rerun still running on the server?)
            states = await asyncio.wait_for(page.evaluate(
                "() => [document.querySelector('[data-testid=stApp]')?.getAttribute('data-test-script-state'),"
                " window.__odb.states.slice(-3).map(x => [Math.round(performance.now() - x[0]), x[1]]),"
                " document.querySelector('[data-testid=stStatusWidget]')?.innerText || 'no status widget']"), 10)
        except Exception:  # the page is gone
            states = None
        s.errors.append(("timeout", s.step, f"the session's deadline ({s.budget:.0f} s) passed; page script "
                                            f"state [now, [ms ago, state] x3, status widget]: {states}"))
    except Exception as e:  # playwright errors: a step's own wait, the page or browser gone
        msg = str(e).splitlines()[0] if str(e) else ""
        kind = "timeout" if "Timeout" in type(e).__name__ or "Timeout" in msg else "crash"
        s.errors.append((kind, s.step, f"{type(e).__name__}: {msg}"[:200]))
    finally:
        s.done = True
        _say(s.line())
        if s.errors and s.shots is not None:
            try:   # what the page showed when it went wrong
                await asyncio.wait_for(page.screenshot(path=str(s.shots / f"session_{s.i:02d}.png")), timeout=20)
            except Exception:  # the page is gone
                pass
        try:
            await asyncio.wait_for(ctx.close(), timeout=30)
        except Exception:  # a page that cannot close does not stop the report
            pass
        await barrier(leave=True)


async def _heartbeat(sessions: list[_Session], pid: int, t0: float) -> None:
    while True:
        await asyncio.sleep(HEARTBEAT_S)
        steps: dict[str, int] = {}
        for s in sessions:
            if not s.done:
                steps[s.step] = steps.get(s.step, 0) + 1
        rss = harness.tree_rss_bytes(pid) / 2**20
        _say(f"  t={time.monotonic() - t0:4.0f} s: {sum(s.done for s in sessions)}/{len(sessions)} done; "
             f"running {dict(sorted(steps.items()))}; server RSS {rss:.0f} MiB")


def _med(xs):
    return statistics.median(xs) if xs else None


def _session_folders() -> set[str]:
    # a server's session folders live in its private folder (odapp.data.private.server_root)
    return {str(p) for p in Path(tempfile.gettempdir()).glob("odlab-server-*/session-*")}


async def _run(quick: bool) -> list[dict]:
    from playwright.async_api import async_playwright

    exe = harness.chromium_executable()
    if exe is None:
        raise RuntimeError("no Chromium on this machine (Debian package 'chromium')")
    n = int(os.environ.get("ODLAB_BENCH_LOAD_SESSIONS") or (QUICK_SESSIONS if quick else SESSIONS))
    budget = float(os.environ.get("ODLAB_BENCH_LOAD_TIMEOUT_S") or SESSION_TIMEOUT_S)
    tmp = Path(tempfile.mkdtemp(prefix="odlab_bench_load_"))
    file = tmp / "upload_traces.csv"
    t0 = time.perf_counter()
    n_rows, n_bytes = make_upload(file, 5 if quick else TARGET_MB)
    files = []
    for i in range(n):   # one name per session: a different dataset id each (hard links: no extra disk)
        f = tmp / f"upload_traces_{i:02d}.csv"
        os.link(file, f)
        files.append(f)
    t_make = time.perf_counter() - t0
    case = f"{n} sessions x upload {n_bytes / 1e6:.0f} MB ({n_rows:,} rows) + ε slider"
    _say(f"bench_load: {case}; file made in {t_make:.0f} s; session deadline {budget:.0f} s; "
         f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    log = tmp / "server.log"
    folders_before = _session_folders()
    sessions = [_Session(i, files[i], budget) for i in range(n)]
    for s in sessions:
        s.shots = tmp
    rss_before = rss_after = 0
    peak = 0
    wall = 0.0
    # a server that has to be stopped with SIGABRT writes every thread's Python stack into its log
    fault = os.environ.get("PYTHONFAULTHANDLER")
    os.environ["PYTHONFAULTHANDLER"] = "1"
    proc, url = harness.start_server(log)
    if fault is None:
        os.environ.pop("PYTHONFAULTHANDLER")
    else:
        os.environ["PYTHONFAULTHANDLER"] = fault
    try:
        await asyncio.to_thread(harness.wait_healthy, proc, url, 120)
        rss_before = harness.tree_rss_bytes(proc.pid)
        async with async_playwright() as p:
            browser = await p.chromium.launch(executable_path=exe, headless=True, args=harness.CHROMIUM_ARGS)
            try:
                barrier = Barrier(n, BARRIER_WAIT_S)
                t_start = time.monotonic()
                for s in sessions:
                    s.deadline = t_start + s.budget
                beat = asyncio.create_task(_heartbeat(sessions, proc.pid, t_start))
                with RssSampler(proc.pid) as rss:
                    try:
                        await asyncio.gather(*(_upload_session(browser, url, s, ROUNDS, barrier) for s in sessions))
                    finally:
                        beat.cancel()
                        peak = rss.peak
                wall = time.monotonic() - t_start
            finally:
                await browser.close()
        await asyncio.sleep(5)
        rss_after = harness.tree_rss_bytes(proc.pid)
        if proc.poll() is not None:
            sessions[0].errors.append(("crash", "server", f"the server exited with code {proc.returncode}"))
        elif any(k == "timeout" for s in sessions for k, _, _ in s.errors):
            os.kill(proc.pid, signal.SIGABRT)   # where the server's threads are (faulthandler, into server.log)
            await asyncio.sleep(2)
    finally:
        harness.stop_server(proc)
    left = len(_session_folders() - folders_before)   # folders of this server not removed at its exit
    errors = [(s.i, *e) for s in sessions for e in s.errors]
    not_loaded = sum(s.load_ms is None for s in sessions)
    loads = [s.load_ms for s in sessions if s.load_ms is not None]
    presses = [p for s in sessions for p in s.press]
    kinds: dict[str, int] = {}
    for _, k, _, _ in errors:
        kinds[k] = kinds.get(k, 0) + 1
    detail = "; ".join(f"session {i} {k} in {st}: {m}" for i, k, st, m in errors)
    _say(f"bench_load summary: {len(errors)} error(s) {kinds or ''}; {n - not_loaded}/{n} uploads became the data "
         f"in use; {sum(s.queued for s in sessions)} sessions saw the queue message; server RSS peak "
         f"{peak / 2**20:.0f} MiB (idle {rss_before / 2**20:.0f}, 5 s after {rss_after / 2**20:.0f}); wall "
         f"{wall:.0f} s; load average {os.getloadavg()[0]:.2f}")
    for i, k, st, m in errors:
        _say(f"  error: session {i} {k} in {st}: {m}")
    if errors:
        print(f"  server log and screenshots of the failed sessions: {tmp}", file=sys.stderr)
    return [
        {"case": case, "metric": "server RSS peak", "value": peak / 2**20, "unit": "MiB", "baseline":
         rss_before / 2**20, "ratio": peak / max(rss_before, 1),
         "note": f"baseline = idle server; 5 s after the sessions closed {rss_after / 2**20:.0f} MiB"},
        {"case": case, "metric": "errors", "value": len(errors), "unit": "", "baseline": None, "ratio": None,
         "note": (f"{n - not_loaded}/{n} uploads became the data in use; by kind {kinds or 'none'}; "
                  f"{detail or 'no failures'}")[:600]},
        {"case": case, "metric": "median load (button to painted page)", "value": _med(loads), "unit": "ms",
         "baseline": None, "ratio": None,
         "note": f"worst {max(loads) if loads else None} ms; all {n} sessions at once, "
                 f"{sum(s.queued for s in sessions)} saw 'queued'; wall {wall:.0f} s"},
        {"case": case, "metric": "median ε slider input-to-paint", "value": _med(presses), "unit": "ms",
         "baseline": None, "ratio": None,
         "note": f"worst {max(presses) if presses else None} ms; {len(presses)} presses; "
                 f"file made in {t_make:.0f} s; session folders left after the server stopped: {left}"},
    ]


def run(quick: bool) -> list[dict]:
    return asyncio.run(_run(quick))
