"""What every command shares: exit codes, error reporting without tracebacks, output helpers."""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from typing import NoReturn, TypeVar

from spillway.api import (
    CATEGORIES,
    GIVE,
    ArgumentError,
    ExitStatus,
    Message,
    Named,
    SpillwayError,
    UsageError,
    collecting,
    message_of,
)
from spillway.cli.output import current, emit_json, silence_stdout

__all__ = [
    "ExitStatus",
    "UsageError",
    "emit_json",
    "fail",
    "guarded",
    "human_bytes",
    "in_options",
    "io_message",
]

T = TypeVar("T")


def fail(message: str, code: ExitStatus, kind: str = "error", json_out: bool = False) -> NoReturn:
    from rich.markup import escape

    from spillway.cli.render import err

    err.print(f"[bold red]error:[/] {escape(message)}", markup=True, highlight=False, emoji=False)
    if json_out:
        emit_error(message, code, kind)
    # click lets a SystemExit through with its code, as it would turn its own Exit into one.
    raise SystemExit(code)


def emit_error(message: str, code: ExitStatus, kind: str) -> None:
    """A failure as a ``spillway.error/1`` object on stdout: scripts reading --json get an answer there too, never
    an empty stream. ``category`` says what the exit code says: "storage" (could not reach or read it), "usage",
    "findings"."""
    category = CATEGORIES.get(code, "findings")
    doc = {"schema": "spillway.error/1", "error": message, "kind": kind, "category": category, "exit_code": code}
    emit_json(doc)


def _progress() -> AbstractContextManager[None]:
    """Progress bars when stderr is a terminal; otherwise nothing, and rich's progress machinery is not imported."""
    if not current().stderr_is_tty:
        return nullcontext()
    from spillway.cli.progress import progress_bars

    return progress_bars(in_options)


def show_warnings(warnings: list[str]) -> None:
    if not warnings:
        return
    from rich.markup import escape  # here, not at the top: a run without warnings (or --json) needs no rich

    from spillway.cli.render import err

    for w in warnings:
        err.print(
            f"[yellow]warning:[/] {escape(in_options(w))}", markup=True, highlight=False, emoji=False, soft_wrap=True
        )


# The option of each API argument, one name per concept across the commands: a message naming one of them
# (spillway.errors.Named) or an ``ArgumentError`` about one is shown in the option's words (in_options, in_flags).
FLAGS = {
    "buffer_size": "--buffer-size",
    "buffers_per_channel": "--buffers-per-channel",
    "floating_buffers_per_gate": "--floating-buffers-per-gate",
    "parallelism": "-p",
    "max_parallelism": "--max-parallelism",
    "flink_version": "--flink-version",
    "keys": "--key",
    "key_fns": "--key-fn",
    "out": "--out",
    "operators": "--operator",
    "old": "--from",
    "new": "--to",
    "force": "--force",
    "copy_data": "--copy-data",
    "plan": "--plan",
    "uids": "--uid",
    "uid_map": "--uid-map",
    "master": "--master",
    "rebase": "--rebase",
    # the environment variable sets it for the library and the CLI alike
    "storage_timeout": "--storage-timeout or SPILLWAY_STORAGE_TIMEOUT",
    "value_type": "--value-type",
    "value_types": "--value-type",
}


def in_options(message: str) -> str:
    """A library message in the CLI's words: each argument it names (a ``Message``'s ``Named`` parts) as the
    option that sets it (``force=True`` -> ``--force``, ``keys={VERTEX: EXTRACTOR}`` -> ``--key VERTEX=EXTRACTOR``,
    ``rebase rule 'A=B'`` -> ``--rebase A=B``). Plain text, and arguments no option sets, stay as they are."""
    return message.words(_as_option) if isinstance(message, Message) else message


def _as_option(named: Named) -> str:
    flag = FLAGS.get(named.argument)
    if flag is None:
        return str(named)
    if named.pair is not None:
        return f"{flag} {named.pair[0]}={named.pair[1]}"
    if named.placeholder is not None:
        return f"{flag} {named.placeholder}"
    if named.value is GIVE or named.value is True:
        return flag
    return f"{flag} {named.value}"


def in_flags(exc: SpillwayError) -> str:
    """The error's message in the CLI's words: an ``ArgumentError`` about an argument that is an option here names
    the option (``buffer_size=32: …`` -> ``--buffer-size 32: …``, ``keys['count']='x': …`` -> ``--key count=x: …``)."""
    if not isinstance(exc, ArgumentError) or exc.argument not in FLAGS:
        return in_options(message_of(exc))
    flag, detail = FLAGS[exc.argument], in_options(exc.detail)
    if exc.value is None:
        return f"{flag}: {detail}"
    return f"{flag} {exc.value if exc.key is None else f'{exc.key}={exc.value}'}: {detail}"


def guarded(action: Callable[[], T], json_out: bool = False, output: object = None) -> T:
    """Run a command body; turn every expected failure into one clear line in the CLI's words (:func:`in_flags`)
    and its exit code (with ``json_out`` also a ``spillway.error/1`` object on stdout). ``output``: what the
    command writes (``--out``), named when the system reports a failed write without a file name."""
    try:
        # Progress bars on stderr, when it is a terminal: every long stage of every command. Warnings
        # the library gives (e.g. a --rebase rule that matched nothing) on stderr, text or --json.
        with _progress(), collecting() as warnings:
            try:
                result = action()
            finally:
                show_warnings(warnings)
        # Flush here, not at exit: a reader that went away (``| head``) must end quietly, below.
        current().stdout.flush()
        return result
    except SpillwayError as exc:
        kind = "UsageError" if isinstance(exc, ArgumentError) else type(exc).__name__  # one kind per category
        fail(in_flags(exc), exc.exit_code, kind, json_out)
    except BrokenPipeError:
        # The reader went away (``| head``): not a failure of ours. Stop writing to the closed pipe.
        silence_stdout()
        raise SystemExit(ExitStatus.OK) from None
    except KeyboardInterrupt:
        current().stderr.write("interrupted\n")
        raise SystemExit(ExitStatus.INTERRUPTED) from None
    except OSError as exc:
        # The disk, not the checkpoint: full, read-only, refused, failing. Storage (exit 3), never "findings".
        fail(io_message(exc, output), ExitStatus.STORAGE, type(exc).__name__, json_out)


def io_message(exc: OSError, output: object = None) -> str:
    """An operating-system error in the operator's terms: the file it concerns first, then what went wrong. A
    copy that runs out of room names the copy, not its source; a failed ``write()`` often names no file at all
    (a full disk): then the command's output, if it has one, is the place to look."""
    what = exc.strerror or str(exc) or type(exc).__name__
    first, second = _named(exc.filename), _named(exc.filename2)
    if first and second and exc.errno in _WRITE_ERRORS:
        return f"{second}: {what} (copying {first})"
    if first:
        return f"{first} -> {second}: {what}" if second else f"{first}: {what}"
    if output not in (None, ""):
        return f"{output}: {what} (while writing the output)"
    return f"{what} (the system named no file)"


# What only a write can run into: with two files named (a copy), the second one, being written, is the place.
_WRITE_ERRORS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS})


def _named(name: object) -> str:
    if name is None:
        return ""
    return os.fsdecode(name) if isinstance(name, (str, bytes)) else str(name)


def human_bytes(n: int) -> str:
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{int(value)} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"
