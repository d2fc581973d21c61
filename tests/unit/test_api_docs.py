"""docs/api.md is executed: every ``python`` block, in order, as one session in a fresh interpreter from the
repository's root (the fixture paths in the page are real; nothing is substituted). Also a rescale whatever
was imported before it (``spillway.rescale`` is a package, never also a call), and the API's wording of a bad
``rebase``."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "api.md"


def _python(code: str) -> subprocess.CompletedProcess[str]:
    env = {"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"}
    return subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)


def blocks() -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", DOC.read_text(), re.S | re.M)


def test_every_python_block_of_docs_api_md_runs() -> None:
    found = blocks()
    # open/validate/analyze, the forecast, uncounted channels, a 1.x plan bound (deduced, then by uids), errors
    assert len(found) >= 6
    session = "\n\n".join(f"# --- block {i}\n{code}" for i, code in enumerate(found))
    done = _python(session)
    assert done.returncode == 0, done.stderr
    assert "buffer_size=32: at least 64 bytes" in done.stdout and "rebase: ''" in done.stdout
    assert "['deduced', 'deterministic-hash']" in done.stdout  # the 1.x plan without uids: bound all the same


@pytest.mark.parametrize(
    "first",
    [
        "spillway.open('tests/fixtures/2.3.0-counted/checkpoints').analyze()",  # imports spillway.rescale.*
        "import spillway.rescale.plan",
        "from spillway.rescale import rescale as module; assert module.__name__ == 'spillway.rescale.rescale'",
    ],
)
def test_a_rescale_runs_whatever_was_imported_before(first: str) -> None:
    code = f"""
import spillway
from spillway.api import RescaleOptions
{first}
cp = spillway.open("tests/fixtures/2.3.0-counted/checkpoints", plan="tests/fixtures/2.3.0-counted/jobgraph.json")
result = cp.rescale(RescaleOptions({{"count": 3}}, keys={{"count": "tuple:0:long"}}, master=None, dry_run=True))
print(result.to_json()["vertices"])
import spillway.rescale.plan
print(spillway.rescale.plan.DEFAULT_BUFFER_SIZE, callable(spillway.rescale))
"""
    done = _python(code)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "[{'vertex': 'count', 'old_parallelism': 2, 'new_parallelism': 3}]"  # Counted.java: p=2
    assert lines[1] == f"{32 * 1024} False"


def test_rebase_is_a_mapping_and_its_errors_speak_python() -> None:
    import spillway

    chk = "tests/fixtures/2.3.0-unaligned/checkpoints"
    plain = spillway.open(ROOT / chk)
    mapped = spillway.open(ROOT / chk, rebase={"file:/nowhere": "file:/elsewhere"})
    assert mapped.model == plain.model
    for bad, words in (
        ({"": "/x"}, "rebase: '': expected non-empty prefixes"),
        ("a=b", "rebase: expected a mapping {old_prefix: new_prefix}, got str"),
        (["no-equals-sign"], "rebase: 'no-equals-sign': expected non-empty prefixes"),
    ):
        with pytest.raises(spillway.UsageError) as caught:
            spillway.open(ROOT / chk, rebase=bad)  # type: ignore[arg-type]
        assert str(caught.value).startswith(words) and "--rebase" not in str(caught.value)
