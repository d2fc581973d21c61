"""numpy twins of ``keygroups``: the same key-group math, bit for bit, for many keys per call.

Each function equals its scalar counterpart element-wise (tests compare them on edge-case values).
"""

from __future__ import annotations

import numpy as np


def long_hash_codes(values: np.ndarray) -> np.ndarray:
    """``Long.hashCode`` (``java_long_hash``) of uint64 values (the longs' bits) -> uint32 hash codes."""
    v = values.astype(np.uint64, copy=False)
    return (v ^ (v >> np.uint64(32))).astype(np.uint32)


def int_hash_codes(values: np.ndarray) -> np.ndarray:
    """``Integer.hashCode`` (``java_int_hash``): the int itself, as uint32 bits."""
    return values.astype(np.int32, copy=False).view(np.uint32)


def murmur_hashes(codes: np.ndarray) -> np.ndarray:
    """``keygroups.murmur_hash`` of many Java hash codes (uint32 array) -> int64 array."""
    u = np.uint32
    k = codes.astype(u) * u(0xCC9E2D51)
    k = (k << u(15)) | (k >> u(17))
    k = k * u(0x1B873593)
    h = (k << u(13)) | (k >> u(19))
    h = h * u(5) + u(0xE6546B64)
    h ^= u(4)
    h ^= h >> u(16)
    h *= u(0x85EBCA6B)
    h ^= h >> u(13)
    h *= u(0xC2B2AE35)
    h ^= h >> u(16)
    s = h.view(np.int32).astype(np.int64)
    return np.where(s >= 0, s, np.where(s == -(1 << 31), 0, -s))


def operator_indices_for_hashes(codes: np.ndarray, max_parallelism: int, parallelism: int) -> np.ndarray:
    """``operator_index(max_parallelism, parallelism, key_group_for_hash(code, max_parallelism))`` per code."""
    return murmur_hashes(codes) % max_parallelism * parallelism // max_parallelism
