"""The restore forecast's Flink side against Flink itself: the 2.3.0-counted checkpoint is restored in Flink
2.3.0 with count at parallelism 4 (Flink's own restore-time rescaling), with Flink's TaskStateAssignment at
DEBUG. It logs every InflightDataRescalingDescriptor it creates ("created ... for task=T subtask=N"); the
first one per (task, subtask) is the input descriptor (TaskStateAssignment.getSubtaskState builds the input
descriptor before the output one). From it, DemultiplexingRecordDeserializer.create's rule gives the virtual
channels per input channel: old subtask indexes x old channels the channel mapping gives that channel.
Those, the old subtasks and the ambiguous ones must equal what ``rescale --dry-run`` forecasts.
"""

from __future__ import annotations

import ast
import json
import re
from pathlib import Path

from click.testing import CliRunner
from support.flink_harness import restore

from spillway.cli.app import app

FIXTURE = Path(__file__).parents[1] / "fixtures" / "2.3.0-counted"
WHOLE = re.compile(
    r"created InflightDataRescalingDescriptor\{gateOrPartitionDescriptors=\[(.*)\]\} for task=(.+) subtask=(\d+)$"
)
GATE = re.compile(
    r"oldSubtaskIndexes=(\[[^\]]*\]), rescaledChannelsMappings=(\w+)\{(.*?)\}, ambiguousSubtaskIndexes=(\[[^\]]*\]), "
    r"mappingType=(\w+)"
)


def mapped(kind: str, body: str, channel: int) -> list[int]:
    """``RescaleMappings.getMappedIndexes`` from its toString."""
    if kind == "IdentityRescaleMappings":
        return [channel]
    rows = ast.literal_eval(body.removeprefix("mappings="))
    return list(rows[channel]) if channel < len(rows) else []


def input_descriptors(log: str, task: str) -> dict[int, list[tuple[list[int], str, str, list[int], str]]]:
    seen: dict[int, list] = {}
    for line in log.splitlines():
        m = WHOLE.search(line)
        if m is None or m.group(2) != task:
            continue
        sub = int(m.group(3))
        if sub in seen:
            continue  # the output descriptor
        seen[sub] = [
            (ast.literal_eval(g[0]), g[1], g[2], ast.literal_eval(g[3]), g[4]) for g in GATE.findall(m.group(1))
        ]
    return seen


def test_virtual_channels_match_flinks_own_rescale(tmp_path: Path) -> None:
    chk = next(FIXTURE.glob("checkpoints/*/chk-*"))
    result = restore(
        "2.3.0", "counted", chk, vertex_parallelism={"count": 4}, until_finished=True, workdir=tmp_path / "flink",
        debug_loggers=("org.apache.flink.runtime.checkpoint.TaskStateAssignment",),
    )  # fmt: skip
    assert result["outcome"] == "restored", result.get("error")
    log = Path(result["log"]).read_text()
    flink = input_descriptors(log, "count")
    assert sorted(flink) == [0, 1, 2, 3], "Flink logged no input rescaling descriptor for count"

    res = CliRunner().invoke(
        app,
        ["rescale", str(chk), "--plan", str(FIXTURE / "jobgraph.json"), "-p", "count=4", "--key",
         "count=tuple:0:long", "--master", "inprocess", "--out", str(tmp_path / "dry"), "--dry-run", "--json"],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    edge = next(e for e in json.loads(res.stdout)["forecast"]["flink"]["edges"] if e["edge"] == "parse -> count (HASH)")
    parse_p = 2  # input channels of count's gate 0
    for s in edge["subtasks"]:
        (olds, kind, body, amb, mapping_type) = flink[s["subtask"]][0]  # gate 0
        assert mapping_type == "RESCALING"
        virtual = sum(len(olds) * len(mapped(kind, body, c)) for c in range(parse_p))
        assert s["old_subtasks"] == olds
        assert s["ambiguous_old_subtasks"] == sorted(set(olds) & set(amb))
        assert s["virtual_channels"] == virtual
