"""A map's draw, layer by layer: ``python -m benchmarks.map_layers [--rounds R] [--presses N] VARIANT [...]``.

Each ``VARIANT`` is ``DECK.json`` or ``DECK.json:ID,ID`` (the deck's layers with those ids left out). A deck's JSON
is what ``st.pydeck_chart`` sent for a map, e.g. the OD release page's (``--dump DIR OUT.json`` writes it for the
app checkout ``DIR``: an AppTest run of its OD release page with the default settings). For every round and
variant: a small app (``bench_browser``'s floor, one ε slider) that draws the deck, on a fresh server, opened in a
fresh headless Chromium session; then 1 + ``N`` ε presses, each sending the deck again with its zones' ``value``
scaled by ε (a new map, as on the OD release page), the first not counted. Rounds alternate the variants' order.

Printed per variant (medians over rounds): *map drawn*, from the page's navigation to the painted frame after the
map's last WebGL draw (``bench_browser``'s map drawn); *press*, key press to painted frame; *CPU to map drawn* and
*CPU per press*, the CPU time (user + system) of every Chromium process this run started (renderer, GPU process with
its software WebGL, browser) over the same spans. On a shared machine CPU time moves less than wall time, but a
deck.gl map also spends CPU while idle (its animation loop), so it grows with the wall time too.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path

from benchmarks import bench_browser as bb
from benchmarks import harness

BODY = """
import json, os
from pathlib import Path
import pydeck as pdk
from odapp.maps import deck as map_deck
spec = json.loads(Path(os.environ["ODLAB_MAP_DECK"]).read_text())
drop = set(filter(None, os.environ.get("ODLAB_MAP_DROP", "").split(",")))
spec["layers"] = [x for x in spec["layers"] if x["id"] not in drop]
for x in spec["layers"]:
    for r in x.get("data") or []:
        if isinstance(r, dict) and "value" in r:
            r["value"] = round(min(1.0, r["value"] * eps / 0.66), 3)
d = map_deck.deck([], pdk.ViewState(**spec["initialViewState"]), height=460)
text = json.dumps(spec, separators=(",", ":"), ensure_ascii=False)
d.to_json = lambda: text
st.pydeck_chart(d, height=460, key="map")
"""


def chromium_cpu_s() -> float:
    """CPU seconds (user + system) of the Chromium processes descended from this process."""
    kids, comm, cpu = {}, {}, {}
    tick = os.sysconf("SC_CLK_TCK")
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            st = Path(f"/proc/{d}/stat").read_text()
        except OSError:   # the process ended meanwhile
            continue
        f = st[st.rindex(")") + 2:].split()
        pid = int(d)
        comm[pid] = st[st.index("(") + 1:st.rindex(")")].lower()
        cpu[pid] = (int(f[11]) + int(f[12])) / tick
        kids.setdefault(int(f[1]), []).append(pid)
    total, todo = 0.0, [os.getpid()]
    while todo:
        for c in kids.get(todo.pop(), []):
            todo.append(c)
            total += cpu[c] if "chrom" in comm[c] else 0.0
    return total


async def one(browser, deck: Path, drop: str, presses: int, log: Path) -> dict:
    os.environ["ODLAB_MAP_DECK"], os.environ["ODLAB_MAP_DROP"] = str(deck.resolve()), drop
    with tempfile.TemporaryDirectory(prefix="odlab_map_") as tmp:
        d = bb.write_small_app(Path(tmp), BODY)
        with harness.streamlit_server(log, app_dir=d, timeout_s=120) as url:
            ctx, page = await bb.new_page(browser)
            try:
                c0 = chromium_cpu_s()
                await bb._goto_drawn(page, url)
                drawn = await bb.map_drawn(page)
                c1 = chromium_cpu_s()
                await bb.press(page, bb.EPS_SLIDER, 0)
                c2 = chromium_cpu_s()
                runs = [await bb.press(page, bb.EPS_SLIDER, i) for i in range(1, presses + 1)]
                c3 = chromium_cpu_s()
            finally:
                await ctx.close()
    return {"drawn": float("nan") if drawn is None else drawn, "press": statistics.median(r["total"] for r in runs),
            "cpu_open": 1000 * (c1 - c0), "cpu_press": 1000 * (c3 - c2) / presses}


async def compare(variants: list[tuple[Path, str]], rounds: int, presses: int) -> dict:
    from playwright.async_api import async_playwright

    out = {f"{p}:{d}": [] for p, d in variants}
    with tempfile.TemporaryDirectory(prefix="odlab_map_log_") as tmp:
        async with async_playwright() as pw:
            browser = await pw.chromium.launch(executable_path=harness.chromium_executable(), headless=True,
                                               args=harness.CHROMIUM_ARGS)
            try:
                for r in range(rounds):
                    for p, d in variants if r % 2 == 0 else variants[::-1]:
                        got = await one(browser, p, d, presses, Path(tmp) / "server.log")
                        out[f"{p}:{d}"].append(got)
                        print(f"round {r + 1} {p}{' without ' + d if d else ''}: "
                              + ", ".join(f"{k} {v:.0f}" for k, v in got.items())
                              + f" (load {os.getloadavg()[0]:.1f})", file=sys.stderr, flush=True)
            finally:
                await browser.close()
    return out


def dump(app_dir: Path, out: Path) -> None:
    """The OD release page's first deck JSON (default settings) of the app checkout ``app_dir``, into ``out``."""
    os.chdir(app_dir)
    sys.path.insert(0, str(app_dir))
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(app_dir / "app.py"), default_timeout=300)
    at.run()
    at.switch_page("pages/2_OD_release.py").run()
    text = at.get("deck_gl_json_chart")[0].proto.json
    out.write_text(text)
    for layer in json.loads(text)["layers"]:
        size = len(json.dumps(layer, separators=(",", ":"), ensure_ascii=False).encode())
        print(f"{layer['id']}: {layer['@@type']}, {len(layer.get('data') or [])} rows, {size:,} bytes")
    print(f"deck: {len(text.encode()):,} bytes")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m benchmarks.map_layers", description=__doc__.split("\n\n")[0])
    parser.add_argument("variants", nargs="*", help="DECK.json or DECK.json:ID,ID (those layers left out)")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--presses", type=int, default=4)
    parser.add_argument("--dump", nargs=2, metavar=("APP_DIR", "OUT_JSON"), type=Path,
                        help="write the OD release page's deck JSON of an app checkout, then stop")
    args = parser.parse_args(argv)
    if args.dump:
        dump(args.dump[0].resolve(), args.dump[1].resolve())
        return 0
    variants = [(Path(p), d) for p, _, d in (v.partition(":") for v in args.variants)]
    if not variants or any(not p.is_file() for p, _ in variants):
        parser.error("give one or more DECK.json[:ID,ID] with existing files")
    out = asyncio.run(compare(variants, args.rounds, args.presses))
    print("| variant | map drawn (ms) | press (ms) | CPU to map drawn (ms) | CPU per press (ms) |")
    print("|---|---|---|---|---|")
    for k, runs in out.items():
        print(f"| {k} | " + " | ".join(f"{statistics.median(r[m] for r in runs):.0f}"
                                       for m in ("drawn", "press", "cpu_open", "cpu_press")) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
