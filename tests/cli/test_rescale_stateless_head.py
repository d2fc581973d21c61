"""A stateless chain head that a release leaves out of ``_metadata`` (1.10, 1.12 keep only operators with state)
is not "not in the checkpoint" as a defect: rescale proceeds, and the output is what Flink expects. Through the
installed console script on real Flink checkpoints; ids from Flink's ids.json. (RestoreCheck runs on Flink 1.14+
only, so these outputs are checked by validate against the rescaled plan, not restored.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.console import spillway
from support.fixtures import fixture_named


def _flink(name: str) -> dict[str, dict]:
    return {n["name"]: n for n in json.loads((fixture_named(name).root / "ids.json").read_text())["stream_nodes"]}


@pytest.mark.parametrize("name", ["1.10.3-aligned", "1.12.5-rocksdb-incremental"])
@pytest.mark.parametrize("flavour", ["plan.json", "jobgraph.json"])
def test_a_head_left_out_of_the_checkpoint_does_not_stop_rescale(tmp_path: Path, name: str, flavour: str) -> None:
    fx = fixture_named(name)
    flink = _flink(name)
    cp_ids = {o["operator_id"] for o in json.loads((fx.root / "oracle.json").read_text())["operators"]}
    assert flink["len"]["operator_id"] not in cp_ids  # the head of len -> Sink: sink: no state, left out
    out = tmp_path / "out"
    # tostr's and the source's uids (ids.json): nothing else in these checkpoints tells them apart
    uids = ["--uid", f"tostr={flink['tostr']['uid']}", "--uid", f"Source: seq={flink['Source: seq']['uid']}"]
    run = spillway(
        "rescale", str(fx.checkpoint_dir), "--plan", str(fx.root / flavour), *uids, "-p", "slow=4",
        "--master", "inprocess", "--out", str(out), "--json",
    )  # fmt: skip
    assert run.code == 0, run.output
    assert "head operator is not in the checkpoint" not in run.output
    written = json.loads(run.out)
    assert {b["operator"]: b["operator_id"] for b in written["binding"] if b["exact"]} == {
        n: flink[n]["operator_id"] for n in ("Source: seq", "tostr", "slow")
    }
    check = spillway("validate", str(out), "--plan", str(out / "rescaled-plan.json"), *uids, "--json")
    assert check.code == 0, check.output
    slow = next(o for o in json.loads(spillway("dump", str(out), "--json").out)["operators"]
                if o["operator_id"] == flink["slow"]["operator_id"])  # fmt: skip
    assert slow["parallelism"] == 4
