"""A writer of zips encrypted with the traditional PKWARE cipher ("ZipCrypto"), as ObjectNet's zip is.

Python's zipfile reads such zips but cannot write them, so the cipher is implemented here from PKWARE's
APPNOTE.TXT (section 6.1, "Traditional PKWARE Encryption"); the tests check the result with independent
readers (zipfile with a password, and Info-ZIP unzip where installed).
"""

from __future__ import annotations

import random
import struct
import zlib
from pathlib import Path

_CRC_TABLE = [0] * 256
for _n in range(256):
    _c = _n
    for _ in range(8):
        _c = (_c >> 1) ^ 0xEDB88320 if _c & 1 else _c >> 1
    _CRC_TABLE[_n] = _c

_DOS_TIME, _DOS_DATE = 0x6000, 0x5821  # 12:00:00, 2024-01-01


class _Keys:
    """The cipher's three 32-bit keys, initialised from the password (APPNOTE 6.1.5)."""

    def __init__(self, password: bytes) -> None:
        self.k0, self.k1, self.k2 = 0x12345678, 0x23456789, 0x34567890
        for byte in password:
            self.update(byte)

    def update(self, byte: int) -> None:
        self.k0 = (self.k0 >> 8) ^ _CRC_TABLE[(self.k0 ^ byte) & 0xFF]
        self.k1 = ((self.k1 + (self.k0 & 0xFF)) * 134775813 + 1) & 0xFFFFFFFF
        self.k2 = (self.k2 >> 8) ^ _CRC_TABLE[(self.k2 ^ (self.k1 >> 24)) & 0xFF]

    def encrypt(self, plain: bytes) -> bytes:
        out = bytearray()
        for byte in plain:
            temp = (self.k2 | 2) & 0xFFFF
            out.append(byte ^ (((temp * (temp ^ 1)) >> 8) & 0xFF))
            self.update(byte)
        return bytes(out)


def write_encrypted_zip(
    path: Path, members: dict[str, bytes], password: str, deflate: bool = True, file_mode: int = 0o644
) -> Path:
    """Write ``members`` (names ending in "/" are folders, stored unencrypted as zip tools do) to ``path``, with
    Unix modes ``file_mode`` and 0o755 (for folders) as Info-ZIP zip stores them."""
    rng = random.Random(0)
    body, central = bytearray(), bytearray()
    for name, data in members.items():
        folder = name.endswith("/")
        crc = zlib.crc32(data)
        method = 8 if deflate and not folder else 0
        packed = data
        if method == 8:
            compressor = zlib.compressobj(9, zlib.DEFLATED, -15)
            packed = compressor.compress(data) + compressor.flush()
        flags = 0 if folder else 0x1
        if not folder:  # 12-byte header: 11 random bytes, then the CRC's high byte for the password check
            keys = _Keys(password.encode())
            packed = keys.encrypt(rng.randbytes(11) + bytes([crc >> 24])) + keys.encrypt(packed)
        raw = name.encode()
        fields = struct.pack(
            "<HHHHHIIIHH", 20, flags, method, _DOS_TIME, _DOS_DATE, crc, len(packed), len(data), len(raw), 0
        )
        mode = 0o40755 if folder else 0o100000 | file_mode
        central += struct.pack("<IH", 0x02014B50, 0x031E) + fields
        central += struct.pack("<HHHII", 0, 0, 0, (mode << 16) | (0x10 if folder else 0), len(body)) + raw
        body += struct.pack("<I", 0x04034B50) + fields + raw + packed
    end = struct.pack("<IHHHHIIH", 0x06054B50, 0, 0, len(members), len(members), len(central), len(body), 0)
    path.write_bytes(bytes(body + central + end))
    return path
