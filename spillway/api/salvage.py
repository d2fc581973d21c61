"""``Checkpoint.salvage``: in-flight records exported into Parquet so a job can replay them (docs/salvage.md).

    cp = spillway.open("chk-42", plan="plan.json")
    report = cp.salvage(SalvageOptions("salvaged/", operators=["count"], value_types={"parse": "tuple(long,long)"}))
    print(report.records, [e.file for e in report.edges])

``cp.salvage(options, dropped_by=cp.preflight(new_plan, PreflightOptions(allow_non_restored_state=True)))``
exports exactly what that restore would drop. ``repair strip-channel-state`` takes the same options
(``StripOptions(salvage=SalvageOptions(...))``) and exports exactly the records it drops before it writes anything.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from spillway.errors import ArgumentError
from spillway.inspect.salvage import SalvageError, SalvageReport
from spillway.inspect.salvage_options import SalvageOptions, value_type_args

if TYPE_CHECKING:
    from spillway.api.results import PreflightResult
    from spillway.api.session import Checkpoint

__all__ = ["SalvageError", "SalvageOptions", "SalvageReport", "salvage", "value_type_args"]


def salvage(cp: Checkpoint, options: SalvageOptions, dropped_by: PreflightResult | None = None) -> SalvageReport:
    """Export the in-flight records ``options`` chooses (see ``SalvageOptions``); ``dropped_by``: instead, exactly
    those a restore into a new job drops (``cp.preflight(new_plan, ...)``'s loss: the halves of channels held by
    operators the new job lacks, output state of an operator no longer ending its chain, …). ``SalvageError``
    (exit 1, nothing written) when a chosen channel cannot be read into records or a record does not fit its spec.
    A record cut between a dropped half and a kept one is exported too: Flink cannot read it whole."""
    from spillway.inspect.operators import operator_ids
    from spillway.inspect.salvage import refuse_inside_checkpoint
    from spillway.inspect.salvage import salvage as export

    if dropped_by is not None and options.operators is not None:
        raise ArgumentError("operators", None, "and dropped_by given: the restore's loss chooses the records")
    ids = operator_ids(cp.model, list(options.operators) if options.operators else None, cp.plan_names)
    halves = None
    if dropped_by is not None:
        halves = {(x.operator, x.side) for x in dropped_by.result.loss.in_flight}
    out = None if options.dry_run else Path(options.out)
    if out is not None:
        refuse_inside_checkpoint(out, cp.loaded)
    types = options.types()
    return export(cp.loaded, cp.plan, out, ids, types, options.jsonl, cp.job_binding, halves=halves)
