#!/usr/bin/env python3
"""Where `spillway validate`'s time goes, phase by phase: wall and CPU of each pass of the benchmark's command.

    python benchmarks/validate_phases.py --gib 0.5 2 10 --repeat 5 --baseline main

Each run is the command `bench_validate.py` times (``validate CHK --plan P``, text output, the CLI's fast path)
in a fresh process that first loads the fast path's modules, then the ones ``api.open`` and ``validate`` load,
and wraps the passes with timestamps (``time.monotonic``, ``time.process_time``: all threads) before running
the command; the byte work's C calls on the worker threads are summed with ``time.thread_time``. The inputs
are ``bench_validate.py``'s (run it once to synthesize them). Rows are medians over the runs (after one
warm-up), wall / CPU in seconds; ``--baseline REV`` runs REV's checkout (see ``side_by_side.py``) the same
way, interleaved. A row a revision does not have is left empty.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from bench_validate import child_env  # noqa: E402
from side_by_side import baseline_checkout, process_cpu, spillway_cwd  # noqa: E402

CHILD = r"""
import sys, time
T0 = float(sys.argv[1])
marks = [("interpreter start", time.monotonic(), time.process_time())]
def mark(name):
    marks.append((name, time.monotonic(), time.process_time()))
import importlib
for name in ("spillway.cli.app", "spillway.cli.commands.validate"):
    try:
        importlib.import_module(name)
    except ImportError:
        pass
mark("imports: the command line")
import spillway.api.session as session, spillway.inspect.validate as V, spillway.inspect.validate_engine as E
import spillway.inspect.topology, spillway.formats.native as native, spillway.storage.load as load
mark("imports: api.open, validate")
native.library()
acc = {}
def wrap(owner, name, label):
    f = getattr(owner, name, None)
    if f is None:
        return
    def g(*a, **k):
        mark("(before " + label + ")")
        try:
            return f(*a, **k)
        finally:
            mark(label)
    setattr(owner, name, g)
def cwrap(owner, name, label):
    f = getattr(owner, name, None)
    if f is None:
        return
    def g(*a, **k):
        w, c = time.monotonic(), time.thread_time()
        try:
            return f(*a, **k)
        finally:
            x = acc.setdefault(label, [0.0, 0.0])
            x[0] += time.monotonic() - w
            x[1] += time.thread_time() - c
    setattr(owner, name, g)
wrap(session, "read_plan", "plan file read")
wrap(load, "decode_metadata", "_metadata decode")
wrap(V._Validation, "check_files", "file survey")
wrap(V._Validation, "check_blobs", "chunk walk (+ framing, if fused) + chunk rules")
wrap(V._Validation, "check_plan", "plan rules, logical channels")
wrap(V._Validation, "plan_jobs", "framing jobs")
wrap(E.Engine, "frame_by_file", "framing file by file (or its results)")
wrap(V, "sort_findings", "results -> findings")
wrap(session.Checkpoint, "validate", "validate returns")
cwrap(native, "walk_file", "C: chunk walk")
cwrap(native.FileFraming, "frame_file", "C: framing")
if hasattr(native, "WalkFraming"):
    cwrap(native.WalkFraming, "walk_frame", "C: walk + framing")
import atexit, json, os
def report():
    mark("end: report")
    os.write(2, ("PHASES " + json.dumps({"marks": marks, "acc": acc}) + "\n").encode())
atexit.register(report)
sys.argv = ["spillway", "validate", *sys.argv[2:]]
mark("(set-up)")
from spillway.cli.app import main
main()
"""


def run_once(code: Path | None, chk: Path, plan: Path) -> tuple[dict[str, tuple[float, float]], float, float]:
    """Per-phase (wall, CPU) deltas of one run, its whole wall and CPU time."""
    python = str(ROOT / ".venv" / "bin" / "python") if (ROOT / ".venv" / "bin" / "python").exists() else sys.executable
    t0 = time.monotonic()
    proc = subprocess.Popen(
        [python, "-c", CHILD, repr(t0), str(chk), "--plan", str(plan)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        cwd=spillway_cwd(code),
        env=child_env(code),
    )
    _, status, usage = os.wait4(proc.pid, 0)
    t1 = time.monotonic()
    err = proc.stderr.read().decode() if proc.stderr else ""
    line = next((x for x in err.splitlines() if x.startswith("PHASES ")), None)
    if os.waitstatus_to_exitcode(status) not in (0, 1) or line is None:
        raise SystemExit(f"validate failed: {err}")
    doc = json.loads(line[len("PHASES ") :])
    rows: dict[str, tuple[float, float]] = {}
    prev_wall, prev_cpu = t0, 0.0
    for name, wall, cpu in doc["marks"]:
        old = rows.get(name, (0.0, 0.0))
        rows[name] = (old[0] + wall - prev_wall, old[1] + cpu - prev_cpu)
        prev_wall, prev_cpu = wall, cpu
    total_cpu = process_cpu(usage)
    rows["end: teardown"] = (t1 - prev_wall, total_cpu - prev_cpu)
    for name, (wall, cpu) in doc["acc"].items():
        rows[f"  [{name}, threads]"] = (wall, cpu)
    return rows, t1 - t0, total_cpu


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gib", type=float, nargs="+", default=[2.0])
    ap.add_argument("--parallelism", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--baseline", metavar="REV")
    args = ap.parse_args()
    sides: dict[str, Path | None] = {}
    if args.baseline:
        sides[args.baseline] = baseline_checkout(args.baseline)
    sides["now"] = None
    for gib in args.gib:
        base = Path.home() / ".cache" / "spillway" / "bench" / f"channels-{gib}g-p{args.parallelism}"
        chk, plan = base / "job" / "chk-1", base / "plan.json"
        if not (chk / "_metadata").exists():
            raise SystemExit(f"{chk}: run bench_validate.py --gib {gib} --parallelism {args.parallelism} first")
        runs: dict[str, list[tuple[dict[str, tuple[float, float]], float, float]]] = {side: [] for side in sides}
        for i in range(args.repeat + 1):
            for side, code in sides.items():
                result = run_once(code, chk, plan)
                if i:  # the first round warms the page cache and the bytecode
                    runs[side].append(result)
        load = os.getloadavg()
        print(f"\n{gib} GiB, {args.repeat} runs per side, load {load[0]:.2f}; median wall / CPU s")
        names: list[str] = []
        for side_runs in runs.values():
            for rows, _, _ in side_runs:
                names += [n for n in rows if n not in names]
        names.sort(key=lambda n: n.startswith("  ["))
        print(f"  {'phase':52}" + "".join(f"{side:>20}" for side in sides))
        for name in names:
            cells = []
            for side in sides:
                found = [rows[name] for rows, _, _ in runs[side] if name in rows]
                cells.append(
                    f"{statistics.median(w for w, _ in found):.3f} / {statistics.median(c for _, c in found):.3f}"
                    if found
                    else ""
                )
            print(f"  {name:52}" + "".join(f"{c:>20}" for c in cells))
        totals = [
            f"{statistics.median(w for _, w, _ in runs[s]):.3f} / {statistics.median(c for _, _, c in runs[s]):.3f}"
            for s in sides
        ]
        print(f"  {'whole process':52}" + "".join(f"{t:>20}" for t in totals))


if __name__ == "__main__":
    main()
