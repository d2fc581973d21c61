"""The docs tell the truth about the CLI: every command and option is in docs/cli.md, every example in
the README names real commands and options, and the README's first-run commands run as shown."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
import typer
from typer.testing import CliRunner

from spillway.cli.app import app

ROOT = Path(__file__).parents[2]


def _commands() -> dict[str, list[str]]:
    """'repair strip-channel-state' -> every option spelling it takes."""
    found: dict[str, list[str]] = {}

    def walk(cmd: object, path: list[str]) -> None:
        subs = getattr(cmd, "commands", None)
        if subs:
            for name, sub in subs.items():
                walk(sub, [*path, name])
            return
        opts = [o for p in cmd.params for o in (*p.opts, *p.secondary_opts) if o.startswith("-")]  # type: ignore[attr-defined]
        found[" ".join(path)] = opts

    walk(typer.main.get_command(app), [])
    return found


def _sections(text: str) -> dict[str, str]:
    parts = re.split(r"^## `spillway ([^`]+)`\s*$", text, flags=re.M)
    return {parts[i].strip(): parts[i + 1] for i in range(1, len(parts), 2)}


def test_every_command_and_option_is_in_the_reference() -> None:
    sections = _sections((ROOT / "docs" / "cli.md").read_text())
    commands = _commands()
    assert len(commands) >= 9
    for name, opts in commands.items():
        assert name in sections, f"docs/cli.md has no section for `spillway {name}`"
        for opt in opts:
            assert f"`{opt}`" in sections[name], f"docs/cli.md: `spillway {name}` does not document {opt}"


def _readme_examples() -> list[list[str]]:
    text = (ROOT / "README.md").read_text()
    lines = []
    for block in re.findall(r"```[a-z]*\n(.*?)```", text, flags=re.S):
        joined = block.replace("\\\n", " ")
        for line in joined.splitlines():
            line = line.split("  #", 1)[0].split(" | ", 1)[0].strip()
            if line.startswith("spillway "):
                lines.append(shlex.split(line)[1:])
    return lines


def test_readme_examples_name_real_commands_and_options() -> None:
    commands = _commands()
    examples = _readme_examples()
    assert len(examples) >= 10
    for args in examples:
        name = args[0] if args[0] != "repair" else f"repair {args[1]}"
        assert name in commands, f"README example uses unknown command: spillway {' '.join(args)}"
        for a in args:
            if a.startswith("-") and a not in ("-h",):
                flag = a.split("=", 1)[0]
                assert flag in commands[name], f"README: `spillway {name}` has no option {flag}"


@pytest.mark.parametrize(
    "args", [a for a in _readme_examples() if any("tests/fixtures/" in x for x in a)], ids=lambda a: " ".join(a)[:60]
)
def test_readme_first_run_commands_run(args: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(ROOT)
    args = [str(tmp_path / Path(a).name) if a.startswith("/tmp/") else a for a in args]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
