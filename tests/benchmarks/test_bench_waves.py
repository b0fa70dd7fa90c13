"""The browser benchmark's memory measurement as sessions come and go (``benchmarks/bench_browser.py``,
``_waves``): waves of protocol clients on a server of its own, the server's RSS after each wave and after the closed
sessions expired, and every session's error said by kind."""

from __future__ import annotations

import textwrap

import pytest

from benchmarks import bench_browser as bb
from benchmarks import harness

pytestmark = pytest.mark.timeout(300)

# Each seed keeps 8 MB in a bounded cache (as the pages' releases do); seed 100001, the second session of the first
# wave, raises on its ε press.
APP = textwrap.dedent("""
    import numpy as np
    import streamlit as st

    seed = st.sidebar.number_input("Seed", 0, 2**31 - 1, 0)
    eps = st.sidebar.slider("ε", 0.05, 5.0, 0.66, 0.01)

    @st.cache_resource(max_entries=4)
    def per_seed(seed, eps):
        return np.random.default_rng(seed).random(1_000_000)

    st.write(f"{per_seed(seed, eps)[0]:.3f}")
    if seed == 100_001 and eps > 0.66:
        raise ValueError("boom")
""")


@pytest.mark.slow   # waves of sessions on a server of its own, then the closed sessions' expiry
def test_waves_report_memory_after_each_wave_and_errors_by_kind(tmp_path, monkeypatch):
    (tmp_path / "app.py").write_text(APP)
    monkeypatch.setenv("STREAMLIT_SERVER_DISCONNECTED_SESSION_TTL", "1")   # the server's and the benchmark's wait

    rows = harness.run_async(bb._waves(tmp_path, 3, 2, tmp_path / "log", path=""))
    metrics = [r["metric"] for r in rows]
    assert metrics == ["server RSS after loading", "server RSS after wave 1", "server RSS after wave 2",
                       "server RSS after wave 3", "server RSS after the closed sessions expired",
                       "level: growth per wave, last quarter of the waves"]
    assert all(r["case"] == "sessions come and go (, 3 waves of 2)" for r in rows)
    assert all(r["unit"] == "MiB" and r["value"] is not None for r in rows)
    assert all(r["value"] > 50 for r in rows[:5])             # a Streamlit server's resident memory
    assert "errors: exception: ValueError: boom;" not in rows[1]["note"]
    assert rows[1]["note"].endswith("errors: exception: ValueError: boom")   # one session, once
    assert "11 s after the last wave" in rows[4]["note"]
    assert "waves 3-3:" in rows[5]["note"]
    assert "waves 1-1:" in rows[5]["note"]


def test_waves_setting(monkeypatch):
    monkeypatch.setenv("ODLAB_BENCH_WAVES", "12x8")
    assert bb._waves_setting(False) == (12, 8)
    monkeypatch.setenv("ODLAB_BENCH_WAVES", "")
    assert bb._waves_setting(True) is None
    monkeypatch.delenv("ODLAB_BENCH_WAVES")
    assert bb._waves_setting(True) == bb.QUICK_WAVES
    assert bb._waves_setting(False) == bb.WAVES
    for bad in ("12", "0x5", "ax3", "3x4x5"):
        monkeypatch.setenv("ODLAB_BENCH_WAVES", bad)
        with pytest.raises(ValueError, match="WAVESxSESSIONS"):
            bb._waves_setting(False)
