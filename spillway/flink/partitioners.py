"""What an exchange's partitioner means, decided in one place (docs/format/job-plans.md).

Both plan flavours print a ``StreamPartitioner``'s ``toString()`` (``FORWARD``, ``HASH``, ``REBALANCE`` …); a job's
own graph may give the class name instead. :meth:`Partitioner.of` reads either into one enum whose properties say
what Flink does with the exchange: pointwise or all-to-all, keyed by key group, and which ``SubtaskStateMapper``
Flink uses for the downstream side's channel state when it rescales. The facts are those of Flink 1.10 … 2.3
(the same on every release; the FORWARD_FOR_* subclasses exist from 1.15 on and print ``FORWARD``).
"""

from __future__ import annotations

from enum import Enum
from functools import lru_cache

__all__ = ["Partitioner"]


class Partitioner(Enum):
    FORWARD = "FORWARD"
    #: ``ForwardForUnspecifiedPartitioner`` (1.15+): a forward edge the adaptive batch scheduler may turn into
    #: REBALANCE; prints ``FORWARD``, so only a job's own graph tells it apart.
    FORWARD_FOR_UNSPECIFIED = "FORWARD_FOR_UNSPECIFIED"
    #: ``ForwardForConsecutiveHashPartitioner`` (1.15+): a forward edge the adaptive batch scheduler may turn into
    #: HASH; prints ``FORWARD``.
    FORWARD_FOR_CONSECUTIVE_HASH = "FORWARD_FOR_CONSECUTIVE_HASH"
    #: ``KeyGroupStreamPartitioner``: keyBy, records routed by key group.
    HASH = "HASH"
    #: The table runtime's ``BinaryHashPartitioner`` (``HASH[f1, f2]``): hashes fields, not key groups.
    TABLE_HASH = "TABLE_HASH"
    REBALANCE = "REBALANCE"
    RESCALE = "RESCALE"
    BROADCAST = "BROADCAST"
    SHUFFLE = "SHUFFLE"
    GLOBAL = "GLOBAL"
    #: ``CustomPartitionerWrapper`` (partitionCustom) and the table runtime's custom partitioner.
    CUSTOM = "CUSTOM"
    #: Text no Flink release prints; the edge keeps the raw text.
    UNKNOWN = "UNKNOWN"

    @staticmethod
    def of(text: str | None) -> Partitioner:
        """The partitioner a plan's ``ship_strategy`` (or a partitioner class name) names; UNKNOWN otherwise."""
        return _classify(text) if text else Partitioner.UNKNOWN

    @property
    def is_forward(self) -> bool:
        """``ForwardPartitioner`` or a subclass: the only exchange Flink chains over."""
        return self in _FORWARDS

    @property
    def is_pointwise(self) -> bool:
        """``StreamPartitioner#isPointwise``: each subtask talks to a fixed few of the other side."""
        return _pointwise(self)

    @property
    def is_all_to_all(self) -> bool:
        """Every upstream subtask has a channel to every downstream subtask (BROADCAST too). False for UNKNOWN:
        nothing is known of its layout."""
        return _all_to_all(self)

    @property
    def is_key_groups(self) -> bool:
        """Records are routed by Flink's key groups (``KeyGroupStreamPartitioner``): what a keyed operator needs."""
        return self is Partitioner.HASH

    @property
    def is_keyed(self) -> bool:
        """Records are routed by a hash of a key (key groups, or the table runtime's field hash)."""
        return self in (Partitioner.HASH, Partitioner.TABLE_HASH)

    @property
    def rescales_channel_state(self) -> bool:
        """Flink can map this exchange's in-flight data to a new parallelism (its downstream
        ``SubtaskStateMapper`` is not UNSUPPORTED). Unknown text: no."""
        return _DOWNSTREAM_MAPPER.get(self, "UNSUPPORTED") != "UNSUPPORTED"

    @property
    def downstream_mapper(self) -> str | None:
        """``getDownstreamSubtaskStateMapper()``'s name; ``None`` when unknown."""
        return _DOWNSTREAM_MAPPER.get(self)

    @property
    def upstream_mapper(self) -> str | None:
        """``getUpstreamSubtaskStateMapper()``'s name; ``None`` when unknown."""
        return _upstream_mapper(self)


def _pointwise(p: Partitioner) -> bool:
    return p in _FORWARDS or p is Partitioner.RESCALE


def _all_to_all(p: Partitioner) -> bool:
    return not _pointwise(p) and p is not Partitioner.UNKNOWN


def _upstream_mapper(p: Partitioner) -> str | None:
    """Only the pointwise partitioners and BROADCAST override StreamPartitioner's ARBITRARY."""
    if p is Partitioner.UNKNOWN:
        return None
    return "UNSUPPORTED" if _pointwise(p) or p is Partitioner.BROADCAST else "ARBITRARY"


_FORWARDS = frozenset(
    {Partitioner.FORWARD, Partitioner.FORWARD_FOR_UNSPECIFIED, Partitioner.FORWARD_FOR_CONSECUTIVE_HASH}
)

_DOWNSTREAM_MAPPER = {
    Partitioner.FORWARD: "UNSUPPORTED",
    Partitioner.FORWARD_FOR_UNSPECIFIED: "UNSUPPORTED",
    Partitioner.FORWARD_FOR_CONSECUTIVE_HASH: "UNSUPPORTED",
    Partitioner.RESCALE: "UNSUPPORTED",
    Partitioner.BROADCAST: "UNSUPPORTED",
    Partitioner.HASH: "RANGE",
    Partitioner.TABLE_HASH: "FULL",
    Partitioner.REBALANCE: "ROUND_ROBIN",
    Partitioner.SHUFFLE: "ROUND_ROBIN",
    Partitioner.GLOBAL: "FIRST",
    Partitioner.CUSTOM: "FULL",
}

#: Class simple names, as a job's own graph may give them.
_CLASSES = {
    "forwardpartitioner": Partitioner.FORWARD,
    "forwardforunspecifiedpartitioner": Partitioner.FORWARD_FOR_UNSPECIFIED,
    "forwardforconsecutivehashpartitioner": Partitioner.FORWARD_FOR_CONSECUTIVE_HASH,
    "keygroupstreampartitioner": Partitioner.HASH,
    "binaryhashpartitioner": Partitioner.TABLE_HASH,
    "rebalancepartitioner": Partitioner.REBALANCE,
    "rescalepartitioner": Partitioner.RESCALE,
    "broadcastpartitioner": Partitioner.BROADCAST,
    "shufflepartitioner": Partitioner.SHUFFLE,
    "globalpartitioner": Partitioner.GLOBAL,
    "custompartitionerwrapper": Partitioner.CUSTOM,
    "rowdatacustomstreampartitioner": Partitioner.CUSTOM,
}


@lru_cache(maxsize=256)  # a plan names a handful of strategies; validate asks once per channel of large jobs
def _classify(text: str) -> Partitioner:
    return _classification(text)


# Not decorated: mutmut leaves decorated functions alone, so the logic stays outside the cache.
def _classification(text: str) -> Partitioner:
    s = text.strip()
    upper = s.upper()
    if upper in Partitioner.__members__:
        # what Flink prints (each partitioner's toString() is its member's name), or a member's name given back
        return Partitioner[upper]
    if upper.startswith("HASH[") and upper.endswith("]"):
        return Partitioner.TABLE_HASH  # BinaryHashPartitioner prints "HASH" + its field names
    simple = s.rpartition(".")[2].lower()
    return _CLASSES.get(simple, Partitioner.UNKNOWN)
