"""Read and write ``_metadata``: bytes ⇄ the model in ``spillway.model.checkpoint``.

Decoding runs the layout compiled by ``spillway.formats.fastparse`` first (fast: each operator becomes
its model as soon as it is parsed, so only one operator's parse tree is alive at a time); if it fails
for any reason, the interpreted layout re-reads the bytes to produce the precise error (field path,
offset). Both enforce the same bounds.
Encoding goes model → construct containers → the interpreted layout's ``build`` — the inverse of
parsing, so ``encode(decode(b)) == b`` for every file Flink writes.
"""

from __future__ import annotations

import gc
import io
import struct
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cache, partial
from typing import Any

from construct import ConstructError, Container, ListContainer

from spillway.flink.features import SUPPORTED_VERSIONS, FormatFeatures, dialects, format_features
from spillway.formats.errors import CheckpointFormatError, from_construct
from spillway.formats.fastparse import Decoded, compile_fast
from spillway.formats.handles import ChannelDecode, channel_codec, decode_handle, encode_handle, fast_decoders
from spillway.formats.javaser import JavaEnum, JavaObject, JavaSerializationError, read_java_object
from spillway.formats.metadata import METADATA_MAGIC, metadata_layout, operator_layout
from spillway.model.checkpoint import (
    CheckpointMetadata,
    CheckpointProperties,
    MasterState,
    OperatorState,
    OperatorStreamHandle,
    SubtaskState,
)

# ==================================================================================================
# bytes -> model


def read_header(data: bytes, file: str) -> int:
    """Check magic and version; return the version."""
    if len(data) < 8:
        raise CheckpointFormatError(
            file, 0, "header", f"file is {len(data)} bytes long, a Flink _metadata file has at least 8"
        )
    magic, version = struct.unpack_from(">Ii", data)
    if magic != METADATA_MAGIC:
        raise CheckpointFormatError(
            file, 0, "header.magic", f"not a Flink _metadata file: magic {magic:#010x}, expected 0x4960672d"
        )
    if version not in SUPPORTED_VERSIONS:
        hint = " (Flink 1.0-1.2 savepoint, not readable by any current Flink)" if version == 1 else ""
        raise CheckpointFormatError(
            file,
            4,
            "header.version",
            f"unknown metadata format version {version}{hint}; known: {SUPPORTED_VERSIONS[0]}-{SUPPORTED_VERSIONS[-1]}",
        )
    return version


class _Collector:
    freeze = False  # see freeze_after_pauses()


def freeze_after_pauses() -> None:
    """For a short-lived process (the CLI): at the end of each ``paused_gc``, move every object the
    cycle collector tracks to its permanent generation (``gc.freeze``), where no collection looks.

    The collector counts allocations while paused; the first collection afterwards walks every young
    object: a decoded 100 MB ``_metadata`` (about 2 M tracked objects), then again as they age into
    the older generations (measured: 0.6-0.7 s CPU of a 3.8 s ``dump``). The objects are acyclic and
    live as long as the command; reference counting still frees them. A cycle that is garbage at
    that moment would only be collected after ``gc.unfreeze()``: harmless in a process that ends with
    its command, which is why a library caller is not opted in."""
    _Collector.freeze = True


@contextmanager
def paused_gc() -> Iterator[None]:
    """Decoding allocates millions of small acyclic objects; the cycle collector would run thousands
    of times for nothing (measured: 4x slower decode of a 70 MB file). Reference counting still frees."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if _Collector.freeze:
            gc.freeze()
        if was_enabled:
            gc.enable()


def decode_metadata(data: bytes, file: str = "_metadata") -> CheckpointMetadata:
    with paused_gc():
        return _decode(data, file)


# From this size on a ``_metadata`` is decoded by the parser with its handle cases inlined. Measured on a V6 file
# (benchmarks/README.md, "two parsers"): generating that parser costs ~12 ms more CPU than the plain one (most of
# a small command's decode) and saves ~1.4 ms per MiB of handle-heavy metadata, so it pays from ~9 MiB on.
INLINED_FROM = 8 << 20


@cache
def fast_parser(version: int, inline: bool = True) -> Callable[[bytes], Any]:
    """The whole-file layout of ``version`` compiled to a parser whose ``operators`` are models (``inline``:
    see ``compile_fast``; both give the same values and reject the same bytes)."""
    hooks: dict[int, Callable[[Any], Any] | Decoded] = {
        id(operator_layout(features)): partial(_operator, features=features) for features in dialects(version)
    }
    hooks.update(fast_decoders())
    return compile_fast(metadata_layout(version), hooks, inline=inline)


def _decode(data: bytes, file: str) -> CheckpointMetadata:
    version = read_header(data, file)
    try:
        parsed = fast_parser(version, len(data) >= INLINED_FROM)(data)
        decoded = True
    except Exception:
        parsed = _diagnose(data, version, file)
        decoded = False
    body = parsed["body"]
    features = format_features(version, body.get("dialect"))
    checkpoint = CheckpointMetadata(
        format_version=version,
        checkpoint_id=body["checkpoint_id"],
        operators=body["operators"] if decoded else [_operator(o, features) for o in body["operators"]],
        master_states=[
            MasterState(m["blob"]["name"], m["blob"]["version"], m["blob"]["payload"]) for m in body["master_states"]
        ],
        format_dialect=features.dialect,
    )
    if features.properties:
        raw = body["properties_raw"]
        checkpoint.properties_raw = raw
        start = len(data) - len(raw)
        try:
            checkpoint.properties = properties_from_java(read_java_object(raw))
        except JavaSerializationError as exc:
            if not raw or exc.unsupported is False:
                raise CheckpointFormatError(
                    file, start + exc.offset, "properties", f"CheckpointProperties: {exc}"
                ) from None
            checkpoint.properties_note = str(exc)
    return checkpoint


def _diagnose(data: bytes, version: int, file: str) -> Any:
    stream = io.BytesIO(data)
    try:
        return metadata_layout(version).parse_stream(stream)
    except ConstructError as exc:
        raise from_construct(exc, file, stream.tell(), len(data)) from None


def _operator_handle(c: Any) -> OperatorStreamHandle | None:
    return None if c is None else decode_handle(c)


def _subtask_common(s: Any, sub: SubtaskState) -> SubtaskState:
    sub.managed_operator_present = s["managed_operator_present"]
    sub.managed_operator_state = _operator_handle(s["managed_operator_state"])
    sub.raw_operator_present = s["raw_operator_present"]
    sub.raw_operator_state = _operator_handle(s["raw_operator_state"])
    sub.managed_keyed_state = decode_handle(s["managed_keyed_state"])
    sub.raw_keyed_state = decode_handle(s["raw_keyed_state"])
    return sub


def _operator(o: Any, features: FormatFeatures) -> OperatorState:
    op = OperatorState(
        operator_id=o["operator_id"],
        parallelism=o["parallelism"],
        max_parallelism=o["max_parallelism"],
        name=o.get("name") or None,
        uid=o.get("uid") or None,
    )
    if features.legacy_subtask_fields:
        op.chain_length = o["chain_length"]
        for s in o["subtasks"]:
            sub = _subtask_common(s, SubtaskState(s["index"]))
            sub.legacy_duration = s["legacy_duration"]
            sub.legacy_state_count = s["legacy_state_count"]
            op.subtasks.append(sub)
        return op
    op.coordinator_state = decode_handle(o["coordinator_state"])
    if o["subtask_count"] < 0:
        op.fully_finished = True
        op.finished_marker = o["subtask_count"]
        return op
    decode_input, decode_output, _ = channel_codec(features.channel_layout)
    for e in o["subtasks"]:
        marker = e["marker"]
        if marker < 0:
            op.subtasks.append(SubtaskState(-marker - 1, finished=True))
            continue
        s = e["state"]
        sub = _subtask_common(s, SubtaskState(marker))
        sub.input_channel_state = _channels(s["input_channel_state"], decode_input, marker)
        sub.result_subpartition_state = _channels(s["result_subpartition_state"], decode_output, marker)
        if features.ref_checkpoint_ids:
            sub.ref_marker = s["ref_marker"]
            sub.ref_checkpoint_id = s["ref_checkpoint_id"]
        op.subtasks.append(sub)
    return op


def _channels(parsed: list[Any], decode: ChannelDecode, subtask: int) -> list[Any]:
    """A subtask's channel handles as models: the fast parser's typed lists hold them already."""
    if parsed and not isinstance(parsed[0], dict):
        return parsed if type(parsed) is list else list(parsed)
    return [decode(h, subtask) for h in parsed]


def properties_from_java(obj: Any) -> CheckpointProperties:
    if not isinstance(obj, JavaObject) or not obj.class_name.endswith(".CheckpointProperties"):
        name = obj.class_name if isinstance(obj, JavaObject) else type(obj).__name__
        raise JavaSerializationError(f"expected CheckpointProperties, found {name}", 0, unsupported=True)
    f = obj.fields
    kind = f.get("checkpointType")
    ctype: dict[str, Any] = {}
    if isinstance(kind, JavaObject):
        ctype["class"] = kind.class_name.rsplit(".", 1)[-1]
        for key, value in kind.fields.items():
            text = value.constant if isinstance(value, JavaEnum) else value
            ctype[_snake(key)] = text
    return CheckpointProperties(
        discard_cancelled=bool(f.get("discardCancelled")),
        discard_failed=bool(f.get("discardFailed")),
        discard_finished=bool(f.get("discardFinished")),
        discard_subsumed=bool(f.get("discardSubsumed")),
        discard_suspended=bool(f.get("discardSuspended")),
        forced=bool(f.get("forced")),
        unclaimed=bool(f.get("unclaimed")),
        checkpoint_type=ctype,
    )


def _snake(name: str) -> str:
    return "".join("_" + ch.lower() if ch.isupper() else ch for ch in name)


# ==================================================================================================
# model -> bytes


def encode_metadata(checkpoint: CheckpointMetadata) -> bytes:
    v = checkpoint.format_version
    try:
        features = checkpoint.features
    except ValueError:
        raise ValueError(f"cannot write metadata format version {v} (dialect {checkpoint.format_dialect})") from None
    body = Container(
        checkpoint_id=checkpoint.checkpoint_id,
        master_states=ListContainer(
            Container(magic=None, blob=Container(version=m.version, name=m.name, payload=m.payload))
            for m in checkpoint.master_states
        ),
        operators=ListContainer(_operator_c(o, features) for o in checkpoint.operators),
        dialect=features.dialect,
    )
    if features.properties:
        if checkpoint.properties_raw is None:
            raise ValueError("metadata V4+ needs the serialized CheckpointProperties (properties_raw)")
        body["properties_raw"] = checkpoint.properties_raw
    return bytes(metadata_layout(v).build(Container(header=Container(magic=METADATA_MAGIC, version=v), body=body)))


def _present_flag(stored: int | None, handle: OperatorStreamHandle | None) -> int:
    # Flink writes 1/0; a file may carry any non-zero value (or 1 with a null handle): keep it.
    if handle is not None:
        return stored if stored else 1
    return stored if stored is not None else 0


def _subtask_common_c(s: SubtaskState) -> Container:
    managed = _present_flag(s.managed_operator_present, s.managed_operator_state)
    raw = _present_flag(s.raw_operator_present, s.raw_operator_state)
    return Container(
        managed_operator_present=managed,
        managed_operator_state=encode_handle(s.managed_operator_state) if managed else None,
        raw_operator_present=raw,
        raw_operator_state=encode_handle(s.raw_operator_state) if raw else None,
        managed_keyed_state=encode_handle(s.managed_keyed_state),
        raw_keyed_state=encode_handle(s.raw_keyed_state),
    )


def _operator_c(o: OperatorState, features: FormatFeatures) -> Container:
    c = Container(operator_id=o.operator_id, parallelism=o.parallelism, max_parallelism=o.max_parallelism)
    if features.names_and_uids:
        c["name"] = o.name or ""
        c["uid"] = o.uid or ""
    if features.legacy_subtask_fields:
        c["chain_length"] = o.chain_length
        subs = ListContainer()
        for s in o.subtasks:
            sc = _subtask_common_c(s)
            sc.update(
                {"index": s.index, "legacy_duration": s.legacy_duration, "legacy_state_count": s.legacy_state_count}
            )
            subs.append(sc)
        c["subtasks"] = subs
        return c
    c["coordinator_state"] = encode_handle(o.coordinator_state)
    if o.fully_finished:
        c["subtask_count"] = o.finished_marker if o.finished_marker < 0 else -1
        c["subtasks"] = None
        return c
    _, _, channel = channel_codec(features.channel_layout)
    entries = ListContainer()
    for s in o.subtasks:
        if s.finished:
            entries.append(Container(marker=-(s.index + 1), state=None))
            continue
        st = _subtask_common_c(s)
        st["input_channel_state"] = ListContainer(map(channel, s.input_channel_state))
        st["result_subpartition_state"] = ListContainer(map(channel, s.result_subpartition_state))
        if features.ref_checkpoint_ids:
            marker = 1 if s.ref_checkpoint_id is not None else (s.ref_marker if s.ref_marker != 1 else 0)
            st["ref_marker"] = marker
            st["ref_checkpoint_id"] = s.ref_checkpoint_id
        entries.append(Container(marker=s.index, state=st))
    c["subtask_count"] = len(entries)
    c["subtasks"] = entries
    return c
