"""Pick operators of a checkpoint by what a person knows of them: operator id, uid or name."""

from __future__ import annotations

from collections.abc import Mapping

from spillway.errors import UsageError
from spillway.model.checkpoint import CheckpointMetadata, OperatorState


def select_operators(
    cp: CheckpointMetadata, wanted: str | None, plan_names: Mapping[str, str] | None = None
) -> list[OperatorState]:
    """All operators when ``wanted`` is None; else those whose id, uid or name is ``wanted``.

    Before metadata V5 a checkpoint stores ids only; a uid given here still finds its operator
    through Flink's uid hash, and the name a bound plan gives it (``plan_names``: ``JobBinding.names``) too."""
    if wanted is None:
        return cp.operators
    hits = [o for o in cp.operators if wanted in (o.operator_id, o.uid, o.name)]
    if not hits:
        hits = [o for o in cp.operators if o.name is None and (plan_names or {}).get(o.operator_id) == wanted]
        if len(hits) > 1:  # a name several plan operators carry picks none of them
            listed = ", ".join(o.operator_id for o in hits)
            raise UsageError(
                f"{wanted!r} names {len(hits)} operators of the plan ({listed}); pick one by its operator id"
            )
    if not hits:
        hashed = _uid_hash(wanted)
        hits = [o for o in cp.operators if o.operator_id == hashed]
    if not hits:
        known = ", ".join(sorted({o.label(plan_names) for o in cp.operators}))
        raise UsageError(f"no operator with id, uid or name {wanted!r}; known: {known}")
    return hits


def operator_ids(
    cp: CheckpointMetadata, wanted: list[str] | None, plan_names: Mapping[str, str] | None = None
) -> set[str] | None:
    """Resolve several id/uid/name values to operator ids; None when none were given."""
    if not wanted:
        return None
    ids: set[str] = set()
    for w in wanted:
        ids |= {o.operator_id for o in select_operators(cp, w, plan_names)}
    return ids


def _uid_hash(uid: str) -> str:
    # Flink's OperatorID for a uid: MurmurHash3 x64-128, seed 0, of the uid's UTF-8 bytes.
    import mmh3

    return bytes(mmh3.hash_bytes(uid.encode("utf-8"), 0)).hex()
