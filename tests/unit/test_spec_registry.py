"""Another module's value spec hooks into the one grammar with ``register_spec``: it parses wherever specs are read
(value specs, key specs with fields and derived keys), and a raw-argument spec gets a path or URL verbatim."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from spillway.formats.values import (
    RAW_ARGUMENT_SPECS,
    SPEC_CONSTRUCTORS,
    SpecParser,
    TupleType,
    Type,
    ValueSpecError,
    parse_key_extractor,
    parse_value_spec,
    register_spec,
)

SEEN: list[str] = []


def schema_spec(p: SpecParser) -> Type:
    SEEN.append(p.raw_argument())
    return parse_value_spec("tuple(long,string)")  # what the schema would describe


@pytest.fixture
def registered() -> Iterator[None]:
    SEEN.clear()
    register_spec("schemaful", schema_spec, raw_argument=True)
    yield
    SPEC_CONSTRUCTORS.pop("schemaful")
    RAW_ARGUMENT_SPECS.discard("schemaful")


def test_a_registered_spec_reads_its_argument_verbatim(registered: None) -> None:
    t = parse_value_spec("schemaful( https://registry:8081/subjects/orders-value/versions/3 )")
    assert isinstance(t, TupleType)
    assert SEEN == ["https://registry:8081/subjects/orders-value/versions/3"]
    parse_value_spec("Schemaful(schemas/Order (v2).avsc)")
    assert SEEN[-1] == "schemas/Order (v2).avsc"


def test_a_registered_spec_keys_by_field_and_derived_key(registered: None) -> None:
    raw = (5).to_bytes(8, "big") + b"\x04a:b"
    assert parse_key_extractor("schemaful(x.avsc):1|before(':')")(raw) == ("a", 97)
    assert parse_key_extractor("schemaful(x.avsc):0")(raw) == (5, 5)


def test_built_in_names_cannot_be_taken() -> None:
    with pytest.raises(ValueError, match="built-in"):
        register_spec("Row", schema_spec)


def test_an_unclosed_raw_argument_is_one_clear_error(registered: None) -> None:
    with pytest.raises(ValueSpecError, match="never closed"):
        parse_value_spec("schemaful(x.avsc")
