"""The dashboard for a class: several Streamlit servers behind HAProxy, each person kept on one of them.

One Streamlit server runs every session's script in one Python process, so it uses one core however many the
machine has (docs/benchmarks.md, "A class on the OD release page"). ``python -m odserve --workers K`` (or
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
import os
import signal
import sys
import tempfile
import time
from pathlib import Path

from odcore.paths import REPO_ROOT
from odserve.haproxy import MAX_CONNECTIONS, ClientCaps, find_jemalloc, host_regex
from odserve.supervisor import POLL_S, Supervisor


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m odserve", description=__doc__.split("\n\n")[0])
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
            host_regex([h], args.port)
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

