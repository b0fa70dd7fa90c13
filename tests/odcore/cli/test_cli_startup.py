"""The command line imports only what a command needs: ``--help`` and argument parsing load no numpy, pandas,
pyarrow or scipy; ``attack-curve`` needs numpy only. Checked on the modules a fresh interpreter has loaded (a
count of modules, not a time, so the test holds on a loaded machine); the defaults that the help prints without
importing their modules agree with those modules."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from odcore.paths import REPO_ROOT

HEAVY = ("numpy", "pandas", "pyarrow", "scipy", "duckdb", "pyspark", "geopandas", "shapely", "h3", "pyproj")


def loaded_after(code: str) -> set[str]:
    """Top-level packages a fresh interpreter has imported after running ``code`` (which prints nothing)."""
    probe = code + "\nimport json, sys\nprint(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
    out = subprocess.run([sys.executable, "-c", probe], cwd=REPO_ROOT, capture_output=True, text=True,
                         check=True).stdout
    return set(json.loads(out.strip().splitlines()[-1]))


def test_probe_sees_a_heavy_import():
    # the checker itself: a command that does import pandas is seen doing so
    assert "pandas" in loaded_after("import odcore.data.synth")


def test_parsing_every_subcommand_imports_no_heavy_package():
    mods = loaded_after(
        "from odcore.cli import build_parser\n"
        "p = build_parser()\n"
        "for name in p._subparsers._group_actions[0].choices:\n"
        "    p.parse_args([name, '--out', 'x'] if name in ('synth', 'districts', 'figures') else [name])\n"
        "import io, contextlib\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        "    try:\n"
        "        p.parse_args(['--help'])\n"
        "    except SystemExit:\n"
        "        pass\n")
    assert not mods & set(HEAVY), sorted(mods & set(HEAVY))


@pytest.mark.parametrize("argv", [["--help"], ["attack-curve", "--help"], ["release", "--help"],
                                  ["synth", "--help"], ["zones-compare", "--help"]])
def test_help_process_imports_no_heavy_package(argv):
    mods = loaded_after("import contextlib, io\nfrom odcore.cli import main\n"
                        "with contextlib.redirect_stdout(io.StringIO()):\n"
                        f"    try:\n        main({argv!r})\n    except SystemExit:\n        pass\n")
    assert not mods & set(HEAVY), sorted(mods & set(HEAVY))


def test_attack_curve_needs_numpy_only():
    mods = loaded_after("import contextlib, io\nfrom odcore.cli import main\n"
                        "with contextlib.redirect_stdout(io.StringIO()):\n"
                        "    assert main(['attack-curve', '--mode', 'user_level', '--max-pairs', '10']) == 0\n")
    assert "numpy" in mods
    assert not mods & (set(HEAVY) - {"numpy"}), sorted(mods & set(HEAVY))


def modules_after(code: str) -> set[str]:
    """Every module (dotted name) a fresh interpreter has imported after running ``code``."""
    probe = code + "\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], cwd=REPO_ROOT, capture_output=True, text=True,
                         check=True).stdout
    return set(json.loads(out.strip().splitlines()[-1]))


# numpy's lazily imported parts that cost attack-curve CPU: masked arrays (np.unique loads them, 15 ms) and the
# polynomial package (its leggauss solved an eigenvalue problem per node set, a third of the command's CPU)
LAZY_NUMPY = ("numpy.ma", "numpy.polynomial")


def test_attack_curve_leaves_numpy_s_lazy_parts_unloaded():
    # the probe sees them when they are used
    assert set(LAZY_NUMPY) <= modules_after("import numpy as np\nnp.unique(np.arange(3))\n"
                                            "from numpy.polynomial.legendre import leggauss")
    mods = modules_after("import contextlib, io\nfrom odcore.cli import main\n"
                         "with contextlib.redirect_stdout(io.StringIO()):\n"
                         "    assert main(['attack-curve']) == 0\n")
    assert "odcore.privacy.pld" in mods
    assert not mods & set(LAZY_NUMPY), sorted(mods & set(LAZY_NUMPY))


def test_printed_defaults_agree_with_their_modules():
    from odcore.cli.parser import SYNTH_DEFAULTS
    from odcore.constants import DEFAULT_COMPARE_SPECS, DEFAULT_DISTRICTS, DEFAULT_DISTRICTS_SEED
    from odcore.data.synth import DEFAULT_SAMPLE_CONFIG, DEFAULT_SAMPLE_SEED
    from odcore.report import zone_compare
    from odcore.space import polygons

    assert {k: getattr(DEFAULT_SAMPLE_CONFIG, k) for k in SYNTH_DEFAULTS} == SYNTH_DEFAULTS
    assert DEFAULT_SAMPLE_SEED == 2022          # the bundled sample's seed (sample_data/README)
    assert polygons.write_districts.__defaults__ == (DEFAULT_DISTRICTS,)
    assert polygons.write_districts.__kwdefaults__ == {"rng": DEFAULT_DISTRICTS_SEED}
    assert zone_compare.DEFAULT_COMPARE_SPECS is DEFAULT_COMPARE_SPECS


def test_attack_curve_unchanged_by_the_light_quadrature():
    # numpy's Gauss-Legendre nodes and math.lgamma replace scipy's on the attack-curve path; same curve to 1e-12.
    # Houssiau et al. 2022: the bound e^eps/(1+e^eps) is first exceeded at k = 3 for eps = 0.66.
    from scipy import special

    from odcore.privacy import attack, pld

    curve = attack.success_curve(0.66, 70)
    x, w = pld.gauss_legendre(96)   # the cached node set itself, against scipy's
    xs, ws = special.roots_legendre(96)
    assert abs(x - 0.5 * (xs + 1)).max() < 1e-14
    assert abs(w - 0.5 * ws).max() < 1e-14
    assert int((curve > attack.posterior_bound(0.66, 0.5)).nonzero()[0][0]) == 3
    out = subprocess.run([sys.executable, "-m", "odcore", "attack-curve", "--json"], cwd=REPO_ROOT,
                         capture_output=True, text=True, check=True).stdout
    assert json.loads(out)["first_k_above_bound"] == 3
