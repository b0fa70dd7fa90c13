"""HAProxy's memory through floods of connections, on glibc's allocator and on jemalloc.

``python -m benchmarks -k haproxy_memory`` starts HAProxy alone with the configuration :mod:`odserve.haproxy` writes,
in front of one small local HTTP server (a stand-in for a Streamlit server, answering every request at once), and
floods it ``WAVES`` times (default 3, ``--quick`` 1): 1,500 connections that send part of a request and 300 that
send one whole request and stay idle, all opened at once, held 1 s, then closed by the client. After each wave it
waits until HAProxy has no connection left and reads its resident memory 2 s later (``VmRSS``, and ``RssAnon``, the
part that is its own rather than its program's and libraries' pages).

Three ways of running it:

- ``glibc``: HAProxy on glibc's allocator, as Debian starts it;
- ``glibc, then SIGQUIT``: the same, then HAProxy's own way to give memory back (its management guide, "Memory
  management": on SIGQUIT it empties its pools, writes them to its standard error and calls ``malloc_trim``);
- ``jemalloc``: as :func:`odserve.haproxy.haproxy_launch` starts it when libjemalloc2 is installed.

Reported for each: RSS before, at the peak, after every wave (and after SIGQUIT), and HAProxy's CPU seconds.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from benchmarks import harness
from odserve import haproxy

WAVES = 3
QUICK_WAVES = 1
HALF_OPEN, IDLE = 1500, 300


class _Ok(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"ok")

    def handle(self):
        try:
            super().handle()
        except OSError:     # HAProxy closed a connection it no longer needed
            pass

    def log_message(self, *args):
        pass


class _Backend(ThreadingHTTPServer):
    request_queue_size = 4096
    daemon_threads = True


def _status(pid: int) -> dict[str, int]:
    return {line.split(":")[0]: int(line.split()[1]) * 1024 for line in
            Path(f"/proc/{pid}/status").read_text().splitlines() if line.startswith(("VmRSS:", "RssAnon:"))}


def _cpu_s(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _conns(sock_path: Path) -> int:
    """HAProxy's open connections (``show info``, ``CurrConns``, on its stats socket)."""
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(5)
        s.connect(str(sock_path))
        s.sendall(b"show info\n")
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    return int(next(line.split()[1] for line in data.decode().splitlines() if line.startswith("CurrConns:")))


def _flood(port: int) -> list[socket.socket]:
    socks = []
    for i in range(HALF_OPEN + IDLE):
        s = socket.create_connection(("127.0.0.1", port), timeout=10)
        s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\nUser-Agent: slow" if i < HALF_OPEN else
                  b"GET /_stcore/health HTTP/1.1\r\nHost: x\r\n\r\n")
        socks.append(s)
    return socks


def _one(way: str, waves: int, tmp: Path) -> list[dict]:
    backend = _Backend(("127.0.0.1", 0), _Ok)
    threading.Thread(target=backend.serve_forever, daemon=True).start()
    run = Path(tempfile.mkdtemp(prefix="run_", dir=tmp))
    port = harness.free_port()
    cfg = run / "haproxy.cfg"
    # every connection of the flood comes from one address: no per-address cap here (this measures the memory a
    # held connection costs, which the caps would keep from being held)
    cfg.write_text(haproxy.haproxy_config([backend.server_address[1]], "127.0.0.1", port, run,
                                        caps=haproxy.ClientCaps(1_000_000, 1_000_000, 1_000_000)))
    argv, env = haproxy.haproxy_launch(haproxy.find_haproxy(), cfg)
    if way != "jemalloc":
        argv, env = [haproxy.find_haproxy(), "-db", "-f", str(cfg)], dict(os.environ)
    with open(run / "haproxy.out", "wb") as out:
        hp = subprocess.Popen(argv, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        while not (run / "haproxy.sock").exists():
            time.sleep(0.1)
        time.sleep(1)
        start, peak, after = _status(hp.pid), 0, []
        for _ in range(waves):
            socks = _flood(port)
            time.sleep(1)
            peak = max(peak, _status(hp.pid)["VmRSS"])
            for s in socks:
                s.close()
            deadline = time.monotonic() + 30
            while _conns(run / "haproxy.sock") > 1 and time.monotonic() < deadline:
                time.sleep(0.2)
            time.sleep(2)
            after.append(_status(hp.pid))
        if way.endswith("SIGQUIT"):
            hp.send_signal(signal.SIGQUIT)
            time.sleep(1)
            after.append(_status(hp.pid))
        cpu = _cpu_s(hp.pid)
    finally:
        hp.terminate()
        hp.wait(10)
        backend.shutdown()
    case = f"HAProxy, {way}: {waves} x ({HALF_OPEN} half-open + {IDLE} idle connections)"
    mib = 2**20
    rows = [{"case": case, "metric": "RSS before", "value": start["VmRSS"] / mib, "unit": "MiB",
             "note": f"its own (RssAnon) {start['RssAnon'] / mib:.1f} MiB"},
            {"case": case, "metric": "RSS peak", "value": peak / mib, "unit": "MiB"}]
    for i, a in enumerate(after):
        what = "after SIGQUIT" if way.endswith("SIGQUIT") and i == len(after) - 1 else f"2 s after wave {i + 1}"
        rows.append({"case": case, "metric": f"RSS {what}", "value": a["VmRSS"] / mib, "unit": "MiB",
                     "note": f"its own (RssAnon) {a['RssAnon'] / mib:.1f} MiB"})
    rows.append({"case": case, "metric": "HAProxy CPU", "value": cpu, "unit": "s"})
    print("  " + "; ".join(f"{r['metric']} {r['value']:.2f}" for r in rows), flush=True)
    return rows


def run(quick: bool) -> list[dict]:
    if haproxy.find_haproxy() is None:
        return [{"case": "HAProxy memory", "metric": "skipped", "value": None, "unit": "",
                 "note": "HAProxy is not installed"}]
    waves = QUICK_WAVES if quick else WAVES
    tmp = Path(tempfile.mkdtemp(prefix="odlab_bench_haproxy_"))
    ways = ["glibc", "glibc, then SIGQUIT"] + (["jemalloc"] if haproxy.find_jemalloc() else [])
    return [row for way in ways for row in _one(way, waves, tmp)]
