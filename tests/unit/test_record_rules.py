"""validate's record rules (spillway/inspect/rules/records.py) on faults placed by hand in a channel of known
pieces: which rule each framing fault is, where it is in which file, and how the faults a damaged length field
caused become one finding at that field.

Expected values follow the module's documented rules and docs/format/damaged-records.md (Flink cuts its
recovery buffers from one chunk each; an element whole in its buffer is read whatever its length field says;
a length past the buffer drops what it covers), with positions chosen here, never read back from the code."""

from __future__ import annotations

from spillway.formats.channel_file import InlineBlob
from spillway.formats.damaged_length import Damage, Location
from spillway.formats.record_framing import FramingFault
from spillway.inspect.rules.records import FramedChannel, Piece, ReadBack, damaged_findings, record_findings

KEYS = (("op", "input", 0, 0, 0), ("up", "output", 1, 0, 0))
CHANNEL = FramedChannel("in(0,0)", "slow", 1, KEYS, complete=True)
ALONE = FramedChannel("in(0,0)", "slow", 1, KEYS[:1], complete=False)
PART = "slow#1 in(0,0)"


def _blob(name: str, base: int) -> InlineBlob:
    """A file's bytes from ``base`` on (an inline blob standing for a file: offsets are ``base`` + position)."""
    blob = InlineBlob(name, bytes(200))
    blob.base = base
    return blob


A, B = _blob("/chk/a", 1000), _blob("/chk/b", 5000)


def _rows(flagged) -> list[tuple]:  # type: ignore[no-untyped-def]
    return [(x.finding.rule, x.finding.message, x.finding.file, x.finding.offset) for x in flagged]


# ------------------------------------------------------------------ each fault on its own
def test_each_fault_kind_is_its_rule_located_in_its_piece() -> None:
    pieces = [Piece(PART, A, 4), Piece(PART, B, 12)]  # the channel's bytes start 4 into a, then 12 into b
    faults = [
        FramingFault("length", "bad length", 0, 6),
        FramingFault("tag", "bad tag", 1, 3),
        FramingFault("size", "wrong size", 1, 9),
        FramingFault("truncated", "cut", 1, 20),
    ]
    flagged = list(record_findings(CHANNEL, faults, pieces))
    assert _rows(flagged) == [
        ("record-length", f"bad length (in {PART})", "/chk/a", 1010),
        ("record-tag", f"bad tag (in {PART})", "/chk/b", 5015),
        ("record-tag", f"wrong size (in {PART})", "/chk/b", 5021),  # docs/validate.md: record-tag covers the size
        ("record-truncated", f"cut (in {PART})", "/chk/b", 5032),
    ]
    for x in flagged:
        assert (x.finding.operator, x.finding.subtask, x.finding.channel) == ("slow", 1, "in(0,0)")
        assert x.keys == KEYS  # the whole channel's bytes are in doubt


def test_a_fault_past_the_last_piece_has_no_place() -> None:
    (x,) = record_findings(CHANNEL, [FramingFault("truncated", "cut", 1, 0)], [Piece(PART, A, 0)])
    assert (x.finding.message, x.finding.file, x.finding.offset) == ("cut (in ?)", None, None)


def test_only_a_length_fault_of_a_part_framed_alone_says_what_the_bytes_left_were() -> None:
    pieces = [Piece(PART, A, 0)]
    faults = [FramingFault("length", "too long", 0, 0), FramingFault("tag", "bad tag", 0, 8)]
    alone = [x.finding.message for x in record_findings(ALONE, faults, pieces)]
    assert alone == [
        f"too long (in {PART}); framed without its output side, the bytes left are this part's and all "
        "output-side state's",
        f"bad tag (in {PART})",
    ]
    assert [x.finding.message for x in record_findings(CHANNEL, faults, pieces)] == [
        f"too long (in {PART})",
        f"bad tag (in {PART})",
    ]


# ------------------------------------------------------------------ no single damaged field
def _back(location: Location, starts: list[int], lengths: list[int], buffer_size: int = 32768) -> ReadBack:
    return ReadBack(location, starts, lengths, buffer_size)


TWO = [Piece(PART, A, 0, chunk=0), Piece(PART, B, 0, chunk=0)]  # a's 100 bytes, then b's 100


def test_the_first_fault_in_the_stream_says_the_damaged_field_is_not_known() -> None:
    """Faults listed out of stream order: the note goes on the one where the framing broke first."""
    later, first = FramingFault("length", "later", 1, 5), FramingFault("length", "first", 0, 50)
    back = _back(Location(50, None, (), searched=True), [0, 100], [100, 100])
    assert [m for _, m, _, _ in _rows(damaged_findings(CHANNEL, [later, first], TWO, back))] == [
        f"later (in {PART})",
        f"first; framing broke here, the damaged field is not known: no single corrected length field lets the "
        f"rest of the channel frame cleanly (in {PART})",
    ]


def test_a_search_that_gave_up_says_so() -> None:
    back = _back(Location(50, None, (), searched=False), [0, 100], [100, 100])
    (row,) = _rows(damaged_findings(CHANNEL, [FramingFault("length", "bad", 0, 50)], TWO, back))
    assert row[1] == (
        f"bad; framing broke here, the damaged field is not known: the search for it gave up (too many positions to "
        f"try) (in {PART})"
    )


def test_a_fault_with_no_place_sorts_after_every_placed_one() -> None:
    placeless, placed = FramingFault("truncated", "cut", 2, 0), FramingFault("length", "bad", 1, 3)  # 2 pieces
    back = _back(Location(103, None, (), searched=True), [0, 100], [100, 100])
    rows = _rows(damaged_findings(CHANNEL, [placeless, placed], TWO, back))
    assert rows[0][1] == "cut (in ?)"
    assert rows[1][1].startswith("bad; framing broke here, the damaged field is not known")


def test_a_first_fault_that_is_not_a_length_is_left_alone_unless_corrections_were_found() -> None:
    tag = FramingFault("tag", "bad tag", 0, 10)
    nothing = _back(Location(10, None, (), searched=True), [0, 100], [100, 100])
    assert _rows(damaged_findings(CHANNEL, [tag], TWO, nothing)) == [
        ("record-tag", f"bad tag (in {PART})", "/chk/a", 1010)
    ]
    one = Damage(position=4, index=1, read=9, fits=6, broke_at=10)
    two = Damage(position=120, index=9, read=30, fits=9, broke_at=10)
    found = _back(Location(10, None, (one, two), searched=True), [0, 100], [100, 100])
    (row,) = _rows(damaged_findings(CHANNEL, [tag], TWO, found))
    # a candidate in the file where the framing broke is named by offset alone, one in another file with it
    assert row == (
        "record-tag",
        f"bad tag; framing broke here, the damaged field is not known: 2 corrected length fields frame the rest of "
        f"the channel equally well (element 1 at offset 1004, element 9 at offset 5020 of /chk/b) (in {PART})",
        "/chk/a",
        1010,
    )


def test_candidates_after_a_fault_with_no_place_are_each_named_with_their_file() -> None:
    placeless = FramingFault("truncated", "cut", 2, 0)  # past the two pieces
    one = Damage(position=4, index=1, read=9, fits=6, broke_at=200)
    back = _back(Location(200, None, (one,), searched=True), [0, 100], [100, 100])
    (row,) = _rows(damaged_findings(CHANNEL, [placeless], TWO, back))
    assert row[1] == (
        "cut; framing broke here, the damaged field is not known: 1 corrected length fields frame the rest of the "
        "channel equally well (element 1 at offset 1004 of /chk/a) (in ?)"
    )


def test_no_fault_at_all_gives_no_finding() -> None:
    back = _back(Location(0, None, (), searched=True), [0, 100], [100, 100])
    assert list(damaged_findings(CHANNEL, [], TWO, back)) == []


# ------------------------------------------------------------------ one damaged field
def _damaged(pieces: list[Piece], damage: Damage, faults: list[FramingFault], lengths: list[int]) -> list[tuple]:
    starts = [sum(lengths[:i]) for i in range(len(lengths))]
    back = _back(Location(damage.broke_at, damage, (damage,)), starts, lengths)
    return _rows(damaged_findings(CHANNEL, faults, pieces, back))


def test_the_faults_from_the_damaged_field_on_become_one_finding_there() -> None:
    """One chunk of 200 bytes in two pieces (a: 4.., b: 12..): the field at stream position 130, in b."""
    pieces = [Piece(PART, A, 4, chunk=0), Piece(PART, B, 12, chunk=0)]
    damage = Damage(position=130, index=7, read=28, fits=20, broke_at=130)
    faults = [
        FramingFault("tag", "early tag", 0, 40),  # before the field: a finding of its own
        FramingFault("length", "length 28 does not fit", 1, 30),  # at the field
        FramingFault("truncated", "cut", 1, 90),  # after it: explained by the field
    ]
    rows = _damaged(pieces, damage, faults, [100, 100])
    assert rows == [
        ("record-tag", f"early tag (in {PART})", "/chk/a", 1044),
        (
            "record-length",
            "element 7 of the channel has a damaged length field: 28 read, 20 fits (the only one whose correction "
            f"lets the rest of the channel frame cleanly); length 28 does not fit (in {PART}). With 32768-byte "
            "network buffers, Flink would read this element anyway: it is whole in its network buffer, where Flink's "
            "reader does not check the length field",
            "/chk/b",
            5042,
        ),
    ]


def test_a_parse_that_landed_further_on_says_how_far_and_where() -> None:
    pieces = [Piece(PART, A, 0, chunk=0), Piece(PART, B, 0, chunk=0)]
    damage = Damage(position=10, index=2, read=60, fits=40, broke_at=150)
    rows = _damaged(pieces, damage, [FramingFault("length", "landed", 1, 50)], [100, 100])
    (row,) = rows
    assert "; framing broke 140 bytes further on, at offset 5050 of /chk/b (in " in row[1]
    assert (row[2], row[3]) == ("/chk/a", 1010)
    damage = Damage(position=10, index=2, read=60, fits=40, broke_at=80)  # landed in the same file
    (row,) = _damaged(pieces, damage, [FramingFault("length", "landed", 0, 80)], [100, 100])
    assert "; framing broke 70 bytes further on, at offset 1080 (in " in row[1]


def test_a_shorter_length_read_may_also_be_bytes_overwritten_after_it() -> None:
    pieces = [Piece(PART, A, 0, chunk=0)]
    damage = Damage(position=10, index=0, read=12, fits=20, broke_at=10)
    (row,) = _damaged(pieces, damage, [FramingFault("length", "x", 0, 10)], [200])
    assert "cleanly, or the 8 bytes after it were overwritten); x (in " in row[1]
    damage = Damage(position=10, index=0, read=20, fits=20, broke_at=10)
    (row,) = _damaged(pieces, damage, [FramingFault("length", "x", 0, 10)], [200])
    assert "frame cleanly); x (in " in row[1]


def _verdict(pieces: list[Piece], lengths: list[int], fits: int, dropped: int = 3) -> str:
    """Flink's reading of a field at stream position 10 that says 60, as validate words it."""
    damage = Damage(position=10, index=1, read=60, fits=fits, broke_at=10, passed_over=dropped)
    (row,) = _damaged(pieces, damage, [FramingFault("length", "x", 0, 10)], lengths)
    return str(row[1]).partition("network buffers, ")[2]


READS = "Flink would read this element anyway"
DROPS = "Flink would read this element from its first 20 bytes, silently drop the 3 element(s)"


def test_pieces_of_one_chunk_are_one_recovery_buffer() -> None:
    """The field at 10 claims 60 bytes: whole in a buffer of the chunk's 100 bytes, past one of a 50-byte chunk."""
    same = [Piece(PART, A, 0, chunk=8), Piece(PART, A, 50, chunk=8), Piece(PART, A, 120, chunk=120)]
    assert _verdict(same, [50, 50, 100], fits=20).startswith(READS)
    then_other = [Piece(PART, A, 0, chunk=8), Piece(PART, A, 50, chunk=8), Piece("up#1 out(0,0)", B, 0, chunk=8)]
    assert _verdict(then_other, [50, 50, 100], fits=20).startswith(READS)  # each piece is compared with the one before
    other_chunk = [Piece(PART, A, 0, chunk=8), Piece(PART, A, 50, chunk=58), Piece(PART, A, 120, chunk=120)]
    assert _verdict(other_chunk, [50, 50, 100], fits=20).startswith(DROPS)
    other_part = [Piece(PART, A, 0, chunk=8), Piece("up#1 out(0,0)", A, 50, chunk=8), Piece(PART, A, 120, chunk=120)]
    assert _verdict(other_part, [50, 50, 100], fits=20).startswith(DROPS)
    other_file = [Piece(PART, A, 0, chunk=8), Piece(PART, B, 50, chunk=8), Piece(PART, A, 120, chunk=120)]
    assert _verdict(other_file, [50, 50, 100], fits=20).startswith(DROPS)


def test_a_merged_buffer_ends_where_its_pieces_end() -> None:
    """The element really needs 95 bytes: more than its buffer (the chunk's 100 bytes, less the field's 10 and 4),
    so the reader fails; a buffer reaching into the next chunk would hold it."""
    same = [Piece(PART, A, 0, chunk=8), Piece(PART, A, 50, chunk=8), Piece(PART, A, 120, chunk=120)]
    assert _verdict(same, [50, 50, 100], fits=95).startswith("Flink would fail reading it")


def test_the_buffer_size_cuts_a_chunk() -> None:
    pieces = [Piece(PART, A, 0, chunk=0), Piece(PART, A, 100, chunk=0)]
    damage = Damage(position=10, index=1, read=60, fits=20, broke_at=10, passed_over=3)
    back = ReadBack(Location(10, damage, (damage,)), [0, 100], [100, 100], 64)
    (row,) = _rows(damaged_findings(CHANNEL, [FramingFault("length", "x", 0, 10)], pieces, back))
    assert f"With 64-byte network buffers, {DROPS}" in row[1]
