"""Print spillway's version and what it runs on."""

from __future__ import annotations

from spillway import api
from spillway.cli.common import ExitStatus, emit_json
from spillway.cli.help import command as spillway_command
from spillway.cli.options import flag

HELP = """Print spillway's version, the Python that runs it and the installed version of each library it runs
on ("not installed" for pyspark when rescale can only run --master inprocess).

Examples:

  spillway version

  spillway version --json | jq -r .spillway
"""


@spillway_command("version", HELP)
@flag("--json", "json_out", help="Emit JSON (schema spillway.version/1).")
def command(json_out: bool) -> int:
    found = api.version()
    if json_out:
        emit_json(found.to_json())
        return ExitStatus.OK
    from spillway.cli.render import out  # text for people: rich is loaded only now

    out.print(f"spillway {found.spillway}", highlight=False)
    out.print(f"python {found.python} ({found.platform})", highlight=False)
    for name, installed in found.distributions.items():
        out.print(f"{name} {installed or 'not installed'}", highlight=False)
    return ExitStatus.OK


__all__ = ["command"]
