"""validate frames the channels it expects to frame while it walks their files (each file read once for both),
before the chunk rules have said what is framed; it keeps that framing only where it is what the ordinary framing
would give. Damaged copies of real fixtures (bytes flipped at random, at chunk length fields and at record length
fields, files cut short) must give the same report both ways (``Copy.run`` compares them, and the serial run with
the pooled one)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from support.damaged import Copy, copy_fixture

import spillway.formats.native as native
from spillway.inspect.topology import load_plan
from spillway.inspect.validate import validate
from spillway.inspect.validate_engine import Engine
from spillway.model.checkpoint import RelativeFileHandle, channel_handles
from spillway.storage.load import load_checkpoint

FIXTURES = ["2.3.0-unaligned-p3", "1.20.3-unaligned", "2.3.0-one-file-per-subtask"]


def _chunk_starts(c: Copy) -> dict[Path, list[int]]:
    """Each channel-state file and the offsets of the chunks its handles list (from the copy's _metadata)."""
    out: dict[Path, list[int]] = {}
    for op in c.checkpoint().operators:
        for sub in op.subtasks:
            for h in channel_handles(sub.input_channel_state) + channel_handles(sub.result_subpartition_state):
                if isinstance(h.delegate, RelativeFileHandle):
                    out.setdefault(c.chk / h.delegate.relative_path, []).extend(h.offsets)
    return out


def _damage(c: Copy, rng: random.Random) -> str:
    files = _chunk_starts(c)
    path = rng.choice(sorted(files))
    data = bytearray(path.read_bytes())
    kind = rng.choice(["byte", "chunk-length", "record-length", "cut"])
    if kind == "byte":
        at = rng.randrange(len(data))
        data[at] ^= 1 << rng.randrange(8)
    elif kind == "chunk-length":  # a chunk's length field (the chunk chain)
        at = rng.choice(files[path]) + rng.randrange(4)
        data[at] ^= 1 << rng.randrange(8)
    elif kind == "record-length":  # the first bytes of a chunk's payload: a record's length field, or inside one
        at = rng.choice(files[path]) + 4 + rng.randrange(4)
        if at < len(data):
            data[at] ^= 1 << rng.randrange(8)
    else:
        at = rng.randrange(len(data))
        del data[at:]
    path.write_bytes(bytes(data))
    return f"{kind} at {at} of {path.name}"


@pytest.mark.parametrize("name", FIXTURES)
def test_damaged_copies_report_the_same_with_and_without_framing_while_walking(name: str, tmp_path: Path) -> None:
    rng = random.Random(name)
    for n in range(12):
        c = copy_fixture(name, tmp_path / str(n))
        what = _damage(c, rng)
        for plan in (True, False):
            try:
                c.run(plan=plan)
            except AssertionError as exc:
                raise AssertionError(f"{name}, {what}, plan={plan}: reports differ") from exc


@pytest.mark.parametrize("name", FIXTURES)
def test_an_intact_copy_is_framed_while_walking(name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The guess is right for every channel of an intact checkpoint: no channel is framed a second time."""
    c = copy_fixture(name, tmp_path)
    added: list[int] = []
    ordinary_add = native.FileFraming.add

    def add(self: native.FileFraming, *args: object, **kwargs: object) -> int:
        added.append(1)
        return ordinary_add(self, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(native.FileFraming, "add", add)
    for workers in (1, 3):
        report = validate(load_checkpoint(c.chk), load_plan(c.plan), workers=workers)
        assert report.channels_framed > 0 and report.records > 0
        assert not report.errors
    assert added == []
    Engine.frame_while_walking = False
    try:
        ordinary = validate(load_checkpoint(c.chk), load_plan(c.plan), workers=3)
    finally:
        Engine.frame_while_walking = True
    assert added  # the ordinary framing did the work there
    assert ordinary == report


def test_a_record_longer_than_its_channel_can_hold_is_found_without_a_plan(tmp_path: Path) -> None:
    """An input part framed alone may end inside a record whose rest is upstream, but a record cannot be longer
    than all the payload its logical channel can have: a length field of 0x7f000000 in the first record of an
    input part is a fault. Framed while walking, the channel's length is not known yet; the framing must still
    not call the part clean."""
    c = copy_fixture("1.20.3-unaligned", tmp_path)
    cp = c.checkpoint()
    h = next(
        h
        for op in cp.operators
        for sub in op.subtasks
        for h in channel_handles(sub.input_channel_state)
        if isinstance(h.delegate, RelativeFileHandle) and h.offsets
    )
    path = c.chk / h.delegate.relative_path
    data = bytearray(path.read_bytes())
    at = h.offsets[0] + 4  # the first record's length field: input state starts on a record boundary
    data[at : at + 4] = (0x7F000000).to_bytes(4, "big")
    path.write_bytes(bytes(data))
    report = c.run(plan=False)
    assert any(f.rule == "record-length" and f.file and f.file.endswith(path.name) for f in report.findings), [
        (f.rule, f.message) for f in report.findings
    ]
