"""Crafted handle paths aimed outside the output: every writing command, through the installed console script,
on real 1.x (V2 1.10.3, V3 1.12.5) and 2.x fixtures whose ``_metadata`` names a file in a sentinel directory
beside the output by a relative ``..`` path, an absolute path with ``..``, a symlink in the source, a NUL byte,
or plainly by its absolute path.

Whatever the command does, the sentinel (every byte, name, mode and mtime) and the source stay as they were and
no scratch is left; a ``..`` or NUL path is refused by every writing command, ``--force`` or not, before anything
is written: no output, nothing new under ``--to``. The other two may be refused, or written with nothing outside
the output and an output that validates.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.faults import CASES, REFUSED, changes, command, craft, lay_out, run, scratch_left, snapshot

# The commands each fixture can carry out from its pristine source (test_pristine_sources_are_written proves it).
MATRIX = {
    "1.10.3-aligned": ("relocate-copy", "strip", "drop"),  # V2: absolute paths only
    "1.12.5-unaligned": ("relocate", "relocate-copy", "strip", "drop"),  # V3: relative channel files
    "2.3.0-unaligned": ("relocate", "relocate-copy", "strip", "drop", "rescale"),
    "2.3.0-finished": ("clear",),
}
V2 = {"1.10.3-aligned"}  # no relative handles: no relative ``..`` path to craft
FORCE = {"relocate", "relocate-copy", "strip", "drop", "rescale", "clear"}  # all take --force


def _params(cases: tuple[str, ...]) -> list:
    return [
        pytest.param(fx, cmd, case, id=f"{fx}-{cmd}-{case}")
        for fx, cmds in MATRIX.items()
        for cmd in cmds
        for case in cases
        if not (case == "relative-dotdot" and fx in V2)
    ]


@pytest.mark.timeout(60)
@pytest.mark.parametrize(("fx", "cmd"), [pytest.param(fx, c, id=f"{fx}-{c}") for fx, cs in MATRIX.items() for c in cs])
def test_pristine_sources_are_written(tmp_path: Path, fx: str, cmd: str) -> None:
    """The control: each command writes its output from the uncrafted layout, so a refusal below is the
    crafted path's doing."""
    layout = lay_out(tmp_path, fx)
    done = run(command(layout, cmd))
    assert done.code == 0, done.output
    assert (layout.out / "_metadata").is_file()
    assert scratch_left(layout.dst) == []


@pytest.mark.timeout(90)
@pytest.mark.parametrize(("fx", "cmd", "case"), _params(CASES))
def test_nothing_outside_the_output_changes(tmp_path: Path, fx: str, cmd: str, case: str) -> None:
    layout = lay_out(tmp_path, fx)
    crafted = craft(layout, case)
    sentinel, source, dst = snapshot(layout.sentinel), snapshot(layout.root), snapshot(layout.dst)
    top = sorted(p.name for p in tmp_path.iterdir())
    tries = [[], ["--force"]] if case in REFUSED and cmd in FORCE else [[]]
    for extra in tries:
        done = run(command(layout, cmd, *extra))
        assert "Traceback" not in done.output, done.output
        assert changes(sentinel, snapshot(layout.sentinel)) == [], f"{crafted!r}: the sentinel changed\n{done.output}"
        assert changes(source, snapshot(layout.root)) == [], f"{crafted!r}: the source changed\n{done.output}"
        assert sorted(p.name for p in tmp_path.iterdir()) == top, done.output
        assert scratch_left(layout.dst) == [], done.output
        if case in REFUSED:
            assert done.code == 1, f"{crafted!r} {extra}: not refused (exit {done.code})\n{done.output}"
            assert len([line for line in done.err.splitlines() if line.startswith("error: ")]) == 1, done.err
            assert not layout.out.exists()
            assert changes(dst, snapshot(layout.dst), dir_times=False) == [], (
                f"{crafted!r}: written under --to\n{done.output}"
            )
        elif done.code == 0:  # written: every file the output references is there
            valid = run(["validate", str(layout.out)])
            assert valid.code == 0, f"{crafted!r}: the output does not validate\n{valid.output}"
        else:
            assert done.code == 1, done.output
            assert changes(dst, snapshot(layout.dst), dir_times=False) == [], done.output


@pytest.mark.timeout(60)
@pytest.mark.parametrize(
    ("fx", "case"),
    [("1.10.3-aligned", "absolute-dotdot"), ("1.12.5-unaligned", "nul"), ("2.3.0-unaligned", "relative-dotdot"),
     ("2.3.0-unaligned", "nul")],
)  # fmt: skip
def test_validate_names_the_crafted_path(tmp_path: Path, fx: str, case: str) -> None:
    """validate calls a ``..`` path a path-escape and a NUL byte a bad-path, as errors (exit 1), never sound."""
    layout = lay_out(tmp_path, fx)
    craft(layout, case)
    done = run(["validate", str(layout.chk)])
    assert "Traceback" not in done.output, done.output
    assert done.code == 1, done.output
    assert ("path-escape" if "dotdot" in case else "bad-path") in done.output, done.output


@pytest.mark.integration
@pytest.mark.timeout(300)
def test_spark_rescale_refuses_an_escaping_path(tmp_path: Path) -> None:
    """The same guarantee when a local Spark (``--master local[1]``) does the rescale."""
    layout = lay_out(tmp_path, "2.3.0-unaligned")
    crafted = craft(layout, "absolute-dotdot")
    sentinel, source, dst = snapshot(layout.sentinel), snapshot(layout.root), snapshot(layout.dst)
    done = run(command(layout, "rescale", master="local[1]"), timeout=280)
    assert "Traceback" not in done.output, done.output
    assert changes(sentinel, snapshot(layout.sentinel)) == [], f"{crafted!r}: the sentinel changed\n{done.output}"
    assert changes(source, snapshot(layout.root)) == [], done.output
    assert done.code == 1, f"{crafted!r}: not refused (exit {done.code})\n{done.output}"
    assert not layout.out.exists()
    assert changes(dst, snapshot(layout.dst), dir_times=False) == [], done.output
