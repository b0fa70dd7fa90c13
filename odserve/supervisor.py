"""The class's Streamlit servers and HAProxy, started and watched: a server that dies is started again on its port
(HAProxy sends it no new connection meanwhile), and everything stops with the launcher."""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from odapp.data import private
from odserve.haproxy import (
    HEALTH_PATH,
    MAX_CONNECTIONS,
    ClientCaps,
    Timeouts,
    allowed_hosts,
    find_haproxy,
    haproxy_config,
    haproxy_launch,
)

# The workers' web requests go to a closed port of this machine: Streamlit looks up the machine's outside address
# (checkip.amazonaws.com) when a WebSocket comes from another site's page; with this it fails at once, on 127.0.0.1.
NO_OUTSIDE_PROXY = "http://127.0.0.1:9"
START_TIMEOUT_S = 180        # a server that does not answer its health check by then is a failed start
POLL_S = 0.25


def _die_with_parent() -> None:
    """In a child before exec: SIGTERM when the supervisor dies (even by kill -9), so no server is left behind."""
    with contextlib.suppress(Exception):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)   # PR_SET_PDEATHSIG


def worker_command(app_dir: Path, port: int, hosts: list[str] | None = None) -> list[str]:
    """The ``streamlit run`` of one server: 127.0.0.1 only, no usage statistics, no file watcher; with ``hosts``,
    Streamlit's own allow-list of the ``Host`` of a WebSocket (``server.allowedHosts``) too."""
    return [sys.executable, "-m", "streamlit", "run", str(app_dir / "app.py"), "--server.headless=true",
            f"--server.port={port}", "--server.address=127.0.0.1", "--server.fileWatcherType=none",
            "--browser.gatherUsageStats=false", *(f"--server.allowedHosts={h}" for h in hosts or ())]


def worker_env(private_dir: Path | None = None, counts_dir: Path | None = None) -> dict[str, str]:
    """A server's environment: every web request to a closed local port; serving a class (no server path typed into
    the app), its sessions' folders in ``private_dir``, the teacher's ``counts_dir`` (:mod:`odapp.data.private`)."""
    env = dict(os.environ, STREAMLIT_BROWSER_GATHER_USAGE_STATS="false")
    for k in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY"):
        env[k] = env[k.lower()] = NO_OUTSIDE_PROXY
    env["NO_PROXY"] = env["no_proxy"] = "127.0.0.1,localhost,::1"
    env[private.CLASS_ENV] = "1"
    env.pop(private.COUNTS_ENV, None)
    if private_dir is not None:
        env[private.ROOT_ENV] = str(private_dir)
    if counts_dir is not None:
        env[private.COUNTS_ENV] = str(counts_dir)
    return env


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _healthy(port: int) -> bool:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(f"http://127.0.0.1:{port}{HEALTH_PATH}", timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


@dataclass
class Worker:
    index: int
    port: int
    proc: subprocess.Popen | None = None
    started: float = 0.0
    restarts: int = 0
    not_before: float = 0.0     # no restart before this time (a server that keeps dying at start waits longer)


@dataclass
class Supervisor:
    """Starts the servers and HAProxy, restarts whatever dies, stops everything on :meth:`stop`.

    ``state.json`` in ``log_dir`` names the running processes (``haproxy`` pid, each worker's port and pid, restarts)
    and is rewritten whenever one changes.
    """

    workers: int
    address: str
    port: int
    app_dir: Path
    log_dir: Path
    max_connections: int = MAX_CONNECTIONS
    timeouts: Timeouts = field(default_factory=Timeouts)
    caps: ClientCaps = field(default_factory=ClientCaps)
    extra_hosts: tuple[str, ...] = ()
    counts_dir: Path | None = None
    haproxy: subprocess.Popen | None = None
    pool: list[Worker] = field(default_factory=list)
    _files: dict = field(default_factory=dict)     # log name -> the open file a process writes to

    def log(self, msg: str) -> None:
        line = f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {msg}"
        with open(self.log_dir / "supervisor.log", "a") as f:
            print(line, file=f)

    def _open(self, name: str):
        """``name`` in the log folder, for appending; the file a process that exited had open there is closed."""
        if name in self._files:
            self._files[name].close()
        f = self._files[name] = open(self.log_dir / name, "ab")   # closed by stop or the next _open of name
        return f

    def _write_state(self) -> None:
        state = {"haproxy": self.haproxy.pid if self.haproxy else None, "url": f"http://{self.address}:{self.port}",
                 "workers": [{"name": f"w{w.index}", "port": w.port, "pid": w.proc.pid if w.proc else None,
                              "restarts": w.restarts} for w in self.pool]}
        tmp = self.log_dir / "state.json.tmp"
        tmp.write_text(json.dumps(state, indent=1))
        tmp.replace(self.log_dir / "state.json")

    @property
    def private_dir(self) -> Path:
        """The servers' private folders (0700): one per server, its sessions' folders inside."""
        return self.log_dir / "private"

    def _start_worker(self, w: Worker) -> None:
        folder = self.private_dir / f"w{w.index}"
        shutil.rmtree(folder, ignore_errors=True)      # a server that died: its sessions are gone with it
        folder.mkdir(mode=0o700, parents=True)
        w.proc = subprocess.Popen(worker_command(self.app_dir, w.port, self.hosts), cwd=self.app_dir,
                                  env=worker_env(folder, self.counts_dir),
                                  stdout=self._open(f"worker{w.index}.log"), stderr=subprocess.STDOUT,
                                  stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent)
        w.started = time.monotonic()
        self.log(f"worker w{w.index} started on 127.0.0.1:{w.port}, pid {w.proc.pid}")

    def _start_haproxy(self) -> None:
        argv, env = haproxy_launch(self.haproxy_path, self.config_path)
        self.haproxy = subprocess.Popen(argv, stdout=self._open("access.log"), stderr=self._open("error.log"),
                                        stdin=subprocess.DEVNULL, preexec_fn=_die_with_parent, env=env)
        self.haproxy_started = time.monotonic()
        self.log(f"haproxy started on {self.address}:{self.port}, pid {self.haproxy.pid}, memory allocator "
                 + (env.get("LD_PRELOAD", "").split(" ")[0] if "MALLOC_CONF" in env else
                    "glibc's (libjemalloc2 is not installed: HAProxy keeps the memory of connections that ended)"))

    def start(self) -> None:
        """Start the servers, wait until each answers, then start HAProxy and wait until it accepts."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.haproxy_path = find_haproxy()
        if self.haproxy_path is None:
            raise RuntimeError("HAProxy is not installed: on Debian or Ubuntu, `sudo apt-get install haproxy`.")
        _check_can_listen(self.address, self.port)
        self.pool = [Worker(i, _free_port()) for i in range(self.workers)]
        self.hosts = allowed_hosts(self.address, self.extra_hosts)
        self.private_dir.mkdir(mode=0o700, exist_ok=True)
        self.private_dir.chmod(0o700)
        self.config_path = self.log_dir / "haproxy.cfg"
        self.config_path.write_text(haproxy_config(
            [w.port for w in self.pool], self.address, self.port, self.log_dir,
            max_connections=self.max_connections, timeouts=self.timeouts, caps=self.caps, hosts=self.hosts))
        check = subprocess.run([self.haproxy_path, "-c", "-q", "-f", str(self.config_path)],
                               capture_output=True, text=True)
        if check.returncode != 0:
            raise RuntimeError(f"HAProxy refused {self.config_path}: {check.stderr.strip() or check.stdout.strip()}")
        for w in self.pool:
            self._start_worker(w)
        self._write_state()
        deadline = time.monotonic() + START_TIMEOUT_S
        for w in self.pool:
            while not _healthy(w.port):
                if w.proc.poll() is not None:
                    raise RuntimeError(f"server w{w.index} exited with code {w.proc.returncode} before answering; "
                                       f"see {self.log_dir / f'worker{w.index}.log'}")
                if time.monotonic() > deadline:
                    raise RuntimeError(f"server w{w.index} did not answer within {START_TIMEOUT_S} s")
                time.sleep(POLL_S)
        self._start_haproxy()
        self._write_state()
        while not _accepts(self.address, self.port):
            if self.haproxy.poll() is not None:
                err = [line for line in (self.log_dir / "error.log").read_text(errors="replace").splitlines()
                       if "[ALERT]" in line]
                raise RuntimeError(f"HAProxy did not start on {self.address}:{self.port}: "
                                   f"{'; '.join(err) or 'exit code ' + str(self.haproxy.returncode)}")
            time.sleep(0.05)

    def check(self) -> None:
        """Restart every server and HAProxy that has exited (a server that died within 10 s of its start waits
        1, 2, 4, ... up to 30 s before the next try)."""
        now = time.monotonic()
        changed = False
        for w in self.pool:
            if w.proc is None or w.proc.poll() is None:
                continue
            if w.not_before == 0.0:
                quick = now - w.started < 10
                w.not_before = now + (min(30.0, 2.0 ** w.restarts) if quick else 0.0)
                self.log(f"worker w{w.index} (pid {w.proc.pid}) exited with code {w.proc.returncode}; restarting"
                         + (f" in {w.not_before - now:.0f} s" if quick else ""))
            if now >= w.not_before:
                w.restarts += 1
                w.not_before = 0.0
                self._start_worker(w)
                changed = True
        if self.haproxy is not None and self.haproxy.poll() is not None and now - self.haproxy_started >= 5:
            # (one that exits at once, e.g. its port taken by another program, is tried every 5 s, not in a loop)
            self.log(f"haproxy (pid {self.haproxy.pid}) exited with code {self.haproxy.returncode}; restarting")
            self._start_haproxy()
            changed = True
        if changed:
            self._write_state()

    def stop(self) -> None:
        procs = [p for p in [self.haproxy, *(w.proc for w in self.pool)] if p is not None]
        for p in procs:
            with contextlib.suppress(ProcessLookupError):
                p.terminate()
        for p in procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        shutil.rmtree(self.private_dir, ignore_errors=True)
        self.log("stopped")
        for f in self._files.values():
            f.close()


def _check_can_listen(address: str, port: int) -> None:
    """RuntimeError naming the address when nothing can listen on ``address:port`` (taken, or not this machine's)."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    with socket.socket(family) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((address, port))
        except OSError as e:
            raise RuntimeError(f"Could not listen on {address}:{port}: {e.strerror}") from None


def _accepts(address: str, port: int) -> bool:
    """HAProxy answers a request on ``address:port`` (any status: a bare connection would be logged as a bad
    request)."""
    host = "127.0.0.1" if address in ("0.0.0.0", "") else "::1" if address == "::" else address
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(f"http://{'[' + host + ']' if ':' in host else host}:{port}{HEALTH_PATH}", timeout=2):
            return True
    except urllib.error.HTTPError:
        return True
    except OSError:
        return False
