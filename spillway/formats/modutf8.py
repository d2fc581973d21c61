"""Java's "modified UTF-8" (``DataOutput.writeUTF``): ``C0 80`` for NUL, surrogates as 3-byte sequences."""

from __future__ import annotations


def decode_modified_utf8(raw: bytes) -> str:
    if raw.isascii():
        return raw.decode("ascii")
    units: list[int] = []
    i, n = 0, len(raw)
    while i < n:
        c = raw[i]
        if c < 0x80:
            units.append(c)
            i += 1
        elif c >> 5 == 0b110 and i + 1 < n and raw[i + 1] >> 6 == 0b10:
            units.append(((c & 0x1F) << 6) | (raw[i + 1] & 0x3F))
            i += 2
        elif c >> 4 == 0b1110 and i + 2 < n and raw[i + 1] >> 6 == 0b10 and raw[i + 2] >> 6 == 0b10:
            units.append(((c & 0x0F) << 12) | ((raw[i + 1] & 0x3F) << 6) | (raw[i + 2] & 0x3F))
            i += 3
        else:
            raise ValueError(f"malformed modified UTF-8 at byte {i} of the string")
    # The units are UTF-16 code units; join surrogate pairs into code points.
    return b"".join(u.to_bytes(2, "big") for u in units).decode("utf-16-be", "surrogatepass")


def encode_modified_utf8(text: str) -> bytes:
    if text.isascii() and "\x00" not in text:
        return text.encode("ascii")
    raw = text.encode("utf-16-be", "surrogatepass")
    out = bytearray()
    for i in range(0, len(raw), 2):
        unit = (raw[i] << 8) | raw[i + 1]
        if 0 < unit < 0x80:
            out.append(unit)
        elif unit < 0x800:
            out += bytes((0xC0 | (unit >> 6), 0x80 | (unit & 0x3F)))
        else:
            out += bytes((0xE0 | (unit >> 12), 0x80 | ((unit >> 6) & 0x3F), 0x80 | (unit & 0x3F)))
    return bytes(out)
