"""Is the ``keys`` extractor (or ``key_fns`` function) the job's real key? Ask the source, and re-ask the output.

Flink put every in-flight record of a keyBy (HASH) edge on the channel to the downstream subtask that owns
the record's key group, computed with the job's real KeySelector. So under the right extractor every source
record sits on the old subtask owning its key group; under a wrong one most do not (``check_source_keys``,
run before anything is written). After writing, every record of a new HASH channel must sit on the new
subtask owning its key group (``check_output_keys``).

Both are independent of the router (``route``/``router``/``key_extract``): records are framed with the
inspect path's ``RecordReader`` and ``value_bytes``, keys come from ``formats.values.parse_key_extractor``
(or the user's function), and key groups from ``flink.keygroups`` (hashCode -> murmur -> key group ->
operator index). The router's own self-check (``verify.self_check``) reuses the router's key function and
so cannot see a wrong extractor.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Generator, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from spillway.errors import Message, Named, message_of
from spillway.flink.keygroups import java_boolean_hash, java_string_hash, key_group_for_hash, operator_index
from spillway.formats.channel_file import Blob, BlobError, FileBlob, InlineBlob, read_chunk_header
from spillway.formats.record_reader import RecordReader
from spillway.formats.values import KeyExtractor, ValueSpecError, parse_key_extractor, render_value
from spillway.inspect.analyze import value_bytes
from spillway.rescale.channel_writer import WrittenFile
from spillway.rescale.plan import HASH, EdgePlan, PartRef, RescalePlan, RescaleRefused

# Records checked per old logical channel before writing (every channel is checked). Under a wrong extractor
# most records of a channel are misplaced, so a few thousand per channel find it; the whole source is
# read again by the router anyway.
SOURCE_SAMPLE_PER_CHANNEL = 5000

KeyOf = Callable[[bytes], tuple[object, int]]  # value bytes -> (key, Java hashCode)


def _load_function(spec: str) -> Callable[..., object]:
    module, _, name = spec.partition(":")
    try:
        fn = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError, ValueError) as exc:
        raise RescaleRefused(Message(Named("key_fns", spec, entry=True), f": {exc}")) from None
    if not callable(fn):
        raise RescaleRefused(Message(Named("key_fns", spec, entry=True), " is not callable"))
    return fn


def _java_hash(key: object) -> int:
    """A ``key_fns`` function returns the key's Java hashCode (int) or a str key (hashed as java.lang.String)."""
    if isinstance(key, bool):
        return java_boolean_hash(key)
    if isinstance(key, int):
        return key
    if isinstance(key, str):
        return java_string_hash(key)
    # the function is broken, whatever the records: the same words as the router's
    raise RescaleRefused(
        Message(
            Named("key_fns", entry=True),
            f" returned {type(key).__name__}; return the key's Java hashCode (int) or a str",
        )
    )


def key_function(ep: EdgePlan) -> tuple[KeyOf, Message, str]:
    """(value -> (key, hashCode), how the user named it, value spec used to render an example)."""
    if ep.key_fn:
        fn = _load_function(ep.key_fn)
        spec = ep.key_fn

        def by_fn(value: bytes) -> tuple[object, int]:
            try:
                key = fn(value)
            except Exception as exc:  # a user function: any failure is a refusal, never a traceback
                raise RescaleRefused(
                    Message(Named("key_fns", spec, entry=True), f" failed: {type(exc).__name__}: {exc}")
                ) from None
            return key, _java_hash(key)

        return by_fn, Message(Named("key_fns", ep.key_fn, entry=True)), "auto"
    try:
        extractor: KeyExtractor = parse_key_extractor(ep.key or "")
    except ValueSpecError as exc:
        raise RescaleRefused(Message(f"edge {ep.label}: ", Named("keys", ep.key, entry=True), f": {exc}")) from None
    shown = extractor.value_type.spec if extractor.value_type.known else "auto"
    return extractor, Message(Named("keys", ep.key, entry=True)), shown


@dataclass
class Misplaced:
    """One record that does not sit on the subtask owning its key group."""

    value: str  # rendered
    key: str
    key_group: int | None
    owner: int | None
    sits_on: int
    where: str
    problem: str | None = None  # the value does not decode under the extractor

    def describe(self, parallelism: int) -> str:
        if self.problem is not None:
            return f"record {self.value} on {self.where} does not decode: {self.problem}"
        return (
            f"record {self.value} on {self.where}: key {self.key}, key group {self.key_group} "
            f"belongs to subtask {self.owner} of {parallelism}, but the record sits on subtask {self.sits_on}"
        )


@dataclass
class EdgeKeys:
    """What one edge's check found."""

    edge: EdgePlan
    named: Message  # keys[…]='long' / key_fns[…]='m:f': the argument that gave the extractor
    checked: int = 0
    mismatched: int = 0
    example: Misplaced | None = None


def _chunks(blob: Blob, offsets: Iterable[int]) -> Iterator[bytes]:
    for off in offsets:
        chunk = read_chunk_header(blob, off)
        yield blob.read_at(off + 4, chunk.length)


def _open(part: PartRef) -> Blob:
    if part.data is not None:
        return InlineBlob("inline", part.data)
    assert part.path is not None
    return FileBlob(Path(part.path), part.base, part.size)


def _values(pieces: Iterator[bytes], limit: int | None) -> Iterator[bytes]:
    """The user values of the records (not watermarks etc.) framed from a channel's payload, in order."""
    reader = RecordReader()
    seen = 0
    for data in pieces:
        for rec in reader.feed(data, None):
            value = value_bytes(rec)
            if value is None:
                continue
            yield value
            seen += 1
            if limit is not None and seen >= limit:
                return


def _check(
    found: EdgeKeys,
    key_of: KeyOf,
    render_spec: str,
    values: Iterator[bytes],
    parallelism: int,
    sits_on: int,
    where: str,
) -> None:
    ep = found.edge
    for value in values:
        found.checked += 1
        try:
            key, code = key_of(value)
        except (ValueSpecError, ValueError, TypeError) as exc:
            found.mismatched += 1
            if found.example is None:
                shown, _ = render_value(value, "auto")
                found.example = Misplaced(shown, "?", None, None, sits_on, where, str(exc))
            continue
        kg = key_group_for_hash(code, ep.max_parallelism)
        owner = operator_index(ep.max_parallelism, parallelism, kg)
        if owner == sits_on:
            continue
        found.mismatched += 1
        if found.example is None:
            shown, problem = render_value(value, render_spec)
            if problem is not None:
                shown, _ = render_value(value, "auto")
            found.example = Misplaced(shown, repr(key), kg, owner, sits_on, where)


def check_source_keys(plan: RescalePlan, per_channel: int | None = SOURCE_SAMPLE_PER_CHANNEL) -> list[EdgeKeys]:
    """For every re-routed HASH edge: up to ``per_channel`` records of every old logical channel, each
    compared with the old downstream subtask it sits on (key groups at the OLD parallelism)."""
    results: list[EdgeKeys] = []
    for ep in plan.edges:
        if ep.rule != HASH or not (ep.key or ep.key_fn):
            continue
        key_of, named, render_spec = key_function(ep)
        found = EdgeKeys(ep, named)
        for src in plan.sources:
            if src.edge != ep.index:
                continue
            pieces = _source_pieces(src.parts)
            try:
                where = f"old channel {src.label}"
                _check(found, key_of, render_spec, _values(pieces, per_channel), ep.old_down_p, src.down, where)
            except BlobError as exc:
                raise RescaleRefused(Message(f"{src.label}: channel state not readable: ", message_of(exc))) from None
            finally:
                pieces.close()
        results.append(found)
    return results


def _source_pieces(parts: tuple[PartRef, ...]) -> Generator[bytes, None, None]:
    for part in parts:
        blob = _open(part)
        try:
            yield from _chunks(blob, part.offsets)
        finally:
            blob.close()


def refuse_wrong_extractors(plan: RescalePlan, per_channel: int | None = SOURCE_SAMPLE_PER_CHANNEL) -> None:
    """Raise RescaleRefused if any checked source record of a re-routed HASH edge is not on the subtask
    owning its key group under the given extractor."""
    wrong = [f for f in check_source_keys(plan, per_channel) if f.mismatched]
    if not wrong:
        return
    lines: list[str] = []
    for f in wrong:
        ep = f.edge
        assert f.example is not None
        lines.append(
            Message(
                f"edge {ep.label}: under ",
                f.named,
                f", {f.mismatched} of {f.checked} checked in-flight records sit on a "
                f"subtask that does not own their key group (Flink placed them by the job's real key, so the key "
                f"extractor is likely wrong); e.g. {f.example.describe(ep.old_down_p)}",
            )
        )
    raise RescaleRefused(
        Message(
            Message.joined("; ", lines),
            ". Give the job's real key (",
            Named("keys", pair=("VERTEX", "EXTRACTOR")),
            " or ",
            Named("key_fns", pair=("VERTEX", "module:function")),
            "; spillway analyze --decode N shows the records)",
        )
    )


def check_output_keys(directory: Path, plan: RescalePlan, files: list[WrittenFile]) -> tuple[list[str], int]:
    """Every record of every new HASH-edge channel, re-read from the written files: is it on the new subtask
    owning its key group? Returns (problems, records checked)."""
    edges = {(ep.down_head, ep.gate): ep for ep in plan.edges if ep.rule == HASH and (ep.key or ep.key_fn)}
    keys = {ep.index: key_function(ep) for ep in edges.values()}
    problems: list[str] = []
    checked = 0
    for f in files:
        hashed = [(ch, edges[(f.operator_id, ch.gate)]) for ch in f.channels if (f.operator_id, ch.gate) in edges]
        if not hashed:
            continue
        blob = FileBlob(directory / f.name)
        try:
            for ch, ep in hashed:
                key_of, named, render_spec = keys[ep.index]
                found = EdgeKeys(ep, named)
                where = f"{f.name} (gate {ch.gate}, input channel {ch.up}) of new subtask {f.down}"
                try:
                    _check(
                        found,
                        key_of,
                        render_spec,
                        _values(_chunks(blob, ch.offsets), None),
                        ep.new_down_p,
                        f.down,
                        where,
                    )
                except BlobError as exc:
                    problems.append(Message(f"{where}: ", message_of(exc)))
                    continue
                checked += found.checked
                if found.example is not None:
                    problems.append(
                        Message(
                            f"{where}: {found.mismatched} of {found.checked} records not on the subtask owning "
                            "their key group under ",
                            named,
                            f", e.g. {found.example.describe(ep.new_down_p)}",
                        )
                    )
        finally:
            blob.close()
    return problems, checked
