"""Where bundled and shared data live."""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parent.parent
# The bundled city: sample_data/ of the repository, or its copy installed inside the package (``pip install .``
# ships it as ``odcore/sample_data``, see pyproject.toml).
_IN_REPO = REPO_ROOT / "sample_data"
_INSTALLED = Path(__file__).resolve().parent / "sample_data"
SAMPLE_DATA_DIR = _IN_REPO if _IN_REPO.is_dir() or not _INSTALLED.is_dir() else _INSTALLED
# ../shared/data beside the repository (the real datasets; never copied into the repo), or $ODLAB_SHARED_DATA.
SHARED_DATA_DIR = Path(os.environ.get("ODLAB_SHARED_DATA") or REPO_ROOT.parent / "shared" / "data")


@contextmanager
def atomic_output(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success rename it to ``path``, on any error remove it.

    A command that fails therefore leaves no partial or stale-looking output (the rename is atomic on one file
    system). The temporary name keeps the suffix so writers that choose the format from it still work.

    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> with atomic_output(d / "x.txt") as tmp:
    ...     _ = tmp.write_text("ok")
    >>> sorted(p.name for p in d.iterdir())
    ['x.txt']
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{path.stem}.", suffix="".join(path.suffixes) or ".tmp", dir=path.parent)
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)
