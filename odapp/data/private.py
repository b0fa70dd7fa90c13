"""Each session's files, kept private to it: one folder per server process (mode 0700), one folder per session inside
it (0700), removed when the session ends; and what a class server lets a person open (no path typed into a page).

A session's folder holds its uploads (traces as Parquet, unpacked cab files, zone files, unpacked counts folders).
It is removed when the browser's connection closes (:func:`odapp.data.cache.session_files`, a session-scoped resource whose
release Streamlit calls at the disconnect), by the sweeper when untouched for :data:`IDLE_S` seconds (a release that
never ran: a crash in the middle of a run), and with the server's whole folder when the server process exits.

``python -m odserve`` (a class) sets :data:`CLASS_ENV`, names the server's folder with :data:`ROOT_ENV` (under its
run folder, removed when it stops or restarts a server) and the teacher's counts folder with :data:`COUNTS_ENV`.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
import threading
import time
from functools import lru_cache
from pathlib import Path

CLASS_ENV = "ODLAB_CLASS"            # "1": serving a class (no server path typed into the app)
ROOT_ENV = "ODLAB_PRIVATE_DIR"       # the server process's folder of session folders
COUNTS_ENV = "ODLAB_COUNTS_DIR"      # a counts folder (or a folder of them) the teacher names at start
SESSION_PREFIX = "session-"
IDLE_S = 3600.0
"""A session folder untouched (no page run of its session) for this long is removed by the sweeper."""
SWEEP_EVERY_S = 60.0


def class_mode() -> bool:
    """True when the app serves a class (``python -m odserve`` sets :data:`CLASS_ENV`)."""
    return os.environ.get(CLASS_ENV, "") == "1"


def teacher_counts_dir() -> Path | None:
    """The counts folder (or folder of counts folders) named with ``--counts-dir`` at start, or None."""
    d = os.environ.get(COUNTS_ENV, "").strip()
    return Path(d).resolve() if d else None


@lru_cache(maxsize=1)
def server_root() -> Path:
    """This server process's private folder (0700): :data:`ROOT_ENV` when set (the class supervisor's), else a new
    folder in the system's temporary directory; either way removed when the process exits."""
    named = os.environ.get(ROOT_ENV, "").strip()
    if named:
        root = Path(named)
        root.mkdir(mode=0o700, parents=True, exist_ok=True)
        root.chmod(0o700)
    else:
        root = Path(tempfile.mkdtemp(prefix=f"odlab-server-{os.getpid()}-"))    # 0700
    atexit.register(shutil.rmtree, root, ignore_errors=True)
    return root.resolve()


def new_session_folder() -> Path:
    """A new session's folder (0700) inside :func:`server_root`; starts the sweeper."""
    start_sweeper()
    return Path(tempfile.mkdtemp(prefix=SESSION_PREFIX, dir=server_root()))


def touch(folder: Path) -> None:
    """Mark ``folder`` as used now (the sweeper's idle clock starts again)."""
    try:
        os.utime(folder)
    except OSError:
        pass


def remove(folder: Path | str) -> bool:
    """Remove a session folder (only one inside :func:`server_root`); True when it was there."""
    p = Path(folder).resolve()
    if p.parent != server_root() or not p.name.startswith(SESSION_PREFIX) or not p.is_dir():
        return False
    shutil.rmtree(p, ignore_errors=True)
    return True


def sweep(idle_s: float = IDLE_S, now: float | None = None) -> list[Path]:
    """Remove the session folders untouched for ``idle_s`` seconds; return them."""
    now = time.time() if now is None else now
    gone = []
    for p in server_root().glob(f"{SESSION_PREFIX}*"):
        try:
            idle = now - p.stat().st_mtime
        except OSError:
            continue
        if idle >= idle_s and remove(p):
            gone.append(p)
    return gone


_sweeper_lock = threading.Lock()
_sweeper: list[threading.Thread] = []


def start_sweeper(every_s: float = SWEEP_EVERY_S, idle_s: float = IDLE_S) -> None:
    """Start (once per process) a daemon thread that calls :func:`sweep` every ``every_s`` seconds."""
    with _sweeper_lock:
        if _sweeper:
            return

        def loop() -> None:
            while True:
                time.sleep(every_s)
                try:
                    sweep(idle_s)
                except OSError:
                    pass

        t = threading.Thread(target=loop, name="odlab-session-sweeper", daemon=True)
        t.start()
        _sweeper.append(t)


def within(path: Path | str, folder: Path | str) -> bool:
    """True when ``path`` (resolved, symbolic links followed) is ``folder`` or inside it."""
    try:
        return Path(path).resolve().is_relative_to(Path(folder).resolve())
    except (OSError, ValueError):
        return False
