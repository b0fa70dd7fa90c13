"""The dashboard for a class: several Streamlit servers behind HAProxy, each person kept on one of them.

One Streamlit server runs every session's script in one Python process, so it uses one core however many the
machine has (docs/benchmarks.md, "A class on the OD release page"). ``python -m odserve.launcher --workers K`` (or
``make class``) starts ``K`` servers of this app on 127.0.0.1 and HAProxy (Debian's ``haproxy`` package) on one
address in front of them, and watches them all: a server that dies is started again on its port, and HAProxy, which
checks every server's ``/_stcore/health`` every second, sends no new connection to it meanwhile.

HAProxy does the serving: a cookie keeps each browser on the server it started on (its session, uploads and the
images made for it live there), new browsers go to the server with the fewest connections, WebSockets pass through,
a request that does not arrive in full within 10 s and a connection idle between requests for 10 s are closed, and at
most ``--max-connections`` connections are served at once (more wait in the kernel's queue). Each server gets at
most ``WORKER_REQUESTS`` requests at once; the others wait in HAProxy's queue, those from an address holding fewer
connections first, so that a flood from one address does not keep a newcomer waiting; one address holds at most
:class:`ClientCaps` connections and WebSockets (more are closed at once). A page of another site (an ``Origin`` that
is not the address itself) and a ``Host`` that is not one of this machine's names (:func:`allowed_hosts`) are
refused with 403 before they reach Streamlit.

The servers run in class mode (:mod:`odapp.data.private`): no folder of this machine can be named in the app (a counts
folder is uploaded as a zip, or is one of ``--counts-dir``), and each session's files are kept in its own 0700 folder
under ``--log-dir``/private, removed when its connection closes. Every request is
logged to ``access.log``, errors and servers going down or up to ``error.log``, and the supervisor's own lines
(server exits and restarts) to ``supervisor.log``, all in ``--log-dir``. docs/class.md explains the configuration.

By default everything listens on 127.0.0.1 only, like the app. ``--address 0.0.0.0`` (or one interface's address)
shares it on a network on purpose. Each server keeps its own caches and its own copy of the loaded city: memory grows
with ``K``.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import ipaddress
import itertools
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import sysconfig
import tempfile
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

from odapp.data import private
from odcore.paths import REPO_ROOT

COOKIE = "odlab_server"      # HAProxy's cookie naming the server a browser is kept on
MAX_CONNECTIONS = 3000       # served at once by the front (global maxconn is a little above it)
WORKER_MAXCONN = 500         # per server: every open tab holds one WebSocket on its server
# Requests other than WebSockets, uploads and downloads: at most this many at once on each server, the others wait in HAProxy's
# queue, where a request from an address holding many connections waits 1 ms longer per connection. A server
# answers its requests one after another, so a newcomer waits for these few, not for a flood's hundreds.
WORKER_REQUESTS = 20
HEALTH_PATH = "/_stcore/health"
# The workers' web requests go to a closed port of this machine: Streamlit looks up the machine's outside address
# (checkip.amazonaws.com) when a WebSocket comes from another site's page; with this it fails at once, on 127.0.0.1.
NO_OUTSIDE_PROXY = "http://127.0.0.1:9"
# HAProxy frees what a closed connection used, but glibc's allocator keeps the freed memory in the process: after a
# flood of connections HAProxy stayed 8-14 MiB above where it started, 26 MiB after three. With jemalloc (Debian's
# libjemalloc2; HAProxy detects it and supports it) it comes back to within about 1 MiB a second after the
# connections close: jemalloc returns free pages to the system from a background thread (dirty_decay_ms), in one arena
# and without per-thread caches (narenas, tcache), and HAProxy keeps no per-thread cache of free objects either
# (-dMno-cache; its management guide: "small memory savings on tiny systems"). docs/class.md, "Memory".
JEMALLOC = "libjemalloc.so.2"
JEMALLOC_CONF = "background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0,narenas:1,tcache:false"
HAPROXY_JEMALLOC_ARGS = ["-dMno-cache"]
START_TIMEOUT_S = 180        # a server that does not answer its health check by then is a failed start
POLL_S = 0.25


@dataclass(frozen=True)
class ClientCaps:
    """What one client address may hold at HAProxy (docs/class.md, "One address cannot take the class"): open
    connections, open WebSockets (one per open tab) and new connections per 10 s. A connection over a cap is closed
    at once (a WebSocket over its cap is answered 429); other addresses are served as before. A school's NAT puts a
    whole class behind one address: each person holds one WebSocket and a browser's handful of connections."""

    connections: int = 300
    websockets: int = 150
    rate_10s: int = 1500

    def __post_init__(self):
        for k, v in self.__dict__.items():
            if not (isinstance(v, int) and v >= 1):
                raise ValueError(f"per-client cap {k} must be a whole number >= 1, got {k}={v!r}.")


@dataclass(frozen=True)
class Timeouts:
    """HAProxy's timeouts, in seconds (docs/class.md says what each one does)."""

    connect: float = 2            # to a server on 127.0.0.1
    http_request: float = 10      # a request's headers, from the first byte (slow or silent clients)
    keep_alive: float = 10        # idle between two requests on one connection
    client: float = 60            # a client that stops reading or sending mid-request
    server: float = 120           # a server that stops answering mid-response
    tunnel: float = 600           # an open WebSocket with no traffic; Streamlit pings every 300 s (config.toml)
    queue: float = 30             # a request waiting for a free slot on a full server
    check: float = 5              # one health check (a server busy with ten reruns answers late, not never)

    def __post_init__(self):
        for k, v in self.__dict__.items():
            if not v > 0:
                raise ValueError(f"timeout {k} must be > 0 seconds, got {k}={v}.")


def _ms(s: float) -> str:
    """HAProxy's time: ``10s`` for whole seconds, else ``1500ms``."""
    return f"{round(s)}s" if float(s).is_integer() else f"{round(s * 1000)}ms"


def allowed_hosts(address: str, extra: list[str] | tuple[str, ...] = ()) -> list[str]:
    """The host names a browser may use to reach the class (the ``Host`` header, without its port): this machine's
    loopback names, ``address`` itself, with ``0.0.0.0``/``::`` this machine's host name and every address of its
    interfaces, and ``extra`` (``--allowed-host``: a DNS name people type). Any other name is refused: a page of
    another site that rebinds its own name to this machine's address cannot use the lab."""
    names = ["localhost", "127.0.0.1", "::1"]
    if address in ("0.0.0.0", "::", ""):
        names += [socket.gethostname(), *local_addresses()]   # (no name lookup: nothing asks a DNS server)
    else:
        names.append(address)
    names += [h.strip() for h in extra]
    out = []
    for n in names:
        n = n.strip().strip("[]").lower().rstrip(".")
        if n and n not in out:
            out.append(n)
    return out


def local_addresses() -> list[str]:
    """This machine's IPv4 and IPv6 interface addresses (``/proc/net/fib_trie`` and ``/proc/net/if_inet6``)."""
    out: list[str] = []
    with contextlib.suppress(OSError):
        lines = Path("/proc/net/fib_trie").read_text().splitlines()
        out += [prev.split("--")[-1].strip() for prev, line in itertools.pairwise(lines)
                if "/32 host LOCAL" in line]
    with contextlib.suppress(OSError):
        for line in Path("/proc/net/if_inet6").read_text().splitlines():
            h = line.split()[0]
            out.append(str(ipaddress.IPv6Address(int(h, 16))))
    return sorted(set(out))


HOST_NAME = re.compile(r"[A-Za-z0-9._:%-]+")


def _host_regex(hosts: list[str], port: int) -> str:
    """A regular expression (HAProxy's PCRE) matching a ``Host`` header naming one of ``hosts``, with no port or
    ``port`` (an IPv6 address in brackets)."""
    for h in hosts:
        if not HOST_NAME.fullmatch(h):
            raise ValueError(f"allowed host must be a host name or an IP address, got {h!r}.")
    alts = "|".join(re.escape(f"[{h}]" if ":" in h else h) for h in hosts)
    return f"'^({alts})(:{port})?$'"     # in single quotes: HAProxy reads it as it is


def haproxy_config(worker_ports: list[int], address: str, port: int, run_dir: Path, *,
                   max_connections: int = MAX_CONNECTIONS, timeouts: Timeouts = Timeouts(),
                   caps: ClientCaps = ClientCaps(), hosts: list[str] | None = None) -> str:
    """HAProxy's configuration for ``worker_ports`` on 127.0.0.1 behind ``address:port``; each client address held
    to ``caps``, and only the ``Host`` names ``hosts`` served (default :func:`allowed_hosts` of ``address``).

    Logs go to HAProxy's standard output (every request; :class:`Supervisor` writes it to ``access.log``) and
    standard error (warnings and errors; ``error.log``); the stats socket ``run_dir/haproxy.sock`` answers
    ``show stat`` (see :func:`server_states`).
    """
    if not worker_ports:
        raise ValueError("at least one worker port is needed, got none.")
    if max_connections < 1:
        raise ValueError(f"max_connections must be >= 1, got max_connections={max_connections}.")
    t = timeouts
    host_re = _host_regex(allowed_hosts(address) if hosts is None else hosts, port)
    bind = f"[{address}]:{port}" if ":" in address else f"{address}:{port}"
    servers = "\n".join(f"    server w{i} 127.0.0.1:{p} cookie w{i}" for i, p in enumerate(worker_ports))
    tracking = "\n".join(f"    server w{i} 127.0.0.1:{p} cookie w{i} track workers/w{i}"
                          for i, p in enumerate(worker_ports))
    return f"""\
# Generated by odapp/serve.py; docs/class.md explains every line.
global
    maxconn {max_connections + 100}
    log stdout format iso local0 info
    log stderr format iso local0 warning
    stats socket {run_dir / 'haproxy.sock'} mode 600 level user
    hard-stop-after 5s

defaults
    mode http
    log global
    option httplog
    option log-separate-errors
    option redispatch 1
    retries 3
    retry-on conn-failure empty-response
    timeout connect {_ms(t.connect)}
    timeout http-request {_ms(t.http_request)}
    timeout http-keep-alive {_ms(t.keep_alive)}
    timeout client {_ms(t.client)}
    timeout server {_ms(t.server)}
    timeout tunnel {_ms(t.tunnel)}
    timeout client-fin 10s
    timeout server-fin 10s
    timeout queue {_ms(t.queue)}
    timeout check {_ms(t.check)}

frontend class
    bind {bind}
    maxconn {max_connections}
    option forwardfor
    # each address's open connections and new connections per 10 s: one address holds at most
    # {caps.connections} and opens at most {caps.rate_10s} per 10 s (more are closed at once; a flood's
    # requests also queue behind a newcomer's, see backend workers)
    stick-table type ipv6 size 100k expire 60s store conn_cur,conn_rate(10s)
    tcp-request connection track-sc0 src
    tcp-request connection reject if {{ sc0_conn_cur gt {caps.connections} }} || {{ sc0_conn_rate gt {caps.rate_10s} }}
    # only the names of this machine (no rebinding of another site's name to it)
    acl allowed_host req.hdr(host) -m reg -i {host_re}
    http-request deny deny_status 403 if !allowed_host
    # each address's open WebSockets (one per open tab): at most {caps.websockets}
    http-request track-sc1 src table websockets if {{ path /_stcore/stream }}
    http-request deny deny_status 429 if {{ path /_stcore/stream }} {{ sc1_conn_cur gt {caps.websockets} }}
    # a page of another site may not use the dashboard: its Origin must be this address (or this machine)
    http-request set-var(txn.host) req.hdr(host)
    acl has_origin req.hdr(origin) -m found
    acl same_origin req.hdr(origin),regsub(^https?://,),strcmp(txn.host) eq 0
    acl local_origin req.hdr(origin) -m reg -i ^https?://(localhost|127\\.0\\.0\\.1|\\[::1\\])(:[0-9]+)?$
    http-request deny deny_status 403 if has_origin !same_origin !local_origin
    use_backend sessions if {{ path /_stcore/stream }} || {{ path_beg /_stcore/upload_file /media/ }}
    default_backend workers

backend workers
    balance leastconn
    cookie {COOKIE} insert indirect nocache httponly attr "SameSite=Lax"
    option httpchk
    http-check send meth GET uri {HEALTH_PATH}
    http-check expect status 200
    http-request set-priority-offset sc0_conn_cur
    default-server check inter 1s fastinter 500ms downinter 1s fall 3 rise 2 maxconn {WORKER_REQUESTS} observe layer4 error-limit 1 on-error mark-down
{servers}

backend websockets
    # the open WebSockets of each address (frontend class: track-sc1)
    stick-table type ipv6 size 100k expire 60s store conn_cur

backend sessions
    balance leastconn
    cookie {COOKIE} insert indirect nocache httponly attr "SameSite=Lax"
    default-server maxconn {WORKER_MAXCONN}
{tracking}
"""


def server_states(sock_path: Path, timeout_s: float = 2.0) -> dict[str, str]:
    """``{"w0": "UP", "w1": "DOWN", ...}`` from HAProxy's stats socket (``show stat``)."""
    with socket.socket(socket.AF_UNIX) as s:
        s.settimeout(timeout_s)
        s.connect(str(sock_path))
        s.sendall(b"show stat\n")
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    lines = data.decode().splitlines()
    head = lines[0].lstrip("# ").split(",")
    out = {}
    for line in lines[1:]:
        row = dict(zip(head, line.split(","), strict=False))
        if row.get("pxname") == "workers" and row.get("svname", "").startswith("w"):
            out[row["svname"]] = row.get("status", "")
    return out


def find_haproxy() -> str | None:
    """Path of the ``haproxy`` program (on PATH, or in /usr/sbin where Debian puts it), or None."""
    return shutil.which("haproxy") or shutil.which("haproxy", path="/usr/sbin:/sbin")


def find_jemalloc() -> str | None:
    """Path of jemalloc's shared library (Debian package ``libjemalloc2``), or None."""
    dirs = [f"/usr/lib/{sysconfig.get_config_var('MULTIARCH') or ''}", "/usr/lib64", "/usr/lib", "/usr/local/lib",
            "/lib64", "/lib"]
    return next((str(Path(d) / JEMALLOC) for d in dirs if (Path(d) / JEMALLOC).is_file()), None)


def haproxy_launch(haproxy_path: str, config_path: Path) -> tuple[list[str], dict[str, str]]:
    """HAProxy's command line (in the foreground, ``-db``) and environment: on jemalloc when it is installed (see
    ``JEMALLOC``), else on glibc's allocator."""
    env = dict(os.environ)
    lib = find_jemalloc()
    if lib is None:
        return [haproxy_path, "-db", "-f", str(config_path)], env
    env["LD_PRELOAD"] = " ".join(x for x in (lib, env.get("LD_PRELOAD", "")) if x)
    env["MALLOC_CONF"] = JEMALLOC_CONF
    return [haproxy_path, "-db", *HAPROXY_JEMALLOC_ARGS, "-f", str(config_path)], env


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


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m odserve.launcher", description=__doc__.split("\n\n")[0])
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1,
                   help="Streamlit server processes (default: the number of cores, %(default)s here)")
    p.add_argument("--address", default="127.0.0.1",
                   help="address to listen on (default 127.0.0.1: this machine only; 0.0.0.0: every interface)")
    p.add_argument("--port", type=int, default=8501, help="port to listen on (default 8501)")
    p.add_argument("--max-connections", type=int, default=MAX_CONNECTIONS,
                   help="connections served at once; more wait (default %(default)s)")
    p.add_argument("--log-dir", type=Path, default=None,
                   help="folder for access.log, error.log, supervisor.log, the servers' logs and haproxy.cfg "
                        "(default: a new temporary folder, printed at the start)")
    p.add_argument("--counts-dir", type=Path, default=None,
                   help="an OD counts folder (trips --counts-out), or a folder of them, that students may open; "
                        "no other folder of this machine can be named in the app")
    p.add_argument("--allowed-host", action="append", default=[], metavar="NAME",
                   help="a further name people reach this machine by (a DNS name); repeat for several. This "
                        "machine's own names and addresses are always allowed, any other Host is refused")
    caps = ClientCaps()
    p.add_argument("--client-connections", type=int, default=caps.connections,
                   help="open connections one client address may hold (default %(default)s)")
    p.add_argument("--client-websockets", type=int, default=caps.websockets,
                   help="open WebSockets (tabs) one client address may hold (default %(default)s)")
    p.add_argument("--client-rate", type=int, default=caps.rate_10s,
                   help="new connections one client address may open per 10 s (default %(default)s)")
    p.add_argument("--app-dir", type=Path, default=REPO_ROOT, help=argparse.SUPPRESS)
    return p


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.workers < 1:
        print(f"--workers must be at least 1, got {args.workers}", file=sys.stderr)
        return 2
    if args.max_connections < 1:
        print(f"--max-connections must be at least 1, got {args.max_connections}", file=sys.stderr)
        return 2
    try:
        caps = ClientCaps(args.client_connections, args.client_websockets, args.client_rate)
        for h in args.allowed_host:
            _host_regex([h], args.port)
    except ValueError as e:
        print(str(e), file=sys.stderr)
        return 2
    if args.counts_dir is not None and not args.counts_dir.is_dir():
        print(f"--counts-dir {args.counts_dir} is not a folder", file=sys.stderr)
        return 2
    log_dir = args.log_dir or Path(tempfile.mkdtemp(prefix="odlab_class_"))
    sup = Supervisor(args.workers, args.address, args.port, args.app_dir.resolve(), log_dir.resolve(),
                     max_connections=args.max_connections, caps=caps, extra_hosts=tuple(args.allowed_host),
                     counts_dir=args.counts_dir.resolve() if args.counts_dir else None)
    stopping = []
    previous = {sig: signal.signal(sig, lambda *_: stopping.append(1)) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        sup.start()
        print(f"OD Privacy Lab: http://{args.address}:{args.port} ({args.workers} server processes behind HAProxy; "
              f"logs in {log_dir})", flush=True)
        if find_jemalloc() is None:
            print("Note: libjemalloc2 is not installed (sudo apt-get install libjemalloc2): without it HAProxy keeps "
                  "the memory of connections that have ended (docs/class.md, \"Memory\").", file=sys.stderr)
        while not stopping:
            sup.check()
            time.sleep(POLL_S)
    except RuntimeError as e:
        print(str(e), file=sys.stderr)
        return 1
    finally:
        sup.stop()
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    return 0


if __name__ == "__main__":
    sys.exit(main())
