"""The docs tell the truth about the CLI: every command and option is in docs/cli.md, every example in
the README names real commands and options, and the README's first-run commands run as shown."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import click
from support.commands import every_command
from support.console import run

from spillway.cli.app import app

ROOT = Path(__file__).parents[2]


def _commands() -> dict[str, list[str]]:
    """'repair strip-channel-state' -> every option spelling it takes."""
    found: dict[str, list[str]] = {}
    for path, cmd in every_command(app).items():
        if not isinstance(cmd, click.Group):
            found[" ".join(path)] = [o for p in cmd.params for o in (*p.opts, *p.secondary_opts) if o.startswith("-")]
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


def _first_run() -> list[tuple[list[str], int]]:
    """The README's First run commands in order, each with the exit code its comment states (0 when none)."""
    text = (ROOT / "README.md").read_text()
    section = text[text.index("## First run") : text.index("\n## ", text.index("## First run") + 1)]
    runs = []
    for block in re.findall(r"```[a-z]*\n(.*?)```", section, flags=re.S):
        for line in block.replace("\\\n", " ").splitlines():
            command, _, comment = line.partition("  #")
            if command.strip().startswith("spillway "):
                said = re.match(r"\s*exit (\d)", comment)
                runs.append((shlex.split(command)[1:], int(said.group(1)) if said else 0))
    return runs


def test_readme_first_run_runs_top_to_bottom_as_written(tmp_path: Path) -> None:
    """Every First run command through the installed script, in the README's order, from the checkout's top,
    with /tmp/ standing for one fresh directory shared by all of them: an --out used twice fails here as it
    would for the reader."""
    runs = _first_run()
    assert len(runs) >= 15 and any(args[0] == "preflight" for args, _ in runs[:3])
    for args, expected in runs:
        args = [a.replace("/tmp/", f"{tmp_path}/", 1) if a.startswith("/tmp/") else a for a in args]
        code, out, err = run(args, cwd=ROOT)
        assert code == expected, f"spillway {' '.join(args)}: exit {code}, README says {expected}\n{out}{err}"
