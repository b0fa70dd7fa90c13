"""The dashboard as a person meets it: a ``streamlit run`` server on 127.0.0.1 and a headless Debian Chromium.

Shared by the browser tests (``tests/conftest.py``) and the browser benchmark (``benchmarks/bench_browser.py``), so
both start the same server with the same flags and drive the same browser (Debian's ``/usr/bin/chromium``, never
Playwright's own download). Nothing here is imported by the app's pages.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

from odcore.paths import REPO_ROOT
from odcore.report.figures import BROWSER_ENV

CHROMIUM_ARGS = [
    "--no-sandbox", "--disable-gpu", "--disable-background-networking", "--disable-component-update",
    "--no-first-run", "--disable-sync", "--disable-quic", "--disable-dev-shm-usage",
]


def chromium_executable() -> str | None:
    """Path of Debian's Chromium (``chromium`` or ``chromium-browser`` on PATH), or None when absent.

    ``ODLAB_BROWSER=none`` (:data:`odcore.report.figures.BROWSER_ENV`) acts as if there were none, ``ODLAB_BROWSER=PATH``
    names the browser: how the suite is checked on "a machine without Chromium" that has one.
    """
    forced = os.environ.get(BROWSER_ENV)
    if forced is not None:
        return None if forced.strip().lower() in ("", "none", "0", "off") else forced
    return shutil.which("chromium") or shutil.which("chromium-browser")


def run_async(coro):
    """``asyncio.run(coro)`` in a thread of its own; returns its result or raises its exception. In a test run
    Playwright's sync API (the browser tests' session fixture) keeps an event loop running in the main thread, where
    ``asyncio.run`` refuses to start."""
    with ThreadPoolExecutor(1) as ex:
        return ex.submit(asyncio.run, coro).result()


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_server(log_path: Path, *, app_dir: Path = REPO_ROOT, port: int | None = None) -> tuple[subprocess.Popen, str]:
    """Launch ``streamlit run app.py`` of ``app_dir`` headless on 127.0.0.1 (output to ``log_path``).

    Returns at once with the process and its URL; :func:`wait_healthy` waits until it answers.
    """
    port = port or free_port()
    env = dict(os.environ, STREAMLIT_BROWSER_GATHER_USAGE_STATS="false")
    log = open(log_path, "w")   # closed by stop_server
    proc = subprocess.Popen(
        [sys.executable, "-m", "streamlit", "run", str(app_dir / "app.py"), "--server.headless=true",
         f"--server.port={port}", "--server.address=127.0.0.1", "--server.fileWatcherType=none"],
        cwd=app_dir, env=env, stdout=log, stderr=subprocess.STDOUT,
    )
    proc._odlab_log = log  # type: ignore[attr-defined]
    return proc, f"http://127.0.0.1:{port}"


def wait_healthy(proc: subprocess.Popen, url: str, timeout_s: float = 60) -> None:
    """Wait until ``url``'s health endpoint answers 200; RuntimeError if the server exits or never answers."""
    deadline = time.time() + timeout_s
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"streamlit exited with code {proc.returncode} before answering on {url}")
        try:
            with urllib.request.urlopen(url + "/_stcore/health", timeout=2) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(0.1)
    raise RuntimeError(f"streamlit did not become healthy on {url} within {timeout_s:g} s")


def stop_server(proc: subprocess.Popen) -> None:
    """Terminate the server started by :func:`start_server` (kill after 10 s) and close its log."""
    proc.terminate()
    try:
        proc.wait(timeout=10)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    log = getattr(proc, "_odlab_log", None)
    if log is not None:
        log.close()


@contextmanager
def streamlit_server(log_path: Path, *, app_dir: Path = REPO_ROOT, timeout_s: float = 60) -> Iterator[str]:
    """A healthy ``streamlit run app.py`` on a free local port for the ``with`` block; yields its URL."""
    proc, url = start_server(log_path, app_dir=app_dir)
    try:
        wait_healthy(proc, url, timeout_s)
        yield url
    finally:
        stop_server(proc)


def _proc_table() -> tuple[dict[int, list[int]], dict[int, tuple[int, float]]]:
    """Children of every process, and each process's ``(rss bytes, cpu seconds)`` (Linux ``/proc``)."""
    tick = os.sysconf("SC_CLK_TCK")
    children: dict[int, list[int]] = {}
    info: dict[int, tuple[int, float]] = {}
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            fields = (d / "stat").read_text().rsplit(")", 1)[1].split()
            status = (d / "status").read_text()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(d.name))
        kb = next((int(line.split()[1]) for line in status.splitlines() if line.startswith("VmRSS:")), 0)
        # utime + stime, and cutime + cstime: children that ended (a closed browser tab) still count
        info[int(d.name)] = (kb * 1024, sum(int(f) for f in fields[11:15]) / tick)
    return children, info


def _tree(pid: int, children: dict[int, list[int]]) -> list[int]:
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def tree_rss_bytes(pid: int) -> int:
    """Resident memory of process ``pid`` and all its descendants (Linux ``/proc``), in bytes; 0 if gone."""
    children, info = _proc_table()
    return sum(info.get(p, (0, 0.0))[0] for p in _tree(pid, children))


def tree_cpu_seconds(pid: int, *, exclude: int | None = None) -> float:
    """CPU time (user + system) used so far by ``pid``'s tree (with the ended children its processes waited for),
    without the tree of ``exclude`` (e.g. the benchmark's own tree without the server: the browsers)."""
    children, info = _proc_table()
    skip = set(_tree(exclude, children)) if exclude is not None else set()
    return sum(info.get(p, (0, 0.0))[1] for p in _tree(pid, children) if p not in skip)
