"""HAProxy in front of the class's servers: its configuration (a cookie per server, per-address caps, timeouts,
the allowed hosts and origins), its runtime view of the servers, and how it is started (with jemalloc when
installed). docs/class.md explains the configuration."""

from __future__ import annotations

import contextlib
import ipaddress
import itertools
import os
import re
import shutil
import socket
import sysconfig
from dataclasses import dataclass
from pathlib import Path

COOKIE = "odlab_server"      # HAProxy's cookie naming the server a browser is kept on
MAX_CONNECTIONS = 3000       # served at once by the front (global maxconn is a little above it)
WORKER_MAXCONN = 500         # per server: every open tab holds one WebSocket on its server
# Requests other than WebSockets, uploads and downloads: at most this many at once on each server, the others wait in HAProxy's
# queue, where a request from an address holding many connections waits 1 ms longer per connection. A server
# answers its requests one after another, so a newcomer waits for these few, not for a flood's hundreds.
WORKER_REQUESTS = 20
HEALTH_PATH = "/_stcore/health"
# HAProxy frees what a closed connection used, but glibc's allocator keeps the freed memory in the process: after a
# flood of connections HAProxy stayed 8-14 MiB above where it started, 26 MiB after three. With jemalloc (Debian's
# libjemalloc2; HAProxy detects it and supports it) it comes back to within about 1 MiB a second after the
# connections close: jemalloc returns free pages to the system from a background thread (dirty_decay_ms), in one arena
# and without per-thread caches (narenas, tcache), and HAProxy keeps no per-thread cache of free objects either
# (-dMno-cache; its management guide: "small memory savings on tiny systems"). docs/class.md, "Memory".
JEMALLOC = "libjemalloc.so.2"
JEMALLOC_CONF = "background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0,narenas:1,tcache:false"
HAPROXY_JEMALLOC_ARGS = ["-dMno-cache"]


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


def host_regex(hosts: list[str], port: int) -> str:
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
    host_re = host_regex(allowed_hosts(address) if hosts is None else hosts, port)
    bind = f"[{address}]:{port}" if ":" in address else f"{address}:{port}"
    servers = "\n".join(f"    server w{i} 127.0.0.1:{p} cookie w{i}" for i, p in enumerate(worker_ports))
    tracking = "\n".join(f"    server w{i} 127.0.0.1:{p} cookie w{i} track workers/w{i}"
                          for i, p in enumerate(worker_ports))
    return f"""\
# Generated by odserve (python -m odserve); docs/class.md explains every line.
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
