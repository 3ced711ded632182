"""``pylog bench --workload start``: spawn to accepting TCP, this checkout's broker against another's.

Example::

    $ git worktree add --detach /tmp/r1 080a57b
    $ pylog bench --workload start --baseline /tmp/r1 --rounds 3 --starts 3   # 9 alternating pairs per mode
    $ python -m broker_sim.bench.start --baseline /tmp/r1 --pairs 9

Each sample is ``BrokerProcess.start`` (``bench/brokers.py``): a fresh port and data dir, timed from just before
``python -m broker_sim`` is spawned until a TCP connect succeeds. Samples alternate (pylog, baseline, floor,
pylog, ...) so that drift on the machine touches every kind alike. ``floor`` is a Python process that binds
and listens at once (no broker_sim): no Python broker starts faster than that on this machine.

Two modes, because where Python finds its bytecode decides most of a start:

* ``source``: the environment as it is, with ``PYTHONDONTWRITEBYTECODE=1``: broker_sim compiles from source on
  every start (a checkout that never wrote ``__pycache__``), so the cost grows with the code imported;
* ``cached``: bytecode kept under a temporary ``PYTHONPYCACHEPREFIX``, warmed by one start of each kind first,
  as for an installed package.

Which mode a deployment gets: ``pip install`` (non-editable: the image's ``pip install /src`` or its wheelhouse)
compiles every module at install, ``PYTHONDONTWRITEBYTECODE`` or not (that variable only stops writing at run
time, never reading), so the image's broker starts as in ``cached``. An editable install (``ci/setup.sh``: ``pip
install -e``) under ``PYTHONDONTWRITEBYTECODE=1`` has no bytecode and recompiles every ``broker_sim`` module it
imports at each process start, as in ``source``, unless ``python -m compileall`` ran over the checkout (a
``.pyc`` whose source changed since is ignored, so stale bytecode is never run); ``ci/setup.sh`` runs it.

The report (JSON on stdout): ``{"workload": ..., "results": {mode: {kind: {"start_ms": median, "samples":
[...], "cpu_ms": median, "cpu_samples": [...]}, "ratio_to_baseline": pylog / baseline, "ratio_to_floor": ...,
"cpu_ratio_to_baseline": ..., "cpu_ratio_to_floor": ...}}}``; above 1 in a ratio means pylog starts slower.
``cpu_ms`` is the CPU time the process had run when it accepted (``/proc/<pid>/schedstat``, Linux; absent
elsewhere): the start's own work, which the wall time ``start_ms`` mixes with waiting for a CPU on a busy
machine. A start is one thread until it accepts, so its main thread's figure is the whole. The benchmark never
fails a build.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import sys
import tempfile
from dataclasses import replace
from typing import TextIO

from broker_sim.bench.brokers import BrokerKind, BrokerProcess, BrokerStartError, BrokerUnavailable, pylog_broker

MODES = ("source", "cached")
# listens as soon as the interpreter is up: the floor under any Python broker's start
_FLOOR = ("import socket, sys, time; s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); "
          "s.bind(('127.0.0.1', int(sys.argv[1]))); s.listen(); time.sleep(600)")


def floor_kind() -> BrokerKind:
    """A Python process that only binds and listens (the interpreter's own start)."""
    return BrokerKind("floor", lambda port, data_dir: [sys.executable, "-c", _FLOOR, str(port)],
                      f"python {sys.version.split()[0]} -c bind+listen")


def kinds(baseline: str | None) -> dict[str, BrokerKind]:
    """pylog (this checkout), baseline (*baseline*'s checkout, if given) and floor; raises BrokerUnavailable."""
    found = {"pylog": pylog_broker()}
    if baseline:
        found["baseline"] = pylog_broker(os.path.abspath(baseline), "baseline")
    found["floor"] = floor_kind()
    return found


def in_mode(kind: BrokerKind, mode: str, cache_dir: str) -> BrokerKind:
    """*kind* with the bytecode settings of *mode* (see the module docstring)."""
    if mode == "source":
        return replace(kind, env={**kind.env, "PYTHONDONTWRITEBYTECODE": "1"})
    # an empty PYTHONDONTWRITEBYTECODE counts as unset, so the child writes its bytecode under the prefix
    return replace(kind, env={**kind.env, "PYTHONPYCACHEPREFIX": os.path.join(cache_dir, kind.name),
                              "PYTHONDONTWRITEBYTECODE": ""})


def time_start(kind: BrokerKind) -> tuple[float, float | None]:
    """One spawn-to-accept: (wall ms, CPU ms the process ran until then, None where unknown); stopped again."""
    broker = BrokerProcess(kind)
    try:
        wall_ms = broker.start()
        return wall_ms, cpu_ms(broker.process.pid)
    finally:
        broker.stop()


def cpu_ms(pid: int) -> float | None:
    """The time *pid*'s main thread has run on a CPU, ms (``/proc/<pid>/schedstat``'s first field, ns)."""
    try:
        with open(f"/proc/{pid}/schedstat") as stat:
            return int(stat.read().split()[0]) / 1e6
    except (OSError, ValueError, IndexError):
        return None


def run(pairs: int, baseline: str | None, err: TextIO, modes: tuple[str, ...] = MODES) -> dict:
    """Alternate *pairs* starts of each kind per mode; the report dict (see the module docstring)."""
    try:
        available = kinds(baseline)
    except BrokerUnavailable as exc:
        return {"workload": {"name": "start"}, "error": str(exc)}
    results: dict = {}
    cache_dir = tempfile.mkdtemp(prefix="pylog-bench-pycache-")
    try:
        for mode in modes:
            mode_kinds = {name: in_mode(kind, mode, cache_dir) for name, kind in available.items()}
            if mode == "cached":
                for kind in mode_kinds.values():  # compile once into the prefix
                    time_start(kind)
            samples: dict[str, list[float]] = {name: [] for name in mode_kinds}
            cpu: dict[str, list[float]] = {name: [] for name in mode_kinds}
            errors: list[str] = []
            for pair in range(1, pairs + 1):
                for name, kind in mode_kinds.items():
                    try:
                        wall_ms, cpu_used_ms = time_start(kind)
                        samples[name].append(round(wall_ms, 2))
                        if cpu_used_ms is not None:
                            cpu[name].append(round(cpu_used_ms, 2))
                    except BrokerStartError as exc:
                        errors.append(f"{mode} pair {pair} {name}: {exc}")
                shown = ", ".join(f"{name} {values[-1]:.0f} ms" for name, values in samples.items() if values)
                print(f"bench: start {mode} pair {pair}/{pairs}: {shown}", file=err, flush=True)
            results[mode] = _summary(samples, errors, cpu)
    finally:
        shutil.rmtree(cache_dir, ignore_errors=True)
    from broker_sim.bench.runner import machine

    return {
        "workload": {
            "name": "start",
            "measure": "spawn to first accepted TCP connect, ms (bench/brokers.py BrokerProcess.start)",
            "pairs": pairs,
            "order": "alternating: " + ", ".join(available) + ", ...",
            "modes": {"source": "PYTHONDONTWRITEBYTECODE=1 (compiled from source each start unless the checkout "
                                "has __pycache__)",
                      "cached": "bytecode under a temporary PYTHONPYCACHEPREFIX, warmed by one start per kind"},
            "brokers": {name: kind.version for name, kind in available.items()},
            **machine(),
        },
        "results": results,
    }


def _summary(samples: dict[str, list[float]], errors: list[str], cpu: dict[str, list[float]] | None = None) -> dict:
    summary: dict = {name: {"start_ms": round(statistics.median(values), 2), "samples": values}
                     for name, values in samples.items() if values}
    for name, values in (cpu or {}).items():
        if values and name in summary:
            summary[name].update(cpu_ms=round(statistics.median(values), 2), cpu_samples=values)
    for anchor in ("baseline", "floor"):
        if "pylog" in summary and anchor in summary:
            summary[f"ratio_to_{anchor}"] = round(summary["pylog"]["start_ms"] / summary[anchor]["start_ms"], 3)
            if "cpu_ms" in summary["pylog"] and summary[anchor].get("cpu_ms"):
                summary[f"cpu_ratio_to_{anchor}"] = round(summary["pylog"]["cpu_ms"] / summary[anchor]["cpu_ms"], 3)
    if errors:
        summary["errors"] = errors
    return summary


def run_from_args(args: argparse.Namespace, *, out: TextIO, err: TextIO) -> int:
    """``pylog bench --workload start``: --rounds x --starts alternating pairs per mode, --baseline DIR as
    the other checkout; the JSON goes to *out* (and --output)."""
    from broker_sim.bench import runner

    runner.print_report(run(args.rounds * args.starts, args.baseline, err), args.output, out=out)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m broker_sim.bench.start", description=__doc__.split("\n")[0])
    parser.add_argument("--pairs", type=int, default=9, help="alternating samples per kind and mode (default: 9)")
    parser.add_argument("--baseline", metavar="DIR", help="another pylog checkout (e.g. an older commit's worktree)")
    parser.add_argument("--mode", choices=MODES, action="append", help="only this mode (repeatable; default: both)")
    args = parser.parse_args(argv)
    print(json.dumps(run(args.pairs, args.baseline, sys.stderr, tuple(args.mode or MODES)), indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
