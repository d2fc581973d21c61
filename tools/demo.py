#!/usr/bin/env python3
"""The demo: run spillway on the bundled real-Flink fixtures, the way a user would from a shell."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "tests" / "fixtures"
SPILLWAY = [sys.executable, "-m", "spillway"]

# One fixture per metadata format version, most interesting first.
PREFERRED = [
    "2.3.0-unaligned",
    "2.0.0-unaligned",
    "1.20.3-finished",
    "1.15.4-finished",
    "1.12.5-unaligned",
    "1.10.3-aligned",
]


def run(*args: str) -> int:
    print(f"\n$ spillway {' '.join(shlex.quote(a) for a in args)}", flush=True)
    return subprocess.run([*SPILLWAY, *args], cwd=ROOT).returncode


def main() -> int:
    names = [p.name for p in sorted(FIXTURES.glob("*/fixture.json"))]
    available = {p.parent.name: json.loads(p.read_text()) for p in FIXTURES.glob("*/fixture.json")}
    chosen = [n for n in PREFERRED if n in available] or sorted(available)[:3]
    if not chosen:
        print("no fixtures found under tests/fixtures", file=sys.stderr)
        return 1
    print(f"spillway demo on {len(chosen)} of {len(names)} bundled real-Flink checkpoints")
    failures = 0
    for name in chosen:
        info = available[name]
        chk = FIXTURES / name / info["checkpoint"]
        print(f"\n=== {name}: Flink {info['release']} — {info.get('description', '')}")
        failures += run("dump", str(chk.relative_to(ROOT))) != 0
        plan = FIXTURES / name / "jobgraph.json"
        failures += run("validate", str(chk.relative_to(ROOT)), "--plan", str(plan.relative_to(ROOT))) != 0
    first = FIXTURES / chosen[0] / available[chosen[0]]["checkpoint"]
    plan = FIXTURES / chosen[0] / "jobgraph.json"
    failures += (
        run("analyze", str(first.relative_to(ROOT)), "--plan", str(plan.relative_to(ROOT)), "--decode", "2") != 0
    )
    failures += run("dump", str(first.relative_to(ROOT)), "--tree") != 0
    failures += rescale_demo()
    return 1 if failures else 0


def rescale_demo() -> int:
    """The main job: rescale the counted fixture's keyed vertex with local Spark, then check the result."""
    info_file = FIXTURES / "2.3.0-counted" / "fixture.json"
    if not info_file.is_file():
        return 0
    chk = (FIXTURES / "2.3.0-counted" / json.loads(info_file.read_text())["checkpoint"]).relative_to(ROOT)
    plan = (FIXTURES / "2.3.0-counted" / "jobgraph.json").relative_to(ROOT)
    with tempfile.TemporaryDirectory(prefix="spillway-demo-") as tmp:
        out = Path(tmp) / "chk-rescaled"
        print("\n=== rescale with local Spark: parse 2 -> 3, count 2 -> 3 (keyBy on Tuple2 field 0, a Long)")
        failures = (
            run(
                "rescale",
                str(chk),
                "--plan",
                str(plan),
                "-p",
                "parse=3",
                "-p",
                "count=3",
                "--key",
                "count=tuple:0:long",
                "--out",
                str(out),
                "--master",
                "local[*]",
            )
            != 0
        )
        if not failures:
            # The rescale wrote the rescaled job's plan beside _metadata: validate frames every logical channel.
            failures += run("validate", str(out), "--plan", str(out / "rescaled-plan.json")) != 0
            failures += run("dump", str(out)) != 0
        return int(failures)


if __name__ == "__main__":
    raise SystemExit(main())
