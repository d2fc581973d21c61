"""``Checkpoint.salvage``: in-flight records exported into Parquet so a job can replay them (docs/salvage.md).

    cp = spillway.open("chk-42", plan="plan.json")
    report = cp.salvage(SalvageOptions("salvaged/", operators=["count"], value_types={"parse": "tuple(long,long)"}))
    print(report.records, [e.file for e in report.edges])

``repair strip-channel-state`` takes the same options (``StripOptions(salvage=SalvageOptions(...))``) and exports
exactly the records it drops before it writes anything.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from spillway.inspect.salvage import SalvageError, SalvageReport
from spillway.inspect.salvage_options import SalvageOptions, value_type_args

if TYPE_CHECKING:
    from spillway.api.session import Checkpoint

__all__ = ["SalvageError", "SalvageOptions", "SalvageReport", "salvage", "value_type_args"]


def salvage(cp: Checkpoint, options: SalvageOptions) -> SalvageReport:
    """Export the in-flight records ``options`` chooses (see ``SalvageOptions``); ``SalvageError`` (exit 1,
    nothing written) when a chosen channel cannot be read into records or a record does not fit its spec."""
    from spillway.inspect.operators import operator_ids
    from spillway.inspect.salvage import refuse_inside_checkpoint
    from spillway.inspect.salvage import salvage as export

    ids = operator_ids(cp.model, list(options.operators) if options.operators else None, cp.plan_names)
    out = None if options.dry_run else Path(options.out)
    if out is not None:
        refuse_inside_checkpoint(out, cp.loaded)
    return export(cp.loaded, cp.plan, out, ids, options.types(), options.jsonl, cp.job_binding)
