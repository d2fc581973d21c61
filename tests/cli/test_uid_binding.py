"""Stream-graph plans on Flink 1.x, where the checkpoint stores ids only: binding by Flink's own ids, the
uids a plan cannot show given with --uid / --uid-map, and refusals that say what to give."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner
from support.fixtures import fixture_named

from spillway.cli.app import app

FX = fixture_named("1.20.3-unaligned")  # source uid "src", name "Source: seq"; the others' uid == name
CHK = str(FX.root / "checkpoints")
PLAN = str(FX.root / "plan.json")
JOB_PLAN = str(FX.root / "jobgraph.json")


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.output


def test_rescale_with_a_stream_graph_plan_needs_no_uid(tmp_path: Path) -> None:
    """The source's uid ("src") is not its name, so no hash finds it; the one checkpoint id left holds a source
    reader's state and the one plan operator left is the source: deduced, and the output is byte for byte the
    one written with the uid typed."""
    outputs = []
    for name, extra in (("deduced", []), ("typed", ["--uid", "Source: seq=src"])):
        code, out = run(
            "rescale",
            CHK,
            "--plan",
            PLAN,
            *extra,
            "-p",
            "slow=3",
            "--key-fn",
            "slow=support.keyfns:key_of",
            "--out",
            str(tmp_path / name),
            "--master",
            "inprocess",
        )
        assert code == 0, out
        outputs.append(tmp_path / name)
    files = [sorted(p.relative_to(o) for p in o.rglob("*") if p.is_file()) for o in outputs]
    assert files[0] == files[1]
    for rel in files[0]:
        if rel.name != "rescaled-plan.json":
            assert (outputs[0] / rel).read_bytes() == (outputs[1] / rel).read_bytes(), rel


def test_rescale_with_a_stream_graph_plan_and_the_uid(tmp_path: Path) -> None:
    code, out = run(
        "rescale",
        CHK,
        "--plan",
        PLAN,
        "--uid",
        "Source: seq=src",
        "-p",
        "slow=3",
        "--key-fn",
        "slow=support.keyfns:key_of",  # KeyOf: the String's prefix; --key string is refused (wrong key)
        "--out",
        str(tmp_path / "o"),
        "--master",
        "inprocess",
        "--json",
    )
    assert code == 0, out
    doc = json.loads(out)
    # Every in-flight record of the job moved: the count framed with Flink's own job-graph plan.
    code, v = run("validate", CHK, "--plan", JOB_PLAN, "--json")
    assert code == 0
    assert doc["records_moved"] == json.loads(v)["summary"]["records"]


def test_uid_map_file_equals_uid_option(tmp_path: Path) -> None:
    """--uid-map FILE and --uid NAME=UID are one input in two spellings: the two rescales bind the same way and
    write the same checkpoint, byte for byte."""
    uid_map = tmp_path / "uids.json"
    uid_map.write_text(json.dumps({"Source: seq": "src"}))
    common = ["-p", "slow=3", "--key-fn", "slow=support.keyfns:key_of", "--master", "inprocess", "--json"]
    outs = {"map": tmp_path / "by-map", "option": tmp_path / "by-option"}
    docs = {}
    for how, given in (("map", ["--uid-map", str(uid_map)]), ("option", ["--uid", "Source: seq=src"])):
        code, out = run("rescale", CHK, "--plan", PLAN, *given, *common, "--out", str(outs[how]))
        assert code == 0, out
        docs[how] = json.loads(out)
    assert docs["map"]["binding"] == docs["option"]["binding"]
    assert any(b["uid"] == "src" and b["exact"] for b in docs["map"]["binding"])  # the source bound by its uid
    for key in ("records_moved", "vertices", "edges", "channel_files", "lost_channels"):
        assert docs["map"][key] == docs["option"][key], key
    files = {how: sorted(p.name for p in out.iterdir()) for how, out in outs.items()}
    assert files["map"] == files["option"]
    assert "_metadata" in files["map"] and any(n.endswith(".channels") for n in files["map"])
    for name in files["map"]:  # _metadata, the new channel-state files, the rescaled plan
        assert (outs["map"] / name).read_bytes() == (outs["option"] / name).read_bytes(), name


def test_strip_with_a_stream_graph_plan_reports_the_exact_loss(tmp_path: Path) -> None:
    code, out = run(
        "repair",
        "strip-channel-state",
        CHK,
        "--plan",
        PLAN,
        "--operator",
        "slow",
        "--out",
        str(tmp_path / "o"),
        "--json",
    )
    assert code == 0, out
    dropped = json.loads(out)["records_dropped"]
    code, v = run("validate", CHK, "--plan", JOB_PLAN, "--json")
    assert dropped == json.loads(v)["summary"]["records"] > 0


def test_uid_without_plan_is_a_usage_error() -> None:
    code, out = run("validate", CHK, "--uid", "a=b")
    assert code == 2 and "--plan" in out
    code, out = run("validate", CHK, "--plan", PLAN, "--uid", "no-equals-sign")
    assert code == 2 and "NAME=UID" in out


def test_rescale_vertex_named_by_a_uid_the_checkpoint_does_not_store(tmp_path: Path) -> None:
    # 1.20 metadata stores no uids; "src" is the source's uid in the job, found by Flink's uid hash.
    code, out = run(
        "rescale",
        CHK,
        "--plan",
        JOB_PLAN,
        "-p",
        "src=3",
        "--out",
        str(tmp_path / "o"),
        "--master",
        "inprocess",
        "--dry-run",
        "--json",
    )
    assert code == 0, out
    assert json.loads(out)["vertices"] == [
        {"vertex": "Source: seq -> tostr", "old_parallelism": 2, "new_parallelism": 3}
    ]
