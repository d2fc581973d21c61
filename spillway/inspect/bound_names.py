"""The names a plan gives a checkpoint's operators, for the callers that are handed a plan and no binding."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from spillway.inspect.topology import Topology
    from spillway.model.checkpoint import Checkpoint


def bound_names(topology: Topology | None, checkpoint: Checkpoint) -> Mapping[str, str]:
    """Operator id -> the plan's name (``JobBinding.names``); empty without a plan. Binds afresh: a caller that
    holds the binding (``spillway.api.Checkpoint.job_binding``) passes its ``names`` on instead."""
    if topology is None:
        return {}
    from spillway.inspect.topology import bind_job

    return bind_job(topology, checkpoint).names
