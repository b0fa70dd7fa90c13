"""Wall and CPU time of N chart images drawn one after another by the dashboard's export function
(``odapp.shared.export.chart_image``: PNG and SVG at the screen's size and at the paper presets), as a teacher who
downloads several charts in a row waits for them.

``python -m benchmarks.image_export_timing [-n N]`` prints one line per image and a total; time the whole process
from outside (``/usr/bin/time -v``) for its CPU seconds, browser included.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import plotly.graph_objects as go

from odapp.shared.export import SCREEN, chart_image
from odcore.report import figures

CASES = (("png", SCREEN), ("svg", SCREEN), ("svg", "single-column"), ("png", "slide"))


def chart(i: int) -> go.Figure:
    """A line chart with two series, different for every ``i`` (no cache can answer)."""
    x = np.arange(20)
    fig = go.Figure([go.Scatter(x=x, y=np.sin(x / (3 + i)) * (i + 1), name="true counts"),
                     go.Scatter(x=x, y=np.cos(x / (2 + i)), name="published counts")])
    return figures.style(fig, f"Chart {i + 1} of the lesson")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.image_export_timing", description=__doc__)
    parser.add_argument("-n", type=int, default=4, help="images to draw (default 4)")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    for i in range(args.n):
        fmt, size = CASES[i % len(CASES)]
        t0 = time.perf_counter()
        data = chart_image(chart(i).to_json(), fmt, size)
        print(f"image {i + 1}: {fmt} {size:>13}  {time.perf_counter() - t0:6.2f} s  {len(data):>8,} bytes", flush=True)
    print(f"{args.n} images: {time.perf_counter() - start:.2f} s wall, {time.process_time():.2f} s CPU (this process)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
