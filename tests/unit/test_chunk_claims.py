"""Which handle claims each chunk of a channel-state file (``spillway.inspect.rules.common.Claims``), as its
docstrings state it: a handle's chunks become its own at once when every one is unclaimed and none repeats (their
payload bytes returned), else nothing changes; more than 16 chunks go through the native library, fewer through
Python, with the same answers. Chunk lengths come from the file each test builds."""

from __future__ import annotations

from array import array
from pathlib import Path
from typing import Any

import pytest

from spillway.formats import native
from spillway.formats.channel_file import FileBlob, build_channel_file, chunk_map
from spillway.inspect.rules.common import Claims

PAYLOADS = [bytes([n]) * (n + 1) for n in range(40)]  # chunk i holds i + 1 bytes


@pytest.fixture
def chunks(tmp_path: Path) -> Any:
    data, _ = build_channel_file(PAYLOADS)
    path = tmp_path / "channel-state"
    path.write_bytes(data)
    with FileBlob(path) as blob:
        found, error = chunk_map(blob)
    assert error is None and len(found) == len(PAYLOADS)
    return found


@pytest.mark.parametrize("count", [3, 17, 30])
@pytest.mark.parametrize("with_c", ["native", "python"])
def test_free_chunks_become_the_handles_and_their_payload_is_returned(
    chunks: Any, count: int, with_c: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if with_c == "python":
        monkeypatch.setattr(native, "claim", lambda *_: None)
    claims = Claims(chunks)
    first, second = object(), object()
    mine = array("q", range(count))
    assert claims.claim(mine, first) == sum(i + 1 for i in range(count))  # type: ignore[arg-type]
    theirs = array("q", range(count, 2 * count if 2 * count <= len(PAYLOADS) else len(PAYLOADS)))
    assert claims.claim(theirs, second) == sum(i + 1 for i in theirs)  # type: ignore[arg-type]
    offsets = list(chunks)
    assert [claims.get(offsets[i]) for i in (0, count - 1)] == [first, first]
    assert claims.get(offsets[count]) is second
    assert claims.unclaimed() == list(range(len(theirs) + count, len(PAYLOADS)))


@pytest.mark.parametrize("count", [3, 17])
def test_a_claimed_or_repeated_chunk_changes_nothing(chunks: Any, count: int) -> None:
    claims = Claims(chunks)
    first, second = object(), object()
    assert claims.claim(array("q", range(count)), first) is not None  # type: ignore[arg-type]
    before = list(claims.owner)
    # the very first chunk (owned by the first handle, number 0) is still taken
    taken = array("q", [0, *range(count, 2 * count - 1)])
    assert claims.claim(taken, second) is None  # type: ignore[arg-type]
    repeated = array("q", [count, *range(count, 2 * count - 1)])
    assert claims.claim(repeated, second) is None  # type: ignore[arg-type]
    assert list(claims.owner) == before
    assert claims.get(next(iter(chunks))) is first


def test_claims_one_at_a_time_and_offsets_where_no_chunk_starts(chunks: Any) -> None:
    claims = Claims(chunks)
    offsets = list(chunks)
    a, b = object(), object()
    claims.set(offsets[0], a)  # type: ignore[arg-type]
    claims.set(offsets[1], a)  # type: ignore[arg-type]
    claims.set(offsets[2], b)  # type: ignore[arg-type]
    assert [claims.get(o) for o in offsets[:4]] == [a, a, b, None]
    assert claims.handles == [a, b]  # one entry per handle, however many chunks it claims
    mid = offsets[3] + 1  # no chunk starts here
    assert claims.get(mid) is None
    claims.set(mid, b)  # type: ignore[arg-type]
    assert claims.get(mid) is b and claims.elsewhere == {mid: b}
    assert claims.unclaimed() == list(range(3, len(PAYLOADS)))
    assert claims.free(array("q", [3, 4])) and not claims.free(array("q", [0])) and not claims.free(array("q", [3, 2]))


def test_nothing_unclaimed_once_every_chunk_has_an_owner(chunks: Any) -> None:
    claims = Claims(chunks)
    x = object()
    assert claims.claim(array("q", range(len(PAYLOADS))), x) is not None  # type: ignore[arg-type]
    assert claims.unclaimed() == []
    only = Claims(chunks)
    only.set(next(iter(chunks)), x)  # type: ignore[arg-type]
    assert only.unclaimed() == list(range(1, len(PAYLOADS)))  # a single handle (number 0) owning one chunk
