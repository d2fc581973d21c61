"""Salvage exports as many elements per logical channel as Flink's own reader finds in it.

Each logical channel of ``1.18.1-unaligned`` (tostr -> slow, slow -> len; String records) is assembled from the
handles Flink's loader reports (oracle.json: the downstream's input channel, then the upstream's subpartition)
and fed to Flink's ``SpillingAdaptiveSpanningRecordDeserializer`` by ``tests/fixtures/reader/ReaderCheck.java``,
as recovery does. The records and other stream elements salvage counts for that channel equal what Flink read.
"""

from __future__ import annotations

import json
import struct
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner
from support.fixtures import fixture_named
from support.flink_harness import prepare

from spillway.cli.app import app

pytestmark = pytest.mark.flink

RELEASE = "1.18.1"
SOURCE = Path(__file__).parents[1] / "fixtures" / "reader" / "ReaderCheck.java"
FIXTURE = fixture_named(f"{RELEASE}-unaligned")


@pytest.fixture(scope="module")
def reader(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    lib, _ = prepare(RELEASE)
    out = tmp_path_factory.mktemp("reader")
    classpath = f"{out}:{lib}/*"
    subprocess.run(["javac", "-nowarn", "--release", "11", "-cp", classpath, "-d", str(out), str(SOURCE)], check=True)
    return ["java", "-cp", classpath, "ReaderCheck"]


def flink_channels(up: str, down: str) -> dict[tuple[int, int], tuple[bytes, list[int]]]:
    """(upstream subtask, downstream subtask) -> (the logical channel's bytes, its chunk lengths), from Flink's
    view of the handles (oracle.json) and the operator ids of its hasher (ids.json)."""
    oracle = json.loads((FIXTURE.root / "oracle.json").read_text())
    ids = {n["name"]: n["operator_id"] for n in json.loads((FIXTURE.root / "ids.json").read_text())["stream_nodes"]}
    ops = {o["operator_id"]: o for o in oracle["operators"]}
    sender, receiver = ops[ids[up]], ops[ids[down]]
    parts: dict[tuple[int, int], list[dict]] = {}
    for sub in receiver["subtasks"]:  # the input half first: recovery replays it first
        for h in sub["input_channel_state"]:
            parts.setdefault((h["input_channel_index"], sub["index"]), []).append(h)
    for sub in sender["subtasks"]:
        for h in sub["result_subpartition_state"]:
            parts.setdefault((sub["index"], h["subpartition_index"]), []).append(h)
    found = {}
    for key, handles in parts.items():
        chunks: list[tuple[Path, int, int]] = []
        for part in handles:
            path = FIXTURE.checkpoint_dir / part["delegate"]["relative_path"]
            data = path.read_bytes()
            chunks += [(path, off + 4, struct.unpack_from(">i", data, off)[0]) for off in part["offsets"]]
        stream = b"".join(p.read_bytes()[o : o + n] for p, o, n in chunks)
        found[key] = (stream, [n for _, _, n in chunks])
    return found


def test_salvage_counts_what_flinks_reader_reads(reader: list[str], tmp_path: Path) -> None:
    plan, out = str(FIXTURE.root / "plan.json"), str(tmp_path / "s")
    res = CliRunner().invoke(app, ["salvage", str(FIXTURE.checkpoint_dir), "--plan", plan, "--out", out, "--json"])
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    compared = 0
    for edge in doc["edges"]:
        channels = flink_channels(edge["upstream"], edge["downstream"])
        assert len(channels) == len(edge["channels"]) == 4
        for c in edge["channels"]:
            u, d = (int(end.split("#")[1].split()[0]) for end in c["channel"].split(" -> "))
            data, chunks = channels[(u, d)]
            path = tmp_path / "channel.bin"
            path.write_bytes(data)
            out = subprocess.run(
                [*reader, str(path), "32768", *map(str, chunks)], capture_output=True, text=True, timeout=120
            )
            lines = out.stdout.split("\n")
            assert lines[1] == "ok", out.stdout + out.stderr
            assert c["records"] + c["other_elements"] == int(lines[0].split()[1]), c
            compared += c["records"]
    assert compared == doc["records"] > 20_000
