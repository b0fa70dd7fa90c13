"""The class benchmark's protocol client (``benchmarks/protocol_client.py``) against real servers: it opens the OD
release page, an ε press really reruns the page with the new ε (the Noise scale shown is 1/ε), cached elements come
back as references and are resolved, and an exception, a run that never finishes and a closed socket are errors."""

from __future__ import annotations

import textwrap

import pytest

from benchmarks import harness
from benchmarks.protocol_client import ProtocolClient
from odapp.shared.words import num

# the benchmark harness's own client, checked against real servers: the slow tier (make test-all)
pytestmark = [pytest.mark.slow, pytest.mark.timeout(300)]


def _noise(run) -> str:
    el = run.find("metric", "Noise scale", sidebar=False)
    assert el is not None, sorted({e.WhichOneof("type") for e in run.elements.values()})
    return el.metric.body


def _live_epsilon(run) -> float:
    """ε as the page's live component was given it in ``run``."""
    import json

    el = next(e for e in run.elements.values() if e.WhichOneof("type") == "bidi_component"
              and e.bidi_component.component_name == "odlab_live_curves")
    return next(c["value"] for c in json.loads(el.bidi_component.json)["controls"] if c["name"] == "epsilon")


def test_od_release_rerun_with_the_new_epsilon(streamlit_url):
    async def go():
        async with ProtocolClient(streamlit_url) as c:
            opened = await c.open("OD_release")
            assert opened.status == "FINISHED_SUCCESSFULLY"
            assert not opened.errors, opened.errors
            assert c.widget("selectbox", "Guarantee unit").selectbox.raw_value.startswith("per metric")
            eps0 = _live_epsilon(opened)   # the page holds ε beside its live curves (odapp/components/live)
            noise0 = _noise(opened)
            assert noise0 == num(1 / eps0)            # per count: sensitivity 1, so the scale is 1/ε

            same = await c.rerun()                    # nothing changed: the big elements come back as references
            assert not same.errors, same.errors
            # (from the second rerun on for the keyed ones, e.g. the live curves' tables: Streamlit gives every
            # keyed element another id in a page's first run than in the runs after it)
            steady = await c.rerun()
            assert steady.bytes < opened.bytes / 10, (steady.bytes, same.bytes, opened.bytes)
            assert "dataframe" in {e.WhichOneof("type") for e in same.elements.values()}   # the table and the map
            assert any(e.WhichOneof("type") == "bidi_component" and e.bidi_component.component_name == "odlab_map"
                       for e in same.elements.values())
            assert _noise(same) == noise0

            pressed = await c.step_epsilon()
            assert pressed.status == "FINISHED_SUCCESSFULLY"
            assert not pressed.errors, pressed.errors
            eps1 = _live_epsilon(pressed)
            assert eps1 == pytest.approx(eps0 + 0.01)   # the slider's step, echoed back by the server
            assert _noise(pressed) == num(1 / eps1) != noise0
            assert pressed.bytes > 0

            seeded = await c.set_value("number_input", "Seed", 4321)
            assert not seeded.errors
            assert c.widget("number_input", "Seed").number_input.value == 4321
            assert _noise(seeded) == num(1 / eps1)    # the seed kept ε: every widget's state was sent

    harness.run_async(go())


TINY_APP = textwrap.dedent("""
    import time

    import streamlit as st

    mode = st.radio("mode", ["ok", "raise", "sleep"])
    st.sidebar.number_input("Seed", 0, 2**31 - 1, 0)
    eps = st.sidebar.slider("ε", 0.05, 5.0, 0.66, 0.01)
    reps = st.select_slider("reps", [500, 1000, 2000], value=1000)
    st.write(f"reps {reps}")
    if mode == "raise" or eps > 0.66:
        raise ValueError("boom")
    if mode == "sleep":
        time.sleep(20)
    st.write("done")
""")


@pytest.fixture
def tiny_server(tmp_path):
    (tmp_path / "app.py").write_text(TINY_APP)
    proc, url = harness.start_server(tmp_path / "server.log", app_dir=tmp_path)
    try:
        harness.wait_healthy(proc, url, 60)
        yield proc, url
    finally:
        harness.stop_server(proc)


def test_exception_timeout_and_closed_socket_are_errors(tiny_server):
    proc, url = tiny_server

    async def go():
        async with ProtocolClient(url, fetch_assets=False) as c:
            assert not (await c.open("")).errors
            # a select slider's state is its options' labels; every rerun sends it (the Attack page has one)
            assert not (await c.set_value("radio", "mode", "ok")).errors
            raised = await c.set_value("radio", "mode", "raise")
            assert raised.errors == ["exception: ValueError: boom"]
            assert not (await c.set_value("radio", "mode", "ok")).errors
            c.timeout_s = 2
            slow = await c.set_value("radio", "mode", "sleep")
            assert [e.split(":")[0] for e in slow.errors] == ["timeout"]
            after = await c.rerun()                  # the session is given up after a timeout
            assert after.errors[:1] == ["socket closed: an earlier run timed out"]
        async with ProtocolClient(url, fetch_assets=False) as c:
            assert not (await c.open("")).errors
            harness.stop_server(proc)
            gone = await c.rerun()
            assert [e.split(":")[0] for e in gone.errors] == ["socket closed"], gone.errors

    harness.run_async(go())


def test_the_class_benchmark_counts_a_clients_exception(tiny_server):
    """The benchmark's protocol-client session and its rows: an ε press that raises is one error, said by kind."""
    from benchmarks import bench_browser as bb

    _, url = tiny_server
    cout = {"open": [], "press": [], "bytes": [], "errors": []}
    harness.run_async(bb._client_session(url, "", 1001, 2, bb.Barrier(1), cout))
    assert cout["errors"] == ["exception: ValueError: boom"]   # the first press raised; the session stopped there
    assert len(cout["press"]) == 1
    assert len(cout["open"]) == 1
    browser = {"open": [1.0], "press": [1.0], "bytes": [1], "errors": [], "exceptions": 0}
    rows = bb._class_rows(browser, cout, path="", n=2, rounds=2, rss=(0, 0, 0), cpu=(1.0, 1.0, 1.0, 0.5),
                          press_cpu=0.1)
    errors = next(r for r in rows if r["metric"] == "errors")
    assert errors["value"] == 1
    assert "exception: ValueError: boom" in errors["note"]
