"""What a session keeps once it has closed, in a real server.

Streamlit keeps a closed session for two minutes (``server.disconnectedSessionTTL``) with what it handed over during
its last run: its fragments, its widgets' format functions and callbacks, its deferred downloads. A function defined
in a page script takes that page's whole namespace with it (on the OD release page: the session's release, maps and
tables, ~8 MB), so in a class every student who left in the last two minutes would still weigh on the server. The
pages therefore define none (``odapp.shared.callbacks``, ``odapp.release.view``, ``odapp.attack.view``).

The check runs inside the server: a ``sitecustomize`` on its ``PYTHONPATH`` writes, on SIGUSR2, how many page
namespaces (other than ``app.py``'s) are still reachable from a function. A small app with a lambda as a format
function shows that the check sees a kept namespace. Before this rule, three closed sessions of OD release, Attack,
Privacy budget, Release designer or Play the attacker left four namespaces of that page alive.
"""

from __future__ import annotations

import json
import os
import signal
import textwrap
import time

import pytest

from benchmarks import harness
from benchmarks.protocol_client import ProtocolClient

pytestmark = pytest.mark.timeout(420)

HOOK = textwrap.dedent('''
    import collections, gc, json, os, signal, threading, types

    def _report(sig, frame):
        from streamlit.runtime import Runtime   # imported when asked: this hook loads before streamlit

        gc.collect()
        spaces = {id(f.__globals__): os.path.basename(str(f.__globals__.get("__file__")))
                  for f in gc.get_objects()
                  if isinstance(f, types.FunctionType) and f.__globals__.get("__name__") == "__main__"
                  and os.path.basename(str(f.__globals__.get("__file__"))) != "app.py"}
        out = os.environ["ODLAB_TEST_KEPT"]
        with open(out + ".tmp", "w") as fh:
            json.dump({"kept": collections.Counter(spaces.values()),
                       # sessions whose connection the server has not seen close, runs still on
                       "open": Runtime.instance()._session_mgr.num_active_sessions(),
                       "runs": sum(t.name == "ScriptRunner.scriptThread" for t in threading.enumerate())}, fh)
        os.replace(out + ".tmp", out)

    signal.signal(signal.SIGUSR2, _report)
''')

SMALL_APP = textwrap.dedent("""
    import streamlit as st

    st.navigation([st.Page("app_pages/main.py", default=True), st.Page("app_pages/kept.py")]).run()
""")
# Seed and ε in the sidebar as in the app; the page keeps its namespace through a lambda format function.
SMALL_PAGE = textwrap.dedent("""
    import streamlit as st

    seed = st.sidebar.number_input("Seed", 0, 2**31 - 1, 0)
    eps = st.sidebar.slider("ε", 0.05, 5.0, 0.66, 0.01)
    big = bytearray(1_000_000)   # what the page's namespace holds
    st.selectbox("Pick", [1, 2], key="pick", format_func=lambda v: f"{v} of {len(big)}")
""")


def _kept_namespaces(tmp_path, monkeypatch, app_dir, pages: list[str], sessions: int) -> dict[str, int]:
    """For each page in turn, open it in ``sessions`` sessions one after another (each sets a new seed, presses ε
    twice and closes), then count the namespaces of that page's script still alive in the server."""
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(HOOK)
    out = tmp_path / "kept.json"
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(filter(None, [str(hook), os.environ.get("PYTHONPATH")])))
    monkeypatch.setenv("ODLAB_TEST_KEPT", str(out))

    async def session(url: str, page: str, seed: int) -> None:
        client = ProtocolClient(url, fetch_assets=False, timeout_s=180)
        try:
            run = await client.open(page)
            run = await client.set_value("number_input", "Seed", seed)
            for _ in range(2):
                assert not run.errors, (page, run.errors)
                run = await client.step_epsilon()   # the sidebar's slider, or the page's live one
            assert not run.errors, (page, run.errors)
        finally:
            await client.close()

    def report(proc) -> dict:
        out.unlink(missing_ok=True)
        os.kill(proc.pid, signal.SIGUSR2)
        deadline = time.time() + 60
        while not out.exists() and time.time() < deadline:
            time.sleep(0.02)
        return json.loads(out.read_text())

    def count(proc) -> dict[str, int]:
        """The namespaces kept once the server has seen every session close and no run is on."""
        deadline = time.time() + 60
        while (r := report(proc))["open"] or r["runs"]:
            assert time.time() < deadline, f"sessions still open or running after 60 s: {r}"
            time.sleep(0.05)
        return r["kept"]

    proc, url = harness.start_server(tmp_path / "server.log", app_dir=app_dir)
    kept = {}
    try:
        harness.wait_healthy(proc, url, 120)
        for i, page in enumerate(pages):
            for j in range(sessions):
                harness.run_async(session(url, page, 1000 + 10 * i + j))
            kept[page] = sum(n for f, n in count(proc).items() if f.split(".")[0].split("_", 1)[-1] == page)
        return kept
    finally:
        harness.stop_server(proc)


def test_the_check_sees_a_page_kept_by_a_format_function(tmp_path, monkeypatch):
    app = tmp_path / "app"
    (app / "app_pages").mkdir(parents=True)
    (app / "app.py").write_text(SMALL_APP)
    (app / "app_pages" / "main.py").write_text('import streamlit as st\nst.write("main")\n')
    (app / "app_pages" / "kept.py").write_text(SMALL_PAGE)
    kept = _kept_namespaces(tmp_path, monkeypatch, app, ["kept"], sessions=3)
    assert kept["kept"] >= 3   # every closed session keeps its page, and the check counts them


# Two closed sessions per page are enough to tell: a page that keeps each closed session's namespace shows two, one
# more than the server's last run may leave (the check above shows that every closed session is counted).
SESSIONS = 2


def test_closed_sessions_keep_no_page_namespace(tmp_path, monkeypatch):
    pages = ["OD_release", "Attack", "Privacy_budget", "Knock_Knock", "Release_designer", "Play_the_attacker",
             "See_the_noise", "Data"]
    kept = _kept_namespaces(tmp_path, monkeypatch, harness.REPO_ROOT, pages, sessions=SESSIONS)
    # at most one: the server's last run can leave its namespace until a later run (seen on Privacy budget), the
    # same one however many sessions came and went
    assert all(n <= 1 for n in kept.values()), f"page namespaces kept after {SESSIONS} closed sessions: {kept}"


def test_deferred_downloads_give_the_data_of_their_own_run(at, monkeypatch):
    """The downloads the pages defer (``odapp.shared.callbacks``, ``odapp.release.view.published_csv``) take only small
    arguments and fetch the data again when called: what they give is still the data of the run that drew them,
    after ε has moved on."""
    import odapp.shared.export
    from odapp.budget import cache as budget_cache

    made = {}
    real = odapp.shared.export.export_buttons

    def recording(name, *, data=None, **kw):
        made[name] = data
        return real(name, data=data, **kw)

    monkeypatch.setattr(odapp.shared.export, "export_buttons", recording)
    at.switch_page("pages/2_OD_release.py").run()
    assert not at.exception, [e.message for e in at.exception]
    shown = int(next(m.value for m in at.metric if m.label == "Pairs published").replace(",", ""))
    csv_then, pub_then = made["DO_NOT_SHARE_analysis_week0"], made["published_week0"]
    at.session_state["odlab.epsilon"] = 2.0   # the page's ε is its live curves' slider (odapp.components.live)
    at.run()
    table = csv_then()   # called after the page has moved on to ε = 2
    assert int(table["released"].sum()) == shown
    assert len(table) > shown   # every observed pair, published or not
    assert len(pub_then()) == shown   # the main download: the published pairs only
    again = made["DO_NOT_SHARE_analysis_week0"]()   # the newer run's download
    # mean |Laplace noise| is its scale b = 1/ε: each download carries the noise of its own run's ε
    assert table["noise"].abs().mean() == pytest.approx(1 / 0.66, rel=0.03)
    assert again["noise"].abs().mean() == pytest.approx(1 / 2.0, rel=0.03)

    at.switch_page("pages/4_Privacy_budget.py").run()
    assert not at.exception, [e.message for e in at.exception]
    weeks = made["epsilon_over_weeks"]()
    direct = budget_cache.epsilon_over_weeks(2.0, 70, 52, 1e-6, 2e-2)   # the page's settings
    assert list(weeks["weeks"]) == list(direct["weeks"])
    assert weeks["basic"].to_numpy() == pytest.approx(direct["basic"].to_numpy())
    at.session_state["odlab.epsilon"] = 0.66   # the page's ε is its live curves' slider (odapp.components.live)
    at.run()
