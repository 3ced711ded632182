"""Log directories (JBOD, Kafka's ``log.dirs``): where each partition directory lives, and moving one.

Theory of operation: a broker has one or more log directories (``log.dirs``,
comma-separated; unset: the broker's data dir).  ``LogDirs`` scans them at
start for ``<topic>-<index>`` directories, so a restart finds a partition in
whichever directory it is, and places a new partition in the directory with
the fewest partitions (Kafka's ``LogManager.nextLogDirs`` rule, ties to the
first listed).  Leftovers of an interrupted move (``<topic>-<index>.<id>-future``,
Kafka's future-log suffix) are removed at start: the move did not happen and
the replica stays where it was.  A partition found in two directories (a crash
between a move's rename and the old copy's removal: both are complete and equal)
is kept in the first listed; the other is removed.

Moving (AlterReplicaLogDirs, API 34), Kafka's future-log way: ``copy_pass``
copies the partition's files into ``<target>/<name>.<id>-future`` on a worker
thread while the partition keeps serving (sealed segments are immutable; a
file that vanishes meanwhile is retention's doing and skipped), fsyncs what it
copied there, and may run again to shrink what changed since; ``finish_copy``
then runs on the event loop, where nothing appends meanwhile: it brings the
future copy exactly up to date (the appended tail of a ``.log`` whose copied
prefix still matches, every other changed file whole, files gone from the
source removed), fsyncs only what it wrote and renames it to
``<target>/<name>``.  The owner then reopens the replica there and removes the
old directory (``mark_deleted`` on the loop, ``shutil.rmtree`` of the marked
directory off it).  No record is lost: the reopened log is a byte copy of the
closed state, and regions already handed to consumers keep the old files open
until sent.  The event loop's share of a move is thus the few files changed
since the last copy pass, whatever the partition's size, so moving a replica
back and forth costs other clients nothing but the disk's bandwidth.

That bandwidth is bounded by ``pace`` (Kafka's ``ReplicaAlterLogDirsThread``
and its quota, ``replica.alter.log.dirs.io.max.bytes.per.second``,
``replication/throttle.py``): ``copy_pass`` copies in chunks of
``COPY_CHUNK`` bytes, counts each and sleeps (on its worker thread) for as
long as ``pace`` says the quota is over.

Single-threaded apart from ``copy_pass``; no locks (``pace`` brings its own).
"""
from __future__ import annotations

import logging
import os
import re
import shutil
import time
import uuid
from pathlib import Path
from typing import Callable

from broker_sim.storage.checkpoint import fsync_directory

log = logging.getLogger(__name__)

FUTURE_SUFFIX = "-future"
DELETE_SUFFIX = "-delete"
_PARTITION_DIR = re.compile(r"^(.+)-(\d+)$")
_TAIL_CHECK = 64  # bytes before a copied prefix's end compared before copying only a .log's tail
COPY_CHUNK = 1 << 20  # bytes a copy pass copies between two calls of its pace


def parse_log_dirs(value: str, default: Path) -> list[Path]:
    """``log.dirs`` (comma-separated paths) -> distinct absolute paths; unset: ``[default]``."""
    dirs: list[Path] = []
    for item in value.split(","):
        item = item.strip()
        if not item:
            continue
        path = Path(item).absolute()
        if path in dirs:
            raise ValueError(f"log.dirs lists {item!r} twice")
        dirs.append(path)
    return dirs or [default]


def partition_of(name: str) -> tuple[str, int] | None:
    """(topic, index) of a partition directory's name, or None for anything else."""
    match = _PARTITION_DIR.match(name)
    if match is None or name.endswith((FUTURE_SUFFIX, DELETE_SUFFIX)):
        return None
    return match.group(1), int(match.group(2))


class LogDirs:
    """The broker's log directories and which one holds each partition (``located``)."""

    def __init__(self, dirs: list[Path]) -> None:
        self.dirs = list(dirs)
        self.located: dict[tuple[str, int], Path] = {}
        for directory in self.dirs:
            directory.mkdir(parents=True, exist_ok=True)
        for directory in self.dirs:
            for path in sorted(directory.iterdir()):
                if not path.is_dir():
                    continue
                if path.name.endswith(FUTURE_SUFFIX):
                    log.warning("removing %s: a replica move interrupted before it completed", path)
                    shutil.rmtree(path, ignore_errors=True)
                    continue
                key = partition_of(path.name)
                if key is None:
                    continue
                if key in self.located:
                    log.warning("%s is also in %s (a move cut short after its copy completed); removing this one",
                                path, self.located[key])
                    remove_directory(path)
                    continue
                self.located[key] = directory

    def path(self, topic: str, index: int) -> Path:
        """The partition's directory: where it is, else where a new one goes (the dir with the fewest partitions)."""
        key = (topic, index)
        directory = self.located.get(key)
        if directory is None:
            directory = self.located[key] = self.emptiest()
        return directory / f"{topic}-{index}"

    def emptiest(self) -> Path:
        counts = {directory: 0 for directory in self.dirs}
        for directory in self.located.values():
            counts[directory] = counts.get(directory, 0) + 1
        return min(self.dirs, key=lambda directory: counts[directory])

    def forget(self, topic: str, index: int) -> None:
        self.located.pop((topic, index), None)

    def resolve(self, value: str) -> Path | None:
        """The log dir ``value`` names (as an AlterReplicaLogDirs request spells it), or None."""
        try:
            wanted = Path(value).absolute()
        except (TypeError, ValueError):
            return None
        return next((directory for directory in self.dirs if directory == wanted), None)

    def stale_deletions(self) -> list[Path]:
        return [path for directory in self.dirs for path in directory.glob("*" + DELETE_SUFFIX)]


def mark_deleted(directory: Path) -> Path | None:
    """Rename to ``.<id>-delete`` (atomic): gone for every reader, removed by ``shutil.rmtree`` later or, after a
    crash, at the next start.  Returns the marked path (None when ``directory`` does not exist)."""
    if not directory.exists():
        return None
    marked = directory.with_name(f"{directory.name}.{uuid.uuid4().hex}{DELETE_SUFFIX}")
    directory.rename(marked)
    return marked


def remove_directory(directory: Path) -> None:
    """``mark_deleted``, then remove at once."""
    marked = mark_deleted(directory)
    if marked is not None:
        shutil.rmtree(marked, ignore_errors=True)


def future_path(target: Path, name: str) -> Path:
    return target / f"{name}.{uuid.uuid4().hex}{FUTURE_SUFFIX}"


def copy_pass(source: Path, future: Path, pace: Callable[[int], float] | None = None) -> int:
    """Copy every file of ``source`` that differs (size or mtime) from its copy in ``future``, and fsync each copy;
    returns bytes copied.  ``pace(bytes)`` is told each chunk copied and answers the seconds to wait before the
    next (0: go on).

    Safe off the event loop: it only reads ``source``, and files vanishing meanwhile are skipped."""
    future.mkdir(parents=True, exist_ok=True)
    copied = 0
    for path in sorted(source.iterdir()):
        target = future / path.name
        try:
            stat = path.stat()
            if target.exists():
                copied_stat = target.stat()
                if (copied_stat.st_size, copied_stat.st_mtime_ns) == (stat.st_size, stat.st_mtime_ns):
                    continue
            copied += _copy_file(path, target, pace)
        except FileNotFoundError:
            continue
    fsync_directory(future)
    return copied


def _copy_file(path: Path, target: Path, pace: Callable[[int], float] | None) -> int:
    """``shutil.copy2`` (to the end of ``path`` as it grows, then its times) in ``COPY_CHUNK``s, each told to
    ``pace``, then fsync; returns bytes copied."""
    copied = 0
    with open(path, "rb") as a, open(target, "wb") as b:
        while True:
            sent = os.sendfile(b.fileno(), a.fileno(), copied, COPY_CHUNK)  # in the kernel, no GIL held
            if not sent:
                break
            copied += sent
            if pace is not None and (wait := pace(sent)) > 0:
                time.sleep(wait)
        os.fsync(b.fileno())
    shutil.copystat(path, target)
    return copied


def finish_copy(source: Path, future: Path, final: Path) -> int:
    """Bring ``future`` exactly up to date with ``source`` and rename it to ``final``; returns bytes copied.

    Call on the event loop (nothing may write ``source`` meanwhile)."""
    copied = 0
    present, written = set(), []
    for path in sorted(source.iterdir()):
        present.add(path.name)
        target = future / path.name
        size = path.stat().st_size
        if target.exists():
            copied_size = target.stat().st_size
            if path.suffix == ".log" and copied_size <= size and _prefix_matches(path, target, copied_size):
                if size > copied_size:
                    copied += _append_tail(path, target, copied_size, size)
                    written.append(target)
                continue
            if path.suffix in (".log", ".index", ".timeindex", ".txnindex") and _same_file(path, target):
                continue
        shutil.copy2(path, target)
        copied += size
        written.append(target)
    for path in list(future.iterdir()):
        if path.name not in present:
            path.unlink()
    for path in written:  # the rest was fsynced by the copy pass that wrote it
        with open(path, "rb") as f:
            os.fsync(f.fileno())
    fsync_directory(future)
    os.rename(future, final)
    fsync_directory(final.parent)
    return copied


def _prefix_matches(path: Path, target: Path, length: int) -> bool:
    start = max(0, length - _TAIL_CHECK)
    with open(path, "rb") as a, open(target, "rb") as b:
        return os.pread(a.fileno(), length - start, start) == os.pread(b.fileno(), length - start, start)


def _append_tail(path: Path, target: Path, start: int, end: int) -> int:
    if end == start:
        return 0
    with open(path, "rb") as a, open(target, "r+b") as b:
        b.truncate(start)
        offset = start
        while offset < end:
            chunk = os.pread(a.fileno(), min(1 << 20, end - offset), offset)
            if not chunk:
                break
            os.pwrite(b.fileno(), chunk, offset)
            offset += len(chunk)
    return end - start


def _same_file(path: Path, target: Path) -> bool:
    a, b = path.stat(), target.stat()
    return (a.st_size, a.st_mtime_ns) == (b.st_size, b.st_mtime_ns)
