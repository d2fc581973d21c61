"""The one error of routing: an old channel that cannot be read, framed or routed."""

from __future__ import annotations

from spillway.errors import SpillwayError


class RouteError(SpillwayError):
    """The old channel cannot be read or framed (names the channel and position)."""
