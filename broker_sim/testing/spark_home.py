"""A SPARK_HOME for pip-installed pyspark whose Python workers import pyspark compiled, not from source.

Theory of operation:

1. Spark puts ``$SPARK_HOME/python/lib/pyspark.zip`` and py4j's zip first on the PYTHONPATH of every Python
   process it starts (``PythonUtils.sparkPythonPath``): each worker and each Python Data Source runner (lookup,
   planning, reading, writing, committing). pip's pyspark ships that zip with its ``.py`` files only, so every
   one of those processes compiles pyspark from source: importing ``pyspark.worker`` takes 1.6-2.1 s from the
   zip and 0.6-0.8 s from site-packages, where pip wrote the bytecode. A test query starts several of them.
2. ``home()`` builds a directory that is the pip install in every other way: a symlink to each entry of the
   pyspark package (``bin``, ``jars``, ``sbin``, ...) and a ``python/lib`` without the two zips, so workers find
   pyspark and py4j where the running interpreter has them. It lives in ``cache_dir()``, named by a
   key of the package's path, version and entries; it is built under a temporary name and renamed, so a
   process sees a whole home or none, and two processes building it at once both end up using one.
3. ``use()`` points SPARK_HOME at it, only when that changes nothing but speed: SPARK_HOME unset or naming the
   pip install, the workers' Python (PYSPARK_PYTHON) the running interpreter (its file, or a launcher such as
   a pyenv shim that runs it), which has pyspark and py4j outside the zips. A Spark distribution of the user's own, another worker Python, or a machine without
   symlinks keeps Spark's layout. The driver's classpath then names the new home's ``jars``, which is why
   ``spark_cds.archive_key`` carries the home in use.
"""
from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

PREFIX = "spark-home-"
# how long a PYSPARK_PYTHON that is not the running interpreter's file may take to say which interpreter it runs
LAUNCHER_TIMEOUT_SECONDS = 15


def cache_dir() -> Path:
    """pylog's cache of Spark homes and class archives: ``$XDG_CACHE_HOME/pylog``, or ``~/.cache/pylog`` when
    XDG_CACHE_HOME is unset or empty."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "pylog"


def _pip_pyspark() -> Path | None:
    try:
        import pyspark
    except ImportError:
        return None
    return Path(pyspark.__file__).resolve().parent


def _outside_zip(module: str) -> bool:
    """True when ``module`` imports from a directory (site-packages), not from a zip Spark puts first."""
    spec = importlib.util.find_spec(module)
    origin = getattr(spec, "origin", None) if spec else None
    return bool(origin) and ".zip" + os.sep not in origin and Path(origin).is_file()


def _zips(package: Path) -> set[str]:
    lib = package / "python" / "lib"
    try:
        return {p.name for p in lib.iterdir() if p.name == "pyspark.zip" or p.name.startswith("py4j-")}
    except OSError:
        return set()


def key(package: Path) -> str:
    """A key of the pip install a home mirrors: its path, pyspark's version and the names of its entries."""
    import pyspark

    names = sorted(p.name for p in package.iterdir())
    text = "\n".join([str(package), pyspark.__version__, *names, *sorted(_zips(package))])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def home() -> Path | None:
    """The fast SPARK_HOME of this pip pyspark, built when missing; None when there is nothing to gain (no
    pip pyspark, no zip in it, pyspark or py4j not importable outside the zips) or no way to build it."""
    package = _pip_pyspark()
    if package is None or not (package / "jars").is_dir() or "pyspark.zip" not in _zips(package):
        return None
    if not (_outside_zip("pyspark") and _outside_zip("py4j")):
        return None
    cache = cache_dir()
    target = cache / f"{PREFIX}{key(package)}"
    if (target / "jars").is_dir():
        return target
    try:
        cache.mkdir(parents=True, exist_ok=True)
        building = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=cache))
        building.chmod(0o755)
    except OSError:
        return None
    try:
        for entry in package.iterdir():
            if entry.name != "python":
                os.symlink(entry, building / entry.name)
        python = package / "python"
        if python.is_dir():
            (building / "python" / "lib").mkdir(parents=True)
            for entry in python.iterdir():
                if entry.name != "lib":
                    os.symlink(entry, building / "python" / entry.name)
            for entry in (python / "lib").iterdir():
                if entry.name not in _zips(package):
                    os.symlink(entry, building / "python" / "lib" / entry.name)
        os.rename(building, target)   # atomic; fails when another process renamed its own first
    except OSError:
        shutil.rmtree(building, ignore_errors=True)
    return target if (target / "jars").is_dir() else None


def applies() -> bool:
    """True when pointing SPARK_HOME at ``home()`` changes nothing but speed (see the module docstring)."""
    package = _pip_pyspark()
    if package is None:
        return False
    current = os.environ.get("SPARK_HOME")
    if current:   # the pip install itself, or a home of ours mirroring it (a parent process set it)
        here = Path(current)
        mirrors = here.name.startswith(PREFIX) and (here / "jars").resolve() == package / "jars"
        if not mirrors and here.resolve() != package:
            return False
    worker = os.environ.get("PYSPARK_PYTHON")
    return not worker or _runs_this_interpreter(worker)


@functools.lru_cache(maxsize=8)
def _runs_this_interpreter(worker: str) -> bool:
    """True when the command ``worker`` runs the running interpreter: the same file, or a launcher of it (a
    pyenv shim, a wrapper script), which it is asked once per process."""
    path = shutil.which(worker) or worker
    if os.path.abspath(path) == os.path.abspath(sys.executable):
        return True
    try:   # not os.path.samefile: a virtualenv's python is a link to its base interpreter, with other packages
        done = subprocess.run([path, "-c", "import sys; print(sys.executable)"], capture_output=True, text=True,
                              timeout=LAUNCHER_TIMEOUT_SECONDS, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return False
    answer = done.stdout.strip()
    return done.returncode == 0 and bool(answer) and os.path.abspath(answer) == os.path.abspath(sys.executable)


def use() -> Path | None:
    """Point SPARK_HOME at ``home()`` when ``applies()``; return the home set, or None when Spark's layout stays.
    Call before the driver JVM starts (its workers take SPARK_HOME from the JVM's environment)."""
    if not applies():
        return None
    target = home()
    if target is not None:
        os.environ["SPARK_HOME"] = str(target)
    return target
