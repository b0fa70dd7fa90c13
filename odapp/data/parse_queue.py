"""The server-wide queue for reading uploads: one (or a few) parsed at a time, the others told how many are ahead,
and the freed memory handed back to the system after each parse."""

from __future__ import annotations

import ctypes
import ctypes.util
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager


class _Ticket:
    """A place in the :class:`ParseQueue`: who holds it (``key``) and when its owner last looked at it."""

    __slots__ = ("key", "seen")

    def __init__(self, key: object):
        self.key, self.seen = key, time.monotonic()


class ParseQueue:
    """A server-wide first-come-first-served queue for reading uploads: at most ``slots`` are parsed at once.

    Streamlit runs each session's script in its own thread, so ten people pressing "Load this file" together
    would parse ten files at once on a 2-core machine, each with a few hundred MB of temporary memory. Through
    this queue they are read one (or ``slots``) at a time; the others wait, and ``on_wait(n_ahead)`` lets the page
    say "queued, N ahead" while they do. After each parse the freed memory is handed back to the system
    (:func:`release_memory`), so the server's memory follows the one parse in flight, not the sum of all.

    A wait that is interrupted (Streamlit stops a script when the person presses something else, or presses the
    button again) keeps its place for ``lease_s`` seconds: a new wait with the same ``key`` (the same session and
    file) takes it over instead of going to the back; a place nobody takes over is dropped after that.
    """

    def __init__(self, slots: int = 1, poll_s: float = 0.5, lease_s: float = 10.0):
        self.slots, self.poll_s, self.lease_s = int(slots), float(poll_s), float(lease_s)
        self._cond = threading.Condition()
        self._line: list[_Ticket] = []   # arrival order; the holders are among the first ``slots``
        self._holding: set[_Ticket] = set()
        self.served = 0

    def _drop_abandoned(self, now: float) -> None:
        gone = [t for t in self._line if t not in self._holding and now - t.seen > self.lease_s]
        for t in gone:
            self._line.remove(t)
        if gone:
            self._cond.notify_all()

    @contextmanager
    def slot(self, on_wait: Callable[[int], None] | None = None, key: object = None) -> Iterator[None]:
        """Wait for a turn (calling ``on_wait`` with the uploads ahead whenever that number changes), then hold
        it for the ``with`` block."""
        with self._cond:
            ticket = next((t for t in self._line if key is not None and t.key == key and t not in self._holding),
                          None)
            if ticket is None:
                ticket = _Ticket(key)
                self._line.append(ticket)
            ticket.seen = time.monotonic()
        try:
            shown = None
            while True:
                with self._cond:
                    now = time.monotonic()
                    ticket.seen = now
                    self._drop_abandoned(now)
                    n = self._line.index(ticket)
                    if n < self.slots and len(self._holding) < self.slots:
                        self._holding.add(ticket)
                        break
                    if n == shown:
                        self._cond.wait(self.poll_s)
                        continue
                if on_wait is not None:   # outside the lock: it draws in the page (and may stop the script)
                    on_wait(n)
                shown = n
        except BaseException:
            if key is None:   # nobody can take the place over
                with self._cond:
                    self._line.remove(ticket)
                    self._cond.notify_all()
            raise
        try:
            yield
        finally:
            with self._cond:
                self._holding.discard(ticket)
                self._line.remove(ticket)
                self.served += 1
                self._cond.notify_all()
            release_memory()


def release_memory() -> None:
    """Give freed heap memory back to the system (glibc ``malloc_trim``; nothing elsewhere).

    Parsing a large upload allocates and frees a few hundred MB in a script thread's own malloc arena, which glibc
    otherwise keeps for later; without this a server that read ten uploads keeps ten such peaks."""
    try:
        ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):   # not glibc
        pass


UPLOAD_QUEUE = ParseQueue(slots=1)
"""The server's queue for reading uploads (one at a time; see :class:`ParseQueue`)."""
