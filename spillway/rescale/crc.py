"""CRC-32 of many equal-length records at once: the order-free fingerprint the router and self-check sum.

``crc32_rows(rows)[i] == zlib.crc32(rows[i])``: in C when the native helper is built (``spw_crc_rows``),
else with numpy tables (CRC-32 is affine over GF(2) for a fixed message length).
"""

from __future__ import annotations

import functools
import zlib

import numpy as np

CRC_TABLE_LIMIT = 512  # record elements up to this length get per-position CRC tables (length x 1 KiB)


@functools.cache
def _crc_position_tables(length: int) -> tuple[int, np.ndarray]:
    """CRC-32 is affine over GF(2) for a fixed message length: crc(x) = crc(0^n) ^ XOR_j T[j][x_j],
    where T[j][b] = crc(b at position j, zeros elsewhere) ^ crc(0^n). Returns (crc(0^n), T)."""
    zero = zlib.crc32(bytes(length))
    tables = np.empty((length, 256), dtype=np.uint32)
    msg = bytearray(length)
    for j in range(length):
        for b in range(256):
            msg[j] = b
            tables[j, b] = zlib.crc32(msg) ^ zero
        msg[j] = 0
    return zero, tables


def crc32_rows(rows: np.ndarray) -> np.ndarray:
    """``zlib.crc32`` of every row of a 2-D uint8 array (rows may be a strided view): in C when the
    native helper is built, else one numpy table lookup and xor per column."""
    from spillway.formats.native import library

    k, length = rows.shape
    lib = library()
    if lib is not None and rows.strides[1] == 1:
        out = np.empty(k, dtype=np.uint32)
        lib.spw_crc_rows(rows.__array_interface__["data"][0], k, rows.strides[0], length, out.ctypes.data)
        return out
    return crc32_rows_numpy(rows)


def crc32_rows_numpy(rows: np.ndarray) -> np.ndarray:
    length = rows.shape[1]
    if length > CRC_TABLE_LIMIT:  # tables would cost more than they save: per row with zlib
        return np.fromiter((zlib.crc32(r) for r in rows), dtype=np.uint32, count=rows.shape[0])
    zero, tables = _crc_position_tables(length)
    crc = np.full(rows.shape[0], zero, dtype=np.uint32)
    for j in range(length):
        crc ^= tables[j][rows[:, j]]
    return crc
