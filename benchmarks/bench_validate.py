#!/usr/bin/env python3
"""`spillway validate` throughput against `cat > /dev/null` on the same files, side by side in one run.

    python benchmarks/bench_validate.py              # 2 GiB synthetic channel state, best of 3
    python benchmarks/bench_validate.py --gib 4 --parallelism 16

The input (benchmarks/synth_channel_state.py) is cached in ~/.cache/spillway/bench/. Both commands read
the same bytes from the page cache (a warm-up run of each comes first). Peak RSS is measured per run.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def timed(cmd: list[str]) -> tuple[float, int]:
    """Wall seconds and peak RSS (KiB) of one child process."""
    pid_start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - pid_start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{cmd[0]} failed: {proc.stderr.read().decode() if proc.stderr else ''}")
    return elapsed, usage.ru_maxrss


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gib", type=float, default=2.0)
    ap.add_argument("--parallelism", type=int, default=8)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    base = Path.home() / ".cache" / "spillway" / "bench" / f"channels-{args.gib}g-p{args.parallelism}"
    chk = base / "job" / "chk-1"
    if not (chk / "_metadata").exists():
        print(f"synthesizing {args.gib} GiB of channel state in {base} …", flush=True)
        subprocess.run(
            [
                sys.executable,
                str(ROOT / "benchmarks" / "synth_channel_state.py"),
                str(base),
                "--gib",
                str(args.gib),
                "--parallelism",
                str(args.parallelism),
            ],
            check=True,
            stdout=subprocess.DEVNULL,
        )
    files = sorted(str(p) for p in chk.iterdir())
    size = sum(Path(f).stat().st_size for f in files)
    cat = ["cat", *files]
    validate = [sys.executable, "-m", "spillway", "validate", str(chk), "--plan", str(base / "plan.json")]
    timed(cat)
    timed(validate)
    rows = {"cat > /dev/null": [], "spillway validate": []}
    for _ in range(args.repeat):
        rows["cat > /dev/null"].append(timed(cat))
        rows["spillway validate"].append(timed(validate))
    mib = size / (1 << 20)
    print(f"\n{len(files)} files, {mib:.0f} MiB, best of {args.repeat}")
    best = {}
    for name, runs in rows.items():
        secs = min(r[0] for r in runs)
        rss = max(r[1] for r in runs) / 1024
        best[name] = secs
        print(f"  {name:20} {secs:7.2f} s  {mib / secs:8.0f} MiB/s  peak RSS {rss:6.0f} MiB")
    ratio = best["cat > /dev/null"] / best["spillway validate"]
    print(f"  validate runs at {ratio:.0%} of the raw read rate")
    _ = resource  # imported for platforms without wait4 accounting


if __name__ == "__main__":
    main()
