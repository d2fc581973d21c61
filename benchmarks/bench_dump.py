#!/usr/bin/env python3
"""Time ``spillway dump`` against Flink's own metadata loader on a large synthetic ``_metadata``.

    python benchmarks/bench_dump.py                      # 200 operators x 128 subtasks, best of 3
    python benchmarks/bench_dump.py --operators 50 --parallelism 64 --repeat 5

1. ``benchmarks/synth/SynthMetadata.java`` is compiled against the Flink 2.3.0 jars and writes a
   realistic V6 ``_metadata`` with Flink's own serializer (incremental RocksDB handles with many
   shared files, merged channel-state handles, source operator/coordinator state). The file is
   cached in ``~/.cache/spillway/bench/`` (rebuilt when the Java source or the parameters change).
2. Three commands run side by side, interleaved, ``--repeat`` times each (wall clock, best run
   reported; peak RSS from the child's rusage):
     flink         java LoadMetadata FILE        (fresh JVM, JVM start included)
     dump          spillway dump FILE            (summary view, stdout to /dev/null)
     dump --json   spillway dump --json FILE     (stdout to /dev/null)
   Ratios are relative to the Flink loader.

``spillway`` runs as ``python -m spillway`` from the repository root with the project venv
(``.venv/bin/python``) when it exists, else with the interpreter running this script.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
SYNTH_SOURCES = sorted((HERE / "synth").glob("*.java"))
FLINK_RELEASE = "2.3.0"
FLINK = "flink LoadMetadata (fresh JVM)"

sys.path.insert(0, str(REPO / "tools"))
import flink_jars  # noqa: E402


def cache_root() -> Path:
    return Path(os.environ.get("SPILLWAY_BENCH_CACHE", Path.home() / ".cache" / "spillway" / "bench"))


def sources_digest() -> str:
    h = hashlib.sha256()
    for src in SYNTH_SOURCES:
        h.update(src.name.encode())
        h.update(src.read_bytes())
    return h.hexdigest()


def flink_classpath() -> str:
    lib = flink_jars.fetch(FLINK_RELEASE)
    return os.pathsep.join(str(p) for p in sorted(lib.glob("*.jar")))


def compile_helpers() -> Path:
    out = cache_root() / "synth-classes"
    stamp = out / ".source-sha256"
    digest = sources_digest()
    if stamp.exists() and stamp.read_text().strip() == digest:
        return out
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    subprocess.run(
        ["javac", "-nowarn", "-encoding", "UTF-8", "-cp", flink_classpath(), "-d", str(out), *map(str, SYNTH_SOURCES)],
        check=True,
    )
    stamp.write_text(digest + "\n")
    return out


def java_cp() -> str:
    return os.pathsep.join([str(compile_helpers()), flink_classpath()])


def synthetic_metadata(operators: int, parallelism: int, seed: int) -> Path:
    """Build (or reuse) the synthetic checkpoint; returns the chk-N/_metadata path."""
    digest = sources_digest()[:12]
    base = cache_root() / f"synth-{operators}x{parallelism}-s{seed}-{digest}"
    metadata = base / "chk-4242" / "_metadata"
    if metadata.exists():
        return metadata
    for stale in cache_root().glob(f"synth-{operators}x{parallelism}-s{seed}-*"):
        shutil.rmtree(stale)  # built by an older version of the Java sources
    metadata.parent.mkdir(parents=True, exist_ok=True)
    tmp = metadata.with_suffix(".partial")
    print(f"building synthetic metadata ({operators} operators x {parallelism} subtasks) ...", flush=True)
    subprocess.run(
        ["java", "-cp", java_cp(), "SynthMetadata", str(tmp), str(operators), str(parallelism), str(seed)],
        check=True,
    )
    tmp.rename(metadata)
    return metadata


def spillway_python() -> str:
    venv = REPO / ".venv" / "bin" / "python"
    return str(venv) if venv.exists() else sys.executable


def run_once(cmd: list[str], keep_stdout: bool = False) -> tuple[float, int, int, str, str]:
    """Run cmd, stdout to /dev/null (or to a temp file when keep_stdout), stderr to a temp file.

    Returns (wall seconds, peak RSS KiB of the child, exit code, stderr tail, stdout).
    """
    with (
        open(os.devnull, "wb") as devnull,
        tempfile.TemporaryFile() as out_f,
        tempfile.TemporaryFile() as err_f,
    ):
        t0 = time.perf_counter()
        proc = subprocess.Popen(cmd, cwd=REPO, stdout=out_f if keep_stdout else devnull, stderr=err_f)
        _, status, usage = os.wait4(proc.pid, 0)  # the child's own rusage (ru_maxrss in KiB on Linux)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        out_f.seek(0)
        err_f.seek(0)
        out, err = out_f.read(), err_f.read()
    return wall, usage.ru_maxrss, proc.returncode, err.decode(errors="replace")[-2000:], out.decode(errors="replace")


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--operators", type=int, default=200)
    ap.add_argument("--parallelism", type=int, default=128)
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--file", type=Path, help="benchmark this _metadata instead of the synthetic one")
    ap.add_argument("--results", type=Path, help="also write the results as JSON to this file")
    args = ap.parse_args(argv)

    metadata = args.file.resolve() if args.file else synthetic_metadata(args.operators, args.parallelism, args.seed)
    size = metadata.stat().st_size
    print(f"file: {metadata} ({size / 1e6:.1f} MB)")

    py = spillway_python()
    commands = {
        FLINK: [
            "java",
            "-cp",
            java_cp(),
            "LoadMetadata",
            str(metadata),
            str(metadata.parent),
        ],
        "spillway dump": [py, "-m", "spillway", "dump", str(metadata)],
        "spillway dump --json": [py, "-m", "spillway", "dump", "--json", str(metadata)],
    }
    runs: dict[str, list[tuple[float, int]]] = {name: [] for name in commands}
    failed: dict[str, str] = {}
    for i in range(args.repeat):
        for name, cmd in commands.items():
            if name in failed:
                continue
            is_flink = name == FLINK
            wall, rss, rc, err, out = run_once(cmd, keep_stdout=is_flink)
            if rc != 0:
                failed[name] = f"exit {rc}: {err.strip().splitlines()[-1] if err.strip() else ''}"
                continue
            runs[name].append((wall, rss))
            note = f"  [{out.strip().splitlines()[-1]}]" if is_flink and out.strip() else ""
            print(f"  run {i + 1}: {name:<32} {wall:8.2f} s  {rss / 1024:8.0f} MiB{note}", flush=True)

    flink_best = min((w for w, _ in runs[FLINK]), default=None)
    print()
    print(f"{'command':<32} {'best s':>8} {'median s':>9} {'peak RSS MiB':>13} {'x flink':>8}")
    results = {"file": str(metadata), "bytes": size, "repeat": args.repeat, "commands": {}}
    for name in commands:
        if name in failed:
            print(f"{name:<32} FAILED ({failed[name]})")
            results["commands"][name] = {"failed": failed[name]}
            continue
        walls = [w for w, _ in runs[name]]
        best, med = min(walls), statistics.median(walls)
        peak = max(r for _, r in runs[name]) / 1024
        ratio = best / flink_best if flink_best else float("nan")
        print(f"{name:<32} {best:8.2f} {med:9.2f} {peak:13.0f} {ratio:8.2f}")
        results["commands"][name] = {
            "best_s": best,
            "median_s": med,
            "peak_rss_mib": peak,
            "ratio_vs_flink": ratio,
            "runs_s": walls,
        }
    if args.results:
        args.results.write_text(json.dumps(results, indent=2) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
