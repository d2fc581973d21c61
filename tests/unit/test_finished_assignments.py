"""The assignments the FLIP-147 verdict tries when the binding leaves operators open (``finished._assignments``):
each open operator (unbound or indistinct, with candidates, not exact) takes each of its candidates, every
checkpoint id left over is taken by exactly one of them, and "-" (not in the checkpoint: releases that leave
stateless operators out of ``_metadata``) leaves the operator out."""

from __future__ import annotations

from spillway.flink import operator_ids
from spillway.flink.operator_ids import Binding, BoundOperator
from spillway.inspect.finished import _assignments

A, B, C = ("a" * 32, "b" * 32, "c" * 32)


def _op(name: str, method: str, candidates: tuple[str, ...] = (), operator_id: str | None = None) -> BoundOperator:
    exact = operator_id is not None
    return BoundOperator(name, method, operator_id, exact, exact, "", candidates=candidates)


def _ids(binding: Binding) -> list[tuple[tuple[str | None, bool, bool, str], ...]]:
    return [
        tuple((b.operator_id, b.in_checkpoint, b.exact, b.method) for b in v.operators) for v in _assignments(binding)
    ]


def test_every_left_id_is_taken_once_and_only_open_operators_move() -> None:
    binding = Binding(
        (
            _op("bound", operator_ids.DEDUCED, operator_id=A),
            _op("open", operator_ids.UNBOUND, (B, C)),
            _op("twin", operator_ids.INDISTINCT, (B, C)),
            # candidates but bound exactly, or bound by another method: never reassigned
            BoundOperator("exact", operator_ids.INDISTINCT, A, True, True, "", candidates=(B,)),
            BoundOperator("named", operator_ids.DEDUCED, None, False, False, "", candidates=(B, C)),
        ),
        (B, C),
        "1.20",
    )
    fixed = [(A, True, True, operator_ids.DEDUCED)]
    rest = [(A, True, True, operator_ids.INDISTINCT), (None, False, False, operator_ids.DEDUCED)]
    assert _ids(binding) == [
        (*fixed, (B, True, True, "deduced"), (C, True, True, "deduced"), *rest),
        (*fixed, (C, True, True, "deduced"), (B, True, True, "deduced"), *rest),
    ]
    for variant in _assignments(binding):
        assert variant.unclaimed == ()
        assert all(b.candidates == () for b in variant.operators[1:3])
        assert variant.operators[3].candidates == (B,)  # untouched


def test_an_open_operator_may_be_out_of_the_checkpoint() -> None:
    binding = Binding(
        (_op("x", operator_ids.UNBOUND, (B, "-")), _op("y", operator_ids.UNBOUND, (B, "-"))), (B,), "1.12"
    )
    assert _ids(binding) == [
        ((B, True, True, "deduced"), (None, False, False, "deduced")),
        ((None, False, False, "deduced"), (B, True, True, "deduced")),
    ]
    # with nothing left over, both may be out
    free = Binding(binding.operators, (), "1.12")
    assert ((None, False, False, "deduced"), (None, False, False, "deduced")) in _ids(free)
    assert len(_ids(free)) == 3  # (b, -), (-, b), (-, -); (b, b) takes one id twice


def test_nothing_open_gives_no_assignment() -> None:
    assert _ids(Binding((_op("bound", operator_ids.DEDUCED, operator_id=A),), (), "1.20")) == []
    assert _ids(Binding((_op("no candidates", operator_ids.UNBOUND),), (B,), "1.20")) == []
