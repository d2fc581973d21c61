#!/usr/bin/env python3
"""How fast ``spillway`` starts: ``-h``, ``--version``, ``dump`` and ``validate`` of a small checkpoint (text and
``--json``) against a bare Python that imports rich (``python -c "import rich"``), side by side in one run.
``floor`` is no spillway command: a Python that imports only what a text dump cannot do without (rich's console,
table and tree, construct, dataclasses).

    python benchmarks/bench_startup.py                          # 11 rounds
    python benchmarks/bench_startup.py --baseline main --repeat 21   # that revision too, interleaved
    python benchmarks/bench_startup.py --checkpoint /path/to/chk-42 # another small checkpoint

Every round runs, for each command, REV's spillway (with ``--baseline``), this checkout's and the
yardstick, one right after the other; reported are wall and CPU time (the child's ``wait4`` rusage,
user + system) as min / median / max, and per pair of runs the ratio to the yardstick (the goal: at most
3) and REV / now (> 1: this checkout starts faster). Pairs keep the ratios meaningful on a machine
whose speed drifts. ``--imports`` also prints, per command, how many modules this checkout imports and
which of the heavy ones (``python -X importtime``).

The children import from compiled bytecode, as an installed package does: ``PYTHONDONTWRITEBYTECODE``
is dropped for them and the ``.pyc`` files go to ``~/.cache/spillway/bench/pycache``
(``PYTHONPYCACHEPREFIX``), never into a checkout. The small checkpoint is the ``2.3.0-sql`` fixture's
(a 15 KiB ``_metadata`` written by Flink 2.3.0, one 0.6 MiB channel-state file).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
from side_by_side import baseline_checkout, process_cpu, spillway_cwd, spillway_env, spread  # noqa: E402

PYCACHE = Path.home() / ".cache" / "spillway" / "bench" / "pycache"
HEAVY = ("numpy", "pyarrow", "pyspark", "pydantic", "construct", "rich", "typer", "click", "pandas", "fsspec")


def child_env(code: Path | None) -> dict[str, str]:
    env = spillway_env(code)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(PYCACHE)
    return env


def timed(cmd: list[str], code: Path | None) -> tuple[float, float]:
    """Wall and CPU seconds of one child (its output thrown away; a failure stops the benchmark)."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=spillway_cwd(code), env=child_env(code)
    )
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    if os.waitstatus_to_exitcode(status) != 0:
        raise SystemExit(f"{' '.join(cmd)} exited with {os.waitstatus_to_exitcode(status)}")
    return wall, process_cpu(usage)


def imported(cmd: list[str], code: Path | None) -> list[str]:
    """The modules ``cmd`` (a ``python -m spillway`` run) imports, in order."""
    run = subprocess.run(
        [cmd[0], "-X", "importtime", *cmd[1:]], capture_output=True, text=True, cwd=spillway_cwd(code),
        env=child_env(code), check=False,
    )  # fmt: skip
    return [line.rsplit("|", 1)[1].strip() for line in run.stderr.splitlines() if line.startswith("import time:")][1:]


def ratios(num: list[float], den: list[float]) -> list[float]:
    return [a / b for a, b in zip(num, den, strict=True) if b > 0]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=11)
    ap.add_argument("--baseline", metavar="REV", help="also run REV's spillway, interleaved")
    ap.add_argument("--checkpoint", type=Path, help="the small checkpoint for dump and validate")
    ap.add_argument("--imports", action="store_true", help="list the heavy modules each command imports")
    args = ap.parse_args()
    chk = args.checkpoint or sorted(ROOT.glob("tests/fixtures/2.3.0-sql/checkpoints/*/chk-*"))[-1]
    py = str(ROOT / ".venv" / "bin" / "python") if (ROOT / ".venv" / "bin" / "python").exists() else sys.executable
    spillway = [py, "-m", "spillway"]
    commands = {
        "-h": [*spillway, "-h"],
        "--version": [*spillway, "--version"],
        "dump": [*spillway, "dump", str(chk)],
        "validate": [*spillway, "validate", str(chk)],
        "dump --json": [*spillway, "dump", str(chk), "--json"],
        "validate --json": [*spillway, "validate", str(chk), "--json"],
        # not spillway: the imports a text dump cannot do without (rich's console, table and tree to render,
        # construct for the layouts, dataclasses for the model), as a floor to read the others against
        "floor": [py, "-c", "import rich.console, rich.table, rich.tree, rich.markup, construct, dataclasses"],
    }
    yardstick = [py, "-c", "import rich"]
    base_code = baseline_checkout(args.baseline) if args.baseline else None
    sides: list[tuple[str, Path | None]] = [*([(f"@{args.baseline}", base_code)] if base_code else []), ("now", None)]

    if args.imports:
        for name, cmd in commands.items():
            mods = imported(cmd, None)
            heavy = sorted({m.split(".")[0] for m in mods} & set(HEAVY))
            print(f"  {name:10} {len(mods):4d} modules; heavy: {', '.join(heavy) or '-'}")

    for cmd in [yardstick, *commands.values()]:  # warm-up: page cache, bytecode
        for _, code in sides:
            timed(cmd, code)
    runs: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for _ in range(args.repeat):
        for name, cmd in commands.items():
            for side, code in sides:
                runs.setdefault((name, side), []).append(timed(cmd, code))
            runs.setdefault((name, "yardstick"), []).append(timed(yardstick, None))

    print(f"\n{args.repeat} rounds, min / median / max; yardstick: python -c 'import rich'; small checkpoint: {chk}")
    for name in commands:
        stick = runs[(name, "yardstick")]
        print(f"  {name}")
        walls, cpus = [w for w, _ in stick], [c for _, c in stick]
        print(f"    yardstick      wall {spread(walls, '{:.3f}')} s  CPU {spread(cpus, '{:.3f}')} s")
        for side, _ in sides:
            mine = runs[(name, side)]
            walls, cpus = [w for w, _ in mine], [c for _, c in mine]
            print(
                f"    {side:14} wall {spread(walls, '{:.3f}')} s  CPU {spread(cpus, '{:.3f}')} s"
                f"  / yardstick: wall {spread(ratios(walls, [w for w, _ in stick]))}×"
                f"  CPU {spread(ratios(cpus, [c for _, c in stick]))}×"
            )
        if base_code is not None:
            old, new = runs[(name, f"@{args.baseline}")], runs[(name, "now")]
            print(
                f"    {args.baseline} / now    wall {spread(ratios([w for w, _ in old], [w for w, _ in new]))}×"
                f"  CPU {spread(ratios([c for _, c in old], [c for _, c in new]))}×"
            )


if __name__ == "__main__":
    main()
