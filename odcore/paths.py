"""Where bundled and shared data live, and how outputs are written (all or nothing, following the umask)."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import re
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from odcore.errors import ParameterError

REPO_ROOT = Path(__file__).resolve().parent.parent
# The bundled city: sample_data/ of the repository, or its copy installed inside the package (``pip install .``
# ships it as ``odcore/sample_data``, see pyproject.toml).
_IN_REPO = REPO_ROOT / "sample_data"
_INSTALLED = Path(__file__).resolve().parent / "sample_data"
SAMPLE_DATA_DIR = _IN_REPO if _IN_REPO.is_dir() or not _INSTALLED.is_dir() else _INSTALLED
# ../shared/data beside the repository (the real datasets; never copied into the repo), or $ODLAB_SHARED_DATA.
SHARED_DATA_DIR = Path(os.environ.get("ODLAB_SHARED_DATA") or REPO_ROOT.parent / "shared" / "data")

# Temporary outputs are named ".<final name>.odcore-tmp-<pid>-<random><suffixes>": hidden (Parquet dataset readers
# skip names starting with "."), recognisable, and removable by the next writer of the same name once the process
# that made them is gone (a run killed with SIGKILL cannot clean up after itself).
TMP_TAG = ".odcore-tmp-"


def current_umask() -> int:
    """The process's file-mode creation mask, read without changing it (``/proc/self/status`` on Linux; elsewhere
    the usual two ``os.umask`` calls)."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    old = os.umask(0o022)
    os.umask(old)
    return old


def _pid_alive(pid: int) -> bool:
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def remove_stale_temporaries(path: str | Path) -> list[Path]:
    """Remove the temporary files and folders left beside ``path`` by writers of ``path`` that were killed (their
    process is gone); returns what was removed. Temporaries of a writer still running are left alone."""
    path = Path(path)
    removed = []
    pat = re.compile(re.escape(f".{path.name}{TMP_TAG}") + r"(\d+)-")
    try:
        entries = list(path.parent.iterdir())
    except OSError:
        return removed
    for e in entries:
        m = pat.match(e.name)
        if m is None or _pid_alive(int(m.group(1))):
            continue
        try:
            if e.is_dir() and not e.is_symlink():
                shutil.rmtree(e)
            else:
                e.unlink()
            removed.append(e)
        except OSError:
            pass
    return removed


def _tmp_prefix(path: Path) -> str:
    return f".{path.name}{TMP_TAG}{os.getpid()}-"


@contextmanager
def atomic_output(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; on success rename it to ``path``, on any error remove it.

    A command that fails therefore leaves no partial or stale-looking output (the rename is atomic on one file
    system); one killed outright leaves only a hidden temporary that the next writer of ``path`` removes. The
    temporary name keeps the suffix so writers that choose the format from it still work. The file gets the mode
    the umask gives a new file (``0o666 & ~umask``), not the 0600 of a temporary file.

    >>> import tempfile, pathlib
    >>> d = pathlib.Path(tempfile.mkdtemp())
    >>> with atomic_output(d / "x.txt") as tmp:
    ...     _ = tmp.write_text("ok")
    >>> sorted(p.name for p in d.iterdir())
    ['x.txt']
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(path)
    fd, name = tempfile.mkstemp(prefix=_tmp_prefix(path), suffix="".join(path.suffixes) or ".tmp", dir=path.parent)
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        os.chmod(tmp, 0o666 & ~current_umask())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


_RENAME_EXCHANGE = 2
_AT_FDCWD = -100


def exchange_paths(a: Path, b: Path) -> bool:
    """Swap two existing paths in one atomic step (Linux ``renameat2(RENAME_EXCHANGE)``); False where the system
    cannot (then the caller falls back to two renames)."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)
        fn = libc.renameat2
    except (OSError, AttributeError):
        return False
    fn.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p, ctypes.c_uint]
    rc = fn(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE)
    return rc == 0


def check_folder_replaceable(path: str | Path, owned: Callable[[Path], bool], *, what: str) -> None:
    """Raise :class:`~odcore.errors.ParameterError` unless ``path`` is absent, an empty folder, or a folder that
    ``owned(path)`` recognises as a previous output of the same kind (which the new output replaces whole).

    ``what`` names the flag or output in the message (e.g. ``"synth --out data/city"``)."""
    path = Path(path)
    if not path.exists():
        return
    if not path.is_dir():
        raise ParameterError(f"{what}: {path} exists and is not a folder; choose a new folder name.")
    if any(path.iterdir()) and not owned(path):
        names = sorted(p.name for p in path.iterdir())
        shown = ", ".join(names[:5]) + (", …" if len(names) > 5 else "")
        raise ParameterError(f"{what}: the folder {path} already holds files this command did not write ({shown}); "
                             "nothing was changed. Choose a new or empty folder (or remove those files).")


@contextmanager
def atomic_folder(path: str | Path, owned: Callable[[Path], bool], *, what: str) -> Iterator[Path]:
    """Yield a new hidden folder beside ``path`` to write a folder output into; on success it becomes ``path`` in one
    step, on any error it is removed.

    ``path`` must be absent, empty, or a previous output of the same kind (``owned(path)`` true, e.g. it holds this
    writer's manifest): anything else is refused before a byte is written (:func:`check_folder_replaceable`), so a
    folder of someone else's files is never deleted. A previous output is swapped out atomically (Linux
    ``renameat2``), so a reader, or a run killed at any moment, sees either the whole previous output or the whole
    new one; what a killed run leaves is a hidden ``.<name>.odcore-tmp-…`` folder that the next run removes. The
    folder gets the mode the umask gives a new folder.
    """
    path = Path(path)
    check_folder_replaceable(path, owned, what=what)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(path)
    tmp = Path(tempfile.mkdtemp(prefix=_tmp_prefix(path), dir=path.parent))
    try:
        yield tmp
        os.chmod(tmp, 0o777 & ~current_umask())
        check_folder_replaceable(path, owned, what=what)   # nobody put anything there meanwhile
        if path.is_dir() and exchange_paths(tmp, path):
            pass                                           # tmp now holds the previous output: removed below
        else:
            if path.is_dir():
                old = Path(tempfile.mkdtemp(prefix=_tmp_prefix(path), dir=path.parent))
                os.rmdir(old)
                os.rename(path, old)    # not atomic with the next line: a kill between leaves the old output here
                os.rename(tmp, path)
                shutil.rmtree(old, ignore_errors=True)
            else:
                os.rename(tmp, path)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


PAUSE_ENV = "ODCORE_TEST_PAUSE"


def pause_for_test(point: str) -> None:
    """A test's way into a write of several steps: with ``ODCORE_TEST_PAUSE=POINT:FILE`` in the environment, the
    process writes its id to FILE when it reaches ``point`` and waits 60 s there, so that a test can kill it at
    that exact step (``kill -9``) and check what a reader then sees. Without the variable it does nothing."""
    spec = os.environ.get(PAUSE_ENV)
    if not spec:
        return
    name, _, marker = spec.partition(":")
    if name != point or not marker:
        return
    Path(marker).write_text(str(os.getpid()), encoding="ascii")
    time.sleep(60)
