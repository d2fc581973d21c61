"""Flink's key-group math, bit for bit: key → hashCode → murmur → key group → subtask (docs/format/keyed-routing.md)."""

from __future__ import annotations

MAX_PARALLELISM_UPPER_BOUND = 1 << 15
_M32 = 0xFFFFFFFF


def _int32(v: int) -> int:
    v &= _M32
    return v - (1 << 32) if v & 0x80000000 else v


def _rotl(v: int, r: int) -> int:
    return ((v << r) | (v >> (32 - r))) & _M32


def murmur3_int(value: int, seed: int = 0) -> int:
    """MurmurHash3 x86_32 of one 4-byte int, as a signed int (Flink uses seed 0, Spark's partitioner 42)."""
    k = (value * 0xCC9E2D51) & _M32
    k = (_rotl(k, 15) * 0x1B873593) & _M32
    h = _rotl((seed & _M32) ^ k, 13)
    h = (h * 5 + 0xE6546B64) & _M32
    h ^= 4
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & _M32
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & _M32
    h ^= h >> 16
    return _int32(h)


def murmur_hash(code: int) -> int:
    """``MathUtils.murmurHash(int)``: MurmurHash3 x86_32 of one int, made non-negative as Flink does."""
    s = murmur3_int(code)
    if s >= 0:
        return s
    return -s if s != -(1 << 31) else 0


def java_string_hash(text: str) -> int:
    h = 0
    raw = text.encode("utf-16-be", "surrogatepass")
    for i in range(0, len(raw), 2):
        h = (31 * h + ((raw[i] << 8) | raw[i + 1])) & _M32
    return _int32(h)


def java_long_hash(v: int) -> int:
    v &= 0xFFFFFFFFFFFFFFFF
    return _int32(v ^ (v >> 32))


def java_int_hash(v: int) -> int:
    return _int32(v)


def java_boolean_hash(v: bool) -> int:
    return 1231 if v else 1237


def key_group_for_hash(hash_code: int, max_parallelism: int) -> int:
    return murmur_hash(hash_code) % max_parallelism


def operator_index(max_parallelism: int, parallelism: int, key_group: int) -> int:
    return key_group * parallelism // max_parallelism


def key_group_range(max_parallelism: int, parallelism: int, index: int) -> tuple[int, int]:
    """Inclusive [first, last] key groups of subtask ``index``."""
    start = (index * max_parallelism + parallelism - 1) // parallelism
    end = ((index + 1) * max_parallelism + parallelism - 1) // parallelism - 1
    return start, end
