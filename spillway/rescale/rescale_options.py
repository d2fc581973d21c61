"""What a rescale is asked to do (``RescaleOptions``; ``spillway.api`` re-exports it), checked before
any storage is touched, and Flink's network buffer defaults it starts from.

The source, its plan and its path rules are not options: they belong to the opened checkpoint
(``spillway.open(path, plan=…, uids=…, rebase=…)``).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from spillway.errors import ArgumentError

PathLike = str | os.PathLike[str]

# Flink's network buffer settings, as a job gets them by default. The network buffer (memory segment)
# size is also the largest chunk Flink writes into a channel-state file, so the rescale's new files
# are chunked by it and the restore forecast reads into buffers of it: one size, one name.
DEFAULT_BUFFER_SIZE = 32 * 1024  # taskmanager.memory.segment-size
BUFFERS_PER_CHANNEL = 2  # taskmanager.network.memory.buffers-per-channel
FLOATING_BUFFERS_PER_GATE = 8  # taskmanager.network.memory.floating-buffers-per-gate
MIN_BUFFER_SIZE, MAX_BUFFER_SIZE = 64, 64 * 1024 * 1024
IN_PROCESS = "inprocess"  # the master that moves the data in this process (no Spark)
RESCALE_SCHEMA = "spillway.rescale/1"  # the report's JSON document (docs/rescale.md)


def check_key_specs(keys: Mapping[str, str], key_fns: Mapping[str, str]) -> None:
    """Every key extractor parses and every key function is ``module:function``; one of them per vertex."""
    from spillway.formats.values import ValueSpecError, parse_key_extractor

    both = sorted(set(keys) & set(key_fns))
    if both:
        raise ArgumentError("key_fns", key_fns[both[0]], "also has a key extractor in keys: give one", both[0])
    for name, spec in keys.items():
        try:
            parse_key_extractor(spec)
        except ValueSpecError as exc:
            raise ArgumentError("keys", spec, str(exc), name) from None
    for name, spec in key_fns.items():
        module, sep, function = spec.partition(":")
        if not sep or not module or not function:
            raise ArgumentError("key_fns", spec, "expected module:function", name)


def check_buffers(buffer_size: int, buffers_per_channel: int, floating_buffers_per_gate: int) -> None:
    """Flink's network buffer settings: a buffer (memory segment) of 64 B to 64 MiB, counts not negative."""
    if buffer_size < MIN_BUFFER_SIZE:
        raise ArgumentError("buffer_size", buffer_size, f"at least {MIN_BUFFER_SIZE} bytes")
    if buffer_size > MAX_BUFFER_SIZE:
        raise ArgumentError("buffer_size", buffer_size, f"at most {MAX_BUFFER_SIZE // (1024 * 1024)} MiB")
    counts = {"buffers_per_channel": buffers_per_channel, "floating_buffers_per_gate": floating_buffers_per_gate}
    for name, n in counts.items():
        if n < 0:
            raise ArgumentError(name, n, "must not be negative")


def check_parallelism(parallelism: Mapping[str, int], argument: str = "parallelism") -> None:
    """``{vertex: n}``: every n a positive integer."""
    for vertex, n in parallelism.items():
        if isinstance(n, bool) or not isinstance(n, int) or n < 1:
            raise ArgumentError(argument, n, "must be a positive integer", vertex)


@dataclass(frozen=True)
class RescaleOptions:
    """``parallelism``: ``{vertex: new parallelism}`` (vertex id, operator uid or name); ``out``: the new
    checkpoint's directory or URI (must not exist; may be left out for a ``dry_run``); ``keys`` /
    ``key_fns``: ``{vertex: extractor}`` / ``{vertex: "module:function"}`` for the vertex's keyBy (or
    custom) input; ``buffer_size``: the network buffer size (taskmanager.memory.segment-size): the largest
    chunk of the new channel files, and the buffers the forecast reads into; ``master``: Spark master, or
    None / ``"inprocess"`` to move the data in this process; ``dry_run``: plan and forecast, write nothing;
    ``force``: leave out the damaged logical channels of moved edges (listed, with what is lost);
    ``buffers_per_channel`` / ``floating_buffers_per_gate``: Flink's settings the forecast assumes;
    ``on_start(checkpoint_dir)``: called once the source is open, before the data moves."""

    parallelism: Mapping[str, int]
    out: PathLike | None = None
    keys: Mapping[str, str] = field(default_factory=dict)
    key_fns: Mapping[str, str] = field(default_factory=dict)
    buffer_size: int = DEFAULT_BUFFER_SIZE
    master: str | None = "local[*]"
    dry_run: bool = False
    force: bool = False
    buffers_per_channel: int = BUFFERS_PER_CHANNEL
    floating_buffers_per_gate: int = FLOATING_BUFFERS_PER_GATE
    on_start: Callable[[str], None] | None = field(default=None, compare=False)

    def __post_init__(self) -> None:
        if not self.parallelism:
            raise ArgumentError("parallelism", None, "name at least one vertex: {vertex: new parallelism}")
        for name in self.parallelism:
            if not isinstance(name, str) or not name:
                raise ArgumentError("parallelism", name, "expected {vertex: new parallelism}, vertex a non-empty str")
        check_parallelism(self.parallelism)
        if self.out is None and not self.dry_run:
            raise ArgumentError("out", None, "the new checkpoint's directory is needed unless dry_run=True")
        check_key_specs(self.keys, self.key_fns)
        check_buffers(self.buffer_size, self.buffers_per_channel, self.floating_buffers_per_gate)
        if self.master == IN_PROCESS:
            object.__setattr__(self, "master", None)
