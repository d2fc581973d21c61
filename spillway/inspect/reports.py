"""The JSON documents of ``validate`` and ``analyze`` (versioned schemas), built from their results.

``dump``'s document is built by ``spillway.inspect.jsonview``, rescale's by ``RescaleResult.to_json``
and repair's by ``RepairResult.to_json``: each schema in one place, none in the CLI.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # binding_json (dump, files, diff) needs none of validate's and analyze's machinery
    from spillway.flink.operator_ids import Binding
    from spillway.inspect.analyze import Analysis, ChannelAnalysis, EdgeSummary
    from spillway.inspect.finished import Verdict
    from spillway.inspect.salvage_options import ValueTypes
    from spillway.inspect.validate import Report


def binding_json(binding: Binding | None) -> list[dict[str, Any]] | None:
    """How each plan operator was bound to the checkpoint: ``method`` is one of flink-id (the job's jar),
    stored-name, uid-hash, deterministic-hash, hash-input, vertex-id, deduced (``exact``: Flink's own ids, or the
    only assignment the checkpoint's evidence allows), indistinct (holds no state; cannot be told apart, nothing
    depends on it), elimination (a structural guess, only without the checkpoint's facts) or unbound; ``reason``
    says what decided it or what would; ``candidates`` the ids an operator not bound could still be ("-": none);
    ``plan_node`` the form that picks the operator where its name is shared (``NAME#7``, ``#7``)."""
    if binding is None:
        return None
    from spillway.flink.operator_ids import node_ref

    return [
        {
            "operator": b.name,
            "plan_node": node_ref(b.node_id, b.vertex_id, b.position),
            "method": b.method,
            "operator_id": b.operator_id,
            "exact": b.exact,
            "in_checkpoint": b.in_checkpoint,
            "uid": b.uid,
            "reason": b.reason,
            "candidates": list(b.candidates),
        }
        for b in binding.operators
    ]


def uid_map_template(rows: list[dict[str, Any]] | None) -> dict[str, str]:
    """A uid map to fill in (``--uid-map FILE``): every plan operator the binding leaves open, with an empty uid
    (empty entries are ignored when the map is read). A name several plan operators carry is keyed by the form
    that picks each one (``NAME#7``): the bare name would pick none of them."""
    names = [b["operator"] for b in rows or ()]
    return {
        _picked(b) if names.count(b["operator"]) > 1 else b["operator"]: ""
        for b in rows or ()
        if b["method"] == "unbound"
    }


def _picked(row: dict[str, Any]) -> str:
    ref = row.get("plan_node")
    return f"{row['operator']}{ref}" if ref else str(row["operator"])


def validate_json(
    report: Report, metadata: str, rebased: list[dict[str, Any]], binding: Binding | None = None
) -> dict[str, Any]:
    """The ``spillway.validate/1`` document (docs/validate.md)."""
    return {
        "schema": "spillway.validate/1",
        "metadata_path": metadata,
        "ok": not report.errors,
        "complete": report.complete,
        "summary": {
            **report.counts(),
            "files_checked": report.files_checked,
            "channel_state_blobs": report.blobs_checked,
            "chunks": report.chunks,
            "logical_channels_framed": report.channels_framed,
            "handles_framed_alone": report.handles_framed_alone,
            "elements": report.elements,  # stream elements framed: records, watermarks and other events
            "records": report.records,  # of them, stream records
            "payload_bytes_read": report.bytes_read,
        },
        "findings": [f.to_json() for f in report.findings],
        "unchecked": [u.to_json() for u in report.unchecked],
        "rebased": rebased,
        "binding": binding_json(binding),
        "rules": {name: {"severity": sev, "description": desc} for name, (sev, desc) in _rules().items()},
    }


def _record_json(r: dict[str, Any], value_type: str) -> dict[str, Any]:
    from spillway.formats.values import value_data

    value, problem = value_data(r["value"], value_type)
    doc = {**r, "value": value}
    if problem:
        doc["value_error"] = problem
    return doc


def channel_json(c: ChannelAnalysis, decode: int, value_type: str) -> dict[str, Any]:
    return {
        "label": c.label,
        "upstream": c.upstream,
        "downstream": c.downstream,
        "gate": c.gate,
        "ship_strategy": c.ship_strategy,
        "buffers": len(c.buffers),
        "records": c.records,
        "bytes": c.bytes,
        "input_bytes": c.input_bytes,
        "output_bytes": c.output_bytes,
        "elements": c.elements,
        "watermarks": c.watermarks,
        "other_elements": c.other_elements,
        "last_watermark": c.last_watermark,
        "junction_record": c.junction_record,
        "first_record": vars(c.first_record) if c.first_record else None,
        "last_record": vars(c.last_record) if c.last_record else None,
        "problem": c.problem,
        "buffer_sequence": [vars(b) for b in c.buffers],
        "first_records": [_record_json(r, value_type) for r in c.record_list[:decode]],
    }


def edge_json(e: EdgeSummary) -> dict[str, Any]:
    return {
        "upstream": e.upstream,
        "downstream": e.downstream,
        "gate": e.gate,
        "ship_strategy": e.ship_strategy,
        "upstream_parallelism": e.upstream_parallelism,
        "downstream_parallelism": e.downstream_parallelism,
        "channels": len(e.channels),
        "buffers": e.buffers,
        "records": e.records,
        "bytes": e.bytes,
        "watermarks": e.watermarks,
        "other_elements": e.other_elements,
    }


def analyze_json(
    a: Analysis,
    verdict: Verdict | None,
    decode: int,
    value_type: str,
    binding: Binding | None = None,
    value_types: ValueTypes | None = None,
) -> dict[str, Any]:
    """The ``spillway.analyze/1`` document (docs/analyze.md). Kept records show as ``value_types`` says for their
    edge, else as ``value_type``."""

    def shown_as(c: ChannelAnalysis) -> str:
        return (value_types and value_types.for_edge(c.upstream, c.downstream)) or value_type

    return {
        "schema": "spillway.analyze/1",
        "format_version": a.checkpoint.format_version,
        "checkpoint_id": a.checkpoint.checkpoint_id,
        "operators": [
            {
                "operator_id": o.operator.operator_id,
                "name": o.operator.name or a.plan_names.get(o.operator.operator_id),
                "uid": o.operator.uid,
                "parallelism": o.operator.parallelism,
                "finished_state": o.finished_state,
                "finished_subtasks": o.finished_subtasks,
                "in_flight_bytes": o.in_flight_bytes,
                "in_flight_records": o.in_flight_records,
                "in_flight_bytes_per_subtask": {str(k): v for k, v in sorted(o.per_subtask_bytes.items())},
            }
            for o in a.operators
        ],
        "edges": [edge_json(e) for e in _edges(a)],
        "channels": [channel_json(c, decode, shown_as(c)) for c in a.channels],
        "restore_verdict": None
        if verdict is None
        else {
            "restorable": verdict.answer,
            "certain": verdict.certain,
            "vertices": verdict.classification,
            "uncertain_vertices": verdict.uncertain_vertices,
            "violations": [vars(v) for v in verdict.violations],
            "notes": verdict.notes,
        },
        "binding": binding_json(binding),
        "skipped": a.skipped,
    }


def _rules() -> dict[str, tuple[str, str]]:
    from spillway.inspect.findings import RULES

    return RULES


def _edges(a: Analysis) -> list[EdgeSummary]:
    from spillway.inspect.analyze import edges

    return edges(a)
