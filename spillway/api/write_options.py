"""The options of the writing calls (``Checkpoint.rescale``, ``.relocate``, ``.strip_channel_state``,
``.clear_finished``, ``.drop_operator``): one frozen dataclass per call, checked when it is built, so a
mistaken option fails before any storage is touched. Defined beside the code that takes them
(``spillway.rescale.options``, ``spillway.repair.options``: the layers below the door run on them as
they are) and re-exported here."""

from __future__ import annotations

from spillway.repair.options import ClearFinishedOptions, DropOperatorOptions, RelocateOptions, StripOptions
from spillway.rescale.options import (
    BUFFERS_PER_CHANNEL,
    DEFAULT_BUFFER_SIZE,
    FLOATING_BUFFERS_PER_GATE,
    IN_PROCESS,
    RESCALE_SCHEMA,
    RescaleOptions,
    check_key_specs,
)

__all__ = [
    "BUFFERS_PER_CHANNEL",
    "DEFAULT_BUFFER_SIZE",
    "FLOATING_BUFFERS_PER_GATE",
    "IN_PROCESS",
    "RESCALE_SCHEMA",
    "ClearFinishedOptions",
    "DropOperatorOptions",
    "RelocateOptions",
    "RescaleOptions",
    "StripOptions",
    "check_key_specs",
]
