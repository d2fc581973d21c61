"""What every command shares: exit codes, error reporting without tracebacks, output helpers."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from typing import Any, NoReturn, TypeVar

import typer
from rich.console import Console

from spillway.formats.errors import CheckpointFormatError
from spillway.formats.metadata_codec import paused_gc
from spillway.inspect.topology import PlanError
from spillway.repair.common import RepairError
from spillway.storage.locate import LocateError
from spillway.storage.safe_writer import WriteError

EXIT_OK = 0
EXIT_FINDINGS = 1  # the checkpoint is broken / has error findings
EXIT_USAGE = 2

# A pipe gets no terminal width; rich would fall back to 80 columns and crush the tables.
out = Console(highlight=False, soft_wrap=False, width=None if sys.stdout.isatty() else 160)
err = Console(stderr=True, highlight=False, soft_wrap=True)

T = TypeVar("T")

RELEASES = {
    2: "Flink 1.3-1.10",
    3: "Flink 1.11-1.15",
    4: "Flink 1.16-1.20",
    5: "Flink 2.0",
    6: "Flink 2.1-2.3",
    7: "Flink after 2.3",
}


REFUSALS = {"RescaleRefused", "RouteError", "ValueSpecError", "StorageError"}


class UsageError(Exception):
    """Bad arguments that typer itself cannot catch (exit 2)."""


def fail(message: str, code: int) -> NoReturn:
    err.print(f"[bold red]error:[/] {message}", markup=True, highlight=False)
    raise typer.Exit(code)


def guarded(action: Callable[[], T]) -> T:
    """Run a command body; turn every expected failure into one clear line and an exit code."""
    try:
        with paused_gc():  # commands build large acyclic trees; see paused_gc
            return action()
    except (LocateError, UsageError, PlanError) as exc:
        fail(str(exc), EXIT_USAGE)
    except CheckpointFormatError as exc:
        fail(str(exc), EXIT_FINDINGS)
    except (RepairError, WriteError) as exc:
        fail(str(exc), EXIT_FINDINGS)
    # Before the catch-all below: the first matching clause wins, and OSError is an Exception.
    except PermissionError as exc:
        fail(f"{exc.filename}: permission denied", EXIT_FINDINGS)
    except OSError as exc:
        fail(f"{exc.filename or ''}: {exc.strerror or exc}", EXIT_FINDINGS)
    except Exception as exc:
        # Refusals of rescale (planner, router, state redistribution, key specs) are one clear line too.
        if type(exc).__name__ in REFUSALS:
            fail(str(exc), EXIT_FINDINGS)
        raise


def emit_json(doc: Any) -> None:
    """Pretty on a terminal, compact in a pipe (the schema is the same)."""
    text = json.dumps(doc, indent=2) if sys.stdout.isatty() else json.dumps(doc, separators=(",", ":"))
    sys.stdout.write(text + "\n")


def human_bytes(n: int) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{int(value)} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"
