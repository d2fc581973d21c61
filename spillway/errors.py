"""One error hierarchy for the whole library; each error carries the exit code the CLI gives it.

Exit codes: 0 ok, 1 findings / refusal / damage, 2 usage, 3 storage could not be reached, read or written —
a store that does not answer in time, a full disk, a refused write (the checkpoint itself may be fine: retrying
later or elsewhere can succeed). The CLI gives any ``OSError`` that reaches it exit 3 as well. Every layer
raises a subclass of ``SpillwayError``; the CLI turns any of them into one line and ``exit_code`` without
matching names.

Messages speak Python: an argument the caller could give or change is named in keyword form, one form for
every message: ``force=True``; ``plan=...`` (give it); ``keys={VERTEX: EXTRACTOR}`` (an entry to give);
``key_fns[…]='m:f'`` (the entry that was given); ``master='yarn'`` (the value that was given). A message that
names one is a :class:`Message` whose :class:`Named` parts a front end says with its own options
(the CLI: ``cli.common.in_options``), never by reading the text back.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum
from typing import ClassVar

GIVE = ...  # ``Named.value`` when the message asks for the argument, whatever its value (``plan=...``)


@dataclass(frozen=True)
class Named:
    """An argument a message names. ``value``: ``GIVE`` (give it: ``plan=...``), ``True`` (a switch:
    ``force=True``), else the value that was given (``master='yarn'``). ``entry``: one entry of a mapping
    argument (``key_fns[…]='m:f'``); ``pair``: an entry to give, as placeholders (``keys={VERTEX: EXTRACTOR}``);
    ``placeholder``: a value to give (``uid_map=FILE``).
    ``python``: the words for Python callers when they are not the keyword form (``rebase rule 'A=B'``)."""

    argument: str
    value: object = GIVE
    entry: bool = False
    pair: tuple[str, str] | None = None
    placeholder: str | None = None
    python: str | None = None

    def __str__(self) -> str:
        if self.python is not None:
            return self.python
        if self.pair is not None:
            return f"{self.argument}={{{self.pair[0]}: {self.pair[1]}}}"
        where = f"{self.argument}[…]" if self.entry else self.argument
        if self.placeholder is not None:
            return f"{where}={self.placeholder}"
        return f"{where}=..." if self.value is GIVE else f"{where}={self.value!r}"


class Message(str):
    """A message that names arguments (:class:`Named`): as a ``str`` it is the Python words; ``parts`` keep each
    named argument apart so a front end can say the message in its own words (:meth:`words`)."""

    parts: tuple[str | Named, ...]

    def __new__(cls, *parts: str | Named) -> Message:
        flat: list[str | Named] = []
        for part in parts:
            flat.extend(part.parts if isinstance(part, Message) else (part,))
        self = super().__new__(cls, "".join(str(p) for p in flat))
        self.parts = tuple(flat)
        return self

    def __add__(self, other: str) -> Message:  # a str, and still a Message
        return Message(self, other)

    def __radd__(self, other: str) -> Message:
        return Message(other, self)

    @classmethod
    def joined(cls, separator: str, texts: list[str]) -> Message:
        """``separator.join(texts)``, each text that names an argument still naming it."""
        parts: list[str] = []
        for text in texts:
            parts += [separator, text] if parts else [text]
        return cls(*parts)

    def to_doc(self) -> list[object]:
        """The parts as JSON values (text as text, a named argument as an object): for a message that must
        cross a process boundary as text (a Spark executor's error)."""
        return [p if isinstance(p, str) else _named_doc(p) for p in self.parts]

    @classmethod
    def from_doc(cls, doc: list[object]) -> Message:
        return cls(*(p if isinstance(p, str) else _named_of(p) for p in doc))

    def words(self, say: Callable[[Named], str]) -> str:
        """The message with each named argument said by ``say`` (the plain text stays as it is)."""
        return "".join(p if isinstance(p, str) else say(p) for p in self.parts)


def _named_doc(named: Named) -> dict[str, object]:
    doc = {k: v for k, v in vars(named).items() if v is not None and v is not GIVE and v is not False}
    return {**doc, "pair": list(named.pair)} if named.pair is not None else doc


def _named_of(doc: object) -> Named:
    if not isinstance(doc, dict) or not isinstance(doc.get("argument"), str):
        raise ValueError(f"not a named argument: {doc!r}")
    pair = doc.get("pair")
    return Named(
        doc["argument"],
        doc.get("value", GIVE),
        bool(doc.get("entry", False)),
        (str(pair[0]), str(pair[1])) if isinstance(pair, list) and len(pair) == 2 else None,
        _text_or_none(doc.get("placeholder")),
        _text_or_none(doc.get("python")),
    )


def _text_or_none(value: object) -> str | None:
    return None if value is None else str(value)


def message_of(exc: BaseException) -> str:
    """An exception's message, as the :class:`Message` it was raised with if it was."""
    first = exc.args[0] if len(exc.args) == 1 else None
    return first if isinstance(first, Message) and str(exc) == first else str(exc)


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
