"""The dashboard for a class: several Streamlit server processes behind one address, each person on one of them.

One Streamlit server runs every session's script in one Python process, so it uses one core however many the
machine has: with ten people pressing a slider at once, the tenth waits for nine reruns (docs/benchmarks.md, "A class
on the OD release page"). ``python -m odapp.serve --workers K`` starts ``K`` servers of this app on 127.0.0.1 (free ports) and one
address in front of them (a TCP relay: nothing is read or changed on the way). Each person's machine is given one
server and keeps it: every connection from the same IP address goes to the same server, so their session, uploads
and downloads are all on one server; a new address goes to the server with the fewest addresses so far.

By default the relay listens on 127.0.0.1 only, like the app. ``--address 0.0.0.0`` (or one interface's address)
shares it on a network on purpose. Several people behind one address (one machine, or a network that hides their
addresses) share one server: nothing breaks, they just do not spread. Each server keeps its own caches and its own
copy of the loaded city: memory grows with ``K``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import tempfile
from pathlib import Path

from odcore.paths import REPO_ROOT

CHUNK = 1 << 16


class Relay:
    """The TCP relay: each client IP address is pinned to one backend (fewest addresses first)."""

    def __init__(self, backends: list[tuple[str, int]]):
        self.backends = backends
        self.pinned: dict[str, int] = {}                   # client address -> backend index
        self.tasks: set[asyncio.Task] = set()              # the connections being relayed

    async def close(self) -> None:
        """End every relayed connection."""
        for t in list(self.tasks):
            t.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)

    def backend_for(self, client_ip: str) -> int:
        if client_ip not in self.pinned:
            counts = [0] * len(self.backends)
            for b in self.pinned.values():
                counts[b] += 1
            self.pinned[client_ip] = min(range(len(self.backends)), key=lambda b: (counts[b], b))
        return self.pinned[client_ip]

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        self.tasks.add(task)
        peer = writer.get_extra_info("peername")
        b = self.backend_for(peer[0] if peer else "?")
        up_writer = None
        try:
            up_reader, up_writer = await asyncio.open_connection(*self.backends[b])
            await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
        except OSError:
            pass
        finally:
            self.tasks.discard(task)
            for w in (writer, up_writer):
                if w is not None:
                    w.close()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    """Copy ``reader`` to ``writer`` until either side closes."""
    try:
        while data := await reader.read(CHUNK):
            writer.write(data)
            await writer.drain()
    except (ConnectionError, OSError):
        pass
    finally:
        try:
            if writer.can_write_eof():
                writer.write_eof()
        except (OSError, RuntimeError):
            pass


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m odapp.serve", description=__doc__.split("\n\n")[0])
    p.add_argument("--workers", type=int, default=os.cpu_count() or 1,
                   help="Streamlit server processes (default: the number of cores, %(default)s here)")
    p.add_argument("--address", default="127.0.0.1",
                   help="address to listen on (default 127.0.0.1: this machine only; 0.0.0.0: every interface)")
    p.add_argument("--port", type=int, default=8501, help="port to listen on (default 8501)")
    p.add_argument("--app-dir", type=Path, default=REPO_ROOT, help=argparse.SUPPRESS)
    return p


async def serve(workers: int, address: str, port: int, app_dir: Path = REPO_ROOT, *, on_ready=None) -> None:
    """Start ``workers`` servers, relay ``address:port`` to them until cancelled, then stop them. ``on_ready(relay,
    procs)`` is called once everything answers."""
    from odapp import live

    logs = Path(tempfile.mkdtemp(prefix="odlab_serve_"))
    ports = [live.free_port() for _ in range(workers)]
    procs = []
    try:
        for i, port_i in enumerate(ports):
            procs.append(live.start_server(logs / f"worker{i}.log", app_dir=app_dir, port=port_i)[0])
        for proc, port_i in zip(procs, ports, strict=True):
            await asyncio.to_thread(live.wait_healthy, proc, f"http://127.0.0.1:{port_i}", 120)
        relay = Relay([("127.0.0.1", p) for p in ports])
        server = await asyncio.start_server(relay.handle, address, port)
        print(f"OD Privacy Lab: http://{address}:{port} ({workers} server processes; their logs in {logs})",
              flush=True)
        if on_ready is not None:
            on_ready(relay, procs)
        async with server:
            try:
                await server.serve_forever()
            finally:
                server.close()
                await relay.close()
    finally:
        for proc in procs:
            live.stop_server(proc)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.workers < 1:
        print(f"--workers must be at least 1, got {args.workers}", file=sys.stderr)
        return 2
    loop = asyncio.new_event_loop()
    task = loop.create_task(serve(args.workers, args.address, args.port, args.app_dir))
    for sig in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(sig, task.cancel)
    try:
        loop.run_until_complete(task)
    except asyncio.CancelledError:
        pass
    except OSError as e:            # e.g. the port is taken
        print(f"Could not listen on {args.address}:{args.port}: {e}", file=sys.stderr)
        return 1
    finally:
        loop.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
