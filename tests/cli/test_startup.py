"""Start-up: each invocation imports what it uses and no more (spillway/cli/app.py loads the one command module
that runs, or whose help is shown).

The import sets are taken from the real entry point (``app.main``) in a fresh process: ``sys.modules`` when
it exits. What must not be there follows from what the invocation does: help and ``--version`` decode
nothing (no construct, rich); a plain ``dump``/``validate`` of a local checkpoint reads no remote store or
Parquet (no pyarrow), moves no key groups (no numpy, no pyspark); no invocation imports another command's
module, and none imports typer or pydantic (the command line is click's)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from support.commands import every_command
from support.console import run
from support.fixtures import fixture_named

from spillway.cli.app import app

ROOT = Path(__file__).parents[2]
SMALL = fixture_named("2.3.0-sql")  # a 15 KiB _metadata written by Flink 2.3.0

# Runs app.main as the console script does and writes sys.modules at exit (after sys.exit too).
_DRIVER = """
import atexit, json, sys
out = sys.argv.pop(1)
atexit.register(lambda: open(out, "w").write(json.dumps(sorted(sys.modules))))
sys.argv[0] = "spillway"
from spillway.cli.app import main
main()
"""


def imported(args: list[str], tmp_path: Path) -> set[str]:
    out = tmp_path / "modules.json"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run(
        [sys.executable, "-c", _DRIVER, str(out), *args], capture_output=True, env=env, stdin=subprocess.DEVNULL
    )
    assert done.returncode in (0, 1, 2), done.stderr.decode()  # 2: no arguments is help, and a usage error
    return set(json.loads(out.read_text()))


def packages(modules: set[str]) -> set[str]:
    return {m.split(".")[0] for m in modules}


COMMANDS = [path for path in every_command(app) if path]  # ("dump",), ("repair",), ("repair", "relocate"), …


def module_of(path: tuple[str, ...]) -> str:
    return ".".join(["spillway.cli.commands", *(name.replace("-", "_") for name in path)])


ALL_COMMAND_MODULES = {module_of(path) for path in COMMANDS} - {module_of(("repair",))}
CONVERTING = {"typer", "pydantic", "pydantic_core"}  # a second framework converting option values
DATA = {"numpy", "pyarrow", "pyspark", "pandas"}


@pytest.mark.parametrize("args", [["-h"], ["--help"], [], ["repair", "-h"]], ids=" ".join)
def test_group_help_imports_no_command_and_nothing_heavy(args: list[str], tmp_path: Path) -> None:
    modules = imported(args, tmp_path)
    assert "click" in modules  # the help is click's (through the app), not a copy of it
    assert not modules & ALL_COMMAND_MODULES, sorted(modules & ALL_COMMAND_MODULES)
    assert not packages(modules) & {"construct", "rich", *CONVERTING, *DATA}
    assert "spillway.formats.metadata_codec" not in modules


def test_version_imports_no_command(tmp_path: Path) -> None:
    modules = imported(["--version"], tmp_path)
    assert not packages(modules) & {"construct", "rich", *CONVERTING, *DATA}
    assert not modules & ALL_COMMAND_MODULES


@pytest.mark.parametrize("name", ["dump", "validate"])
def test_a_plain_small_run_converts_nothing_and_imports_only_its_command(name: str, tmp_path: Path) -> None:
    modules = imported([name, str(SMALL.checkpoint_dir)], tmp_path)
    assert module_of((name,)) in modules
    assert not modules & (ALL_COMMAND_MODULES - {module_of((name,))}), sorted(modules & ALL_COMMAND_MODULES)
    assert not packages(modules) & {*CONVERTING, *DATA}
    assert "spillway.inspect.parquet_out" not in modules and "spillway.storage.fs" not in modules
    # stderr is not a terminal here: no progress bars, so rich's progress machinery is not loaded; construct's
    # import of pdb is left a stand-in until used (never), so the debugger stack is not loaded either
    assert not modules & {"rich.progress", "spillway.cli.progress", "bdb", "cmd"}


def test_a_plain_dump_loads_no_binding_validate_or_analyze_machinery(tmp_path: Path) -> None:
    """Without --plan there is no binding to show: neither the binding search (numpy) nor the other
    commands' modules behind the renderers' types."""
    modules = imported(["dump", str(SMALL.checkpoint_dir)], tmp_path)
    assert module_of(("dump",)) in modules
    unwanted = {"spillway.flink.operator_ids", "spillway.flink.deduction", "spillway.inspect.validate"}
    assert not modules & {*unwanted, "spillway.inspect.analyze"}, sorted(modules & unwanted)


def test_a_plain_validate_loads_no_plan_machinery(tmp_path: Path) -> None:
    """Without --plan nothing is bound: no plan reading, binding search or plan checks are loaded."""
    modules = imported(["validate", str(SMALL.checkpoint_dir)], tmp_path)
    unwanted = {"spillway.inspect.topology", "spillway.flink.operator_ids", "spillway.inspect.plan_check"}
    assert "spillway.inspect.validate" in modules and not modules & unwanted, sorted(modules & unwanted)


@pytest.mark.parametrize("path", [list(p) for p in COMMANDS if module_of(p) in ALL_COMMAND_MODULES], ids=" ".join)
def test_a_commands_help_imports_that_command_alone_and_converts_nothing(path: list[str], tmp_path: Path) -> None:
    modules = imported([*path, "-h"], tmp_path)
    module = module_of(tuple(path))
    assert module in modules
    assert not modules & (ALL_COMMAND_MODULES - {module}), sorted(modules & (ALL_COMMAND_MODULES - {module}))
    assert not packages(modules) & CONVERTING


def test_the_list_of_commands_is_each_modules_first_docstring_line() -> None:
    """``spillway -h`` lists a command without importing it, by the first line of its module's docstring: that
    line must be what the module itself says (a module that changes its docstring changes the list)."""
    import importlib

    code, stdout, _ = run(["-h"], columns=200)
    assert code == 0
    listed = dict(line.split(None, 1) for line in stdout.split("Commands:\n", 1)[1].strip().splitlines())
    top = {p[0] for p in COMMANDS}
    assert set(listed) == top
    for name in top:
        doc = importlib.import_module(module_of((name,))).__doc__ or ""
        assert listed[name] == doc.splitlines()[0], name


def test_a_typo_still_gets_a_suggestion_without_loading_commands() -> None:
    code, _, stderr = run(["dumpp", "x"])
    assert code == 2 and "No such command 'dumpp'. Did you mean 'dump'?" in stderr
    code, _, stderr = run(["repair", "relocat", "x"])
    assert code == 2 and "Did you mean 'relocate'?" in stderr


def test_a_usage_error_under_json_is_one_error_document() -> None:
    """Said once, by the root group, however deep the command (repair's group is a lazy group too)."""
    code, stdout, _ = run(["repair", "drop-operator", "/nonexistent", "--json"])
    assert code == 2
    docs = [json.loads(line) for line in stdout.splitlines()]
    assert len(docs) == 1 and docs[0]["schema"] == "spillway.error/1" and "--out" in docs[0]["error"]


def test_a_module_left_for_first_use_is_the_real_one_when_used() -> None:
    """The entry point leaves pdb unloaded (construct imports it and never uses it); whoever uses it gets the real
    module: its attributes, ``from pdb import …``, and the real module in ``sys.modules`` from then on."""
    code = (
        "import sys\n"
        "from spillway.cli.app import _load_on_first_use\n"
        "_load_on_first_use('pdb')\n"
        "import construct\n"
        "assert 'bdb' not in sys.modules, 'loaded before any use'\n"
        "import pdb\n"
        "from pdb import Pdb\n"
        "import bdb\n"
        "assert issubclass(Pdb, bdb.Bdb) and pdb.Pdb is Pdb\n"
        "assert type(sys.modules['pdb']).__name__ == 'module' and sys.modules['pdb'].Pdb is Pdb\n"
        "print('ok')\n"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False)
    assert done.returncode == 0 and done.stdout == "ok\n", done.stderr


@pytest.mark.parametrize("name", ["dump", "validate"])
def test_a_plain_json_run_loads_no_rich(name: str, tmp_path: Path) -> None:
    """``--json`` is written straight to stdout: rich (consoles, tables, markup) is loaded only to print for people."""
    modules = imported([name, str(SMALL.checkpoint_dir), "--json"], tmp_path)
    assert module_of((name,)) in modules
    assert "rich" not in packages(modules), sorted(m for m in modules if m.startswith("rich"))
    text = imported([name, str(SMALL.checkpoint_dir)], tmp_path)
    assert {"rich.console", "rich.table", f"spillway.cli.{name}_show"} <= text  # the text run does load them
