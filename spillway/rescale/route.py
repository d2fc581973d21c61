"""The names of the former ``route`` module, for callers and tests written against it.

Routing now lives in ``router`` (``route_source``, ``RouteStats``, ``Run``), framing in
``formats/stream_elements`` and ``formats/uniform_runs``, key extraction in ``key_extract``, fingerprints
in ``crc``, old-channel reading in ``channel_reader`` and the self-check's re-read in ``element_scan``.
``route_source`` and ``scan_elements`` here read ``BLOCK``, ``FAST_MIN`` and ``vector_target_function``
from this module at call time, so setting them here still tunes the numpy path.
"""

from __future__ import annotations

from collections.abc import Iterator

from spillway.flink.keygroups_vectorized import murmur_hashes
from spillway.formats.stream_elements import MAX_ELEMENT
from spillway.formats.uniform_runs import MIN_RUN as FAST_MIN
from spillway.formats.uniform_runs import RETRY_AFTER as SLOW_STRETCH
from spillway.rescale import element_scan, router
from spillway.rescale.channel_reader import BLOCK, iter_channel_blocks, iter_channel_bytes
from spillway.rescale.crc import CRC_TABLE_LIMIT, crc32_rows, crc32_rows_numpy
from spillway.rescale.element_scan import Scan
from spillway.rescale.key_extract import java_hash_of, load_key_fn, target_function, vector_target_function
from spillway.rescale.plan import EdgePlan, SourceChannel
from spillway.rescale.route_error import RouteError
from spillway.rescale.router import RUN_LIMIT, RouteStats, Run

__all__ = [
    "BLOCK",
    "CRC_TABLE_LIMIT",
    "FAST_MIN",
    "MAX_ELEMENT",
    "RUN_LIMIT",
    "SLOW_STRETCH",
    "RouteError",
    "RouteStats",
    "Run",
    "Scan",
    "crc32_rows",
    "crc32_rows_numpy",
    "iter_channel_blocks",
    "iter_channel_bytes",
    "java_hash_of",
    "load_key_fn",
    "murmur_hashes",
    "route_source",
    "scan_elements",
    "target_function",
    "vector_target_function",
]


def route_source(src: SourceChannel, ep: EdgePlan, stats: RouteStats) -> Iterator[Run]:
    """``router.route_source`` tuned by this module's ``BLOCK``, ``FAST_MIN`` and ``vector_target_function``."""
    return router.route_source(src, ep, stats, block=BLOCK, min_run=FAST_MIN, vectorize=vector_target_function)


def scan_elements(view: memoryview, ep: EdgePlan | None = None, down: int = 0) -> Scan:
    """``element_scan.scan_elements`` tuned by this module's ``FAST_MIN`` and ``vector_target_function``."""
    return element_scan.scan_elements(view, ep, down, min_run=FAST_MIN, vectorize=vector_target_function)
