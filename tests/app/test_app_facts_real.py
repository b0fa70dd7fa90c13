"""One number per quantity on real data: Cabspotting cab files uploaded in the app (a zip of cab files, the upload
the sidebar offers) and the same files given to ``python -m odcore facts --json``: every page's guarantee card, the
Data page's people, the Attack page's typical person and the Release designer's people and typical person read the
same numbers as the command line, or each carries its labelled reason; Home's example and typical person too."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import zipfile

import pytest

from odcore.paths import REPO_ROOT
from odcore.report.facts import (
    DELTA_SPLIT_DESIGNER,
    DELTA_SPLIT_SELECTION,
    PEOPLE_LOCATED_WHY,
    PEOPLE_WEEK_WHY,
)
from tests.app import app_on_upload

pytestmark = [pytest.mark.realdata, pytest.mark.slow, pytest.mark.timeout(900)]   # ~30–60 s on 2 shared cores: eight pages on real uploaded cabs

CABS = 12
"""Cab files of the subset: the first twelve by name, three weeks of them, a few seconds to stream..."""
TRIPLESS = ("ayshowg", "eotcue", "idjoat", "idjojwa", "ockoac", "egoiwroi", "ifeshce", "elvgid", "inhiala", "isnthli")
"""... and the cabs that, in the whole folder, are located in a week without making a trip in it: they make the
people located in a week more than the week's people (521 and 518 in the whole folder's week 2; 21 and 16 in the
subset's week 0), and a designer counting them would take a typical person of 53 trips where the facts say 72."""

PAGES_WITH_CARD = ["pages/1_Data.py", "pages/2_OD_release.py", "pages/3_Attack.py", "pages/4_Privacy_budget.py",
                   "pages/6_Release_designer.py", "pages/7_Play_the_attacker.py", "pages/8_See_the_noise.py",
                   "pages/9_Audit.py"]


def _metric(at, label: str):
    m = [x for x in at.metric if x.label == label]
    assert m, (label, [x.label for x in at.metric])
    return m[0]


@pytest.fixture(scope="module")
def cabs(shared_data, tmp_path_factory):
    """``(folder, zip bytes)`` of the subset: the cab files linked into a folder of their own (for the command line)
    and zipped (for the app's upload)."""
    src = shared_data / "cabspotting_sf"
    files = sorted(src.glob("new_*.txt.gz"))[:CABS]
    files += [src / f"new_{c}.txt.gz" for c in TRIPLESS if (src / f"new_{c}.txt.gz") not in files]
    if not all(f.is_file() for f in files):
        pytest.skip("no Cabspotting folder")
    folder = tmp_path_factory.mktemp("cabs_subset")
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        for f in files:
            (folder / f.name).symlink_to(f)
            z.write(f, f.name)
    return folder, buf.getvalue()


def _cli(*args: str) -> dict:
    out = subprocess.run([sys.executable, "-m", "odcore", *args, "--json"], cwd=REPO_ROOT, capture_output=True,
                         text=True, check=True, timeout=600)
    return json.loads(out.stdout)


def test_every_page_reads_the_command_lines_facts_on_real_cabs(cabs):
    import streamlit as st

    folder, raw = cabs
    got = _cli("facts", "--input", str(folder))
    cli = got["facts"]
    # the designer's command counts the week's people and takes its typical person as the facts do
    design = _cli("design", "--input", str(folder), "--week", str(got["week"]))
    assert design["people"] == cli["people_week"]["value"]
    assert design["typical_trips"] == cli["typical_trips"]["value"]
    st.cache_data.clear()
    st.cache_resource.clear()
    at = app_on_upload(raw, "cabs.zip")
    for page in PAGES_WITH_CARD:
        at.switch_page(page).run()
        assert not at.exception, (page, [e.message for e in at.exception])
        assert at.sidebar.selectbox(key="w.week").value == got["week"], page   # the app opens on the busiest week
        assert _metric(at, "Typical person's week: ε").value == cli["epsilon_person_week"]["text"], page
        assert _metric(at, "Typical person's week: ε").proto.delta.startswith(
            f"{cli['typical_trips']['text']} unique trips"), page
        assert _metric(at, "Bound on any attacker").value == cli["bound_typical"]["text"], page
        attack = _metric(at, "Attack on the typical person")
        assert attack.value == cli["attack_typical"]["text"], page
        assert attack.proto.delta.startswith(f"with suppression; {cli['attack_typical_plain']['text']} without"), page
        if page == "pages/1_Data.py":   # the people: in the data, located in the week, with a trip in the week
            assert _metric(at, "People in the data").value == cli["people_data"]["text"]
            located = _metric(at, "People located this week")
            assert located.value == cli["people_located_week"]["text"]
            assert located.proto.delta == f"{cli['people_week']['text']} with a trip: the week's people"
            assert PEOPLE_LOCATED_WHY.capitalize() in located.proto.help
        if page == "pages/3_Attack.py":
            assert _metric(at, "User").value == cli["typical_user"]["text"]
            assert _metric(at, "Attack success on this user").value == cli["attack_typical"]["text"]
            assert _metric(at, "Without suppression").value == cli["attack_typical_plain"]["text"]
        if page == "pages/6_Release_designer.py":   # its people and typical person are the week's
            google = _metric(at, "Google's setting, typical person").proto.delta
            assert f"{cli['typical_trips']['text']} trips at ε 0.66)" in google
            assert f"{cli['epsilon_person_week']['text']} at δ" in google
            assert DELTA_SPLIT_SELECTION in _metric(at, "Threshold").proto.help
        if page == "pages/9_Audit.py":
            assert any(DELTA_SPLIT_DESIGNER in c.value for c in at.caption)
        if page == "pages/4_Privacy_budget.py":
            assert f"has {cli['typical_trips']['text']}." in at.number_input(key="budget_trips").help
    at.switch_page("pages/0_Home.py").run()
    assert not at.exception, [e.message for e in at.exception]
    home = " ".join(i.value for i in at.info)   # the 32-trip example and the typical person, each saying which
    assert cli["attack_example"]["text"] in home
    assert f"**{cli['attack_typical']['text']}** with suppression" in home
    assert cli["bound_typical"]["text"] in home
    # the labelled reasons of the two weekly counts of people, as the command line gives them
    assert cli["people_week"]["why"] == PEOPLE_WEEK_WHY
    assert cli["people_located_week"]["why"] == PEOPLE_LOCATED_WHY
    assert cli["people_data"]["value"] >= cli["people_located_week"]["value"] > cli["people_week"]["value"] > 0
