#!/usr/bin/env python3
"""Time ``spillway dump`` against Flink's own metadata loader on a large synthetic ``_metadata``.

    python benchmarks/bench_dump.py                      # 200 operators x 128 subtasks, best of 3
    python benchmarks/bench_dump.py --operators 50 --parallelism 64 --repeat 5
    python benchmarks/bench_dump.py --handle-heavy          # 200 x 32, a channel handle per channel

1. ``benchmarks/synth/SynthMetadata.java`` is compiled against the Flink 2.3.0 jars and writes a
   realistic V6 ``_metadata`` with Flink's own serializer (incremental RocksDB handles with many
   shared files, merged channel-state handles, source operator/coordinator state). The file is
   cached in ``~/.cache/spillway/bench/`` (rebuilt when the Java source or the parameters change).
2. Three commands run side by side, interleaved, ``--repeat`` times each (wall clock and CPU time
   as min / median / max; peak RSS from the child's rusage):
     flink         java LoadMetadata FILE        (fresh JVM, JVM start included)
     dump          spillway dump FILE            (summary view, stdout to /dev/null)
     dump --json   spillway dump --json FILE     (stdout to /dev/null)
   Ratios are relative to the Flink loader.
   ``--handle-heavy``: the shape "handle-heavy" of ``SynthMetadata`` (200 operators x 32 subtasks,
   channel state on every subtask, one handle per channel: ~205k input and ~205k output channel
   handles, ~99 MB), where per-handle costs dominate.
3. ``--baseline REV``: REV's spillway (a cached ``git worktree``, see ``side_by_side.py``) runs each
   spillway command right before this checkout's, in every round; the report adds per-pair ratios
   REV / now (min / median / max; > 1 = this checkout is faster) of wall and CPU time. ``--no-flink``
   skips the JVM (useful for quick side-by-side runs).

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
sys.path.insert(0, str(HERE))
import flink_jars  # noqa: E402
from side_by_side import baseline_checkout, process_cpu, ratios, spillway_cwd, spillway_env, spread  # noqa: E402


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


def synthetic_metadata(operators: int, parallelism: int, seed: int, shape: str = "mixed") -> Path:
    """Build (or reuse) the synthetic checkpoint; returns the chk-N/_metadata path."""
    digest = sources_digest()[:12]
    tag = f"synth-{operators}x{parallelism}-s{seed}" + ("" if shape == "mixed" else f"-{shape}")
    base = cache_root() / f"{tag}-{digest}"
    metadata = base / "chk-4242" / "_metadata"
    if metadata.exists():
        return metadata
    for stale in cache_root().glob(f"{tag}-*"):
        if "-" in stale.name[len(tag) + 1 :]:
            continue  # another shape's cache ("<tag>-<shape>-<digest>")
        shutil.rmtree(stale)  # built by an older version of the Java sources
    metadata.parent.mkdir(parents=True, exist_ok=True)
    tmp = metadata.with_suffix(".partial")
    print(f"building synthetic metadata ({operators} operators x {parallelism} subtasks, {shape}) ...", flush=True)
    subprocess.run(
        ["java", "-cp", java_cp(), "SynthMetadata", str(tmp), str(operators), str(parallelism), str(seed), shape],
        check=True,
    )
    tmp.rename(metadata)
    return metadata


def spillway_python() -> str:
    venv = REPO / ".venv" / "bin" / "python"
    return str(venv) if venv.exists() else sys.executable


def run_once(
    cmd: list[str], keep_stdout: bool = False, code: Path | None = None
) -> tuple[float, float, int, int, str, str]:
    """Run cmd, stdout to /dev/null (or to a temp file when keep_stdout), stderr to a temp file.

    ``code``: run spillway from that checkout instead of this one (``side_by_side``).
    Returns (wall seconds, CPU seconds, peak RSS KiB of the child, exit code, stderr tail, stdout).
    """
    with (
        open(os.devnull, "wb") as devnull,
        tempfile.TemporaryFile() as out_f,
        tempfile.TemporaryFile() as err_f,
    ):
        t0 = time.perf_counter()
        proc = subprocess.Popen(
            cmd,
            cwd=spillway_cwd(code),
            env=spillway_env(code),
            stdout=out_f if keep_stdout else devnull,
            stderr=err_f,
        )
        _, status, usage = os.wait4(proc.pid, 0)  # the child's own rusage (ru_maxrss in KiB on Linux)
        wall = time.perf_counter() - t0
        proc.returncode = os.waitstatus_to_exitcode(status)
        out_f.seek(0)
        err_f.seek(0)
        out, err = out_f.read(), err_f.read()
    return (
        wall,
        process_cpu(usage),
        usage.ru_maxrss,
        proc.returncode,
        err.decode(errors="replace")[-2000:],
        out.decode(errors="replace"),
    )


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--operators", type=int, default=200)
    ap.add_argument("--parallelism", type=int, help="default 128 (32 with --handle-heavy)")
    ap.add_argument("--seed", type=int, default=42)
    ap.add_argument(
        "--handle-heavy",
        action="store_true",
        help="channel state on every subtask, one handle per channel (default 200 x 32: ~99 MB)",
    )
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--file", type=Path, help="benchmark this _metadata instead of the synthetic one")
    ap.add_argument("--results", type=Path, help="also write the results as JSON to this file")
    ap.add_argument("--baseline", metavar="REV", help="also run REV's spillway side by side, interleaved")
    ap.add_argument("--no-flink", action="store_true", help="skip Flink's loader")
    args = ap.parse_args(argv)

    shape = "handle-heavy" if args.handle_heavy else "mixed"
    parallelism = args.parallelism or (32 if args.handle_heavy else 128)
    metadata = args.file.resolve() if args.file else synthetic_metadata(args.operators, parallelism, args.seed, shape)
    size = metadata.stat().st_size
    print(f"file: {metadata} ({size / 1e6:.1f} MB)")
    base_code = baseline_checkout(args.baseline) if args.baseline else None

    py = spillway_python()
    # name -> (command, checkout it runs from); a baseline run comes right before the run it is paired with
    commands: dict[str, tuple[list[str], Path | None]] = {}
    if not args.no_flink:
        commands[FLINK] = (["java", "-cp", java_cp(), "LoadMetadata", str(metadata), str(metadata.parent)], None)
    for label, extra in (("spillway dump", []), ("spillway dump --json", ["--json"])):
        cmd = [py, "-m", "spillway", "dump", *extra, str(metadata)]
        if base_code is not None:
            commands[f"{label} @{args.baseline}"] = (cmd, base_code)
        commands[label] = (cmd, None)
    runs: dict[str, list[tuple[float, float, int]]] = {name: [] for name in commands}
    failed: dict[str, str] = {}
    for i in range(args.repeat):
        for name, (cmd, code) in commands.items():
            if name in failed:
                continue
            is_flink = name == FLINK
            wall, cpu, rss, rc, err, out = run_once(cmd, keep_stdout=is_flink, code=code)
            if rc != 0:
                failed[name] = f"exit {rc}: {err.strip().splitlines()[-1] if err.strip() else ''}"
                continue
            runs[name].append((wall, cpu, rss))
            note = f"  [{out.strip().splitlines()[-1]}]" if is_flink and out.strip() else ""
            line = f"  run {i + 1}: {name:<40} {wall:8.2f} s wall {cpu:8.2f} s CPU {rss / 1024:8.0f} MiB{note}"
            print(line, flush=True)

    flink_best = min((r[0] for r in runs.get(FLINK, [])), default=None)
    flink_cpu = min((r[1] for r in runs.get(FLINK, [])), default=None)
    print()
    print(f"{'command':<40} {'wall s min/med/max':>20} {'CPU s min/med/max':>20} {'peak RSS MiB':>13} {'x flink':>8}")
    results: dict = {"file": str(metadata), "bytes": size, "repeat": args.repeat, "commands": {}}
    for name in commands:
        if name in failed:
            print(f"{name:<40} FAILED ({failed[name]})")
            results["commands"][name] = {"failed": failed[name]}
            continue
        walls = [r[0] for r in runs[name]]
        cpus = [r[1] for r in runs[name]]
        best, med = min(walls), statistics.median(walls)
        peak = max(r[2] for r in runs[name]) / 1024
        ratio = best / flink_best if flink_best else float("nan")
        print(f"{name:<40} {spread(walls):>20} {spread(cpus):>20} {peak:13.0f} {ratio:8.2f}")
        results["commands"][name] = {
            "best_s": best,
            "median_s": med,
            "peak_rss_mib": peak,
            "ratio_vs_flink": ratio,
            "ratio_cpu_vs_flink": min(cpus) / flink_cpu if flink_cpu else float("nan"),
            "runs_s": walls,
            "cpu_s": cpus,
        }
    if base_code is not None:
        print(f"\nside by side, per pair {args.baseline} / now (> 1: this checkout is faster), min / median / max")
        for label in ("spillway dump", "spillway dump --json"):
            old, new = runs.get(f"{label} @{args.baseline}", []), runs.get(label, [])
            wall_r = ratios([r[0] for r in old], [r[0] for r in new])
            cpu_r = ratios([r[1] for r in old], [r[1] for r in new])
            rss_r = ratios([float(r[2]) for r in old], [float(r[2]) for r in new])
            print(f"  {label:<28} wall {spread(wall_r)}   CPU {spread(cpu_r)}   peak RSS {spread(rss_r)}")
            results["commands"].setdefault(label, {})["vs_baseline"] = {
                "rev": args.baseline,
                "wall": wall_r,
                "cpu": cpu_r,
                "rss": rss_r,
            }
    if args.results:
        args.results.write_text(json.dumps(results, indent=2) + "\n")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
