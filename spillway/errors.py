"""One error hierarchy for the whole library; each error carries the exit code the CLI gives it.

Exit codes: 0 ok, 1 findings / refusal / damage, 2 usage, 3 storage could not be reached, read or written —
a store that does not answer in time, a full disk, a refused write (the checkpoint itself may be fine: retrying
later or elsewhere can succeed). The CLI gives any ``OSError`` that reaches it exit 3 as well. Every layer
raises a subclass of ``SpillwayError``; the CLI turns any of them into one line and ``exit_code`` without
matching names.

Messages speak Python: an argument the caller could give or change is named in keyword form, one form for
every message, so a front end can say the same with its own options (the CLI: ``cli.common.in_flags``):
``force=True``; ``plan=...`` (give it); ``keys={VERTEX: EXTRACTOR}`` (an entry to give);
``key_fns[…]='m:f'`` (the entry that was given); ``master='yarn'`` (the value that was given).
"""

from __future__ import annotations

from enum import IntEnum
from typing import ClassVar


class ExitStatus(IntEnum):
    """Every exit code of every command, one meaning each (docs/cli.md, "Exit codes")."""

    OK = 0
    FINDINGS = 1  # findings, a refusal, damage, or an answer of no / restores with loss
    USAGE = 2  # the arguments are wrong
    STORAGE = 3  # a store, a disk or a JobManager could not be reached, read or written
    UNKNOWN = 4  # the evidence does not decide the answer (preflight)
    INTERRUPTED = 130  # 128 + SIGINT, as shells report it


# What each exit code means, as ``--json`` error documents name it (``category``).
CATEGORIES = {ExitStatus.FINDINGS: "findings", ExitStatus.USAGE: "usage", ExitStatus.STORAGE: "storage"}


class SpillwayError(Exception):
    """Something spillway cannot do as asked, or a checkpoint it cannot accept (exit 1)."""

    exit_code: ClassVar[ExitStatus] = ExitStatus.FINDINGS


class UsageError(SpillwayError):
    """The arguments are wrong: a missing path, a bad option value, a plan that cannot be read (exit 2)."""

    exit_code: ClassVar[ExitStatus] = ExitStatus.USAGE


class ArgumentError(UsageError):
    """A bad argument of a library call, in Python's words: the message names the argument
    (``buffer_size=32: at least 64 bytes``); ``argument``/``key``/``value``/``detail`` let a front end say the
    same in its own words (the CLI names its option: ``--buffer-size 32: at least 64 bytes``).
    ``key``: the entry of a mapping argument (``keys["count"]``), if any; ``value`` None: the argument as a
    whole (``detail`` says what is wrong with it)."""

    def __init__(self, argument: str, value: object, detail: str, key: str | None = None) -> None:
        self.argument, self.value, self.detail, self.key = argument, value, detail, key
        where = argument if key is None else f"{argument}[{key!r}]"
        super().__init__(f"{where}: {detail}" if value is None else f"{where}={value!r}: {detail}")


class StorageError(SpillwayError):
    """A file system could not be reached or read (or written) as needed: a refused or silent endpoint, a
    timeout, missing credentials, a missing client library (exit 3). Says nothing about the checkpoint."""

    exit_code: ClassVar[ExitStatus] = ExitStatus.STORAGE
