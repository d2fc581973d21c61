"""Flink's key → hashCode → murmurHash → key group → subtask math (spillway/flink/keygroups.py), bit for bit.

Every expected number was printed by Flink 2.3.0's own classes — ``Object.hashCode`` of Java's String, Long,
Boolean and Integer, ``MathUtils.murmurHash`` and ``KeyGroupRangeAssignment`` — with
``tests/fixtures/oracle/KeyGroupExamples.java`` (how to run it is in its header) and pasted here, so the test
needs no JVM. The keys are the edges the fixtures' keys do not reach: characters above U+00FF, surrogate
pairs and lone surrogates, longs with high bits set, negative hash codes, boolean and int keys, the two ints
whose murmur hash is 0, and max parallelisms that are not powers of two.
"""

from __future__ import annotations

import pytest

from spillway.flink.keygroups import (
    MAX_PARALLELISM_UPPER_BOUND,
    java_boolean_hash,
    java_int_hash,
    java_long_hash,
    java_string_hash,
    key_group_for_hash,
    key_group_range,
    murmur_hash,
    operator_index,
)

# (max parallelism, parallelism) of every routing column below
ROUTES = ((128, 3), (100, 7), (1000, 3), (32768, 10))

# key, Java hashCode, MathUtils.murmurHash(hashCode), [(key group, subtask) per ROUTES]
STRINGS = [
    ("\u65e5\u672c", 835047, 1762503263, [(95, 2), (63, 4), (263, 0), (10847, 3)]),
    ("polygenelubricants", -2147483648, 1718298732, [(108, 2), (32, 2), (732, 2), (10348, 3)]),
    (
        "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8",
        -934492083,
        877579912,
        [(8, 0), (12, 0), (912, 2), (20104, 6)],
    ),
    ("\u20acuro", 249288006, 1216457988, [(4, 0), (88, 6), (988, 2), (11524, 3)]),
    ("\uffff\u0100", 2031841, 1100757051, [(59, 1), (51, 3), (51, 0), (14395, 4)]),
    ("\U0001f600", 1772899, 1934073014, [(54, 1), (14, 0), (14, 0), (7350, 2)]),  # a surrogate pair in Java
    ("\ud800", 55296, 545030712, [(56, 1), (12, 0), (712, 2), (568, 0)]),  # lone high surrogate
    ("a\udc00b", 1839235, 745290224, [(112, 2), (24, 1), (224, 0), (14832, 4)]),  # lone low surrogate
]
LONGS = [
    (1 << 32, 1, 68075478, [(86, 2), (78, 5), (478, 1), (16342, 4)]),
    (0x123456789ABCDEF, -2004318072, 1749024145, [(17, 0), (45, 3), (145, 0), (32145, 9)]),
    (-1, 0, 593689054, [(94, 2), (54, 3), (54, 0), (31198, 9)]),
    (-(1 << 63), -2147483648, 1718298732, [(108, 2), (32, 2), (732, 2), (10348, 3)]),
    (-0x100000001, 1, 68075478, [(86, 2), (78, 5), (478, 1), (16342, 4)]),
    (0x7FFFFFFF00000000, 2147483647, 1653689534, [(62, 1), (34, 2), (534, 1), (19646, 5)]),
]
BOOLEANS = [
    (True, 1231, 1090530765, [(77, 1), (65, 4), (765, 2), (11725, 3)]),
    (False, 1237, 1530821891, [(3, 0), (91, 6), (891, 2), (32003, 9)]),
]
INTS = [
    (17, 17, 1197063121, [(81, 1), (21, 1), (121, 0), (15313, 4)]),
    (-17, -17, 992105181, [(93, 2), (81, 5), (181, 0), (21213, 6)]),
    (-(1 << 31), -2147483648, 1718298732, [(108, 2), (32, 2), (732, 2), (10348, 3)]),
    (-1, -1, 1982413648, [(80, 1), (48, 3), (648, 1), (15184, 4)]),
]


def _ids(cases: list) -> list[str]:
    # plain ASCII letters, digits and "-": mutmut passes node ids on a command line, where quotes and
    # backslashes in an id make pytest find no test
    return [str(c[0]).encode("unicode_escape", "backslashreplace").decode().replace("\\", "") for c in cases]


def _routes(hash_code: int) -> list[tuple[int, int]]:
    out = []
    for max_p, p in ROUTES:
        kg = key_group_for_hash(hash_code, max_p)
        out.append((kg, operator_index(max_p, p, kg)))
    return out


@pytest.mark.parametrize(("key", "hash_code", "murmur", "routes"), STRINGS, ids=_ids(STRINGS))
def test_string_keys_route_as_in_flink(key, hash_code, murmur, routes) -> None:
    assert java_string_hash(key) == hash_code
    assert murmur_hash(hash_code) == murmur
    assert _routes(hash_code) == routes


@pytest.mark.parametrize(("key", "hash_code", "murmur", "routes"), LONGS, ids=_ids(LONGS))
def test_long_keys_route_as_in_flink(key, hash_code, murmur, routes) -> None:
    assert java_long_hash(key) == hash_code
    assert murmur_hash(hash_code) == murmur
    assert _routes(hash_code) == routes


@pytest.mark.parametrize(("key", "hash_code", "murmur", "routes"), BOOLEANS, ids=_ids(BOOLEANS))
def test_boolean_keys_route_as_in_flink(key, hash_code, murmur, routes) -> None:
    assert java_boolean_hash(key) == hash_code
    assert murmur_hash(hash_code) == murmur
    assert _routes(hash_code) == routes


@pytest.mark.parametrize(("key", "hash_code", "murmur", "routes"), INTS, ids=_ids(INTS))
def test_int_keys_route_as_in_flink(key, hash_code, murmur, routes) -> None:
    assert java_int_hash(key) == hash_code
    assert murmur_hash(hash_code) == murmur
    assert _routes(hash_code) == routes


# The only two ints whose MathUtils.murmurHash is 0 (Flink 2.3.0, all 2^32 ints tried): the raw MurmurHash3
# is a bijection of the int, so one of them hashes to 0 and the other to Integer.MIN_VALUE, which
# murmurHash maps to 0 as well instead of overflowing Math.abs.
@pytest.mark.parametrize("code", [-2089875627, -1035494534])
def test_the_two_ints_flink_hashes_to_zero(code: int) -> None:
    assert murmur_hash(code) == 0
    assert [key_group_for_hash(code, max_p) for max_p, _ in ROUTES] == [0, 0, 0, 0]


# KeyGroupRangeAssignment.computeKeyGroupRangeForOperatorIndex, inclusive [start, end] per subtask
@pytest.mark.parametrize(
    ("max_p", "ranges"),
    [
        (100, [(0, 14), (15, 28), (29, 42), (43, 57), (58, 71), (72, 85), (86, 99)]),
        (10, [(0, 3), (4, 6), (7, 9)]),
        (
            MAX_PARALLELISM_UPPER_BOUND,
            [
                (0, 3276),
                (3277, 6553),
                (6554, 9830),
                (9831, 13107),
                (13108, 16383),
                (16384, 19660),
                (19661, 22937),
                (22938, 26214),
                (26215, 29491),
                (29492, 32767),
            ],
        ),
    ],
)
def test_key_group_ranges_as_in_flink(max_p: int, ranges: list[tuple[int, int]]) -> None:
    assert MAX_PARALLELISM_UPPER_BOUND == 32768  # KeyGroupRangeAssignment.UPPER_BOUND_MAX_PARALLELISM
    assert [key_group_range(max_p, len(ranges), i) for i in range(len(ranges))] == ranges
