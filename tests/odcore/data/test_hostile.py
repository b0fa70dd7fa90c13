"""Hostile input: every generated file (tests/hostile/generator.py) through the CLI and the dashboard's upload path.

Each file either gives exit code 2 and one line ``error: ...`` containing the expected fragment (no traceback, no
hang), or loads with exactly the expected users, rows kept, rows dropped / adjusted and first time. The same file
through :func:`odapp.data.loading.apply_upload` (what the upload button calls) gives the same message or the same figures.
Bad parameter values are checked the same way. The bombs run once, in a subprocess whose peak memory is measured.
"""

from __future__ import annotations

import functools
import gzip
import io
import json
import re
import signal
import subprocess
import sys
import zipfile
from contextlib import contextmanager

import pytest

from odcore.cli import main
from odcore.paths import REPO_ROOT
from tests.hostile.generator import CASES, Case, gzip_zeros, upload_options, write_all, zip_zeros

LIGHT = [c for c in CASES if not c.heavy]


@contextmanager
def deadline(seconds: int, what: str):
    """Fail (instead of hanging the suite) when the block takes longer than ``seconds``."""
    def boom(signum, frame):
        raise TimeoutError(f"{what} did not finish within {seconds} s (hang)")
    old = signal.signal(signal.SIGALRM, boom)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    return {c.name: p for c, p in write_all(tmp_path_factory.mktemp("hostile"))}


def test_the_suite_is_large_enough():
    assert len(CASES) >= 80
    assert len({c.name for c in CASES}) == len(CASES)


def check_loaded(case: Case, summary: dict) -> None:
    assert summary["users"] == case.users, summary
    assert summary["rows_kept"] == case.rows_kept, summary
    assert summary["rows_dropped"] == case.dropped, summary
    assert summary["rows_adjusted"] == case.adjusted, summary
    if case.time_min:
        assert summary["time_min"] == case.time_min, summary


@pytest.mark.parametrize("case", LIGHT, ids=lambda c: c.name)
def test_cli(case, files, capsys):
    with deadline(60, case.name):
        rc = main(["trips", "--input", str(files[case.name]), "--threshold", "1", "--json", *case.cli])
    out, err = capsys.readouterr()
    if case.error:
        assert rc == 2, (out, err)
        assert out == ""
        assert err.startswith("error: "), err
        assert err.count("\n") == 1, err
        assert case.error in err, err
        assert "Traceback" not in err
    else:
        assert rc == 0, err
        check_loaded(case, json.loads(out))


@pytest.mark.parametrize("case", [c for c in LIGHT if c.app], ids=lambda c: c.name)
def test_app_upload_path(case, files):
    from odapp.data.loading import apply_upload
    from odapp.shared.state import K_UPLOAD_ERROR, K_UPLOAD_TRACES

    state: dict = {}
    with deadline(60, case.name):
        ok = apply_upload(state, files[case.name].read_bytes(), files[case.name].name, upload_options(case))
    if case.error:
        assert not ok
        assert case.error in state[K_UPLOAD_ERROR], state[K_UPLOAD_ERROR]
        assert "\n" not in state[K_UPLOAD_ERROR]
    else:
        assert ok, state.get(K_UPLOAD_ERROR)
        check_loaded(case, state[K_UPLOAD_TRACES].summary)


BAD_PARAMETERS = [
    (["budget", "--epsilon", "1e308"], "(--epsilon) must be a number >= 1e-06 and <= 50"),
    (["budget", "--epsilon", "0"], "(--epsilon) must be a number >= 1e-06"),
    (["budget", "--epsilon", "1e-320"], "(--epsilon) must be a number >= 1e-06"),
    (["budget", "--epsilon", "5e-324"], "(--epsilon) must be a number >= 1e-06"),
    (["release", "--epsilon", "5e-324", "--out", "{tmp}/r"], "(--epsilon) must be a number >= 1e-06"),
    (["budget", "--epsilon", "nan"], "(--epsilon) must be"),
    (["budget", "--epsilon", "inf"], "(--epsilon) must be"),
    (["budget", "--delta", "1"], "(--delta) must be a number > 0 and < 1"),
    (["budget", "--delta", "-0.1"], "(--delta) must be"),
    (["budget", "--weeks", "0"], "(--weeks) must be an integer >= 1"),
    (["budget", "--weeks", "100000"], "(--weeks) must be an integer >= 1 and <= 520"),
    (["budget", "--trips", "0"], "(--trips) must be an integer >= 1"),
    (["budget", "--threshold", "-5"], "(--threshold) must be a number >= 1"),
    (["release", "--epsilon", "1e308", "--out", "{tmp}/r"], "(--epsilon) must be"),
    (["release", "--seed", "-1", "--out", "{tmp}/r"], "(--seed) must be an integer >= 0"),
    (["release", "--threshold", "0.5", "--out", "{tmp}/r"], "(--threshold) must be a number >= 1"),
    (["release", "--cell-km2", "0", "--out", "{tmp}/r"], "(--cell-km2) must be a number >= 0.01"),
    (["release", "--cell-km2", "1e9", "--out", "{tmp}/r"], "(--cell-km2) must be"),
    (["release", "--week", "-1", "--out", "{tmp}/r"], "(--week) must be an integer >= 0"),
    (["release", "--mode", "user_level", "--max-pairs", "0", "--out", "{tmp}/r"], "(--max-pairs) must be"),
    (["release", "--time-offset", "1e300", "--out", "{tmp}/r"], "(--time-offset) must be"),
    (["trips", "--threshold", "-5"], "(--threshold) must be a number >= 1"),
    (["trips", "--cell-km2", "-1"], "(--cell-km2) must be"),
    (["trips", "--end", "2300-01-01"], "end must be a date or time"),
    (["trips", "--start", "yesterday-ish"], "start must be a date or time"),
    (["trips", "--tz", "Mars/Olympus"], "tz must be an IANA time zone"),
    (["trips", "--bbox", "1,2,3"], "bbox must be south,west,north,east"),
    (["user-risk", "--resolution", "100000000"], "(--resolution) must be an integer >= 2 and <= 1,024"),
    (["user-risk", "--resolution", "1"], "(--resolution) must be"),
    (["user-risk", "--epsilon", "-1"], "(--epsilon) must be"),
    (["user-risk", "--prior", "1.5"], "(--prior) must be"),
    (["attack-curve", "--monte-carlo", "1000000000"], "(--monte-carlo) must be an integer >= 1 and <= 1,000,000"),
    (["attack-curve", "--monte-carlo", "0"], "(--monte-carlo) must be"),
    (["attack-curve", "--monte-carlo", "1000000", "--k-max", "500"], "noise draws"),
    (["attack-curve", "--k-max", "-3"], "(--k-max) must be an integer >= 0"),
    (["attack-curve", "--seed", "-7"], "(--seed) must be"),
    (["attack-curve", "--prior", "0"], "(--prior) must be"),
    (["synth", "--users", "0", "--out", "{tmp}/s.parquet"], "(--users) must be an integer >= 1"),
    (["synth", "--weeks", "9999", "--out", "{tmp}/s.parquet"], "(--weeks) must be"),
    (["synth", "--seed", "-1", "--out", "{tmp}/s.parquet"], "(--seed) must be"),
    (["synth", "--extent-km", "0", "--out", "{tmp}/s.parquet"], "(--extent-km) must be"),
    (["defences", "--epsilon", "0.1,-1"], "(--epsilon) must be"),
    (["knock", "--prior", "7"], "(--prior) must be"),
    (["knock", "--workers", "0"], "workers (--workers) must be an integer >= 1 and <= 64"),
    # Knock Knock's own parameters go through the same rule (odcore.data.validate.PARAMETERS)
    (["knock", "--m", "0"], "m (--m) must be an integer >= 1 and <= 10,000"),
    (["knock", "--m", "100000000"], "m (--m) must be an integer >= 1 and <= 10,000"),
    (["knock", "--alpha", "1.5"], "alpha (--alpha) must be a number > 0 and <= 1"),
    (["knock", "--targets", "0"], "targets (--targets) must be an integer >= 1"),
    (["knock", "--n-train", "100000000"], "n_train (--n-train) must be an integer >= 1 and <= 100,000"),
    (["knock", "--n-test", "0"], "n_test (--n-test) must be"),
    (["knock", "--beta", "-2"], "beta (--beta) must be"),
    (["knock", "--n-groups", "1e9"], "(--n-groups) must be"),
    (["knock", "--period-slots", "0"], "period_slots (--period-slots) must be"),
    (["knock", "--inference-period", "-1"], "inference_period (--inference-period) must be"),
    (["knock", "--kappa", "0"], "kappa (--kappa) must be"),
    (["knock", "--slot-minutes", "0"], "slot_minutes (--slot-minutes) must be an integer >= 1 and <= 10,080"),
    (["knock", "--n-jobs", "100000"], "n_jobs (--n-jobs) must be an integer >= 1 and <= 64"),
    (["knock", "--grid-shape", "10x100000"], "--grid-shape rows and columns each must be an integer >= 1 and <= 1,000"),
    (["defences", "--groups", "0"], "groups (--groups) must be an integer >= 1"),
    (["defences", "--kappa", "1000000"], "kappa (--kappa) must be"),
    (["defences", "--m", "0"], "m (--m) must be"),
    (["release", "--config", "{tmp}/bad.json", "--out", "{tmp}/r"], "(--epsilon) must be"),
]


@pytest.mark.parametrize(("argv", "fragment"), BAD_PARAMETERS, ids=lambda a: " ".join(a) if isinstance(a, list)
                         else None)
def test_bad_parameters_one_line_exit_2_and_nothing_written(argv, fragment, tmp_path, capsys):
    (tmp_path / "bad.json").write_text(json.dumps({"epsilon": "lots"}))
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    try:
        rc = main(argv)
    except SystemExit as exc:   # argparse refuses a value of the wrong type itself (also exit 2)
        rc = exc.code
    out, err = capsys.readouterr()
    assert rc == 2, (out, err)
    assert "Traceback" not in err
    if err.startswith("error: "):
        assert err.count("\n") == 1, err
        assert fragment in err, err
    else:
        assert "invalid" in err, err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bad.json"]   # nothing written


def test_knock_configs_take_the_same_rule_as_the_command_line():
    """The Python API (KnockConfig, MREConfig, TimeSeriesConfig) refuses what the CLI refuses, with the same words."""
    from odcore.errors import ParameterError
    from odcore.knock.experiment import KnockConfig, MREConfig
    from odcore.knock.timeseries import TimeSeriesConfig

    for make, fragment in ((lambda: KnockConfig(m=0), "m must be an integer >= 1 and <= 10,000"),
                           (lambda: KnockConfig(alpha=0), "alpha must be a number > 0 and <= 1"),
                           (lambda: KnockConfig(n_train=10**9), "n_train must be an integer >= 1 and <= 100,000"),
                           (lambda: KnockConfig(n_jobs=1000), "n_jobs must be"),
                           (lambda: MREConfig(n_groups=0), "n_groups must be an integer >= 1"),
                           (lambda: MREConfig(kappa=10**7), "kappa must be"),
                           (lambda: TimeSeriesConfig(slot_minutes=0), "slot_minutes must be an integer >= 1"),
                           (lambda: TimeSeriesConfig(shape=(10, 5000)), "must be an integer >= 1 and <= 1,000")):
        with pytest.raises(ParameterError, match=re.escape(fragment)):
            make()
    assert KnockConfig(m=3.0, n_train=40).m == 3   # whole numbers written as floats are accepted as integers


def test_release_writes_nothing_when_it_fails_late(tmp_path, capsys):
    """The week check runs after loading; the output folder must stay empty (atomic outputs)."""
    rc = main(["release", "--week", "300", "--out", str(tmp_path / "r")])
    assert rc == 2
    assert "--week=300 has no trips" in capsys.readouterr().err
    assert not (tmp_path / "r").exists() or not any((tmp_path / "r").iterdir())


def test_release_text_mode_when_nothing_is_published(tmp_path, capsys):
    rc = main(["release", "--threshold", "10000", "--out", str(tmp_path / "r")])
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert "0 of " in out
    assert "mean relative error n/a" in out
    assert sorted(p.name for p in (tmp_path / "r").iterdir()) == ["guarantee_sheet.html", "published.csv",
                                                                   "published.parquet", "release.json",
                                                                   "zones.geojson"]


@functools.cache
def _bomb(make) -> bytes:
    """1 GiB of zeros compressed by ``make`` (made once for the command-line and the upload test)."""
    return make(1 << 30)


def test_the_bombs_are_gzip_and_zip_files_of_zeros():
    """The bombs are read by Python's own gzip and zipfile modules as what they claim: whole on a few blocks, and at
    1 GiB the declared size, the first MiB all zeros and ~1 MB on disk."""
    n = 3 << 24
    assert gzip.decompress(gzip_zeros(n)) == bytes(n)
    with zipfile.ZipFile(io.BytesIO(zip_zeros(n))) as z:
        assert z.testzip() is None
        assert z.read("zeros.csv") == bytes(n)
    big = _bomb(gzip_zeros)
    assert len(big) < 2_000_000
    with gzip.GzipFile(fileobj=io.BytesIO(big)) as g:
        assert g.read(1 << 20) == bytes(1 << 20)
    assert int.from_bytes(big[-4:], "little") == (1 << 30) % (1 << 32)   # RFC 1952 ISIZE
    big = _bomb(zip_zeros)
    with zipfile.ZipFile(io.BytesIO(big)) as z, z.open("zeros.csv") as f:
        assert z.getinfo("zeros.csv").file_size == 1 << 30
        assert f.read(1 << 20) == bytes(1 << 20)


_BOMB_SCRIPT = """
import sys, time
from odcore.cli import main
t0 = time.perf_counter()
rc = main(["trips", "--input", sys.argv[1]])
# VmHWM: peak resident memory of this process image (ru_maxrss would include the forking pytest process)
peak_kb = next(int(x.split()[1]) for x in open("/proc/self/status") if x.startswith("VmHWM"))
print(rc, round(time.perf_counter() - t0, 2), peak_kb // 1024, file=sys.stderr)
"""


@pytest.mark.parametrize(("name", "make"), [("bomb.csv.gz", gzip_zeros), ("bomb.zip", zip_zeros)])
def test_bomb_stops_at_the_cap_fast_and_small(name, make, tmp_path):
    """1 GiB of zeros in ~1 MB: stopped while decompressing, under 300 MB peak memory (whole process); the seconds
    it took are printed by the script (no timed assertion; the subprocess timeout guards against a hang)."""
    p = tmp_path / name
    p.write_bytes(_bomb(make))
    assert p.stat().st_size < 2_000_000
    r = subprocess.run([sys.executable, "-c", _BOMB_SCRIPT, str(p)], capture_output=True, text=True, timeout=120,
                       cwd=REPO_ROOT)
    lines = r.stderr.strip().splitlines()
    assert lines[0].startswith("error: "), r.stderr
    assert "decompression bomb" in lines[0], r.stderr
    rc, _seconds, peak_mb = lines[-1].split()
    assert rc == "2"
    assert int(peak_mb) < 300, f"peak RSS {peak_mb} MB"


_BOMB_UPLOAD_SCRIPT = """
import sys
from pathlib import Path
from odapp.data.loading import apply_upload
from odapp.shared.state import K_UPLOAD_ERROR
p = Path(sys.argv[1])
state = {}
ok = apply_upload(state, p.read_bytes(), p.name)
peak_kb = next(int(x.split()[1]) for x in open("/proc/self/status") if x.startswith("VmHWM"))
print(state.get(K_UPLOAD_ERROR, "loaded").replace(chr(10), " "), file=sys.stderr)
print(int(ok), peak_kb // 1024, file=sys.stderr)
"""


@pytest.mark.parametrize(("name", "make"), [("bomb.csv.gz", gzip_zeros), ("bomb.zip", zip_zeros)])
def test_bomb_upload_stops_at_the_cap_in_the_app_path(name, make, tmp_path):
    """The same bombs through the dashboard's upload function (what "Load this file" calls): refused with the
    message, under 300 MB peak memory for the whole process."""
    p = tmp_path / name
    p.write_bytes(_bomb(make))
    r = subprocess.run([sys.executable, "-c", _BOMB_UPLOAD_SCRIPT, str(p)], capture_output=True, text=True,
                       timeout=120, cwd=REPO_ROOT)
    message, last = r.stderr.strip().splitlines()[-2:]
    assert "decompression bomb" in message, r.stderr
    ok, peak_mb = last.split()
    assert ok == "0"
    assert int(peak_mb) < 300, f"peak RSS {peak_mb} MB"


def test_cli_in_a_real_process_no_traceback(files):
    """The installed entry point (not only main()): exit 2, one line, for a file that could crash a reader."""
    r = subprocess.run([sys.executable, "-m", "odcore", "trips", "--input", str(files["iso_year_2300"])],
                       capture_output=True, text=True, timeout=120, cwd=REPO_ROOT)
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1, r.stderr
    assert "year 2300" in r.stderr, r.stderr
