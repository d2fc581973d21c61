"""The --key-fn example `spillway rescale -h` shows is complete and works as printed: its file, saved as shown,
rescales the bundled job's `slow` operator (Strings keyed by the part before ':'), and the Python-free
`--key 'slow=string|before(":")'` it names moves every record to the same place."""

from __future__ import annotations

import json
import shlex
import textwrap
from pathlib import Path

from support.console import run
from support.fixtures import fixture_named

from spillway.cli.commands.rescale import HELP


def example() -> tuple[str, list[str]]:
    """(the file's text, the command's arguments) as -h prints them."""
    lines = HELP.splitlines()
    start = lines.index("  # prefix_key.py")
    end = next(i for i in range(start, len(lines)) if lines[i].lstrip().startswith("spillway rescale"))
    code = textwrap.dedent("\n".join(lines[start:end])).strip() + "\n"
    return code, shlex.split(lines[end].strip())[1:]


def test_the_docs_show_the_same_example() -> None:
    code, args = example()
    docs = (Path(__file__).parents[2] / "docs" / "rescale.md").read_text()
    assert f"```python\n{code}```" in docs
    assert "spillway " + " ".join(args) in docs


def test_the_key_fn_example_runs_as_printed(tmp_path: Path) -> None:
    code, args = example()
    assert "from spillway.formats.values import read_string" in code
    (tmp_path / "prefix_key.py").write_text(code)
    fx = fixture_named("2.3.0-unaligned")
    swap = {"chk-42": str(fx.checkpoint_dir), "plan.json": str(fx.root / "jobgraph.json")}
    argv = [swap.get(a, a) for a in args]
    assert "--key-fn" in argv and "slow=prefix_key:key" in argv
    by_fn = tmp_path / "by-fn"
    argv[argv.index("chk-42-p3")] = str(by_fn)
    code_fn, out_fn, err_fn = run([*argv, "--master", "inprocess", "--json"], cwd=tmp_path)
    assert code_fn == 0, err_fn

    by_spec = tmp_path / "by-spec"
    code_spec, out_spec, err_spec = run(
        [
            "rescale",
            str(fx.checkpoint_dir),
            "--plan",
            str(fx.root / "jobgraph.json"),
            "-p",
            "slow=3",
            "--key",
            'slow=string|before(":")',
            "--out",
            str(by_spec),
            "--master",
            "inprocess",
            "--json",
        ],
        cwd=tmp_path,
    )
    assert code_spec == 0, err_spec
    fn_doc, spec_doc = json.loads(out_fn), json.loads(out_spec)
    assert fn_doc["records_moved"] == spec_doc["records_moved"] > 0
    # the same records land in the same new channels: the new channel-state files hold the same bytes
    fn_files = sorted(p.read_bytes() for p in by_fn.rglob("*") if p.is_file() and p.name != "_metadata")
    spec_files = sorted(p.read_bytes() for p in by_spec.rglob("*") if p.is_file() and p.name != "_metadata")
    assert fn_files == spec_files and fn_files
