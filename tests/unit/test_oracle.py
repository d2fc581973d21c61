"""Our decode equals what Flink's own Checkpoints.loadCheckpointMetadata reports (oracle.json)."""

from __future__ import annotations

import json
from typing import Any

import pytest
from support.fixtures import Fixture, fixture_params

from spillway.formats.metadata_codec import decode_metadata
from spillway.inspect.jsonview import JsonView


def _normalise(doc: Any) -> Any:
    """Operators in id order; before Flink 1.18 the shared/private file lists of incremental handles
    are HashMaps in memory, so Flink reports them in hash order, not file order: compare as sets."""
    if isinstance(doc, list):
        return [_normalise(x) for x in doc]
    if not isinstance(doc, dict):
        return doc
    # plan_name: the plan's name of a bound operator, spillway's annotation (null without --plan), not Flink's data
    out = {k: _normalise(v) for k, v in doc.items() if k not in ("schema", "plan_name")}
    if "operators" in out:
        out["operators"] = sorted(out["operators"], key=lambda o: o["operator_id"])
    for key in ("shared_state", "private_state"):
        if key in out:
            out[key] = sorted(out[key], key=lambda e: e["local_path"])
    return out


def _diff(ours: Any, flink: Any, path: str = "") -> list[str]:
    if isinstance(ours, dict) and isinstance(flink, dict):
        problems = []
        for key in sorted(set(ours) | set(flink)):
            if key not in flink:
                problems.append(f"{path}.{key}: only in spillway ({ours[key]!r:.80})")
            elif key not in ours:
                problems.append(f"{path}.{key}: only in Flink ({flink[key]!r:.80})")
            else:
                problems += _diff(ours[key], flink[key], f"{path}.{key}")
        return problems
    if isinstance(ours, list) and isinstance(flink, list):
        if len(ours) != len(flink):
            return [f"{path}: {len(ours)} items in spillway, {len(flink)} in Flink"]
        return [p for i, (a, b) in enumerate(zip(ours, flink, strict=True)) for p in _diff(a, b, f"{path}[{i}]")]
    return [] if ours == flink else [f"{path}: spillway {ours!r:.80} != Flink {flink!r:.80}"]


@pytest.mark.parametrize("fx", fixture_params())
def test_decode_matches_flink_loader(fx: Fixture) -> None:
    flink = json.loads(fx.oracle.read_text())
    checkpoint = decode_metadata(fx.metadata.read_bytes(), str(fx.metadata))
    ours = JsonView(resolver=None).checkpoint(checkpoint)
    problems = _diff(_normalise(ours), _normalise(flink))
    assert not problems, "\n".join(problems[:20])
