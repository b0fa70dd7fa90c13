"""odcore.report.figures.render_image: one image at a time in the process, in a browser kept per block or per process,
replaced when it dies, and a clear error (never a hang) when it cannot start or answer."""

from __future__ import annotations

import asyncio
import os
import signal
import stat
import threading
import time
from pathlib import Path

import plotly.graph_objects as go
import pytest

from odcore.errors import ImageExportError, MissingBrowserError
from odcore.report import figures

NEEDS_BROWSER = pytest.mark.skipif(figures.find_browser() is None, reason="no Chrome/Chromium on this machine: "
                                   "kaleido cannot draw PNG/SVG (Debian package 'chromium'; .ci/run installs it)")


def _processes() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, command name) of every process that can be read now (Linux /proc)."""
    out = {}
    for d in Path("/proc").iterdir():
        if d.name.isdigit():
            try:
                stat_line = (d / "stat").read_text()
            except OSError:
                continue
            name = stat_line[stat_line.index("(") + 1:stat_line.rindex(")")]
            out[int(d.name)] = (int(stat_line[stat_line.rindex(")") + 2:].split()[1]), name)
    return out


def _descendants(name_starts: str, root: int | None = None) -> list[int]:
    """Descendants of ``root`` (this process by default) whose name starts with ``name_starts`` and whose parent's
    does not (for Chromium: the browser process, not its renderers and helpers)."""
    procs = _processes()
    mine, grew = {os.getpid() if root is None else root}, True
    while grew:
        more = {p for p, (pp, _) in procs.items() if pp in mine} - mine
        mine |= more
        grew = bool(more)
    return sorted(p for p in mine if procs.get(p, (0, ""))[1].startswith(name_starts)
                  and not procs.get(procs[p][0], (0, ""))[1].startswith(name_starts))


def _image_chromium() -> list[int]:
    """The kept image browser's Chromium (under kaleido's wrapper process), whatever other Chromium this process
    runs (a browser test's, in the same test worker)."""
    wrapper = figures.image_browser_pid()
    return [] if wrapper is None else _descendants("chrom", wrapper)


def _gone(pids: list[int], seconds: float) -> bool:
    """Every process of ``pids`` has ended (waited for up to ``seconds``)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        alive = []
        for p in pids:
            try:
                if not Path(f"/proc/{p}/stat").read_text().rsplit(") ", 1)[-1].startswith("Z"):   # a zombie has ended
                    alive.append(p)
            except OSError:
                pass
        if not alive:
            return True
        time.sleep(0.2)
    return False


def _chart(colour: str, n: int) -> go.Figure:
    return go.Figure(go.Bar(x=list(range(n)), y=[(i * 7) % 5 + 1 for i in range(n)], marker_color=colour))


def _png(fig: go.Figure, **kw) -> bytes:
    return figures.render_image(fig, "png", width=320, height=200, **kw)


@pytest.fixture
def no_kept_browser():
    """Each test starts and ends with no browser kept (the dashboard's keep undone)."""
    figures.release_image_browser()
    yield
    figures.release_image_browser()
    assert not figures.image_browser_running()


@NEEDS_BROWSER
@pytest.mark.timeout(240)
def test_two_threads_drawing_at_once_each_get_their_own_image(no_kept_browser, monkeypatch):
    import kaleido

    a, b = _chart("#1b9e77", 6), _chart("#d95f02", 9)
    calc_fig, drawing = kaleido.Kaleido.calc_fig, {"now": 0, "most": 0}

    async def counted(self, *args, **kwargs):   # how many renders are inside the browser at once
        drawing["now"] += 1
        drawing["most"] = max(drawing["most"], drawing["now"])
        try:
            await asyncio.sleep(0.05)               # a window wide enough for a second call to come in
            return await calc_fig(self, *args, **kwargs)
        finally:
            drawing["now"] -= 1

    monkeypatch.setattr(kaleido.Kaleido, "calc_fig", counted)
    with figures.image_server():
        want = {"a": _png(a), "b": _png(b)}           # drawn one after the other: the reference
        assert want["a"] != want["b"]
        got: dict[str, list] = {"a": [], "b": []}
        start = threading.Barrier(2)

        def draw(key, fig):
            start.wait()
            for _ in range(3):
                try:
                    got[key].append(_png(fig))
                except Exception as e:   # kept, so the assertion below shows it
                    got[key].append(e)

        threads = [threading.Thread(target=draw, args=(k, f)) for k, f in (("a", a), ("b", b))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(200)
        assert not any(t.is_alive() for t in threads)
    assert got["a"] == [want["a"]] * 3
    assert got["b"] == [want["b"]] * 3
    assert drawing["most"] == 1                       # one image at a time in the process


@NEEDS_BROWSER
@pytest.mark.timeout(180)
def test_a_browser_killed_between_images_is_replaced_and_the_next_image_is_right(no_kept_browser):
    a, b = _chart("#1b9e77", 6), _chart("#7570b3", 4)
    with figures.image_server():
        want_a, want_b = _png(a), _png(b)
        first = _image_chromium()
        assert len(first) == 1
        assert _png(a) == want_a
        assert _image_chromium() == first              # kept: the next image used the same browser
        os.kill(first[0], signal.SIGKILL)
        assert _png(b) == want_b                        # a fresh browser, whether the death was seen yet or not
        second = _image_chromium()
        assert len(second) == 1
        assert second != first
        assert figures.image_browser_running()
    assert not figures.image_browser_running()        # the block's end closed it
    assert _gone(first + second, 20)


@NEEDS_BROWSER
@pytest.mark.timeout(180)
def test_a_browser_killed_while_drawing_is_replaced(no_kept_browser, monkeypatch, caplog):
    """Chromium killed in the middle of a render (inside kaleido's call, on the browser's thread): the waiting call
    sees it, draws the image once more in a fresh browser, and keeps that one."""
    import kaleido

    fig = _chart("#e7298a", 5)
    calc_fig = kaleido.Kaleido.calc_fig
    killed = []

    async def kill_then_draw(self, *args, **kwargs):
        if not killed:
            [pid] = _image_chromium()
            os.kill(pid, signal.SIGKILL)
            killed.append(pid)
        return await calc_fig(self, *args, **kwargs)

    with figures.image_server():
        want = _png(fig)
        monkeypatch.setattr(kaleido.Kaleido, "calc_fig", kill_then_draw)
        with caplog.at_level("WARNING", logger="odcore.report.figures"):
            t0 = time.monotonic()
            assert _png(fig) == want
            assert time.monotonic() - t0 < 60
        assert len(killed) == 1
        assert "image browser stopped (png image, attempt 1)" in caplog.text
        assert _image_chromium() not in ([], killed)
        assert figures.image_browser_running()


def test_a_browser_that_will_not_start_gives_a_clear_error(no_kept_browser, monkeypatch):
    monkeypatch.setenv(figures.BROWSER_ENV, "/bin/false")
    with figures.image_server(), \
            pytest.raises(ImageExportError, match=r"\(/bin/false\) did not start: .*ODLAB_BROWSER"):
        _png(_chart("#66a61e", 3))
    assert not figures.image_browser_running()


def test_a_browser_that_never_answers_gives_an_error_in_time(no_kept_browser, monkeypatch, tmp_path):
    """A "browser" that starts and says nothing: the deadline ends the wait, and the process is stopped."""
    hang = tmp_path / "silent-browser"
    hang.write_text("#!/bin/sh\nexec sleep 300\n")
    hang.chmod(hang.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv(figures.BROWSER_ENV, str(hang))
    t0 = time.monotonic()
    with pytest.raises(ImageExportError, match=r"did not answer within 2 s"):
        _png(_chart("#a6761d", 3), timeout=2)
    assert time.monotonic() - t0 < 30
    deadline = time.monotonic() + 10                  # stopped: the wrapper passes the signal on, then it ends
    while _descendants("sleep") and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _descendants("sleep") == []


def test_no_browser_and_a_missing_path_are_the_missing_browser_error(no_kept_browser, monkeypatch, tmp_path):
    monkeypatch.setenv(figures.BROWSER_ENV, "none")
    with pytest.raises(MissingBrowserError, match="needs Google Chrome or Chromium"):
        _png(_chart("#666666", 3))
    monkeypatch.setenv(figures.BROWSER_ENV, str(tmp_path / "no-such-chromium"))
    with pytest.raises(MissingBrowserError, match="no-such-chromium"):
        _png(_chart("#666666", 3))
