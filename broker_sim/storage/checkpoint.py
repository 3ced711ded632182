"""Kafka-style text checkpoint files, replaced atomically.

Theory of operation: Kafka keeps small pieces of partition metadata
(`log-start-offset-checkpoint`, `leader-epoch-checkpoint`, ...) in text files of
the form::

    <version>
    <number of entries>
    <entry>
    ...

A checkpoint is written to `<name>.tmp`, fsynced, renamed over the old file and
the directory is fsynced, so a crash leaves either the old or the new file,
never a mix. Readers get the entry lines and validate them themselves; any
malformed or unreadable file raises ValueError so the owner can decide to
rebuild or ignore — checkpoints are derived data, and Kafka's log manager
resets what it cannot read (the log start offset to the first segment's base
offset) rather than refusing to start.
"""

from __future__ import annotations

import os
from pathlib import Path


def fsync_directory(directory: Path) -> None:
    """Make renames and unlinks inside `directory` durable."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def write_checkpoint(path: Path, version: int, entries: list[str]) -> None:
    """Atomically replace `path` with a checkpoint holding `entries` (one line each)."""
    text = f"{version}\n{len(entries)}\n" + "".join(f"{entry}\n" for entry in entries)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "wb", buffering=0) as f:
        f.write(text.encode("ascii"))
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fsync_directory(path.parent)


def read_checkpoint(path: Path, version: int) -> list[str] | None:
    """Entry lines of the checkpoint at `path`, or None when the file does not exist.

    Raises ValueError when the file cannot be read, the version differs or the
    entry count does not match.
    """
    try:
        lines = path.read_text("ascii").splitlines()
    except FileNotFoundError:
        return None
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}: not an ASCII checkpoint file") from e
    except OSError as e:  # a directory in its place, no permission, an I/O error
        raise ValueError(f"{path}: unreadable: {e}") from e
    if len(lines) < 2 or lines[0].strip() != str(version):
        raise ValueError(f"{path}: expected checkpoint version {version}, found {lines[:1]!r}")
    try:
        count = int(lines[1])
    except ValueError as e:
        raise ValueError(f"{path}: entry count {lines[1]!r} is not a number") from e
    entries = lines[2:]
    if count != len(entries):
        raise ValueError(f"{path}: header says {count} entries, file has {len(entries)}")
    return entries
