"""The parts of the writing calls' results, defined beside the code that makes them and re-exported here: a
repair's ``RepairResult`` (what changed, the loss, the restore instructions; ``to_json()`` is
``spillway.repair/1``) and what a ``RescaleResult`` lists (vertices, edges, records moved, channels lost)."""

from __future__ import annotations

from spillway.repair.common import Change
from spillway.repair.transforms import ChannelLoss
from spillway.repair.workflow import EdgeLoss, Loss, RepairResult
from spillway.rescale.plan import LostChannel
from spillway.rescale.rescale import EdgeRoute, Moved, VertexChange

__all__ = [
    "Change",
    "ChannelLoss",
    "EdgeLoss",
    "EdgeRoute",
    "Loss",
    "LostChannel",
    "Moved",
    "RepairResult",
    "VertexChange",
]
