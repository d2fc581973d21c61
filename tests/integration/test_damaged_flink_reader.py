"""What validate says Flink does with a damaged length field, checked against Flink's own reader.

``tests/fixtures/reader/ReaderCheck.java`` feeds a logical channel to Flink's
``SpillingAdaptiveSpanningRecordDeserializer`` (1.18.1 jars) as recovery does: each chunk cut into network
buffers of the given size. The channel is the biggest of ``1.18.1-unaligned`` (support/oracle_channel.py),
with one length field damaged; Flink's reader then reads every element (``reads``), throws (``fails``), ends
with a partial element pending and the damaged one unread (``swallows``), or reads fewer elements than the
channel has less those the damaged length covers (``drops``)."""

from __future__ import annotations

import struct
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from support.damaged import copy_fixture
from support.flink_harness import prepare
from support.java_loop import SOURCE as MAIN_LOOP
from support.java_loop import JavaLoop
from support.oracle_channel import biggest_channel

from spillway.formats.damaged_length import flink_reading, locate, recovered_buffers

RELEASE = "1.18.1"
SOURCE = Path(__file__).parents[1] / "fixtures" / "reader" / "ReaderCheck.java"


@pytest.fixture(scope="module")
def reader(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JavaLoop]:
    """ReaderCheck's many runs in one JVM (each run is milliseconds; a JVM start was most of it)."""
    lib, _ = prepare(RELEASE)
    out = tmp_path_factory.mktemp("reader")
    classpath = f"{out}:{lib}/*"
    javac = ["javac", "-nowarn", "--release", "11", "-cp", classpath, "-d", str(out)]
    subprocess.run([*javac, str(SOURCE), str(MAIN_LOOP)], check=True)
    loop = JavaLoop(["java", "-cp", classpath, "MainLoop"])
    yield loop
    loop.close()


def _flink(reader: JavaLoop, data: bytes, size: int, chunks: list[int], tmp: Path) -> tuple[int, str]:
    path = tmp / "channel.bin"
    path.write_bytes(data)
    code, stdout = reader.call("ReaderCheck", str(path), str(size), *map(str, chunks))
    lines = stdout.split("\n")
    assert code == 0 and lines[0].startswith("read "), stdout + reader.stderr()
    return int(lines[0].split()[1]), lines[1]


def test_validate_says_what_flinks_reader_does(reader: JavaLoop, tmp_path: Path) -> None:
    channel = biggest_channel(copy_fixture(f"{RELEASE}-unaligned", tmp_path))
    data = b"".join(channel.file.read_bytes()[offset : offset + n] for _, offset, n in channel.chunks)
    chunks = [n for _, _, n in channel.chunks]
    total = len(channel.elements)
    assert _flink(reader, data, 32768, chunks, tmp_path) == (total, "ok")
    seen: dict[str, int] = {}
    for k in (5, 100, total // 2, total - 3):
        n = channel.elements[k].length
        for value in (n + 4099, n + 40, 0x7FFF0000, 0, -1):
            for size in (32768, 4096, 1024):
                damaged = bytearray(data)
                struct.pack_into(">i", damaged, channel.elements[k].position, value)
                location = locate(damaged)
                assert location is not None and location.damage is not None, (k, value)
                said = flink_reading(
                    location.damage, recovered_buffers([(s, c) for s, _, c in channel.chunks], size), len(data)
                )
                read, end = _flink(reader, bytes(damaged), size, chunks, tmp_path)
                case = (k, value, size, said.outcome, read, end)
                if said.outcome == "reads":
                    assert (read, end) == (total, "ok"), case
                elif said.outcome == "fails":
                    assert end.startswith("failed"), case
                elif said.outcome == "swallows":
                    assert (read, end) == (k, "pending"), case
                else:
                    assert said.outcome == "drops" and read <= total - location.damage.passed_over, case
                seen[said.outcome] = seen.get(said.outcome, 0) + 1
    # and elements that run past their buffer, with a length too small to say so
    for size in (32768, 4096):
        buffers = recovered_buffers([(s, c) for s, _, c in channel.chunks], size)
        k = next(
            i
            for i, e in enumerate(channel.elements)
            if any(s <= e.position and e.position + 4 <= end < e.position + 4 + e.length for s, end in buffers)
        )
        damaged = bytearray(data)
        struct.pack_into(">i", damaged, channel.elements[k].position, 0)
        location = locate(damaged)
        assert location is not None and location.damage is not None
        said = flink_reading(location.damage, buffers, len(data))
        read, end = _flink(reader, bytes(damaged), size, chunks, tmp_path)
        assert said.outcome == "fails" and end.startswith("failed java.io.IOException: Serializer consumed more"), (
            k,
            end,
        )
        seen["fails"] = seen.get("fails", 0) + 1
    assert set(seen) == {"reads", "fails", "swallows", "drops"}, seen
