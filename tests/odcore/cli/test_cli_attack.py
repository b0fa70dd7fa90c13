"""CLI: ``python -m odcore attack-curve`` and ``user-risk``."""

from __future__ import annotations

import json

import numpy as np
import pytest

from odcore.cli import main
from odcore.privacy import attack


def _run(capsys, argv):
    code = main(argv)
    cap = capsys.readouterr()
    return code, cap.out, cap.err


def test_attack_curve_json(capsys):
    code, out, _ = _run(capsys, ["attack-curve", "--epsilon", "0.66", "--k-max", "70", "--json"])
    assert code == 0
    d = json.loads(out)
    assert d["k"] == list(range(71))
    assert d["epsilon"] == 0.66
    assert d["bound"] == pytest.approx(np.exp(0.66) / (1 + np.exp(0.66)))
    np.testing.assert_allclose(d["success"], attack.success_curve(0.66, 70), atol=1e-15)
    assert d["success"][3] == pytest.approx(0.7071, abs=1e-4)
    assert "mc_success" not in d
    assert d["first_k_above_bound"] == 3   # Houssiau et al. 2022: risk above the 16 % claim from 3 trips


def test_attack_curve_monte_carlo(capsys):
    argv = ["attack-curve", "--k-max", "6", "--monte-carlo", "3000", "--seed", "4", "--json"]
    code, out, _ = _run(capsys, argv)
    assert code == 0
    d = json.loads(out)
    for key in ("mc_success", "mc_ci_low", "mc_ci_high"):
        assert len(d[key]) == 7
    lo, hi, ex = np.array(d["mc_ci_low"]), np.array(d["mc_ci_high"]), np.array(d["success"])
    assert np.all(lo <= hi)
    assert np.mean((ex >= lo) & (ex <= hi)) >= 5 / 7   # 95 % intervals
    _, out2, _ = _run(capsys, argv)
    assert json.loads(out2)["mc_success"] == d["mc_success"]   # same seed, same output


def test_attack_curve_text_and_prior(capsys):
    code, out, _ = _run(capsys, ["attack-curve", "--k-max", "3", "--prior", "0.2"])
    assert code == 0
    assert "0.7071" in out
    assert "prior 0.2" in out


def test_attack_curve_tpr(capsys):
    code, out, _ = _run(capsys, ["attack-curve", "--k-max", "4", "--tpr", "--json"])
    assert code == 0
    d = json.loads(out)
    np.testing.assert_allclose(d["tpr_at_fpr_1pct"], [attack.tpr_at_fpr(k, 0.66, 0.01)[0] for k in range(5)],
                               atol=1e-9)
    assert d["tpr_at_fpr_0.1pct"][0] == pytest.approx(0.001)


def test_attack_curve_errors(capsys):
    code, _, err = _run(capsys, ["attack-curve", "--epsilon", "-1"])
    assert code == 2
    assert err.startswith("error:")
    assert "epsilon" in err
    code, _, err = _run(capsys, ["attack-curve", "--monte-carlo", "0"])
    assert code == 2
    assert "--monte-carlo" in err


@pytest.fixture(scope="module")
def small_city(tmp_path_factory):
    from odcore.data.synth import SynthConfig, generate_city

    df = generate_city(SynthConfig(users=400, extent_km=6.0), rng=3)
    path = tmp_path_factory.mktemp("city") / "city.parquet"
    df.to_parquet(path)
    return path


def test_user_risk_json(capsys, small_city):
    code, out, _ = _run(capsys, ["user-risk", "--input", str(small_city), "--week", "0", "--threshold", "5",
                                 "--json"])
    assert code == 0
    d = json.loads(out)
    users = d["users"]
    n = len(users["user"])
    assert n == d["summary"]["users"] > 0
    assert all(len(users[key]) == n for key in ("k", "k_informative", "effective_k", "success", "error_bound"))
    s = np.array(users["success"])
    assert np.all((s >= 0.5) & (s <= 1))
    assert np.all(np.array(users["effective_k"]) <= np.array(users["k"]) + 1e-9)
    assert set(d["summary"]["quantiles"]) >= {"median", "p90", "max"}
    assert d["summary"]["share_above_90pct"] == pytest.approx(np.mean(s > 0.9))


def test_user_risk_user_detail_text_and_threshold_effect(capsys, small_city):
    code, out, _ = _run(capsys, ["user-risk", "--input", str(small_city), "--threshold", "5", "--json"])
    d = json.loads(out)
    u = d["users"]["user"][int(np.argmax(d["users"]["success"]))]
    code, out, _ = _run(capsys, ["user-risk", "--input", str(small_city), "--threshold", "5", "--user", str(u)])
    assert code == 0
    _, out_j, _ = _run(capsys, ["user-risk", "--input", str(small_city), "--threshold", "5", "--user", str(u),
                                "--prior", "0.1", "--json"])
    detail = json.loads(out_j)["user"]
    assert 0.9 <= detail["success_prior"] <= 1
    assert detail["prior"] == 0.1
    assert f"user {u}:" in out
    assert "TPR at FPR 1%" in out
    # a high threshold suppresses almost everything in a 400-user city: success ~ ½ for everyone
    code, out, _ = _run(capsys, ["user-risk", "--input", str(small_city), "--threshold", "1000", "--fast", "--json"])
    assert code == 0
    assert max(json.loads(out)["users"]["success"]) < 0.5 + 1e-6


def test_user_risk_user_level_and_errors(capsys, small_city):
    code, out, _ = _run(capsys, ["user-risk", "--input", str(small_city), "--threshold", "3", "--mode", "user_level",
                                 "--max-pairs", "5", "--seed", "1", "--json"])
    assert code == 0
    d = json.loads(out)
    assert d["epsilon_per_pair"] == pytest.approx(0.66 / 5)
    assert max(d["users"]["k"]) <= 5
    code, _, err = _run(capsys, ["user-risk", "--input", str(small_city), "--week", "9"])
    assert code == 2
    assert "--week 9" in err
    code, _, err = _run(capsys, ["user-risk", "--input", str(small_city), "--user", "no-such-user"])
    assert code == 2
    assert "no-such-user" in err


def test_attack_curve_per_person(capsys):
    from odcore.cli import main
    from odcore.privacy.attack import bounded_success_curve

    assert main(["attack-curve", "--mode", "user_level", "--max-pairs", "10", "--k-max", "40", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["unit"] == "per person and week"
    assert out["success_per_person"] == pytest.approx(bounded_success_curve(0.66, 10, 40).tolist(), abs=1e-15)
    assert out["success_per_person"][40] == pytest.approx(out["success_per_person"][10], abs=1e-15)   # flat at m
    assert main(["attack-curve", "--mode", "user_level"]) == 2
    assert "--max-pairs" in capsys.readouterr().err
