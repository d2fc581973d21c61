"""Real restores of the ``finished-symmetric`` fixtures: two interchangeable partly finished branches whose uids a
1.x plan does not show (tests/fixtures/generator/README.md).

``tests/fixtures/finished-symmetric/<release>/<case>/`` holds what the restore harness (``RestoreCheck``) recorded:
the submitted job's ``jobgraph.json``, ``plan.json`` and ``ids.json`` (Flink's own ids of its nodes: the names
repeat) and ``flink.json`` (Flink's outcome and message). The unit
test (tests/unit/test_finished_symmetric.py) checks spillway's verdict against them without a JVM. Re-record with
``python tests/support/finished_symmetric.py RELEASE [CASE ...]``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

RECORDED = Path(__file__).resolve().parents[1] / "fixtures" / "finished-symmetric"
RELEASES = ("1.15.4", "1.20.3")

#: case -> RestoreCheck variant (None: the fixture's own job, unchanged).
CASES: dict[str, str | None] = {
    "same-job": None,
    # finish-on-0 -> pass forward in both branches: the running pass and sink chain behind the partly finished
    # half -> finish-on-0
    "symmetric-chained": "symmetric-chained",
    # the same forward edge with pass.disableChaining(): the same stream-graph plan, a different chain
    "symmetric-unchained": "symmetric-unchained",
    # half -rebalance-> finish-on-0 in both branches: a partly finished vertex fed all-to-all by a partly finished one
    "symmetric-split": "symmetric-split",
}

RECORDED_KEYS = ("flink_version", "variant", "allow_non_restored_state", "outcome", "stage", "error_class", "error")


def recorded_dir(release: str, case: str) -> Path:
    return RECORDED / release / case


def load_recorded(release: str, case: str) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads((recorded_dir(release, case) / "flink.json").read_text())
    return doc


def record(release: str, case: str) -> dict[str, Any]:
    """Restore the case with real Flink and (re)write its recorded plans and outcome."""
    import shutil
    import tempfile

    from support.fixtures import fixture_named
    from support.flink_harness import restore

    fx = fixture_named(f"{release}-finished-symmetric")
    with tempfile.TemporaryDirectory(prefix="spillway-record-") as tmp:
        res = restore(
            release,
            fx.info["scenario"],
            fx.checkpoint_dir,
            variant=CASES[case],
            run_seconds=3,
            workdir=Path(tmp) / "work",
        )
        out = recorded_dir(release, case)
        out.mkdir(parents=True, exist_ok=True)
        shutil.copy(res["jobgraph_plan"], out / "jobgraph.json")
        shutil.copy(res["stream_plan"], out / "plan.json")
        shutil.copy(Path(res["jobgraph_plan"]).parent / "ids.json", out / "ids.json")
    doc = {k: res[k] for k in RECORDED_KEYS}
    (out / "flink.json").write_text(json.dumps(doc, indent=1) + "\n")
    return doc


if __name__ == "__main__":
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    release, *names = sys.argv[1:]
    for name in names or list(CASES):
        print(name, json.dumps(record(release, name)))
