"""What ``spillway dump`` shows, for a program as for the CLI (``spillway.api.dump_checkpoint``).

    from spillway.api import DumpView, dump_checkpoint
    result = dump_checkpoint("/checkpoints/7f3c…/chk-42", DumpView(operator="slow-count"))
    result.summary().operators[0].channel_bytes        # the table's figures
    result.to_json()                                   # the spillway.dump/1 document (docs/dump-schema.md)

One call opens the checkpoint (the newest readable chk-N of a job directory), binds the plan when one is
given and selects the operators; the views are built from the result on demand, each as far as it needs:
the table surveys the files once (how many cannot be reached) and summarizes the selected operators, the
JSON document resolves every file of the checkpoint before the (maybe filtered) operators are rendered.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any, ClassVar

from spillway.model.walk import STATE_KINDS

if TYPE_CHECKING:
    from spillway.flink.operator_ids import Binding
    from spillway.inspect.summary import CheckpointSummary
    from spillway.inspect.topology import Topology
    from spillway.model.checkpoint import CheckpointMetadata, OperatorState
    from spillway.storage.job_jar import JobJar
    from spillway.storage.load import Damaged, LoadedCheckpoint

PathLike = str | os.PathLike[str]


@dataclass(frozen=True)
class DumpView:
    """Which part of the checkpoint to show: ``operator`` (an id, uid or name; every operator when None)
    and ``subtask`` (an index; every subtask when None)."""

    operator: str | None = None
    subtask: int | None = None


@dataclass(frozen=True)
class OperatorTree:
    """One operator as the tree view shows it: its label and id, and its ``spillway.dump/1`` document."""

    label: str
    operator_id: str
    fully_finished: bool
    doc: dict[str, Any]
    # a subtask document's handle lists, in the order a subtask holds them
    kinds: ClassVar[tuple[str, ...]] = STATE_KINDS


@dataclass
class DumpResult:
    """An opened checkpoint and the operators (and subtask) a view of it shows."""

    loaded: LoadedCheckpoint
    damaged: list[Damaged]  # newer chk-N of the job directory whose _metadata does not decode
    operators: list[OperatorState]
    subtask: int | None
    binding: Binding | None  # how the plan's operators were bound (None without a plan)
    #: Operator id -> the plan's name, for operators the checkpoint stores no name for (``JobBinding.names``).
    plan_names: Mapping[str, str] = field(default_factory=dict)
    _survey: tuple[int, int] | None = field(default=None, repr=False)

    @property
    def checkpoint(self) -> CheckpointMetadata:
        """The decoded ``_metadata``."""
        return self.loaded.checkpoint

    @property
    def top_parallelism(self) -> int:
        """The highest parallelism of the selected operators (0 when none has subtasks)."""
        return max((o.parallelism for o in self.operators), default=0)

    def survey(self) -> tuple[int, int]:
        """(files referenced, files not reachable here), found once; records every rebase applied."""
        if self._survey is None:
            self._survey = self.loaded.survey_files()
        return self._survey

    @property
    def missing_files(self) -> int:
        return self.survey()[1]

    @cached_property
    def unsafe_paths(self) -> list[dict[str, str]]:
        """Each distinct path in ``_metadata`` with a ``..`` component or a byte no file system accepts
        (``{path, rule, reason}``, the path shown escaped): never resolved, and no command writes from it."""
        from spillway.model.paths import shown_path, unsafe_names

        return [
            {"path": shown_path(name), "rule": p.rule, "reason": p.reason} for name, p in unsafe_names(self.checkpoint)
        ]

    @cached_property
    def _summary(self) -> CheckpointSummary:
        from spillway.inspect.summary import summarize

        return summarize(self.checkpoint, self.operators)

    def summary(self) -> CheckpointSummary:
        """The table's figures per selected operator (state bytes by kind, channels, files, finished)."""
        return self._summary

    def rebases(self) -> list[dict[str, Any]]:
        """The rebases applied so far (every one, once ``survey`` or a JSON view ran)."""
        return self.loaded.resolver.rebases()

    def json_head(self) -> dict[str, Any]:
        """The ``spillway.dump/1`` document without its operators (``operators`` keeps its place)."""
        from spillway.inspect.jsonview import JsonView

        # Every rebase of the whole checkpoint is known before the (maybe filtered) view is built.
        self.survey()
        loaded = self.loaded
        doc = JsonView(loaded.resolver).checkpoint_head(loaded.checkpoint)
        doc["source"] = {
            "metadata_path": loaded.location.shown,
            "checkpoint_dir": loaded.location.shown_dir,
            "size": loaded.size,
            "damaged": [d.to_json() for d in self.damaged],
            "unsafe_paths": self.unsafe_paths,
        }
        doc["rebased"] = loaded.resolver.rebases()
        doc["rebase_unmatched"] = loaded.unmatched_rebase
        return doc

    def operator_docs(self) -> Iterator[dict[str, Any]]:
        """The document's ``operators``, one at a time (a writer holds one operator's dicts at once)."""
        from spillway.inspect.jsonview import JsonView

        return JsonView(self.loaded.resolver, self.plan_names).operator_docs(
            self.checkpoint, self.operators, self.subtask
        )

    def to_json(self) -> dict[str, Any]:
        """The whole ``spillway.dump/1`` document."""
        head = self.json_head()
        head["operators"] = list(self.operator_docs())
        return head

    def trees(self) -> Iterator[OperatorTree]:
        """Each selected operator with every handle, for the tree view."""
        from spillway.inspect.jsonview import JsonView

        view = JsonView(self.loaded.resolver, self.plan_names)
        features = self.checkpoint.features
        for o in self.operators:
            doc = view.operator(o, features, self.subtask)
            yield OperatorTree(o.label(self.plan_names), o.operator_id, o.fully_finished, doc)


def dump_checkpoint(
    path: PathLike,
    view: DumpView | None = None,
    *,
    plan: Topology | JobJar | PathLike | None = None,
    uids: Mapping[str, str] | None = None,
    uid_map: PathLike | None = None,
    rebase: Mapping[str, str] | Sequence[str] | None = None,
) -> DumpResult:
    """Open the checkpoint at ``path`` (a job directory: its newest chk-N whose ``_metadata`` decodes; a
    chk-N directory; a ``_metadata`` file; local or a URI) and select what ``view`` shows.

    ``plan``/``uids``/``uid_map``: as for ``spillway.open`` (before Flink 2.0 a checkpoint stores operator
    ids only: the operators the plan binds exactly get the plan's names). ``rebase``: ``{old_prefix:
    new_prefix}`` or ``OLD=NEW`` strings. Each damaged chk-N passed over is a warning (``spillway.notices``)
    and in ``damaged``. Raises ``UsageError`` for an operator no id, uid or name matches."""
    from spillway import notices
    from spillway.inspect.job_plans import read_plan
    from spillway.inspect.operators import select_operators
    from spillway.storage.load import load_newest_readable
    from spillway.storage.locate import rebase_rules

    view = view or DumpView()
    topology = read_plan(plan, uids=uids, uid_map=uid_map)  # a bad plan fails before any storage is touched
    # 'OLD=NEW' strings go to the locator as they are (its own message for a malformed one)
    rules = rebase_rules(rebase) if isinstance(rebase, Mapping) else (list(rebase) if rebase is not None else None)
    loaded, damaged = load_newest_readable(path, rules)
    job = None
    if topology is not None:
        from spillway.inspect.topology import bind_job

        job = bind_job(topology, loaded.checkpoint)
    for d in damaged:
        notices.warn(f"{d.checkpoint}: damaged, passed over: {d.error}")
    names = job.names if job is not None else {}
    operators = select_operators(loaded.checkpoint, view.operator, names)
    return DumpResult(loaded, damaged, operators, view.subtask, job.operators if job else None, names)


__all__ = ["DumpResult", "DumpView", "OperatorTree", "dump_checkpoint"]
