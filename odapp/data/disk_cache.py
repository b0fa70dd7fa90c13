"""The disk cache: the bundled city's tables and the number-only privacy tables kept between launches, stamped
with the code that built them, and the content hash of a file shipped with the app."""

from __future__ import annotations

import hashlib
import os
import pickle
from functools import lru_cache
from pathlib import Path

from odcore.paths import REPO_ROOT, SAMPLE_DATA_DIR

CACHE_ENV = "ODLAB_CACHE_DIR"      # where the bundled city's tables are kept between launches; "none": nowhere
CACHE_MAX_FILES = 12


def cache_dir() -> Path | None:
    """The disk cache folder (``$ODLAB_CACHE_DIR``, default ``~/.cache/odlab``), or None when switched off."""
    v = os.environ.get(CACHE_ENV, "").strip()
    if v.lower() in ("none", "off", "0"):
        return None
    return Path(v).expanduser() if v else Path.home() / ".cache" / "odlab"


@lru_cache(maxsize=1)
def code_stamp() -> str:
    """Hash of the engine's source (``odcore/**/*.py``), of this module, of the loader (:mod:`odapp.data.loading`) and
    of the app's ``cache.py`` modules (which say what each kept table is): a cached table built by other code is never read back."""
    h = hashlib.sha256()
    for f in [*sorted((REPO_ROOT / "odcore").rglob("*.py")), Path(__file__), Path(__file__).with_name("loading.py"),
              *sorted((REPO_ROOT / "odapp").rglob("cache.py"))]:
        h.update(f.relative_to(REPO_ROOT).as_posix().encode())
        h.update(f.read_bytes())
    return h.hexdigest()[:16]


def shipped_file_hash(path) -> str | None:
    """SHA-256 of ``path`` when it is a file shipped with the app (``sample_data/``, e.g. the bundled districts), else
    None (an upload, another file, or not a path)."""
    if path is None:
        return None
    try:
        p = Path(str(path)).resolve()
        if p.parent != SAMPLE_DATA_DIR.resolve() or not p.is_file():
            return None
        return _file_sha256(str(p), p.stat().st_mtime_ns, p.stat().st_size)
    except OSError:
        return None


@lru_cache(maxsize=8)
def _file_sha256(path: str, mtime_ns: int, size: int) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def disk_cached(kind: str, key: str, build):
    """``build()``, kept on disk between launches of the app under ``kind`` and ``key`` (plus :func:`code_stamp`).

    Only for the bundled city and for results that depend on no data (uploads never touch the disk cache: they stay
    in their session). Reading back the loaded city and its OD tables takes ~0.1 s instead of ~2.5 s to validate and
    build them: the first page of a new server is drawn sooner. A damaged or unreadable file is rebuilt; a folder
    that cannot be written is skipped. The ``CACHE_MAX_FILES`` most recently used files of each ``kind`` are kept
    (``kind`` has no ``-``).
    """
    d = cache_dir()
    if d is None:
        return build()
    f = d / f"{kind}-{hashlib.sha256(f'{key}|{code_stamp()}'.encode()).hexdigest()[:24]}.pkl"
    try:
        with open(f, "rb") as fh:
            obj = pickle.load(fh)
        os.utime(f)
        return obj
    except FileNotFoundError:
        pass
    except Exception:  # damaged or from an incompatible library version: rebuild it
        f.unlink(missing_ok=True)
    obj = build()
    try:
        d.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = f.with_name(f"{f.name}.{os.getpid()}.tmp")
        with open(tmp, "wb") as fh:
            pickle.dump(obj, fh, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, f)
        for old in sorted(d.glob(f"{kind}-*.pkl"), key=lambda p: p.stat().st_mtime, reverse=True)[CACHE_MAX_FILES:]:
            old.unlink(missing_ok=True)
    except OSError:
        pass
    return obj
