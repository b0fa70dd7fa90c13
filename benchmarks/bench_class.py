"""A class through the proxy: N sessions moving the ε slider for a few minutes on ``python -m odserve``.

``python -m benchmarks -k class`` starts ``python -m odserve --workers 2`` (two Streamlit servers behind HAProxy,
:mod:`odserve`) on 127.0.0.1 and opens ``N`` (default 30, ``ODLAB_BENCH_CLASS_SESSIONS``) protocol clients
(:class:`benchmarks.protocol_client.ProtocolClient`: the page's files, the WebSocket and the reruns a browser tab
asks for) on the OD release page, each from its own loopback address as other laptops would be. For ``DURATION_S``
seconds (default 120, ``ODLAB_BENCH_CLASS_S``) every session presses ε one step, waits for the run to finish,
thinks 1-3 s (its own seeded generator) and presses again. One client opens the page before the others so the
city is loaded once on its server, as the teacher's would be.

Reported: presses (reruns) done, errors of any kind (a run with an error, a closed socket, a run not finished in
120 s), the median and 95th percentile press-to-finished time, the resident memory of the whole tree (supervisor,
HAProxy, both servers; sampled every 0.5 s) before the class, its peak, and 10 s after every session closed, and the
requests HAProxy logged with a status other than 200, 101 or 304 (``access.log``), and every connection the tree made
to an address that is not loopback (:mod:`benchmarks.outgoing`: a Python audit hook in each Python process and
``/proc/net`` polled every 0.25 s).
"""

from __future__ import annotations

import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks import harness
from benchmarks.outgoing import OutgoingRecorder, audit_env
from benchmarks.protocol_client import ProtocolClient
from odcore.paths import REPO_ROOT

SESSIONS = 30
DURATION_S = 120
QUICK_SESSIONS = 4
QUICK_DURATION_S = 20
WORKERS = 2
PAGE = "OD_release"


async def _session(url: str, i: int, deadline: float, out: dict) -> None:
    rng = np.random.default_rng(1000 + i)
    async with ProtocolClient(url, source=f"127.0.0.{2 + i}") as c:
        opened = await c.open(PAGE)
        out["errors"] += [f"open: {e}" for e in opened.errors]
        if opened.errors:
            return
        while time.monotonic() < deadline:
            run = await c.step_epsilon()   # the page's live slider (or the sidebar's)
            out["presses"].append(run.ms)
            out["errors"] += [f"press: {e}" for e in run.errors]
            if run.errors:
                return
            await asyncio.sleep(float(rng.uniform(1.0, 3.0)))


async def _sample(pid: int, peak: list[int], stop: asyncio.Event) -> None:
    while not stop.is_set():
        peak[0] = max(peak[0], await asyncio.to_thread(harness.tree_rss_bytes, pid))
        try:
            await asyncio.wait_for(stop.wait(), 0.5)
        except TimeoutError:
            pass


async def _run(n: int, duration_s: float) -> list[dict]:
    from concurrent.futures import ThreadPoolExecutor

    asyncio.get_running_loop().set_default_executor(ThreadPoolExecutor(max_workers=n + 4))
    tmp = Path(tempfile.mkdtemp(prefix="odlab_bench_class_"))
    port = harness.free_port()
    url = f"http://127.0.0.1:{port}"
    out_file = open(tmp / "serve.out", "w")
    env, audit_log = audit_env(tmp)
    proc = subprocess.Popen([sys.executable, "-m", "odserve", "--workers", str(WORKERS), "--port", str(port),
                             "--log-dir", str(tmp / "logs")], cwd=REPO_ROOT, stdout=out_file,
                            stderr=subprocess.STDOUT, env=env)
    recorder = OutgoingRecorder(proc.pid)
    recorder.start()
    try:
        t_start = time.monotonic()
        while "OD Privacy Lab:" not in (tmp / "serve.out").read_text():
            if proc.poll() is not None or time.monotonic() - t_start > 300:
                raise RuntimeError(f"odserve did not start: {(tmp / 'serve.out').read_text()}")
            await asyncio.sleep(0.5)
        async with ProtocolClient(url) as first:        # the city loaded once, as the teacher's tab would
            opened = await first.open(PAGE)
            if opened.errors:
                raise RuntimeError(f"the page did not open: {opened.errors}")
        await asyncio.sleep(2)
        rss_before = harness.tree_rss_bytes(proc.pid)
        peak, stop = [rss_before], asyncio.Event()
        sampler = asyncio.create_task(_sample(proc.pid, peak, stop))
        out: dict = {"presses": [], "errors": []}
        t0 = time.monotonic()
        await asyncio.gather(*(_session(url, i, t0 + duration_s, out) for i in range(n)))
        wall = time.monotonic() - t0
        await asyncio.sleep(10)
        stop.set()
        await sampler
        rss_after = harness.tree_rss_bytes(proc.pid)
    finally:
        proc.terminate()
        proc.wait(30)
        out_file.close()
        outgoing = sorted(recorder.stop())
    outgoing += audit_log.read_text().splitlines() if audit_log.exists() else []
    log = (tmp / "logs" / "access.log").read_text().splitlines()
    bad = [line for line in log if not any(f" {s} " in line for s in (200, 101, 304))]
    presses = sorted(out["presses"])
    p95 = presses[min(len(presses) - 1, int(0.95 * len(presses)))] if presses else None
    case = f"{n} sessions x {duration_s:.0f} s on OD release, odserve --workers {WORKERS} (HAProxy)"
    print(f"  {len(presses)} presses in {wall:.0f} s, {len(out['errors'])} errors "
          f"{out['errors'][:5]}; RSS {rss_before / 2**20:.0f} -> {peak[0] / 2**20:.0f} -> {rss_after / 2**20:.0f} "
          f"MiB; HAProxy: {len(log)} requests logged, {len(bad)} not 200/101/304; connections off the machine: "
          f"{outgoing or 'none'}; logs in {tmp}", file=sys.stderr)
    note = f"logs in {tmp}"
    return [
        {"case": case, "metric": "presses (reruns)", "value": len(presses), "unit": "", "note": note},
        {"case": case, "metric": "errors", "value": len(out["errors"]), "unit": "",
         "note": "; ".join(out["errors"][:3])},
        {"case": case, "metric": "press to run finished, median", "value": statistics.median(presses) if presses
         else None, "unit": "ms"},
        {"case": case, "metric": "press to run finished, 95th percentile", "value": p95, "unit": "ms"},
        {"case": case, "metric": "tree RSS before", "value": rss_before / 2**20, "unit": "MiB",
         "note": "supervisor + HAProxy + servers, one page opened"},
        {"case": case, "metric": "tree RSS peak", "value": peak[0] / 2**20, "unit": "MiB"},
        {"case": case, "metric": "tree RSS 10 s after", "value": rss_after / 2**20, "unit": "MiB"},
        {"case": case, "metric": "connections off the machine", "value": len(outgoing), "unit": "",
         "note": "; ".join(outgoing[:3]) or f"{recorder.polls} polls of /proc/net and a Python audit hook"},
        {"case": case, "metric": "HAProxy requests not 200/101/304", "value": len(bad), "unit": "",
         "note": bad[0] if bad else f"{len(log)} requests"},
    ]


def run(quick: bool) -> list[dict]:
    n = int(os.environ.get("ODLAB_BENCH_CLASS_SESSIONS") or (QUICK_SESSIONS if quick else SESSIONS))
    duration = float(os.environ.get("ODLAB_BENCH_CLASS_S") or (QUICK_DURATION_S if quick else DURATION_S))
    return asyncio.run(_run(n, duration))
