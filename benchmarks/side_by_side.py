"""Shared by the benchmarks: run an older revision of spillway side by side with this checkout.

``baseline_checkout(REV)`` makes (once) a detached ``git worktree`` of REV in
``~/.cache/spillway/bench/worktree-<sha>``; ``spillway_env(code)`` / ``spillway_cwd(code)`` run
``python -m spillway`` from it. ``-m`` puts the working directory first on ``sys.path``, so a run of the
baseline starts in the worktree *and* has it first on ``PYTHONPATH`` (same venv, same dependencies, only
the code differs). ``process_cpu(usage)`` is the CPU seconds of one child from ``os.wait4``; ``spread``
formats min / median / max.
"""

from __future__ import annotations

import os
import statistics
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def baseline_checkout(rev: str) -> Path:
    sha = subprocess.run(["git", "rev-parse", rev], cwd=REPO, capture_output=True, text=True, check=True).stdout
    tree = Path.home() / ".cache" / "spillway" / "bench" / f"worktree-{sha.strip()[:12]}"
    if not (tree / "spillway").is_dir():
        subprocess.run(["git", "worktree", "add", "--detach", str(tree), rev], cwd=REPO, check=True)
    return tree


def spillway_cwd(code: Path | None) -> Path:
    return code if code is not None else REPO


def spillway_env(code: Path | None) -> dict[str, str]:
    env = dict(os.environ)
    if code is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(code), *filter(None, [env.get("PYTHONPATH")])])
    return env


def process_cpu(usage: os.struct_rusage | object) -> float:
    return float(usage.ru_utime + usage.ru_stime)  # type: ignore[attr-defined]


def spread(values: list[float], fmt: str = "{:.2f}") -> str:
    """``min / median / max`` of a list of figures."""
    if not values:
        return "-"
    return " / ".join(fmt.format(v) for v in (min(values), statistics.median(values), max(values)))


def ratios(old: list[float], new: list[float]) -> list[float]:
    """Per-pair ``old / new`` (> 1 means this checkout is faster), pairs taken in run order."""
    return [o / n for o, n in zip(old, new, strict=False) if n > 0]
