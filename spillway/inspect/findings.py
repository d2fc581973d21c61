"""Validation findings: every rule has a name, a severity and a one-line purpose (table: docs/validate.md)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

ERROR, WARNING, INFO = "error", "warning", "info"
SEVERITY_ORDER = {ERROR: 0, WARNING: 1, INFO: 2}

RULES: dict[str, tuple[str, str]] = {
    "file-exists": (ERROR, "every file a handle references exists and is readable"),
    "file-size": (ERROR, "a file is at least as long as the handles pointing into it need"),
    "file-size-extra": (WARNING, "a file is longer than its handle says (Flink writes exact sizes)"),
    "path-escape": (
        ERROR,
        "relative and rebased paths stay inside the checkpoint directory; no path has a '..' component",
    ),
    "bad-path": (ERROR, "every path is one a file system accepts: no NUL byte, valid Unicode, not empty"),
    "file-not-local": (WARNING, "a path that is not local (s3://, hdfs://…) and was not rebased is not checked"),
    "inline-channel": (ERROR, "inline (byte-stream) channel state is one header and one chunk of the stated size"),
    "channel-header": (ERROR, "a channel-state file starts with serialization version 0"),
    "chunk-chain": (ERROR, "a channel-state file is a chain of [length][bytes] chunks that ends exactly at EOF"),
    "chunk-offset": (ERROR, "every handle offset is in bounds and points at the length field of a chunk"),
    "chunk-overlap": (ERROR, "no chunk is claimed by two channel handles"),
    "channel-size": (ERROR, "a channel handle's size equals the sum of its chunks (length prefixes included)"),
    "unclaimed-chunks": (WARNING, "chunks no handle refers to (dead bytes in a channel-state file)"),
    "duplicate-channel": (ERROR, "a subtask has at most one handle per channel"),
    "record-length": (ERROR, "each record length is positive and fits in what is left of the logical channel"),
    "record-tag": (ERROR, "each record starts with a StreamElement tag the release knows, of the right size"),
    "record-truncated": (ERROR, "a logical channel ends on a record boundary"),
    "subtask-index": (ERROR, "subtask indices are unique and below the parallelism; handles carry their subtask"),
    "finished-state": (ERROR, "finished subtasks hold no state; fully finished operators hold no coordinator state"),
    "key-group-tiling": (
        ERROR,
        "an operator's keyed-state key-group ranges lie in [0, max parallelism) and never overlap",
    ),
    "key-group-gap": (WARNING, "key groups no subtask holds state for"),
    "key-group-range": (WARNING, "a subtask's key-group range differs from the one Flink assigns it"),
    "key-group-clipped": (
        INFO,
        "an incremental (RocksDB) handle wider than its subtask's range: Flink's restore clips it to the range",
    ),
    "channel-index": (ERROR, "channel indices exist on the other side of the edge (needs --plan)"),
    "channel-holder": (ERROR, "input state sits on a chain's head, output state on its tail (needs --plan)"),
    "plan-mismatch": (
        ERROR,
        "the plan describes this checkpoint: operators bound by Flink's own ids have the plan's parallelism",
    ),
    "plan-renamed": (
        WARNING,
        "an operator bound by the id Flink computes from the plan has another name in the checkpoint (V5+): renamed",
    ),
    "plan-unbound": (WARNING, "no operator of the plan could be found in the checkpoint by Flink's ids"),
    "binding-uncertain": (
        WARNING,
        "channel state on an operator the plan cannot be bound to for certain: not checked against the plan",
    ),
    "topology": (INFO, "what could not be checked for lack of topology, and why"),
}


@dataclass
class Finding:
    rule: str
    message: str
    operator: str | None = None
    subtask: int | None = None
    channel: str | None = None
    file: str | None = None
    offset: int | None = None

    @property
    def severity(self) -> str:
        return RULES[self.rule][0]

    def to_json(self) -> dict[str, Any]:
        return {"severity": self.severity, **asdict(self)}


def sort_findings(findings: list[Finding]) -> list[Finding]:
    return sorted(findings, key=lambda f: (SEVERITY_ORDER[f.severity], f.rule, f.file or "", f.offset or 0))
