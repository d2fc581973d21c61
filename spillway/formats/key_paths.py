"""Keys picked by field name or path and keys derived from a field without Python (docs/format/object-values.md).

Grammar (after the value spec)::

    key     := spec [":" path ["@utf8"]] ("|" fn)*      (@utf8: avro string keys returned as Avro's Utf8)
    path    := step ("." step)*            step := FIELD-NAME | FIELD-INDEX
    fn      := before('S') | after('S') | beforelast('S') | afterlast('S') | part('S', N)
             | substring(B) | substring(B, E) | lower | upper | trim | str | mod(N)

``pojo(user:string,seq:long):user`` keys by a POJO field, ``pojo(meta:pojo(origin:string),…):meta.origin`` by a
nested one, ``row(id:long,name:string):name`` / ``caseclass(...)`` fields by name, tuples and rows by index.
The functions are what KeySelectors most often do to a field (``s.substring(0, s.indexOf(':'))``,
``toLowerCase()``, ``String.valueOf(id)``, ``id % 16``), with Java's semantics: text positions count UTF-16
units; ``before``/``after`` keep the whole string when the separator is missing; ``part`` is
``split(Pattern.quote(S))[N]``; ``mod`` is Java's ``%`` (the sign of the dividend); ``lower``/``upper`` are
``toLowerCase``/``toUpperCase`` of a locale without special rules (ROOT, English); ``str`` is
``String.valueOf`` of an integer, boolean or string. The key's hash is the Java hashCode of the final value.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass

from spillway.formats.value_composites import CaseClassType, FieldsValue, NullableType, PojoType
from spillway.formats.values import (
    SCALARS,
    KeyExtractor,
    RowType,
    RowValue,
    ScalarType,
    SpecParser,
    TupleType,
    Type,
    UnknownType,
    ValueSpecError,
    register_path_keys,
)

_INTEGERS = ("long", "int", "short", "byte")
UTF8_SUFFIX = "utf8"  # FIELD@utf8: the KeySelector returns Avro's Utf8 (the field itself), not a String


def _utf16(s: str) -> bytes:
    return s.encode("utf-16-be", "surrogatepass")


def _from_utf16(b: bytes) -> str:
    return b.decode("utf-16-be", "surrogatepass")


def _java_substring(s: str, begin: int, end: int | None) -> str:
    units = _utf16(s)
    n = len(units) // 2
    stop = n if end is None else end
    if not 0 <= begin <= stop <= n:
        raise ValueSpecError(f"substring({begin}, {stop}) of a {n}-unit string (Java: StringIndexOutOfBounds)")
    return _from_utf16(units[2 * begin : 2 * stop])


def _java_trim(s: str) -> str:
    start, end = 0, len(s)
    while start < end and s[start] <= " ":
        start += 1
    while end > start and s[end - 1] <= " ":
        end -= 1
    return s[start:end]


def _java_mod(v: int, n: int) -> int:
    r = abs(v) % n
    return -r if v < 0 else r


def _java_split(s: str, sep: str) -> list[str]:
    parts = s.split(sep)
    while len(parts) > 1 and parts[-1] == "":  # Java drops trailing empty strings
        parts.pop()
    return parts


@dataclass(frozen=True)
class KeyFunction:
    """One step of a derived key: ``apply`` on a Java value of type ``takes``, giving one of type ``gives``."""

    text: str
    takes: tuple[str, ...]
    gives: str | None  # None: the input's type
    apply: Callable[[object], object]

    def result(self, scalar: str) -> str:
        return self.gives or scalar


def _text_fn(text: str, fn: Callable[[str], str]) -> KeyFunction:
    return KeyFunction(text, ("string",), "string", lambda v: fn(str(v)))


def _str_of(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def _parse_function(p: SpecParser) -> KeyFunction:
    name = p.take()
    if name in ("before", "after", "beforelast", "afterlast"):
        p.take("(")
        sep = p.literal()
        p.take(")")
        if not sep:
            raise p.fail(f"{name}(...) needs a separator that is not empty")
        text = f"{name}({sep!r})"
        if name == "before":
            return _text_fn(text, lambda s: s.split(sep, 1)[0])
        if name == "after":
            return _text_fn(text, lambda s: s.split(sep, 1)[-1])
        if name == "beforelast":
            return _text_fn(text, lambda s: s.rsplit(sep, 1)[0])
        return _text_fn(text, lambda s: s.rsplit(sep, 1)[-1])
    if name == "part":
        p.take("(")
        sep = p.literal()
        p.take(",")
        index = p.number()
        p.take(")")
        if not sep:
            raise p.fail("part(...) needs a separator that is not empty")

        def part(s: str) -> str:
            parts = _java_split(s, sep)
            if index >= len(parts):
                raise ValueSpecError(f"part({sep!r}, {index}) of {s!r}: only {len(parts)} parts")
            return parts[index]

        return _text_fn(f"part({sep!r},{index})", part)
    if name == "substring":
        p.take("(")
        begin = p.number()
        end: int | None = None
        if p.peek() == ",":
            p.take(",")
            end = p.number()
        p.take(")")
        text = f"substring({begin})" if end is None else f"substring({begin},{end})"
        return _text_fn(text, lambda s: _java_substring(s, begin, end))
    if name == "lower":
        return _text_fn("lower", str.lower)
    if name == "upper":
        return _text_fn("upper", str.upper)
    if name == "trim":
        return _text_fn("trim", _java_trim)
    if name == "str":
        return KeyFunction("str", ("string", "boolean", *_INTEGERS), "string", _str_of)
    if name == "mod":
        p.take("(")
        n = p.number()
        p.take(")")
        if n == 0:
            raise p.fail("mod(0) divides by zero")
        return KeyFunction(f"mod({n})", _INTEGERS, None, lambda v: _java_mod(int(v), n))  # type: ignore[call-overload]
    raise p.fail(
        f"unknown key function {name!r} (known: before, after, beforelast, afterlast, part, substring, lower, "
        "upper, trim, str, mod)"
    )


# ---------------------------------------------------------------- paths

Step = tuple[str, int | str]  # ("pojo" | "caseclass" | "row" | "tuple" | "item", index or name)


def _unwrap(t: Type) -> Type:
    return t.inner if isinstance(t, NullableType) else t


def _resolve(spec: str, t: Type, step: str, walked: list[str]) -> tuple[Step, Type]:
    """One path step from type ``t`` (reached by the names in ``walked``); fields before the picked one must have
    known types. A spec type of another module steps itself with ``path_field(spec, walked, step)``, returning
    ``(("item", name), field type)`` for values that are dicts of their fields (avro, kryo)."""
    t = _unwrap(t)
    own = getattr(t, "path_field", None)
    if callable(own):
        found: tuple[Step, Type] = own(spec, walked, step)
        return found
    names: list[str] | None
    if isinstance(t, PojoType | CaseClassType):
        names = [n for n, _ in t.fields]
        types = [f for _, f in t.fields]
        kind = "pojo" if isinstance(t, PojoType) else "caseclass"
    elif isinstance(t, RowType | TupleType):
        names = t.names if isinstance(t, RowType) else None
        types = t.fields
        kind = "row" if isinstance(t, RowType) else "tuple"
    else:
        at = ".".join(walked) or "the value"
        raise ValueSpecError(f"key spec {spec!r}: {at} is a {t.spec}, which has no field {step!r}")
    if step.isdigit():
        if kind == "pojo":
            raise ValueSpecError(f"key spec {spec!r}: pick a POJO field by name, not by number ({step})")
        index = int(step)
        if index >= len(types):
            raise ValueSpecError(f"key spec {spec!r}: field {index} does not exist ({len(types)} fields)")
    else:
        if names is None or step not in names:
            known = ", ".join(names) if names else "none: pick by number"
            raise ValueSpecError(f"key spec {spec!r}: {t.spec} has no field {step!r} (names: {known})")
        index = names.index(step)
    # the fields written before the picked one must decode to find it; the picked one is checked by the next
    # step (a nested field before a later ? is still found) or, for the key itself, by parse_path_key
    if any(not f.known for f in types[:index]):
        raise ValueSpecError(
            f"key spec {spec!r}: a field serialized before {step!r} has an unknown type (?), so the key cannot be found"
        )
    if kind in ("pojo", "caseclass"):
        return (kind, (names or [])[index]), types[index]
    return (kind, index), types[index]


def _step(value: object, step: Step) -> object:
    where = step[1]
    if step[0] == "item":
        assert isinstance(value, dict) and isinstance(where, str)  # a record of another module's spec type
        return value[where]
    if isinstance(value, FieldsValue):
        assert isinstance(where, str)  # resolved against a pojo/caseclass type
        return value.get(where)
    if isinstance(value, RowValue):
        assert isinstance(where, int)
        return value.fields[where]
    assert isinstance(value, tuple) and isinstance(where, int)  # a tuple's decoded value
    return value[where]


class PathKeyExtractor(KeyExtractor):
    """A key at a field path of the decoded value, optionally passed through key functions."""

    def __init__(self, spec: str, value_type: Type, path: list[Step], key_type: Type, fns: list[KeyFunction]):
        self.spec = spec
        self.value_type = value_type
        self.field = None
        self.strict = value_type.known
        self.key_type = key_type
        self.path = path
        self.fns = fns
        final = key_type.scalar.name if isinstance(key_type, ScalarType) else None
        for fn in fns:
            assert final is not None  # parse_path_key checked the types
            final = fn.result(final)
        self._final_hash: Callable[[object], int]
        if fns:
            scalar = SCALARS[final or ""]
            assert scalar.hash is not None
            self._final_hash = scalar.hash
        else:
            self._final_hash = key_type.hash

    def __call__(self, payload: bytes | memoryview) -> tuple[object, int]:
        data = payload if isinstance(payload, bytes) else bytes(payload)
        try:
            value, end = self.value_type.read(data, 0)
        except (struct.error, IndexError) as exc:
            raise ValueSpecError(f"value does not fit {self.spec!r}: {exc}") from None
        except ValueSpecError as exc:
            raise ValueSpecError(f"value does not fit {self.spec!r}: {exc}") from None
        if self.strict and end != len(data):
            raise ValueSpecError(
                f"value does not fit {self.spec!r}: {len(data) - end} bytes left over after offset {end} (more fields "
                "than the spec names, or another schema version? give every field, or ? for the ones after the key)"
            )
        key = value
        for i, step in enumerate(self.path):
            if key is None:
                where = ".".join(str(s[1]) for s in self.path[:i])
                raise ValueSpecError(
                    f"{self.spec!r}: {where} is null in this value; Flink refuses null keys (a KeySelector reading "
                    "through it fails)"
                )
            key = _step(key, step)
        if key is None:
            raise ValueSpecError(f"the key of {self.spec!r} is null in this value; Flink refuses null keys")
        for fn in self.fns:
            key = fn.apply(key)
        return key, self._final_hash(key)

    def __repr__(self) -> str:
        return f"PathKeyExtractor({self.spec!r})"


def parse_path_key(spec: str) -> KeyExtractor:
    """``SPEC[:PATH][|FN...]`` (module docstring)."""
    p = SpecParser(spec)
    value_type = p.type()
    path: list[Step] = []
    key_type: Type = value_type
    walked: list[str] = []
    if p.peek() == ":":
        p.take(":")
        while True:
            if p.peek() in (None, ".", "|", "@", ":"):
                raise ValueSpecError(f"key spec {spec!r}: empty field name in the path after {'.'.join(walked)!r}")
            step = p.take_raw()
            step_, key_type = _resolve(spec, key_type, step, walked)
            path.append(step_)
            walked.append(step)
            if p.peek() != ".":
                break
            p.take(".")
    elif callable(getattr(value_type, "path_field", None)):
        raise ValueSpecError(
            f"key spec {spec!r}: name the key field: {value_type.spec}:FIELD (a nested one as outer.inner), the field "
            "the job's KeySelector returns"
        )
    as_utf8 = False
    if p.peek() == "@":
        p.take("@")
        word = p.take()
        if word != UTF8_SUFFIX:
            raise p.fail(f"@{word}: the only key marker is @{UTF8_SUFFIX} (a KeySelector returning Avro's Utf8)")
        as_utf8 = True
    key_type = _unwrap(key_type)
    as_key = getattr(key_type, "as_key", None)
    if callable(as_key):  # a type of another module: the Java type its key hashes as
        key_type = as_key(spec, as_utf8)
    elif as_utf8:
        raise ValueSpecError(f"key spec {spec!r}: @{UTF8_SUFFIX} is for string fields of avro(...) records")
    if isinstance(key_type, UnknownType):
        raise ValueSpecError(f"key spec {spec!r}: the key field has an unknown type (?)")
    fns: list[KeyFunction] = []
    while p.peek() == "|":
        p.take("|")
        fns.append(_parse_function(p))
    p.end()
    if not path and not isinstance(key_type, ScalarType):
        raise ValueSpecError(f"key spec {spec!r}: pick the key field with :NAME (or :N), e.g. {value_type.spec}:…")
    current = key_type.scalar.name if isinstance(key_type, ScalarType) else None
    for fn in fns:
        if current not in fn.takes:
            raise ValueSpecError(
                f"key spec {spec!r}: {fn.text} takes a {' or '.join(fn.takes)}, the key here is a "
                f"{current or key_type.spec}"
            )
        current = fn.result(current)
    if not fns:
        if isinstance(key_type, ScalarType) and key_type.scalar.hash is None:
            raise ValueSpecError(
                f"key spec {spec!r}: {key_type.spec} keys hash by object identity; Flink cannot route them"
            )
        if not isinstance(key_type, ScalarType | TupleType):
            raise ValueSpecError(
                f"key spec {spec!r}: a {key_type.spec} key hashes with its class's own hashCode, which spillway "
                "cannot compute: key by one of its fields, or use --key-fn"
            )
        if isinstance(key_type, TupleType) and not all(isinstance(f, ScalarType) for f in key_type.fields):
            raise ValueSpecError(f"key spec {spec!r}: a tuple key needs scalar fields")
    return PathKeyExtractor(spec, value_type, path, key_type, fns)


register_path_keys(parse_path_key)
