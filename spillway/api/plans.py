"""Plans and path rules as the API takes them: a plan file (either flavour), a running job's plan
(``http://HOST:PORT/jobs/JOB_ID``) or a ``Topology``, with the uids it cannot show; ``rebase`` as a mapping.

Light on purpose: ``spillway.open`` imports this module, not the analyses behind the other calls."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from spillway.errors import UsageError

if TYPE_CHECKING:
    from spillway.api.jobs import JobJar
    from spillway.inspect.topology import Topology

PathLike = str | os.PathLike[str]
# Path rewrites that win over automatic rebasing: {old_prefix: new_prefix}, or "OLD=NEW" strings.
Rebase = Mapping[str, str] | Sequence[str] | None


def rebase_rules(rebase: Rebase) -> list[str] | None:
    """``rebase`` as the locator's ``OLD=NEW`` rules; a wrong shape is a ``UsageError`` in Python's words."""
    if rebase is None:
        return None
    pairs: list[tuple[object, object]]
    if isinstance(rebase, Mapping):
        pairs = list(rebase.items())
    elif isinstance(rebase, Sequence) and not isinstance(rebase, str):
        pairs = [(r.partition("=")[0], r.partition("=")[2]) if isinstance(r, str) else (r, None) for r in rebase]
    else:
        raise UsageError(f"rebase: expected a mapping {{old_prefix: new_prefix}}, got {type(rebase).__name__}")
    rules = []
    for old, new in pairs:
        if not isinstance(old, str) or not isinstance(new, str) or not old or not new:
            raise UsageError(
                f"rebase: {old!r}: expected non-empty prefixes, {{old_prefix: new_prefix}} or 'OLD_PREFIX=NEW_PREFIX'"
            )
        rules.append(f"{old}={new}")
    return rules


def read_plan(
    plan: Topology | JobJar | PathLike | None,
    *,
    uids: Mapping[str, str] | None = None,
    uid_map: PathLike | None = None,
) -> Topology | None:
    """The plan with the uids it cannot show: ``uid_map`` (a JSON file ``{"operator name": "uid"}``) first,
    ``uids`` win. ``plan``: a file of either flavour (``getExecutionPlan()``/``flink info`` or the REST job
    graph), a running job's ``http://HOST:PORT/jobs/JOB_ID`` (fetched from its JobManager), a ``Topology``, or
    a ``JobJar`` (the job's own graph, built by Flink from its jar: every id exact, no uids to give)."""
    if plan is None:  # before importing what a plan needs: a run without one (a plain dump) loads none of it
        if uids or uid_map:
            raise UsageError("uids and uid_map need a plan")
        return None
    from spillway.api.jobs import JobJar, job_plan

    if isinstance(plan, JobJar):
        if uids or uid_map:
            raise UsageError("uids and uid_map: a job's jar shows every uid itself; give neither with it")
        return job_plan(plan)
    from spillway.inspect.topology import load_uid_map

    merged = load_uid_map(Path(uid_map)) if uid_map is not None else {}
    for name, uid in (uids or {}).items():
        if not isinstance(name, str) or not isinstance(uid, str) or not name or not uid:
            raise UsageError(f"uids: {name!r}: expected {{operator name: uid}} with non-empty strings")
        merged[name] = uid
    from spillway.inspect.plan_names import check_uid_names
    from spillway.inspect.topology import Topology, load_plan, parse_plan
    from spillway.storage.rest import is_job_url

    if isinstance(plan, Topology):
        if merged:
            check_uid_names(plan, merged)
        return plan.with_uids({**plan.uids, **merged}) if merged else plan
    if is_job_url(str(plan)):
        from spillway.storage.rest import fetch_plan

        topology = parse_plan(fetch_plan(str(plan)), str(plan), uids=merged)
    else:
        topology = load_plan(Path(plan), merged)
    check_uid_names(topology, merged)
    return topology


def job_checkpoint(path: PathLike) -> str:
    """``path`` itself, or for a running job's ``http://HOST:PORT/jobs/JOB_ID`` its latest completed checkpoint."""
    from spillway.storage.rest import is_job_url, latest_checkpoint

    if not is_job_url(str(path)):
        return str(path)

    return latest_checkpoint(str(path))
