"""``spillway validate`` without typer, for the invocations whose meaning is plain.

``parse_validate`` accepts only ``validate`` with one path and the command's own options, each spelt out
(``--plan P``, not ``--plan=P``), the single-valued ones at most once, no value that starts with ``-``;
it returns the keyword arguments typer would pass (tests/cli/test_fast_validate.py compares them with
typer's parse of the same argv, and ``OPTIONS`` with the command's declared parameters). Anything else
returns None and goes through typer, which owns help, usage errors and their messages.
"""

from __future__ import annotations

from typing import Any

# option -> (keyword of validate.command, takes a value, repeatable)
OPTIONS: dict[str, tuple[str, bool, bool]] = {
    "--plan": ("plan", True, False),
    "--json": ("json_out", False, False),
    "--rebase": ("rebase", True, True),
    "--uid": ("uid", True, True),
    "--uid-map": ("uid_map", True, False),
    "--strict": ("strict", False, False),
}


def parse_validate(argv: list[str]) -> dict[str, Any] | None:
    if not argv or argv[0] != "validate":
        return None
    kwargs: dict[str, Any] = {
        "path": None,
        "plan": None,
        "json_out": False,
        "rebase": None,
        "uid": None,
        "uid_map": None,
        "strict": False,
    }
    seen: set[str] = set()
    args = argv[1:]
    i = 0
    while i < len(args):
        token = args[i]
        if not _plain(token):
            return None
        if not token.startswith("-"):
            if kwargs["path"] is not None:
                return None  # typer reports the extra argument
            kwargs["path"] = token
            i += 1
            continue
        spec = OPTIONS.get(token)
        if spec is None or (token in seen and not spec[2]):
            return None
        seen.add(token)
        name, takes_value, repeatable = spec
        if not takes_value:
            kwargs[name] = True
            i += 1
            continue
        if i + 1 >= len(args) or args[i + 1].startswith("-") or not _plain(args[i + 1]):
            return None
        if repeatable:
            kwargs[name] = [*(kwargs[name] or []), args[i + 1]]
        else:
            kwargs[name] = args[i + 1]
        i += 2
    return kwargs if kwargs["path"] is not None else None


def _plain(token: str) -> bool:
    """Text typer would take as it is: no option syntax it might read differently, valid Unicode."""
    if token == "-" or token == "--" or (token.startswith("--") and "=" in token):
        return False
    try:
        token.encode()
    except UnicodeEncodeError:  # undecodable bytes (surrogate escapes): typer's own conversion decides
        return False
    return True


def run_validate(argv: list[str]) -> int | None:
    """Run ``validate`` if ``parse_validate`` accepts ``argv``: its exit code; None: use typer."""
    kwargs = parse_validate(argv)
    if kwargs is None:
        return None
    import typer

    from spillway.cli import output
    from spillway.cli.validate import command

    output.use(None)  # what the app's callback does before every command
    try:
        command(**kwargs)
    except typer.Exit as exc:
        return exc.exit_code
    except KeyboardInterrupt:  # outside the command's own guard, as typer reports it
        from spillway.errors import EXIT_INTERRUPTED

        return EXIT_INTERRUPTED
    return 0
