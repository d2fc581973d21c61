#!/usr/bin/env python3
"""`spillway validate` throughput against `cat > /dev/null` on the same files, side by side in one run.

    python benchmarks/bench_validate.py              # 2 GiB synthetic channel state, best of 3
    python benchmarks/bench_validate.py --gib 4 --parallelism 16
    python benchmarks/bench_validate.py --gib 0.5 2 5 10 --parallelism 100 --discard   # scale: 10 000 channels

The input (benchmarks/synth_channel_state.py) is cached in ~/.cache/spillway/bench/. Both commands read
the same bytes from the page cache (a warm-up run of each comes first). Peak RSS is measured per run.

    python benchmarks/bench_validate.py --baseline f709c99 --repeat 5   # that revision side by side

``--baseline REV`` runs REV's spillway (a cached ``git worktree``, see ``side_by_side.py``) right before
this checkout's in every round; reported are wall and CPU time min / median / max per command and the
per-pair ratios REV / now (> 1: this checkout is faster). The ``--json`` findings of both must be
identical (checked once, before the timed rounds).

Several ``--gib`` sizes run one after the other and end with a table of seconds per GiB (linear time shows
as a flat column) and peak RSS per size. ``--discard`` deletes each input once it has been measured (10 GiB
of channel state is a lot of disk to leave in a cache).

The children import spillway from compiled bytecode, as an installed package does (pip compiles on
install): ``PYTHONDONTWRITEBYTECODE`` is dropped for them and the ``.pyc`` files go to
``~/.cache/spillway/bench/pycache`` (``PYTHONPYCACHEPREFIX``), never into a checkout.
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from side_by_side import baseline_checkout, process_cpu, ratios, spillway_cwd, spillway_env, spread  # noqa: E402

PYCACHE = Path.home() / ".cache" / "spillway" / "bench" / "pycache"


def child_env(code: Path | None) -> dict[str, str]:
    """The environment of a spillway run: REV's checkout first (if any), bytecode compiled once and cached."""
    env = spillway_env(code)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(PYCACHE)
    return env


def timed(cmd: list[str], code: Path | None = None, cwd: Path | None = None) -> tuple[float, float, int]:
    """Wall seconds, CPU seconds and peak RSS (KiB) of one child process."""
    pid_start = time.perf_counter()
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        cwd=cwd or spillway_cwd(code),
        env=child_env(code),
    )
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - pid_start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{cmd[0]} failed: {proc.stderr.read().decode() if proc.stderr else ''}")
    return elapsed, process_cpu(usage), usage.ru_maxrss


def findings_json(cmd: list[str], code: Path | None) -> bytes:
    out = subprocess.run(
        [*cmd, "--json"], capture_output=True, cwd=spillway_cwd(code), env=child_env(code), check=False
    )
    return out.stdout


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gib", type=float, nargs="+", default=[2.0], help="one or more sizes, measured in turn")
    ap.add_argument(
        "--parallelism", type=int, default=8, help="of both operators: parallelism² logical channels, 2 × it files"
    )
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--baseline", metavar="REV", help="also run REV's spillway side by side, interleaved")
    ap.add_argument("--discard", action="store_true", help="delete each synthesized input after measuring it")
    args = ap.parse_args()
    base_code = baseline_checkout(args.baseline) if args.baseline else None
    summary = [measure(gib, args, base_code) for gib in args.gib]
    if len(summary) > 1:
        print(f"\n{args.parallelism**2} logical channels; per size (min wall, median CPU, max peak RSS):")
        print("      GiB     MiB   cat s  validate s  CPU s  CPU s/GiB  wall s/GiB  RSS MiB  of cat's rate")
        for gib, mib, cat_wall, wall, cpu, rss in summary:
            g = mib / 1024
            print(
                f"  {gib:7.2f} {mib:7.0f} {cat_wall:7.2f} {wall:11.2f} {cpu:6.2f} {cpu / g:10.3f} {wall / g:11.3f}"
                f" {rss:8.0f} {cat_wall / wall:14.0%}"
            )


def measure(
    gib: float, args: argparse.Namespace, base_code: Path | None
) -> tuple[float, float, float, float, float, float]:
    """One size: (GiB asked, MiB of files, cat's best wall, validate's best wall, median CPU, max peak RSS)."""
    base = Path.home() / ".cache" / "spillway" / "bench" / f"channels-{gib}g-p{args.parallelism}"
    chk = base / "job" / "chk-1"
    if not (chk / "_metadata").exists():
        print(f"synthesizing {gib} GiB of channel state in {base} …", flush=True)
        subprocess.run(
            [
                sys.executable,
                str(ROOT / "benchmarks" / "synth_channel_state.py"),
                str(base),
                "--gib",
                str(gib),
                "--parallelism",
                str(args.parallelism),
            ],
            check=True,
            stdout=subprocess.DEVNULL,
        )
    files = sorted(str(p) for p in chk.iterdir())
    size = sum(Path(f).stat().st_size for f in files)
    py = str(ROOT / ".venv" / "bin" / "python") if (ROOT / ".venv" / "bin" / "python").exists() else sys.executable
    cat = ["cat", *files]
    validate = [py, "-m", "spillway", "validate", str(chk), "--plan", str(base / "plan.json")]
    # name -> (command, checkout); the baseline runs right before this checkout in every round
    commands: dict[str, tuple[list[str], Path | None]] = {"cat > /dev/null": (cat, None)}
    if base_code is not None:
        commands[f"spillway validate @{args.baseline}"] = (validate, base_code)
        if findings_json(validate, base_code) != findings_json(validate, None):
            raise SystemExit(f"validate --json differs between {args.baseline} and this checkout")
        print(f"validate --json: identical to {args.baseline}")
    commands["spillway validate"] = (validate, None)
    for cmd, code in commands.values():  # warm-up: page cache, native framer build, bytecode cache
        timed(cmd, code)
    rows: dict[str, list[tuple[float, float, int]]] = {name: [] for name in commands}
    for i in range(args.repeat):
        for name, (cmd, code) in commands.items():
            rows[name].append(timed(cmd, code))
            w, c, r = rows[name][-1]
            print(f"  run {i + 1}: {name:<34} {w:7.2f} s wall {c:7.2f} s CPU {r / 1024:6.0f} MiB", flush=True)
    mib = size / (1 << 20)
    print(
        f"\n{gib} GiB: {len(files)} files, {mib:.0f} MiB, {args.parallelism**2} logical channels, "
        f"{args.repeat} rounds; min / median / max"
    )
    best = {}
    for name, runs in rows.items():
        walls, cpus = [r[0] for r in runs], [r[1] for r in runs]
        rss = max(r[2] for r in runs) / 1024
        best[name] = min(walls)
        rates = [mib / w for w in walls]
        print(
            f"  {name:34} wall {spread(walls)} s  CPU {spread(cpus)} s  {spread(rates, '{:.0f}')} MiB/s"
            f"  peak RSS {rss:6.0f} MiB"
        )
    ratio = best["cat > /dev/null"] / best["spillway validate"]
    print(f"  validate runs at {ratio:.0%} of the raw read rate (best runs)")
    if base_code is not None:
        old, new = rows[f"spillway validate @{args.baseline}"], rows["spillway validate"]
        print(f"  per pair {args.baseline} / now (> 1: this checkout is faster):")
        print(f"    wall {spread(ratios([r[0] for r in old], [r[0] for r in new]))}")
        print(f"    CPU  {spread(ratios([r[1] for r in old], [r[1] for r in new]))}")
        print(f"    RSS  {spread(ratios([float(r[2]) for r in old], [float(r[2]) for r in new]))}")
    if args.discard:
        shutil.rmtree(base)
    _ = resource  # imported for platforms without wait4 accounting
    now = rows["spillway validate"]
    return (
        gib,
        mib,
        best["cat > /dev/null"],
        best["spillway validate"],
        statistics.median(r[1] for r in now),
        max(r[2] for r in now) / 1024,
    )


if __name__ == "__main__":
    main()
