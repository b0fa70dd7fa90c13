"""Connections that leave the machine, recorded while a process tree runs (the class tests and benchmark).

Two instruments, both needed: :data:`AUDIT`, a ``sitecustomize.py`` that installs a Python audit hook in every
Python process started with it on ``PYTHONPATH`` (each ``socket.connect``, ``sendto`` and name lookup to anything but
loopback is appended to the file named by ``ODLAB_NET_AUDIT``), and :class:`OutgoingRecorder`, which polls
``/proc/net/{tcp,tcp6,udp,udp6}`` for sockets of a process tree connected to an address that is not loopback (for
programs that are not Python, such as HAProxy). Linux only.
"""

from __future__ import annotations

import contextlib
import os
import socket
import textwrap
import threading
from pathlib import Path

AUDIT = textwrap.dedent("""
    # Instrument (benchmarks/outgoing.py): log every network call of this process to a non-loopback address.
    import os
    import sys

    _LOG = os.environ.get("ODLAB_NET_AUDIT")
    _EVENTS = ("socket.connect", "socket.sendto", "socket.sendmsg", "socket.getaddrinfo", "socket.gethostbyname",
               "socket.gethostbyaddr")

    def _local(host):
        if isinstance(host, bytes):
            host = host.decode(errors="replace")
        return host is None or str(host).startswith("127.") or str(host) in ("::1", "localhost", "", "0.0.0.0", "::")

    def _hook(event, args):
        if event not in _EVENTS:
            return
        addr = args[1] if event.startswith("socket.send") or event == "socket.connect" else args[0]
        host = addr[0] if isinstance(addr, tuple) else addr
        if event.startswith("socket.") and isinstance(addr, str) and addr.startswith("/"):
            return   # a unix socket
        if not _local(host):
            with open(_LOG, "a") as f:
                f.write(f"{os.getpid()} {event} {addr!r}\\n")

    if _LOG:
        sys.addaudithook(_hook)
""")


def children_of() -> dict[int, list[int]]:
    out: dict[int, list[int]] = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            with contextlib.suppress(OSError, IndexError):
                out.setdefault(int((d / "stat").read_text().rsplit(")", 1)[1].split()[1]), []).append(int(d.name))
    return out


def tree(pid: int) -> list[int]:
    """``pid`` and all its descendants."""
    children, out, todo = children_of(), [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def _addr(hexaddr: str) -> str:
    """``/proc/net/tcp``'s ``0100007F:1F90`` as ``127.0.0.1:8080`` (IPv6: the 16 bytes as four 32-bit words)."""
    h, port = hexaddr.split(":")
    b = bytes.fromhex(h)
    if len(b) == 4:
        return f"{socket.inet_ntop(socket.AF_INET, b[::-1])}:{int(port, 16)}"
    b = b"".join(b[i:i + 4][::-1] for i in range(0, 16, 4))
    return f"[{socket.inet_ntop(socket.AF_INET6, b)}]:{int(port, 16)}"


def _is_local(addr: str) -> bool:
    host = addr.rsplit(":", 1)[0].strip("[]")
    return (host.startswith("127.") or host in ("::1", "0.0.0.0", "::") or host.startswith("::ffff:127."))


def _local_hex(h: str) -> bool:
    """A quick look at a ``/proc/net`` address: 127.x.x.x, ::1, ::ffff:127.x.x.x or all zeros (not connected)."""
    return ((h.endswith("7F") and (len(h) == 8 or h.startswith("0000000000000000FFFF0000")))
            or h in ("00000000", "00000000000000000000000001000000", "0" * 32))


def foreign_sockets(root: int) -> set[str]:
    """Sockets of process ``root`` and its descendants connected to (or connecting to) an address that is not this machine's loopback.
    The socket tables are read first and the processes' file descriptors only when one such socket exists, so a
    poll costs little while thousands of loopback connections are open."""
    candidates = {}
    for proto in ("tcp", "tcp6", "udp", "udp6"):
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/net/{proto}").read_text().splitlines()[1:]:
                f = line.split()
                if not _local_hex(f[2].split(":")[0]) and not _is_local(remote := _addr(f[2])):
                    candidates[f[9]] = f"{proto} {_addr(f[1])} -> {remote}"
    if not candidates:
        return set()
    found = set()
    for pid in tree(root):
        with contextlib.suppress(OSError):
            for fd in Path(f"/proc/{pid}/fd").iterdir():
                with contextlib.suppress(OSError):
                    link = os.readlink(fd)
                    if link.startswith("socket:[") and link[8:-1] in candidates:
                        found.add(candidates[link[8:-1]])
    return found


class OutgoingRecorder(threading.Thread):
    """Polls :func:`foreign_sockets` of ``pid``'s tree every 0.25 s until :meth:`stop`."""

    def __init__(self, pid: int):
        super().__init__(daemon=True)
        self.pid, self.seen, self.polls = pid, set(), 0
        self._stop_event = threading.Event()

    def run(self):
        while not self._stop_event.wait(0.25):
            self.seen |= foreign_sockets(self.pid)
            self.polls += 1

    def stop(self) -> set[str]:
        self._stop_event.set()
        self.join(10)
        return self.seen




def audit_env(folder: Path) -> tuple[dict[str, str], Path]:
    """Environment for a process tree whose Python processes log their outside calls: ``(env, log file)``. Writes
    :data:`AUDIT` as ``folder/audit/sitecustomize.py``."""
    from odcore.paths import REPO_ROOT

    d = folder / "audit"
    d.mkdir(parents=True, exist_ok=True)
    (d / "sitecustomize.py").write_text(AUDIT)
    log = folder / "net_audit.txt"
    return dict(os.environ, ODLAB_NET_AUDIT=str(log), PYTHONPATH=os.pathsep.join([str(d), str(REPO_ROOT)])), log
