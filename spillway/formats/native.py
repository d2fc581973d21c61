"""The compiled record-framing walk (``native/framer.c``), built on first use and loaded with ctypes.

Pure Python frames ~165 MB/s of 50-200 byte records; the C loop is I/O bound. If no C compiler is
available (or ``SPILLWAY_NO_NATIVE=1``), callers fall back to the Python ``Framer`` — same results,
slower. Builds are cached per source hash under ``~/.cache/spillway/native``.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
from array import array
from collections.abc import Sequence
from functools import cache
from pathlib import Path
from types import EllipsisType
from typing import TYPE_CHECKING, Any

from spillway.cache import cache_root
from spillway.formats.stream_elements import INT32_MAX, RECORD_TAGS, size_bounds

if TYPE_CHECKING:
    from spillway.formats.channel_file import Walked

SOURCE = Path(__file__).with_name("native") / "framer.c"


class FramerRules(ctypes.Structure):
    """``framer_rules_t``: what ``stream_elements`` declares, in the form the C loop reads."""

    _fields_ = [
        ("min_len", ctypes.c_int32 * 256),
        ("max_len", ctypes.c_int32 * 256),
        ("limit", ctypes.c_int64),
        ("is_record", ctypes.c_uint8 * 256),
    ]


class FramerState(ctypes.Structure):
    _fields_ = [
        ("rules", ctypes.POINTER(FramerRules)),
        ("total", ctypes.c_int64),
        ("consumed", ctypes.c_int64),
        ("left", ctypes.c_int64),
        ("length", ctypes.c_int32),
        ("need_tag", ctypes.c_int32),
        ("head_len", ctypes.c_int32),
        ("dead", ctypes.c_int32),
        ("head", ctypes.c_uint8 * 4),
        ("records", ctypes.c_int64),
        ("tag_counts", ctypes.POINTER(ctypes.c_int64)),  # 256 counters, or NULL (the file-by-file framing: 10 000
        ("record_tags", ctypes.c_int64),  # channels at ~100 bytes each instead of ~2 KiB)
        ("start_piece", ctypes.c_int64),
        ("start_pos", ctypes.c_int64),
        ("fault_kind", ctypes.c_int32),
        ("fault_tag", ctypes.c_int32),
        ("fault_value", ctypes.c_int64),
        ("fault_piece", ctypes.c_int64),
        ("fault_pos", ctypes.c_int64),
        ("fault_remaining", ctypes.c_int64),
        ("tag", ctypes.c_int32),
        ("max_end", ctypes.c_int64),
    ]


FAULT_LENGTH = 1  # fault_kind values set by spw_feed
FAULT_ELEMENT = 2


@cache
def framer_rules(tags: frozenset[int], limit: int | None) -> FramerRules:
    """The C framer's tables for one set of allowed tags, from ``stream_elements`` (built once, shared)."""
    rules = FramerRules()
    for tag, (low, high) in enumerate(size_bounds(tags)):
        rules.min_len[tag] = low
        rules.max_len[tag] = high
    rules.limit = INT32_MAX if limit is None else limit
    for tag in RECORD_TAGS:
        rules.is_record[tag] = 1
    return rules


def _cache_dir() -> Path:
    return cache_root() / "native"


# What every file-framing call ends with (see ``_framing_tail``): states (framer_t), statuses (int32, in/out),
# the read buffer, its size, the largest run of unlisted chunks read through.
_FRAMING_TAIL: list[type[ctypes._SimpleCData[Any]]] = [
    ctypes.c_void_p,
    ctypes.c_void_p,
    ctypes.c_void_p,
    ctypes.c_int64,
    ctypes.c_int64,
]


@cache
def library() -> ctypes.CDLL | None:
    if os.environ.get("SPILLWAY_NO_NATIVE"):
        return None
    source = SOURCE.read_bytes()
    target = _cache_dir() / f"framer-{hashlib.sha256(source).hexdigest()[:16]}.so"
    if not target.exists():  # built once per source: the modules for it load only then (start-up time)
        import shutil
        import subprocess
        import tempfile

        compiler = shutil.which(os.environ.get("CC", "cc")) or shutil.which("gcc")
        if compiler is None:
            return None
        target.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(dir=target.parent) as tmp:
            out = Path(tmp) / target.name
            result = subprocess.run(
                [compiler, "-O2", "-shared", "-fPIC", "-o", str(out), str(SOURCE)],
                capture_output=True,
            )
            if result.returncode != 0:
                return None
            out.replace(target)  # atomic: concurrent builders never load a half-written library
    lib = ctypes.CDLL(str(target))
    lib.spw_feed.restype = ctypes.c_int64
    lib.spw_feed.argtypes = [
        ctypes.POINTER(FramerState),
        ctypes.c_void_p,
        ctypes.c_int64,
        ctypes.c_int64,
        ctypes.c_int64,
    ]
    lib.spw_walk.restype = ctypes.c_int64
    lib.spw_walk.argtypes = [
        ctypes.c_int,
        ctypes.c_int64,
        ctypes.c_int64,
        ctypes.POINTER(ctypes.c_int64),
        ctypes.POINTER(ctypes.c_int32),
        ctypes.c_int64,
        ctypes.POINTER(ctypes.c_int64),
        ctypes.POINTER(ctypes.c_int32),
    ]
    lib.spw_frame_chunks.restype = ctypes.c_int
    lib.spw_frame_chunks.argtypes = [
        ctypes.POINTER(FramerState),
        ctypes.c_int,
        ctypes.c_int64,
        ctypes.POINTER(ctypes.c_int64),
        ctypes.POINTER(ctypes.c_int32),
        ctypes.c_int64,
        ctypes.c_void_p,
        ctypes.c_int64,
    ]
    lib.spw_frame_batch.restype = None
    lib.spw_frame_batch.argtypes = [
        ctypes.POINTER(FramerRules),
        ctypes.c_int64,
        ctypes.c_void_p,  # part_first (int64)
        ctypes.c_void_p,  # totals (int64)
        ctypes.c_void_p,  # complete (int8)
        ctypes.c_void_p,  # fds (int32)
        ctypes.c_void_p,  # bases (int64)
        ctypes.c_void_p,  # chunk_first (int64)
        ctypes.c_void_p,  # offsets (int64)
        ctypes.c_void_p,  # lengths (int32)
        ctypes.c_void_p,  # buf
        ctypes.c_int64,
        ctypes.c_void_p,  # records (int64, out): stream elements
        ctypes.c_void_p,  # status (int32, out)
        ctypes.c_void_p,  # stream_records (int64, out): of them, records
    ]
    lib.spw_frame_file.restype = ctypes.c_int
    lib.spw_frame_file.argtypes = [
        ctypes.c_int,
        ctypes.c_int64,
        ctypes.c_int64,
        ctypes.c_void_p,  # offsets (int64)
        ctypes.c_void_p,  # lengths (int32)
        ctypes.c_void_p,  # slots (int64)
        *_FRAMING_TAIL,
    ]
    lib.spw_walk_frame.restype = ctypes.c_int64
    lib.spw_walk_frame.argtypes = [
        ctypes.c_int,
        ctypes.c_int64,
        ctypes.c_int64,
        ctypes.c_void_p,  # walk: offsets (int64, out)
        ctypes.c_void_p,  # walk: lengths (int32, out)
        ctypes.c_int64,
        ctypes.POINTER(ctypes.c_int64),
        ctypes.POINTER(ctypes.c_int32),
        ctypes.c_int64,
        ctypes.c_void_p,  # listed offsets (int64)
        ctypes.c_void_p,  # their slots (int64)
        *_FRAMING_TAIL,
    ]
    lib.spw_claim.restype = ctypes.c_int64
    lib.spw_claim.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int32, ctypes.c_void_p]
    lib.spw_gather.restype = ctypes.c_int64
    lib.spw_gather.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p]
    lib.spw_init_states.restype = None
    lib.spw_init_states.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.POINTER(FramerRules), ctypes.c_void_p]
    lib.spw_in_element.restype = ctypes.c_int
    lib.spw_in_element.argtypes = [ctypes.c_void_p]
    lib.spw_locate.restype = ctypes.c_int64
    lib.spw_locate.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p]
    lib.spw_stream_records.restype = ctypes.c_int64
    lib.spw_stream_records.argtypes = [ctypes.POINTER(FramerState)]
    lib.spw_crc_rows.restype = None
    lib.spw_crc_rows.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p]
    return lib


class FrameBatch:
    """Channels for one ``spw_frame_batch`` call, as the flat arrays it reads (``array`` buffers, no copies)."""

    def __init__(self) -> None:
        self.part_first = array("q", [0])
        self.totals = array("q")
        self.complete = array("b")
        self.fds = array("i")
        self.bases = array("q")
        self.chunk_first = array("q", [0])
        self.offsets = array("q")
        self.lengths = array("i")

    def __len__(self) -> int:
        return len(self.totals)

    def add(self, parts: Sequence[tuple[int, int, list[int], Sequence[int]]], total: int, complete: bool) -> None:
        """One channel: (fd, base, chunk offsets, payload lengths) per part, its payload length, and whether
        it must end on a record boundary."""
        for fd, base, offsets, lengths in parts:
            self.fds.append(fd)
            self.bases.append(base)
            self.offsets.extend(offsets)
            self.lengths.extend(lengths)
            self.chunk_first.append(len(self.offsets))
        self.part_first.append(len(self.fds))
        self.totals.append(total)
        self.complete.append(complete)


def frame_batch(batch: FrameBatch, rules: FramerRules, buffer: bytearray) -> list[tuple[int, int] | None]:
    """(stream elements, of them records) per channel of the batch, None where the channel did not frame
    cleanly (see spw_frame_batch). The C loop releases the GIL."""
    lib = library()
    assert lib is not None
    n = len(batch)
    records = array("q", [0]) * n
    status = array("i", [0]) * n
    stream_records = array("q", [0]) * n

    def address(a: array[Any]) -> int:
        return a.buffer_info()[0]  # the arrays outlive the call and are not resized during it

    lib.spw_frame_batch(
        ctypes.byref(rules),
        n,
        address(batch.part_first),
        address(batch.totals),
        address(batch.complete),
        address(batch.fds),
        address(batch.bases),
        address(batch.chunk_first),
        address(batch.offsets),
        address(batch.lengths),
        ctypes.addressof((ctypes.c_char * len(buffer)).from_buffer(buffer)),
        len(buffer),
        address(records),
        address(status),
        address(stream_records),
    )
    return [(r, d) if s == 0 else None for r, d, s in zip(records, stream_records, status, strict=True)]


def _address(a: array[Any]) -> int:
    return a.buffer_info()[0]  # the arrays outlive the call and are not resized during it


def _framer_states(rules: FramerRules, totals: array[int]) -> tuple[ctypes.Array[FramerState], array[int]]:
    """A framer state per channel (``totals``: each one's payload length) and a status per channel, all zero."""
    lib = library()
    assert lib is not None
    n = len(totals)
    states = (FramerState * max(n, 1))()
    lib.spw_init_states(states, n, ctypes.byref(rules), _address(totals))
    return states, array("i", [0]) * n


def _framing_tail(
    states: ctypes.Array[FramerState] | None, status: array[int], buffer: bytearray, max_gap: int
) -> tuple[int, int, int, int, int]:
    """The arguments every file-framing call ends with: the channels' states and statuses, the read buffer and its
    size, and how many bytes of unlisted chunks are read through rather than starting a new read."""
    assert states is not None
    address = ctypes.addressof((ctypes.c_char * len(buffer)).from_buffer(buffer))
    return ctypes.addressof(states), _address(status), address, len(buffer), max_gap


class FileFraming:
    """Many channels framed file by file (``spw_frame_file``): each file is read once, in file order, and every
    chunk goes to the framer of its channel. ``add`` the channels, then for each phase (a channel's parts in stream
    order: phase 0 its first part, phase 1 its second) run ``frame_file`` on every file of that phase — files of
    one phase on any threads, phases one after the other — then read ``results``."""

    MAX_GAP = 64 << 10  # bytes of unlisted chunks read through rather than starting a new read

    def __init__(self, rules: FramerRules) -> None:
        self.rules = rules
        self.totals = array("q")
        self.complete = array("b")
        # phase -> (fd, base) -> chunk offsets, payload lengths, channel slots
        self.files: list[dict[tuple[int, int], tuple[array[int], array[int], array[int]]]] = []
        self.states: ctypes.Array[FramerState] | None = None
        self.status = array("i")

    def add(self, parts: Sequence[tuple[int, int, list[int], Sequence[int]]], total: int, complete: bool) -> int:
        """One channel: (fd, base, chunk offsets, payload lengths) per part in stream order, each part's offsets
        increasing; its payload length; whether it must end on a record boundary. Returns its slot."""
        slot = len(self.totals)
        self.totals.append(total)
        self.complete.append(complete)
        for phase, (fd, base, offsets, lengths) in enumerate(parts):
            if phase == len(self.files):
                self.files.append({})
            listed = self.files[phase].get((fd, base))
            if listed is None:
                listed = self.files[phase][fd, base] = (array("q"), array("i"), array("q"))
            listed[0].extend(offsets)
            listed[1].extend(lengths)
            listed[2].extend(array("q", [slot]) * len(offsets))
        return slot

    def start(self) -> None:
        self.states, self.status = _framer_states(self.rules, self.totals)

    def frame_file(self, phase: int, file: tuple[int, int], buffer: bytearray) -> None:
        """Feed one file's chunks of one phase (releases the GIL; files of a phase touch disjoint channels)."""
        lib = library()
        assert lib is not None and self.states is not None
        offsets, lengths, slots = self.files[phase][file]
        lib.spw_frame_file(
            file[0],
            file[1],
            len(offsets),
            _address(offsets),
            _address(lengths),
            _address(slots),
            *_framing_tail(self.states, self.status, buffer, self.MAX_GAP),
        )

    def results(self) -> list[tuple[int, int] | None]:
        """(stream elements, of them records) per channel, None where it did not frame cleanly."""
        lib = library()
        assert lib is not None and self.states is not None
        out: list[tuple[int, int] | None] = []
        size = ctypes.sizeof(FramerState)
        base = ctypes.addressof(self.states)
        for slot, status in enumerate(self.status):
            state = self.states[slot]
            if status != 0 or (self.complete[slot] and lib.spw_in_element(base + slot * size)):
                out.append(None)
            else:
                out.append((state.records, lib.spw_stream_records(ctypes.byref(state))))
        return out


INT64_MAX = (1 << 63) - 1
# a guessed channel: whether it must end on a record boundary, and (fd, base, id of the offsets list) per part
GuessKey = tuple[bool, tuple[tuple[int, int, int], ...]]
REDO = -1  # spw_walk_frame: a read failed or the walk's arrays were too small


class WalkFraming:
    """Channels framed while their files' chunk chains are walked (``spw_walk_frame``): each file is read once,
    front to back, for both. The channels are a guess made from the handles before the walk and the chunk rules
    have said what is framed; ``result`` answers for a channel only where that guess framed exactly what the
    ordinary framing (``FileFraming``) would, and says when it cannot.

    ``add`` the channels (parts in stream order, each part's offsets increasing), ``start``, then per phase
    (phases one after the other, the files of one on any threads) ``walk_frame`` each file not walked yet and
    ``frame_walked`` each file walked in an earlier phase."""

    MAX_GAP = FileFraming.MAX_GAP

    def __init__(self, rules: FramerRules) -> None:
        self.rules = rules
        self.complete = array("b")
        self.slots: dict[GuessKey, int] = {}  # see ``slot``
        self.keep: list[list[int]] = []  # the offsets lists the slots were made from (their ids stay theirs)
        # phase -> (fd, base) -> listed chunk offsets, their channel slots
        self.files: list[dict[tuple[int, int], tuple[array[int], array[int]]]] = []
        self.states: ctypes.Array[FramerState] | None = None
        self.status = array("i")

    @staticmethod
    def key(parts: Sequence[tuple[int, int, list[int]]], complete: bool) -> GuessKey:
        return complete, tuple((fd, base, id(offsets)) for fd, base, offsets in parts)

    def add(self, parts: Sequence[tuple[int, int, list[int]]], complete: bool) -> None:
        """One channel: (fd, base, the handle's chunk offsets) per part in stream order."""
        key = self.key(parts, complete)
        if key in self.slots:
            return
        slot = self.slots[key] = len(self.complete)
        self.complete.append(complete)
        for phase, (fd, base, offsets) in enumerate(parts):
            self.keep.append(offsets)
            if phase == len(self.files):
                self.files.append({})
            listed = self.files[phase].get((fd, base))
            if listed is None:
                listed = self.files[phase][fd, base] = (array("q"), array("q"))
            listed[0].extend(offsets)
            listed[1].extend(array("q", [slot]) * len(offsets))

    def start(self) -> None:
        # no payload length to hold a channel to while walking: the framer records how far it got (max_end)
        self.states, self.status = _framer_states(self.rules, array("q", [INT64_MAX]) * len(self.complete))

    def walk_frame(self, phase: int, file: tuple[int, int], size: int, buffer: bytearray) -> Walked | None:
        """Walk one file and frame its chunks of this phase: the walk as ``walk_file`` gives it, or None where the
        file must be walked again the ordinary way (its channels then frame the ordinary way too)."""
        lib = library()
        assert lib is not None and self.states is not None
        offsets, slots = self.files[phase][file] if file in self.files[phase] else (array("q"), array("q"))
        cap = max(16, size // 4096, 2 * len(offsets))
        walked, lengths = array("q", [0]) * cap, array("i", [0]) * cap
        err_off, err_kind = ctypes.c_int64(0), ctypes.c_int32(0)
        n = lib.spw_walk_frame(
            file[0],
            file[1],
            size,
            _address(walked),
            _address(lengths),
            cap,
            ctypes.byref(err_off),
            ctypes.byref(err_kind),
            len(offsets),
            _address(offsets),
            _address(slots),
            *_framing_tail(self.states, self.status, buffer, self.MAX_GAP),
        )
        if n == REDO:
            return None
        del walked[n:], lengths[n:]
        error = (err_off.value, WALK_ERRORS.get(err_kind.value, "?")) if err_kind.value else None
        return walked, lengths, error

    def frame_walked(self, phase: int, file: tuple[int, int], walked: Walked, buffer: bytearray) -> None:
        """Frame one file's chunks of a later phase, its chunks known from the walk (a listed offset that starts
        no chunk: status 2, as in ``walk_frame``)."""
        lib = library()
        assert lib is not None and self.states is not None
        offsets, slots = self.files[phase][file]
        found = locate(walked[0], offsets)
        assert found is not None
        where = found[0]
        keep = array("q", (k for k in range(len(offsets)) if where[k] >= 0))
        for k in range(len(offsets)):
            if where[k] < 0:
                self.status[slots[k]] = 2
        listed = array("q", (offsets[k] for k in keep))
        lengths = array("i", (walked[1][where[k]] for k in keep))
        owners = array("q", (slots[k] for k in keep))
        lib.spw_frame_file(
            file[0],
            file[1],
            len(listed),
            _address(listed),
            _address(lengths),
            _address(owners),
            ctypes.addressof(self.states),
            _address(self.status),
            ctypes.addressof((ctypes.c_char * len(buffer)).from_buffer(buffer)),
            len(buffer),
            self.MAX_GAP,
        )

    def slot(self, parts: Sequence[tuple[int, int, list[int]]], complete: bool) -> int | None:
        """The slot of a channel framed as these parts (the same offsets lists), if it was added."""
        return self.slots.get(self.key(parts, complete))

    def result(self, slot: int, total: int) -> tuple[int, int] | EllipsisType | None:
        """What ``FileFraming`` would give for this channel with payload length ``total``: (stream elements, of them
        records), or None (it does not frame cleanly); ``...`` where this framing cannot tell."""
        lib = library()
        assert lib is not None and self.states is not None
        status = self.status[slot]
        if status not in (0, 1):
            return ...
        state = self.states[slot]
        if status == 1 or state.max_end > total:
            return None  # with the length known, framing would have stopped at that element's length (or earlier)
        if self.complete[slot] and lib.spw_in_element(ctypes.byref(state)):
            return None
        return state.records, lib.spw_stream_records(ctypes.byref(state))


WALK_ERRORS = {
    1: "file ends inside a chunk length field",
    2: "negative chunk length",
    3: "chunk runs past the end of the data",
    4: "read error",
}


def walk_file(fd: int, base: int, size: int) -> tuple[array[int], array[int], tuple[int, str] | None] | None:
    """Chunk chain of a file-backed blob in C: the offsets of the chunks' length fields (increasing, ``q``), their
    payload lengths (``i``), and (error offset, why) where the chain breaks or None.

    None when the native library is unavailable (callers use the construct-based walk)."""
    lib = library()
    if lib is None:
        return None
    cap = max(16, size // 4096)
    while True:
        offsets, lengths = array("q", [0]) * cap, array("i", [0]) * cap
        err_off, err_kind = ctypes.c_int64(0), ctypes.c_int32(0)
        n = lib.spw_walk(
            fd,
            base,
            size,
            ctypes.cast(_address(offsets), ctypes.POINTER(ctypes.c_int64)),
            ctypes.cast(_address(lengths), ctypes.POINTER(ctypes.c_int32)),
            cap,
            ctypes.byref(err_off),
            ctypes.byref(err_kind),
        )
        if n >= 0:
            break
        cap *= 4
    del offsets[n:], lengths[n:]  # in place: no second copy of a large map
    error = (err_off.value, WALK_ERRORS.get(err_kind.value, "?")) if err_kind.value else None
    return offsets, lengths, error


def locate(sorted_offsets: array[int], offsets: array[int]) -> tuple[array[int], int] | None:
    """The index of each of ``offsets`` among ``sorted_offsets`` (-1: not there) and how many were not found;
    None without the native library."""
    lib = library()
    if lib is None:
        return None
    out = array("q", [0]) * len(offsets)
    missing = lib.spw_locate(
        _address(sorted_offsets), len(sorted_offsets), _address(offsets), len(offsets), _address(out)
    )
    return out, missing


def claim(owner: array[int], positions: array[int], who: int, lengths: array[int]) -> int | None:
    """``spw_claim``: mark the chunks at ``positions`` (``q``) as ``who``'s in ``owner`` (``i``, -1: unclaimed) if
    every one is unclaimed and none repeats, and return their payload bytes (``lengths``: ``i``, per chunk); else
    None, ``owner`` unchanged. Without the native library: None (the caller checks one by one)."""
    lib = library()
    if lib is None:
        return None
    paid = lib.spw_claim(_address(owner), _address(positions), len(positions), who, _address(lengths))
    return None if paid < 0 else int(paid)


def gather(lengths: array[int], positions: array[int]) -> tuple[array[int], int] | None:
    """The payload lengths (``i``) of the chunks at ``positions`` and their sum; None without the native library."""
    lib = library()
    if lib is None:
        return None
    out = array("i", [0]) * len(positions)
    total = lib.spw_gather(_address(lengths), _address(positions), len(positions), _address(out))
    return out, int(total)
