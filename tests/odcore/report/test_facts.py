"""One source per quantity: the facts layer (odcore.report.facts) against independent references, and every reader
of a fact (the guarantee card of each page, Home, the Attack and Privacy budget pages, the command line's --json)
showing the same number or its labelled reason."""

from __future__ import annotations

import contextlib
import io
import json
import math
import subprocess

import numpy as np
import pytest
from scipy.optimize import linprog

from odcore.cli import figures as F
from odcore.cli import main as cli_main
from odcore.cli.parser import build_parser
from odcore.numbers import expected_count_text, number_text, percent_text
from odcore.paths import REPO_ROOT
from odcore.report.facts import (
    BOUND_WHY,
    DELTA_SPLIT_DESIGNER,
    DELTA_SPLIT_SELECTION,
    success_bound,
    typical_person,
)
from odcore.report.sheet import posterior_with_delta

pytestmark = pytest.mark.timeout(300)


@pytest.mark.parametrize(("eps", "delta", "prior"), [(0.66, 0.0, 0.5), (0.66, 1e-3, 0.5), (2.0, 0.05, 0.2),
                                                     (0.1, 0.2, 0.9), (13.4, 1e-6, 0.5), (1.0, 0.0, 0.7)])
def test_success_bound_is_the_linear_programme_over_the_dp_region(eps, delta, prior):
    # independent: maximise π·TPR + (1 − π)(1 − FPR) over the (ε, δ) trade-off region with scipy's LP solver
    # constraints: TPR ≤ e^ε·FPR + δ and 1 − FPR ≤ e^ε·(1 − TPR) + δ
    e = math.exp(eps)
    res = linprog(c=[1 - prior, -prior],   # variables (FPR, TPR): minimise −(π·TPR − (1 − π)·FPR)
                  A_ub=[[-e, 1], [-1, e]], b_ub=[delta, e - 1 + delta], bounds=[(0, 1), (0, 1)])
    assert res.success
    assert success_bound(eps, delta, prior) == pytest.approx(-res.fun + 1 - prior, abs=1e-9)


def test_success_bound_at_even_prior_is_the_sheets_posterior_with_delta():
    for eps, d in [(0.66, 0.0), (0.66, 0.1), (5.0, 1e-6), (13.4, 2e-6)]:
        assert success_bound(eps, d) == pytest.approx(posterior_with_delta(eps, d), abs=1e-12)


def test_chances_below_one_never_read_as_100_percent_nor_as_a_dozen_decimals():
    for p in [0.999, 0.99952, 1 - 1e-6, 1 - 1e-9, 1 - 1e-15, 0.5, 1e-3, 1e-9]:
        t = percent_text(p)
        assert not t.startswith("100"), t
        assert len(t.split(" ")[-2].split(".")[-1]) <= 4, t   # at most digits + 3 decimals
        assert not t.startswith("0.0 ")
        assert t != "0 %"
    assert percent_text(1 - 1e-15) == "> 99.9999 %"
    assert percent_text(1.0) == "100.0 %"
    assert expected_count_text(7.3e-06) == "< 0.1"
    assert "e-" not in expected_count_text(1e-12)
    assert number_text(1e-6) == "1.00e-06"


def test_typical_person_is_the_nearest_rank_median_first_by_id():
    import pandas as pd

    s = pd.Series([5, 1, 9, 5, 3, 7], index=[10, 3, 8, 2, 4, 1])
    # sorted by id: 1→7, 2→5, 3→1, 4→3, 8→9, 10→5; nearest-rank median of [1,3,5,5,7,9] is 5; first id with 5 is 2
    assert typical_person(s) == (2, 5)
    assert typical_person(pd.Series(dtype=int)) == (None, None)


def _odcore_json(*args: str) -> dict:
    """What ``python -m odcore ARGS`` prints (JSON) from the repository's root, run by the command line's ``main``
    in this process."""
    buf = io.StringIO()
    with contextlib.chdir(REPO_ROOT), contextlib.redirect_stdout(buf):
        rc = cli_main(list(args))
    assert rc == 0, args
    return json.loads(buf.getvalue())


def _cli_facts(*args: str) -> dict:
    return _odcore_json("facts", "--json", *args)["facts"]


def _metric(at, label: str):
    m = [x for x in at.metric if x.label == label]
    assert m, (label, [x.label for x in at.metric])
    return m[0]


PAGES_WITH_CARD = ["pages/1_Data.py", "pages/2_OD_release.py", "pages/3_Attack.py", "pages/4_Privacy_budget.py",
                   "pages/6_Release_designer.py", "pages/7_Play_the_attacker.py", "pages/8_See_the_noise.py",
                   "pages/9_Audit.py"]


@pytest.fixture(scope="module")
def city_facts() -> dict:
    """``facts --json`` on the bundled city (its busiest week), once for the module."""
    return _odcore_json("facts", "--json")


def test_every_reader_shows_the_same_facts_on_the_bundled_city(at, city_facts):
    cli = city_facts["facts"]
    # the quantities a person reads, each with its value and its labelled reason
    for key in ("people_data", "people_week", "typical_trips", "epsilon_count", "threshold", "epsilon_person_week",
                "delta_noise", "delta_threshold", "delta_person_week", "bound_typical", "attack_typical",
                "attack_typical_plain", "attack_example"):
        assert cli.get(key, {}).get("why"), key
        assert cli[key]["text"], key
    assert cli["bound_typical"]["why"] == BOUND_WHY
    # a bound, and an attack that succeeds less: both there, labelled apart
    assert cli["attack_typical"]["value"] < cli["attack_typical_plain"]["value"] <= cli["bound_typical"]["value"]
    for page in PAGES_WITH_CARD:
        at.switch_page(page).run()
        assert not at.exception, (page, [e.message for e in at.exception])
        assert _metric(at, "Typical person's week: ε").value == cli["epsilon_person_week"]["text"], page
        assert _metric(at, "Bound on any attacker").value == cli["bound_typical"]["text"], page
        attack = _metric(at, "Attack on the typical person")
        assert attack.value == cli["attack_typical"]["text"], page
        assert cli["attack_typical_plain"]["text"] in attack.proto.delta, page
        assert attack.proto.delta.startswith(f"with suppression; {cli['attack_typical_plain']['text']} without")
        assert _metric(at, "Typical person's week: ε").proto.delta.startswith(f"{cli['typical_trips']['text']} "
                                                                             "unique trips")
        if page == "pages/3_Attack.py":   # its "typical" person is the card's person, with the same two numbers
            assert _metric(at, "User").value == cli["typical_user"]["text"]
            assert _metric(at, "Attack success on this user").value == cli["attack_typical"]["text"]
            assert _metric(at, "Without suppression").value == cli["attack_typical_plain"]["text"]
        if page == "pages/6_Release_designer.py":   # Google's typical person is the card's, its δ said beside it
            google = _metric(at, "Google's setting, typical person").proto.delta
            assert f"{cli['typical_trips']['text']} trips at ε 0.66)" in google
            assert f"{cli['epsilon_person_week']['text']} at δ" in google
            assert "on the card above" in google
            assert DELTA_SPLIT_SELECTION in _metric(at, "Threshold").proto.help
        if page == "pages/9_Audit.py":   # why its comparison's threshold is not the designer's
            assert any(DELTA_SPLIT_DESIGNER in c.value for c in at.caption)
        if page == "pages/4_Privacy_budget.py":   # the typical person's trips in the n help
            assert f"has {cli['typical_trips']['text']}." in at.number_input(key="budget_trips").help
    at.switch_page("pages/0_Home.py").run()
    home = " ".join(i.value for i in at.info)
    # Home's 32-trip example and the typical person's attack: both there, each saying which it is
    assert cli["attack_example"]["text"] in home
    assert "example, not a person of this data" in home
    assert f"**{cli['attack_typical']['text']}** with suppression" in home
    assert cli["bound_typical"]["text"] in home


@pytest.mark.slow
def test_cli_facts_on_a_real_folder(shared_data):
    folder = shared_data / "cabspotting_sf"
    if not folder.exists():
        pytest.skip("no Cabspotting folder")
    f = _cli_facts("--input", str(folder))
    assert f["people_data"]["value"] >= f["people_week"]["value"] > 0
    assert f["attack_typical"]["value"] <= f["attack_typical_plain"]["value"] + 1e-9
    assert f["bound_typical"]["value"] >= f["attack_typical_plain"]["value"] - 1e-9
    assert np.isfinite(f["epsilon_person_week"]["value"])
    assert f["bound_typical"]["text"] != "100.0 %"   # a bound below 1 never reads as certainty


def test_audit_sentence_holds_for_its_numbers():
    from odcore.privacy.audit import one_run_epsilon_lower
    from odcore.report.facts import audit_most_shown, audit_sentence

    # independent: 500 of 500 right is the most 500 guesses show; p^500 = 0.05 with p = e^ε/(1+e^ε)
    p = 0.05 ** (1 / 500)
    assert audit_most_shown(500) == pytest.approx(math.log(p / (1 - p)), rel=1e-6)
    assert audit_most_shown(500) == pytest.approx(5.11, abs=0.01)
    assert one_run_epsilon_lower(500, 500) == audit_most_shown(500)
    below = {"count": {"epsilon_lower": 0.52, "epsilon_theory": 0.66, "guesses": 775},
             "person": {"epsilon_lower": 3.85, "epsilon_theory": 13.41, "guesses": 500}}
    above = {"count": {"epsilon_lower": 0.678, "epsilon_theory": 0.66, "guesses": 775}}   # audit --seed 14
    for results in (below, above):
        text = audit_sentence(results, 0.66)
        assert "as it must" not in text
        assert "about 5 % of seeds" in text
    assert "at or below the promised 0.66" in audit_sentence(below, 0.66)
    assert "above the promised 0.66" in audit_sentence(above, 0.66)
    assert "500 guesses can never show more than 5.11" in audit_sentence(below, 0.66)


def test_selection_rows_name_their_mechanism():
    import pandas as pd

    from odcore.privacy.selection import MECHANISMS, compare_selection

    rng = np.random.default_rng(0)
    rows = [(0, u, int(o), int(o) + 1) for u in range(600) for o in {int(x) for x in rng.integers(0, 6, size=3)}]
    t = compare_selection(pd.DataFrame(rows, columns=["week", "user", "origin", "destination"]), epsilon=1.0,
                          max_pairs=3, rng=1, pipeline_dp=False)
    for strategy, mechanism in zip(t["strategy"], t["mechanism"], strict=True):
        noise = "Gaussian" if "Gaussian" in strategy else "Laplace"   # the strategy's own words
        assert noise in mechanism, (strategy, mechanism)
        assert ("one count" in mechanism) == ("one noisy count" in strategy), (strategy, mechanism)
    # PipelineDP's one-count Gaussian sits beside the lab's, named the same way (mechanism for mechanism)
    assert MECHANISMS["PipelineDP: gaussian (post-aggregation thresholding)"] == t.set_index("strategy").loc[
        "lab: Gaussian then tau (one noisy count)", "mechanism"]
    assert MECHANISMS["PipelineDP: laplace (post-aggregation thresholding)"] == t.set_index("strategy").loc[
        "lab: Laplace then tau (one noisy count)", "mechanism"]


@pytest.mark.realdata
def test_region_default_says_what_it_leaves_out(shared_data):
    """The Foursquare set spans the US: the default keeps its densest region, and the loader, the sidebar's words and
    `trips --json` say how many fixes and people are left out and how to keep them; the counts checked against the
    whole set read without a region."""

    from odcore.constants import LAT, LON, USER
    from odcore.data.traces import load_traces, region_left_out_words

    folder = shared_data / "foursquare_us_liu2017_5k"
    if not folder.exists():
        pytest.skip("no Foursquare folder")
    kw = {"tz": "America/New_York", "time_offset_s": 28800, "bbox": None}
    kept = load_traces(folder, region="auto", **kw)
    whole = load_traces(folder, region="all", **kw)
    every = whole.df
    s, w, n, e = kept.report.bbox_used
    inside = every[LAT].between(s, n) & every[LON].between(w, e)
    left = kept.report.region_left_out
    # the rows of the file outside the region: the distinct fixes outside it, plus at most the duplicate rows
    assert 0 < int((~inside).sum()) <= left["fixes"]
    assert left["fixes"] - int((~inside).sum()) <= whole.report.rows_dropped.get("duplicate_row", 0)
    people_in = set(every.loc[inside, USER])
    assert left["people"] == len(set(every[USER]) - people_in)
    assert kept.df[USER].nunique() == len(people_in)
    words = region_left_out_words(kept.report.region, left, "Reading options → Region → all")
    assert f"{left['fixes']:,} fixes outside it are left out" in words
    assert "Reading options → Region → all" in words
    got = _odcore_json("trips", "--json", "--input", str(folder), "--tz", "America/New_York", "--time-offset",
                       "28800", "--bbox", "none")
    assert got["region_left_out"] == left
    assert "--region all" in got["region_note"]


def test_the_live_curves_write_chances_and_bounds_as_the_server_does(tmp_path):
    """The browser's readouts (live.js: fmt 'pct', successBound) against odcore.numbers.percent_text and
    odcore.report.facts.success_bound, run in Node on the same inputs."""
    import shutil

    node = shutil.which("node") or shutil.which("nodejs")
    if node is None:
        pytest.skip("no Node.js to run the component's code")
    src = (REPO_ROOT / "odapp" / "components" / "live" / "live.js").read_text(encoding="utf-8")
    chances = [0.7054, 0.99952, 0.9999996, 1 - 1e-15, 3e-9, 0.5, 1e-3, 0.6593]
    cases = [(0.66, 0.0, 0.5), (0.66, 1e-3, 0.5), (2.0, 0.05, 0.2), (13.4, 1e-6, 0.5), (50.0, 1e-6, 0.5),
             (1.0, 0.0, 0.7)]
    script = tmp_path / "probe.js"
    script.write_text(src + f"\nconsole.log(JSON.stringify({{pct: {json.dumps(chances)}.map(v => fmt(v, 'pct')), "
                      f"bound: {json.dumps(cases)}.map(([e, d, p]) => successBound(e, d, p))}}));\n",
                      encoding="utf-8")
    out = json.loads(subprocess.run([node, str(script)], capture_output=True, text=True, check=True,
                                    timeout=60).stdout.strip().splitlines()[-1])
    assert out["pct"] == [percent_text(p) for p in chances]
    for (e, d, p), got in zip(cases, out["bound"], strict=True):
        assert got == pytest.approx(success_bound(e, d, p), abs=1e-12)
        assert got < 1


def test_audit_command_says_what_its_guesses_can_show():
    out = _odcore_json("audit", "--json", "--seed", "0", "--canaries", "200")
    from odcore.report.facts import audit_most_shown

    for e in out["units"].values():
        assert e["epsilon_lower"] <= e["epsilon_most_shown"] == pytest.approx(audit_most_shown(e["guesses"]))
    assert "as it must" not in out["words"]
    person = out["units"]["person"]
    most = number_text(round(person["epsilon_most_shown"], 2))
    assert f"{person['guesses']} guesses can never show more than {most}" in out["words"]


def test_the_figures_read_the_facts_of_the_week(city_facts):
    """``figures``: the budget figure's person is the facts' typical person (``--trips typical``; the default 21 is
    the bundled city's, as its help says), its first week's tight ε the typical person's ε per week, and Fig. 1's
    curve at that person's k the facts' attack without suppression, its bound the facts' bound for one trip."""
    parser = build_parser()
    week = city_facts["week"]
    f = city_facts["facts"]
    assert parser.parse_args(["figures", "--out", "x"]).trips == f["typical_trips"]["value"]
    args = parser.parse_args(["figures", "--out", "x", "--trips", "typical", "--week", str(week), "--seed", "0"])
    data: dict = {}
    fig, table = F.build("budget_weeks", args, data)
    assert int(table["k"].iloc[0]) == f["typical_trips"]["value"]
    title = fig.layout.title.text.replace("<br>", " ")
    assert f"the typical person of week {week}, {f['typical_trips']['text']} unique trips" in title
    # both the exact privacy-loss distribution at δ 1e-6; the figure's an upper bracket on a 1e-3 loss grid
    assert float(table["tight"].iloc[0]) == pytest.approx(f["epsilon_person_week"]["value"], abs=2e-3)
    assert number_text(round(float(table["tight"].iloc[0]), 1)) == f["epsilon_person_week"]["text"]
    assert F.file_stem("budget_weeks", args.trips) == "DO_NOT_SHARE_budget_weeks"   # drawn from the data
    assert F.file_stem("budget_weeks", 21) == "budget_weeks"
    # its JSON draws it again: it holds the command's flags only, not what the loader found (tz_found)
    assert set(F.settings(args)) <= {a.dest for a in parser._subparsers._group_actions[0].choices["figures"]._actions}
    _, curve = F.build("fig1_per_count", args, data)
    k = f["typical_trips"]["value"]
    assert float(curve.loc[curve["k"] == k, "success_per_count"].iloc[0]) == pytest.approx(
        f["attack_typical_plain"]["value"], abs=1e-12)
    # the bound of one trip: the facts' bound at the ε of one count and δ 0, e^ε/(1 + e^ε) written independently
    e = math.exp(f["epsilon_count"]["value"])
    assert float(curve["bound_one_trip"].iloc[0]) == pytest.approx(e / (1 + e), abs=1e-12)
    assert float(curve["bound_one_trip"].iloc[0]) == success_bound(f["epsilon_count"]["value"])
