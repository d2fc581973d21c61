"""What ``validate`` returns (``Report``, ``Unchecked``) and the one place findings enter it (``Recorder``)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from spillway.inspect.channels import ChannelKey
from spillway.inspect.findings import Finding
from spillway.inspect.rules.common import Flagged


@dataclass(frozen=True)
class Unchecked:
    """Part of the checkpoint validate could not check, and why: ``what`` is ``channel-handle`` (a handle whose
    records were not framed) or ``file`` (a file that was not read)."""

    what: str
    why: str
    operator: str | None = None
    subtask: int | None = None
    channel: str | None = None
    file: str | None = None

    def to_json(self) -> dict[str, object]:
        return {
            "what": self.what,
            "why": self.why,
            "operator": self.operator,
            "subtask": self.subtask,
            "channel": self.channel,
            "file": self.file,
        }


@dataclass
class Report:
    findings: list[Finding] = field(default_factory=list)
    files_checked: int = 0
    blobs_checked: int = 0
    chunks: int = 0
    channels_framed: int = 0
    handles_framed_alone: int = 0
    elements: int = 0  # stream elements framed: records, watermarks and other events
    records: int = 0  # of them, stream records
    bytes_read: int = 0
    # Channel handles whose bytes cannot be trusted, with the error findings that say so (for
    # ``rescale --force``, which drops exactly these logical channels and must name why).
    damage: dict[ChannelKey, list[Finding]] = field(default_factory=dict)
    # What was not checked (files not read, channel handles not framed), in the order found: a report
    # with no errors is "sound" only when this is empty.
    unchecked: list[Unchecked] = field(default_factory=list)
    # Records of each whole logical channel that framed without a fault, by the keys of its parts in stream
    # order: what ``rescale --force`` says it leaves out when such a channel is condemned for another reason.
    counted: dict[tuple[ChannelKey, ...], int] = field(default_factory=dict)

    @property
    def complete(self) -> bool:
        """Every byte validate checks was checked (nothing is in ``unchecked``)."""
        return not self.unchecked

    def unchecked_summary(self) -> list[tuple[str, str, int]]:
        """(what, why, how many) for each distinct reason something was left unchecked, in the order first
        seen."""
        counts: dict[tuple[str, str], int] = {}
        for u in self.unchecked:
            counts[u.what, u.why] = counts.get((u.what, u.why), 0) + 1
        return [(what, why, n) for (what, why), n in counts.items()]

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "error"]

    def counts(self) -> dict[str, int]:
        out = {"error": 0, "warning": 0, "info": 0}
        for f in self.findings:
            out[f.severity] += 1
        return out


class Recorder:
    """Adds findings to a report in the order the checks yield them; an error also marks the channel handles
    it condemns as damaged."""

    def __init__(self, report: Report) -> None:
        self.report = report

    def add(self, finding: Finding, *keys: ChannelKey) -> Finding:
        self.report.findings.append(finding)
        self.damaged(finding, *keys)
        return finding

    def flagged(self, item: Flagged) -> Finding:
        return self.add(item.finding, *item.keys)

    def all(self, items: Iterable[Flagged]) -> None:
        for item in items:
            self.flagged(item)

    def damaged(self, finding: Finding, *keys: ChannelKey) -> None:
        if finding.severity != "error":
            return
        for key in keys:
            self.report.damage.setdefault(key, []).append(finding)
