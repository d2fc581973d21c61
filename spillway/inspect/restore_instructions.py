"""How to restore a checkpoint spillway wrote, for the Flink release line that wrote its source.

A written checkpoint keeps its source's ``_metadata`` format, so only the releases that write (and read) that
format may restore it: the format's release line (docs/format/versions.md). Flink takes the path of the
checkpoint directory (the one holding ``_metadata``) as ``flink run -s PATH`` on every release, or in the
configuration: ``execution.savepoint.path`` up to 1.19; from 1.20 on the option is
``execution.state-recovery.path`` and the old key is still read as its deprecated name (docs/format/versions.md,
"Restoring"). The new job must run each operator at the parallelism the checkpoint was written for. That is
given per operator, not per vertex: Flink sets it per operator (``setParallelism``), and which operators of a
1.x job share a chain is often not decided by the evidence (docs/format/operator-ids.md, sections 7 and 8).
"""

from __future__ import annotations

import shlex
from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any

from spillway.flink.features import FormatFeatures, parse_release
from spillway.model.checkpoint import OperatorState

OLD_PATH_KEY = "execution.savepoint.path"  # SavepointConfigOptions, Flink 1.10-1.19 (deprecated key from 1.20)
NEW_PATH_KEY = "execution.state-recovery.path"  # StateRecoveryOptions, Flink 1.20 on
NEW_KEY_FROM = (1, 20)


def release_line(features: FormatFeatures) -> str:
    """``"1.16-1.20"``, ``"2.0"``, ``"after 2.3"``: the releases that write this format."""
    return features.releases.removeprefix("Flink ")


def path_key(features: FormatFeatures) -> str:
    """The configuration key every release of the format's line reads the restore path from."""
    first = features.first_release
    if first is None or parse_release(first) >= NEW_KEY_FROM:
        return NEW_PATH_KEY
    return OLD_PATH_KEY  # read by every release up to 1.19, and by 1.20 as the deprecated name of the new key


def restore_instructions(path: str, features: FormatFeatures, parallelism: dict[str, int]) -> dict[str, Any]:
    """The ``restore`` member of a writing command's JSON: where Flink restores from, with which release line,
    and the parallelism of each operator of the written checkpoint (keyed by its label: uid, name, the bound
    plan's name, else its id)."""
    key = path_key(features)
    notes = []
    last = features.last_release
    if key == OLD_PATH_KEY and (last is None or parse_release(last) >= NEW_KEY_FROM):
        notes.append(f"Flink 1.20 reads {OLD_PATH_KEY} as the deprecated name of {NEW_PATH_KEY}")
    return {
        "path": path,
        "release_line": release_line(features),
        "parallelism": dict(parallelism),
        "config": {key: path},
        "command": f"flink run -s {shlex.quote(path)} …",
        "notes": notes,
    }


def operator_parallelism(
    operators: Iterable[tuple[OperatorState, int]], plan_names: Mapping[str, str] | None = None
) -> dict[str, int]:
    """Label -> parallelism; a label two operators share gets each one's id appended (no entry lost).
    ``plan_names``: a bound plan's names (``JobBinding.names``)."""
    pairs = [(o.label(plan_names), o.operator_id, n) for o, n in operators]
    seen = Counter(label for label, _, _ in pairs)
    return {(label if seen[label] == 1 else f"{label} ({op_id})"): n for label, op_id, n in pairs}


def restore_lines(restore: dict[str, Any]) -> list[str]:
    """The instructions for people, one line each (plain text; the caller styles and escapes)."""
    path = restore["path"]
    (key,) = restore["config"]
    sizes = ", ".join(f"{name}={n}" for name, n in restore["parallelism"].items())
    lines = [
        f"restore with Flink {restore['release_line']} (the release line that wrote the source checkpoint):",
        f"  {restore['command']}   or   {key}: {path}",
        f"  parallelism per operator: {sizes}",
    ]
    lines += [f"  note: {n}" for n in restore["notes"]]
    return lines


__all__ = [
    "NEW_PATH_KEY",
    "OLD_PATH_KEY",
    "operator_parallelism",
    "path_key",
    "release_line",
    "restore_instructions",
    "restore_lines",
]
