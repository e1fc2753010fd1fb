"""Row-group ranges from a Parquet footer, decoded here (Thrift compact protocol).

A short process (a session-start hook's digest) plans its lookups in derived tables from
the footers of small partitions. Decoding those few kilobytes here spares it importing
pyarrow (and numpy, which pyarrow loads), which would cost it about a third of what Polars
does. Only plain cases are decoded: 32/64-bit integers, booleans, floats and UTF-8
strings with exact-order statistics (``min_value``/``max_value``), and timestamps as
stored. Anything else (a large footer, a logical timestamp wanted as a datetime, legacy
statistics, an unknown layout) answers ``None`` and the caller asks pyarrow.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["Footer", "read_footer", "MAX_FOOTER_BYTES"]

#: footers past this size go to pyarrow (decoding them in Python costs more than it saves)
MAX_FOOTER_BYTES = 256 * 1024

# Parquet physical types
_BOOLEAN, _INT32, _INT64, _INT96, _FLOAT, _DOUBLE, _BYTE_ARRAY, _FIXED = range(8)
_UTF8 = 0  # ConvertedType.UTF8


class _Unsupported(Exception):
    """A footer this decoder does not read; pyarrow will."""


def _decode_struct(data: bytes, pos: int) -> tuple[dict[int, Any], int]:
    """One Thrift compact struct at ``pos``: {field id: value} and the position after it."""
    out: dict[int, Any] = {}
    last = 0
    while True:
        head = data[pos]
        pos += 1
        kind = head & 0x0F
        if kind == 0:  # stop
            return out, pos
        delta = head >> 4
        if delta:
            fid = last + delta
        else:
            raw, pos = _varint(data, pos)
            fid = (raw >> 1) ^ -(raw & 1)
        last = fid
        if kind == 1 or kind == 2:  # booleans carry their value in the type
            out[fid] = kind == 1
        else:
            out[fid], pos = _decode_value(data, pos, kind)


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def _decode_value(data: bytes, pos: int, kind: int) -> tuple[Any, int]:
    if kind in (4, 5, 6):  # i16, i32, i64: zigzag varints
        raw, pos = _varint(data, pos)
        return (raw >> 1) ^ -(raw & 1), pos
    if kind == 8:  # binary
        n, pos = _varint(data, pos)
        return data[pos:pos + n], pos + n
    if kind == 12:
        return _decode_struct(data, pos)
    if kind == 9 or kind == 10:  # list, set
        head = data[pos]
        pos += 1
        size, elem = head >> 4, head & 0x0F
        if size == 15:
            size, pos = _varint(data, pos)
        items = []
        for _ in range(size):
            if elem in (1, 2):  # booleans in a list: one byte each
                items.append(data[pos] == 1)
                pos += 1
            else:
                value, pos = _decode_value(data, pos, elem)
                items.append(value)
        return items, pos
    if kind == 3:  # byte
        return data[pos], pos + 1
    if kind == 7:  # double
        return struct.unpack_from("<d", data, pos)[0], pos + 8
    raise _Unsupported(f"thrift type {kind}")  # a map: never in the fields read here


@dataclass(frozen=True)
class Footer:
    """What a lookup plans with: per row group its row count and, per top-level column,
    its physical type, converted type, whether it is a timestamp, and its statistics."""

    counts: list[int]
    columns: dict[str, tuple[int, int | None, dict[int, Any]]]
    stats: list[dict[str, tuple[bytes | None, bytes | None]]]

    def ranges(self, column: str, physical: bool) -> tuple[list, list] | None:
        """Per row group the min and max of ``column`` (None without statistics), or None
        when this decoder cannot give them exactly as pyarrow would."""
        if column not in self.columns:
            return [None] * len(self.counts), [None] * len(self.counts)
        ptype, converted, logical = self.columns[column]
        timestamp = 8 in logical or converted in (9, 10)
        decode = _DECODERS.get(ptype)
        if (timestamp and not physical) or decode is None or not _plain(ptype, converted,
                                                                         logical):
            return None
        if physical and ptype == _BYTE_ARRAY:
            decode = bytes  # the bytes as stored
        mins: list[Any] = []
        maxs: list[Any] = []
        for group in self.stats:
            lo, hi = group.get(column, (None, None))
            if lo is None or hi is None:
                mins.append(None)
                maxs.append(None)
            else:
                mins.append(decode(lo))
                maxs.append(decode(hi))
        return mins, maxs


def _plain(ptype: int, converted: int | None, logical: dict[int, Any]) -> bool:
    """Whether pyarrow gives this column's statistics as the plain value decoded here:
    signed integers (a timestamp as stored), booleans, floats, UTF-8 strings."""
    if ptype in (_INT32, _INT64):
        if 8 in logical or converted in (9, 10):  # a timestamp: its stored count
            return True
        integer = logical.get(10)
        return (converted is None or converted in (15, 16, 17, 18)) and (
            not logical or (integer is not None and integer.get(2, True)))
    if ptype == _BYTE_ARRAY:
        return converted == _UTF8 or 1 in logical
    return ptype in (_BOOLEAN, _FLOAT, _DOUBLE) and converted is None and not logical


_DECODERS = {
    _INT32: lambda b: struct.unpack("<i", b)[0],
    _INT64: lambda b: struct.unpack("<q", b)[0],
    _BOOLEAN: lambda b: bool(b[0]),
    _FLOAT: lambda b: struct.unpack("<f", b)[0],
    _DOUBLE: lambda b: struct.unpack("<d", b)[0],
    _BYTE_ARRAY: lambda b: b.decode("utf-8"),
}


def read_footer(path: Path) -> Footer | None:
    """The footer of the Parquet file at ``path``, or None when it is large or holds
    something this decoder does not read (then ask pyarrow). Raises OSError when the file
    cannot be read and ValueError when it is not a Parquet file."""
    with open(path, "rb") as fh:
        fh.seek(0, 2)
        size = fh.tell()
        if size < 12:
            raise ValueError(f"{path} is too short to be a Parquet file")
        fh.seek(size - 8)
        tail = fh.read(8)
        if tail[4:] != b"PAR1":
            raise ValueError(f"{path} does not end in the Parquet magic bytes")
        length = struct.unpack("<i", tail[:4])[0]
        if length <= 0 or length > size - 12:
            raise ValueError(f"{path} has a damaged Parquet footer")
        if length > MAX_FOOTER_BYTES:
            return None
        fh.seek(size - 8 - length)
        data = fh.read(length)
    try:
        return _footer(data)
    except _Unsupported:
        return None
    except (IndexError, KeyError, TypeError, UnicodeDecodeError, struct.error) as exc:
        raise ValueError(f"{path} has a damaged Parquet footer: {exc!r}") from None


def _skip(data: bytes, pos: int, kind: int) -> int:
    """The position after one value of Thrift compact ``kind`` at ``pos``."""
    if kind in (3,):
        return pos + 1
    if kind in (4, 5, 6):
        while data[pos] & 0x80:
            pos += 1
        return pos + 1
    if kind == 7:
        return pos + 8
    if kind == 8:
        n, pos = _varint(data, pos)
        return pos + n
    if kind == 12:
        while True:
            head = data[pos]
            pos += 1
            inner = head & 0x0F
            if inner == 0:
                return pos
            if not head >> 4:
                pos = _skip(data, pos, 4)
            if inner not in (1, 2):
                pos = _skip(data, pos, inner)
    if kind in (9, 10):
        head = data[pos]
        pos += 1
        size, elem = head >> 4, head & 0x0F
        if size == 15:
            size, pos = _varint(data, pos)
        if elem in (1, 2, 3):
            return pos + size
        for _ in range(size):
            pos = _skip(data, pos, elem)
        return pos
    raise _Unsupported(f"thrift type {kind}")


def _fields(data: bytes, pos: int):  # noqa: ANN202 - a generator of (id, kind, pos)
    """Walk a struct's fields: yields (field id, type, position of its value); the caller
    sends back the position after the value (or None to skip it)."""
    last = 0
    while True:
        head = data[pos]
        pos += 1
        kind = head & 0x0F
        if kind == 0:
            yield 0, 0, pos
            return
        if head >> 4:
            fid = last + (head >> 4)
        else:
            raw, pos = _varint(data, pos)
            fid = (raw >> 1) ^ -(raw & 1)
        last = fid
        after = yield fid, kind, pos
        if after is None:
            after = pos if kind in (1, 2) else _skip(data, pos, kind)
        pos = after


def _list_head(data: bytes, pos: int) -> tuple[int, int]:
    head = data[pos]
    pos += 1
    size = head >> 4
    if size == 15:
        size, pos = _varint(data, pos)
    return size, pos


def _statistics(data: bytes, pos: int) -> tuple[bytes | None, bytes | None, bool, int]:
    """(min_value, max_value, legacy statistics present, position after the struct)."""
    lo = hi = None
    legacy = False
    walk = _fields(data, pos)
    fid, kind, at = next(walk)
    while fid:
        after = None
        if fid in (5, 6) and kind == 8:
            n, start = _varint(data, at)
            value = data[start:start + n]
            if fid == 5:
                hi = value
            else:
                lo = value
            after = start + n
        elif fid in (1, 2):
            legacy = True
        fid, kind, at = walk.send(after)
    return lo, hi, legacy, at


def _struct_end(data: bytes, pos: int, want: int = -1) -> tuple[int, int]:
    """Skip the struct at ``pos``; if field ``want`` (a struct) is met, stop at its value.
    Returns (position, 1 when stopped at ``want`` else 0)."""
    last = 0
    while True:
        head = data[pos]
        pos += 1
        kind = head & 0x0F
        if kind == 0:
            return pos, 0
        delta = head >> 4
        if delta:
            fid = last + delta
        else:
            raw, pos = _varint(data, pos)
            fid = (raw >> 1) ^ -(raw & 1)
        last = fid
        if fid == want and kind == 12:
            return pos, 1
        if kind in (5, 6, 4):  # varints: the common case, inline
            while data[pos] & 0x80:
                pos += 1
            pos += 1
        elif kind == 8:
            n, pos = _varint(data, pos)
            pos += n
        elif kind not in (1, 2):
            pos = _skip(data, pos, kind)


def _column_stats(data: bytes, pos: int) -> tuple[tuple | None, int]:
    """A ColumnChunk: its statistics (min, max, legacy) or None, and the position after."""
    # ColumnChunk: find field 3 (ColumnMetaData)
    pos, found_meta = _struct_end(data, pos, 3)
    if not found_meta:
        raise _Unsupported("column metadata outside the footer")
    # ColumnMetaData: find field 12 (Statistics)
    pos, found_stats = _struct_end(data, pos, 12)
    column = None
    if found_stats:
        lo, hi, legacy, pos = _statistics(data, pos)
        column = (lo, hi, legacy)
        pos, _ = _struct_end(data, pos)  # the rest of ColumnMetaData
    pos, _ = _struct_end(data, pos)  # the rest of ColumnChunk
    return column, pos


def _footer(data: bytes) -> Footer:
    schema: list[dict[int, Any]] = []
    counts: list[int] = []
    stats: list[dict[str, tuple[bytes | None, bytes | None]]] = []
    names: list[str] = []
    columns: dict[str, tuple[int, int | None, dict[int, Any]]] = {}
    walk = _fields(data, 0)
    fid, kind, at = next(walk)
    while fid:
        after = None
        if fid == 2 and kind == 9:
            schema, after = _decode_value(data, at, 9)
            # a flat schema only: the root, then one leaf per column (nested: pyarrow)
            if schema[0].get(5) != len(schema) - 1 or any(5 in e for e in schema[1:]):
                raise _Unsupported("nested schema")
            for element in schema[1:]:
                name = element[4].decode("utf-8")
                # LogicalType is a union (1 STRING, 8 TIMESTAMP, 10 INTEGER, ...);
                # ConvertedType 0 UTF8, 9/10 TIMESTAMP_MILLIS/MICROS, 15-18 INT_8..INT_64
                columns[name] = (element[1], element.get(6), element.get(10) or {})
                names.append(name)
        elif fid == 4 and kind == 9:
            if not names:
                raise _Unsupported("row groups before the schema")
            groups, at = _list_head(data, at)
            for _ in range(groups):
                rows = None
                found: dict[str, tuple[bytes | None, bytes | None]] = {}
                group = _fields(data, at)
                gfid, gkind, gat = next(group)
                while gfid:
                    gafter = None
                    if gfid == 1 and gkind == 9:
                        chunks, gat = _list_head(data, gat)
                        if chunks != len(names):
                            raise _Unsupported("column chunks do not match the schema")
                        for name in names:
                            column, gat = _column_stats(data, gat)
                            if column is None:
                                continue
                            lo, hi, legacy = column
                            if lo is not None or hi is not None:
                                found[name] = (lo, hi)
                            elif legacy:
                                raise _Unsupported("legacy statistics")  # pyarrow's rules
                        gafter = gat
                    elif gfid == 3:
                        raw, gafter = _varint(data, gat)
                        rows = (raw >> 1) ^ -(raw & 1)
                    gfid, gkind, gat = group.send(gafter)
                if rows is None:
                    raise _Unsupported("a row group without its row count")
                counts.append(rows)
                stats.append(found)
                at = gat
            after = at
        fid, kind, at = walk.send(after)
    if not schema:
        raise _Unsupported("no schema")
    return Footer(counts=counts, columns=columns, stats=stats)
