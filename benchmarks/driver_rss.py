"""Peak memory of the driver process of one ``python -m odcore`` command, run in this process: prints the peak
resident set size (``getrusage(RUSAGE_SELF).ru_maxrss``), CPU and wall seconds of this Python process on stderr.
With ``--engine spark`` the JVM (Spark's driver and, in local mode, its executors) is another process and is not
counted: the figure is what the Python side holds (e.g. a loaded table before Spark counts).

    /usr/bin/time -v python -m benchmarks.driver_rss release --input DIR --engine spark --seed 3 --out OUT --json
"""

from __future__ import annotations

import resource
import sys
import time


def main(argv: list[str]) -> int:
    from odcore.cli import main as odcore_main

    t0 = time.perf_counter()
    rc = odcore_main(argv)
    wall = time.perf_counter() - t0
    me = resource.getrusage(resource.RUSAGE_SELF)
    print(f"driver python: peak RSS {me.ru_maxrss / 2**20:.3f} GiB, CPU {me.ru_utime + me.ru_stime:.1f} s "
          f"(user {me.ru_utime:.1f} + sys {me.ru_stime:.1f}), wall {wall:.1f} s, exit {rc}", file=sys.stderr)
    return int(rc or 0)


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
