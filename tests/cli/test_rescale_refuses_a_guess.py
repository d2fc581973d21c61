"""No command writes on a guess: in 1.20.3-prod-counted nothing in the checkpoint tells check-totals (uid
"checker", operator state) from the discard sink (uid "out", no state) — both have a uid, the same parallelism,
and no channel state enters either — so both assignments fit the evidence. rescale refuses, names the two plan
operators that could hold the state, writes nothing; with the one uid it asks for it proceeds. (With it, real
Flink restores the output exactly-once: tests/integration/test_rescale_restore_no_uid.py.)"""

from __future__ import annotations

import json
from pathlib import Path

from support.console import spillway
from support.fixtures import fixture_named

FX = fixture_named("1.20.3-prod-counted")
ARGS = ["--plan", str(FX.root / "plan.json"), "-p", "count-per-key=3", "-p", "forward-values=3", "-p", "parse=3",
        "--key", "count-per-key=tuple:0:long", "--master", "inprocess"]  # fmt: skip


def _flink() -> dict[str, dict]:
    return {n["name"]: n for n in json.loads((FX.root / "ids.json").read_text())["stream_nodes"]}


def test_an_undecided_stateful_operator_is_refused_with_what_decides_it(tmp_path: Path) -> None:
    out = tmp_path / "out"
    run = spillway("rescale", str(FX.checkpoint_dir), *ARGS, "--out", str(out))
    assert run.code == 1 and not out.exists()
    flink = _flink()
    assert flink["check-totals"]["operator_id"] in run.err  # the one holding state, by Flink's id
    assert "'check-totals'" in run.err and "'discard: Writer'" in run.err and "--uid" in run.err


def test_the_uid_it_asks_for_decides_it(tmp_path: Path) -> None:
    out = tmp_path / "out"
    uid = _flink()["check-totals"]["uid"]
    run = spillway(
        "rescale", str(FX.checkpoint_dir), *ARGS, "--uid", f"check-totals={uid}", "--out", str(out), "--json"
    )
    assert run.code == 0, run.output
    binding = {b["operator"]: b for b in json.loads(run.out)["binding"]}
    flink = _flink()
    assert all(b["exact"] and b["operator_id"] == flink[name]["operator_id"] for name, b in binding.items())
