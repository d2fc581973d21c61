"""Errors that point at a byte: every decode failure names file, offset, field path and expectation."""

from __future__ import annotations

import re

from construct import ConstructError

from spillway.errors import SpillwayError
from spillway.formats.primitives import FormatError


class CheckpointFormatError(SpillwayError):
    """Bytes that do not decode. ``str()`` is the one-line message shown to users."""

    def __init__(self, file: str, offset: int | None, field_path: str, message: str):
        self.file = file
        self.offset = offset
        self.field_path = field_path
        self.message = message
        where = f"byte {offset}" if offset is not None else "unknown offset"
        field = f" in {field_path}" if field_path else ""
        super().__init__(f"{file}: {where}{field}: {message}")


# Layout names that structure the declarations but mean nothing to a user.
_HIDDEN = {"(parsing)", "header", "body", "state", "blob", "(???)"}
# Single handles shown as one-element lists in the JSON view: name them as list items there too.
_LISTISH = {"managed_operator_state", "raw_operator_state", "managed_keyed_state", "raw_keyed_state"}
_SHORT_READ = re.compile(r"expected (\d+), found (\d+)")


def field_path(construct_path: str | None) -> str:
    """``(parsing) -> body -> operators -> [3] -> subtasks -> [1] -> state -> x`` → ``operators[3].subtasks[1].x``."""
    if not construct_path:
        return ""
    out = ""
    for part in (p.strip() for p in construct_path.split("->")):
        if not part or part in _HIDDEN:
            continue
        if part.startswith("["):
            out += part
        else:
            out += ("." if out else "") + part
            if part in _LISTISH:
                out += "[0]"
    return out


def from_construct(exc: ConstructError, file: str, stream_pos: int, size: int) -> CheckpointFormatError:
    """Translate a construct failure, recovering the offset of the field that failed."""
    text = str(exc).strip().splitlines()[-1] if str(exc).strip() else type(exc).__name__
    text = re.sub(r"^Error in path .*?\n?", "", text)
    offset: int | None = getattr(exc, "offset", None) if isinstance(exc, FormatError) else None
    message = text
    m = _SHORT_READ.search(text)
    if offset is None and m and "stream read less" in text:
        needed, found = int(m.group(1)), int(m.group(2))
        offset = size - found
        message = f"truncated: field needs {needed} bytes, only {found} left"
    if offset is None:
        offset = stream_pos
    return CheckpointFormatError(file, offset, field_path(getattr(exc, "path", None)), message)
