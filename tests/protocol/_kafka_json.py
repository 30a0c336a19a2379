"""An independent reference encoder for Kafka's JSON message schemas, for golden-bytes tests.

Written straight from Kafka's protocol guide and the JSON schema format, sharing no code with
``pylogq.protocol``: its own version-range parser, snake_case names, sample values and writer.
Byte layouts (big-endian):

    int8/16/32/64, uint16, float64, bool(1 byte), uuid(16 bytes)
    varint/varlong          zig-zag, then 7 bits a byte, low group first
    string/bytes/records    int16 (string) or int32 length, -1 null; compact: uvarint N+1, 0 null
    array                   int32 count, -1 for null; compact: uvarint count+1, 0 null
    struct                  its fields in order; in a flexible version then the tagged fields:
                            uvarint count, per field (ascending tag) uvarint tag, uvarint size, body

A tagged field is written only when it differs from its default, as Kafka's generated code does.
"""

from __future__ import annotations

import json
import re
import struct
import uuid
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

from ._wire import uvarint

MESSAGES = Path(__file__).resolve().parents[3] / "shared" / "kafka-reference" / "message"

Range = Optional[Tuple[int, int]]
_OPEN = 1 << 15


def versions(text: Any) -> Range:
    """"3+", "0-7", "5" or "none" (or absent) as an inclusive range, None for none."""
    if text is None or text == "none":
        return None
    m = re.fullmatch(r"(\d+)(\+|-(\d+))?", str(text).strip())
    assert m, "bad version range %r" % text
    lo = int(m.group(1))
    if m.group(2) is None:
        return lo, lo
    return (lo, _OPEN) if m.group(2) == "+" else (lo, int(m.group(3)))


def has(rng: Range, version: int) -> bool:
    return rng is not None and rng[0] <= version <= rng[1]


def key(name: str) -> str:
    """Kafka's CamelCase field name as the snake_case key pylogq's values use."""
    out = []
    for i, c in enumerate(name):
        if c.isupper() and i and (name[i - 1].islower() or name[i - 1].isdigit()
                                  or (i + 1 < len(name) and name[i + 1].islower()
                                      and name[i - 1].isupper())):
            out.append("_")
        out.append(c.lower())
    return "".join(out)


def load(name: str) -> Dict[str, Any]:
    """One message schema, ``//`` comments (outside strings) removed.

    A field that names one of the message's ``commonStructs`` (``[]LeaderAndIsrPartitionState``)
    gets that struct's ``fields``, so the rest of this module sees every struct inline.
    """
    text = (MESSAGES / (name + ".json")).read_text()
    spec = json.loads(re.sub(r'"(?:\\.|[^"\\])*"|//[^\n]*',
                             lambda m: m.group(0) if m.group(0).startswith('"') else "", text))
    common = {s["name"]: s["fields"] for s in spec.get("commonStructs", [])}
    for fields in list(common.values()) + [spec["fields"]]:
        _inline(fields, common)
    return spec


def _inline(fields: List[Dict[str, Any]], common: Dict[str, List[Dict[str, Any]]]) -> None:
    for f in fields:
        struct_name = f["type"][2:] if f["type"].startswith("[]") else f["type"]
        if "fields" not in f and struct_name in common:
            f["fields"] = common[struct_name]
        elif "fields" in f:
            _inline(f["fields"], common)


# -- sample values -------------------------------------------------------------------------

RECORDS = bytes(range(7, 40))  # opaque to both codecs


class Samples:
    """Deterministic values for one message at one version; ``index`` 0, 1 or 2.

    Element ``pos`` of an array's parent gives it (2 * index + pos + 1) % 3 elements, so arrays
    at every depth hold 0, 1 and 2 elements across the three samples (nullable arrays: null
    and two of those sizes). Sample 0 sets every field, tagged ones included, to a non-default
    value; sample 1 sets every nullable field to null; sample 2 nulls each nullable primitive
    at its 1st, 3rd... occurrence and each nullable array or struct at its 2nd, 4th..., so
    nulls are reached inside arrays too.
    """

    def __init__(self, index: int) -> None:
        self.index = index
        self.n = 0
        self.seen: Dict[str, int] = {}

    def struct(self, fields: List[Dict[str, Any]], version: int, depth: int = 0,
               pos: int = 0, path: str = "") -> Dict[str, Any]:
        out: Dict[str, Any] = {}
        for f in fields:
            if not has(versions(f["versions"]), version):
                continue
            out[key(f["name"])] = self.field(f, version, depth, pos, path + "." + f["name"])
        return out

    def field(self, f: Dict[str, Any], version: int, depth: int, pos: int, path: str) -> Any:
        ftype = f["type"]
        if has(versions(f.get("nullableVersions")), version):
            seen = self.seen[path] = self.seen.get(path, -1) + 1
            container = ftype.startswith("[]") or "fields" in f
            if self.index == 1 or (self.index == 2 and seen % 2 == int(container)):
                return None
        if ftype.startswith("[]"):
            count = _count(self.index, depth, pos)
            if "fields" in f:
                return [self.struct(f["fields"], version, depth + 1, i, path)
                        for i in range(count)]
            return [self.primitive(ftype[2:], f) for _ in range(count)]
        if "fields" in f:
            return self.struct(f["fields"], version, depth + 1, pos, path)
        return self.primitive(ftype, f)

    def primitive(self, ftype: str, f: Dict[str, Any]) -> Any:
        self.n += 1
        n = self.n
        if ftype == "int8":
            return n % 120 + 1
        if ftype == "int16":
            return 300 + n
        if ftype in ("int32", "varint"):
            return 70_000 + n
        if ftype in ("int64", "varlong"):
            return (1 << 35) + n
        if ftype == "uint16":
            return 40_000 + n
        if ftype == "float64":
            return n + 0.25
        if ftype == "bool":
            return str(f.get("default", "false")).lower() != "true"
        if ftype == "string":
            return "s%d-\u00e9" % n
        if ftype == "bytes":
            return bytes([n % 256, 0, 255])
        if ftype == "records":
            return RECORDS
        if ftype == "uuid":
            return uuid.UUID(int=(n << 64) | n)
        raise AssertionError("no sample for type %r" % ftype)


def _count(index: int, depth: int, pos: int) -> int:
    return (2 * index + pos + 1) % 3


def is_tagged(f: Dict[str, Any], version: int) -> bool:
    return "tag" in f and has(versions(f.get("taggedVersions")), version)


def default(f: Dict[str, Any], version: int) -> Any:
    """A field's default value, as Kafka's generated code defines it."""
    text = f.get("default")
    text = None if text is None else str(text).lower() if isinstance(text, bool) else str(text)
    ftype = f["type"]
    if ftype.startswith("[]"):
        return None if text == "null" else []
    if "fields" in f:
        return {key(g["name"]): default(g, version) for g in f["fields"]
                if has(versions(g["versions"]), version)}
    if ftype in ("int8", "int16", "int32", "int64", "uint16", "varint", "varlong"):
        return int(text, 0) if text else 0
    if ftype == "float64":
        return float(text) if text else 0.0
    if ftype == "bool":
        return text == "true"
    if ftype == "uuid":
        return uuid.UUID(int=0)
    if ftype == "string":
        return None if text == "null" else text or ""
    if ftype == "bytes":
        return None if text == "null" else b""
    if ftype == "records":
        return None
    raise AssertionError("no default for type %r" % ftype)


# -- the encoder ---------------------------------------------------------------------------


_FIXED = {"int8": ">b", "int16": ">h", "int32": ">i", "int64": ">q", "uint16": ">H",
          "float64": ">d"}


def _primitive(ftype: str, value: Any, compact: bool) -> bytes:
    if ftype in _FIXED:
        return struct.pack(_FIXED[ftype], value)
    if ftype == "bool":
        return b"\x01" if value else b"\x00"
    if ftype == "uuid":
        return value.bytes
    if ftype == "varint":
        return uvarint(((value << 1) ^ (value >> 31)) & 0xFFFFFFFF)
    if ftype == "varlong":
        return uvarint(((value << 1) ^ (value >> 63)) & 0xFFFFFFFFFFFFFFFF)
    if ftype in ("string", "bytes", "records"):
        raw = None if value is None else value.encode() if ftype == "string" else bytes(value)
        if compact:
            return uvarint(0 if raw is None else len(raw) + 1) + (raw or b"")
        fmt = ">h" if ftype == "string" else ">i"
        return struct.pack(fmt, -1 if raw is None else len(raw)) + (raw or b"")
    raise AssertionError("cannot encode type %r" % ftype)


def encode_struct(fields: List[Dict[str, Any]], value: Dict[str, Any], version: int,
                  flexible: Range) -> bytes:
    """The bytes of one struct (or a whole message) at ``version``."""
    flex = has(flexible, version)
    out = bytearray()
    tagged: List[Tuple[int, bytes]] = []
    for f in fields:
        if not has(versions(f["versions"]), version):
            continue
        k = key(f["name"])
        if is_tagged(f, version):
            if k in value and value[k] != default(f, version):
                tagged.append((f["tag"], _field(f, value[k], version, flexible)))
            continue
        out += _field(f, value.get(k, default(f, version)), version, flexible)
    if flex:
        out += uvarint(len(tagged))
        for tag, body in sorted(tagged):
            out += uvarint(tag) + uvarint(len(body)) + body
    return bytes(out)


def _field(f: Dict[str, Any], value: Any, version: int, flexible: Range) -> bytes:
    compact = has(versions(f.get("flexibleVersions")) if "flexibleVersions" in f else flexible,
                  version)
    ftype = f["type"]
    if ftype.startswith("[]"):
        if value is None:
            head = uvarint(0) if compact else struct.pack(">i", -1)
            return head
        head = uvarint(len(value) + 1) if compact else struct.pack(">i", len(value))
        if "fields" in f:
            return head + b"".join(encode_struct(f["fields"], v, version, flexible) for v in value)
        return head + b"".join(_primitive(ftype[2:], v, compact) for v in value)
    if "fields" in f:
        return encode_struct(f["fields"], value, version, flexible)
    return _primitive(ftype, value, compact)


def encode(spec: Dict[str, Any], value: Dict[str, Any], version: int) -> bytes:
    """A whole message (request or response body, or a header) at ``version``."""
    return encode_struct(spec["fields"], value, version, versions(spec.get("flexibleVersions")))


def contains(actual: Any, expected: Any, path: str = "") -> None:
    """``actual`` equals ``expected`` except that dicts may carry extra (defaulted) keys."""
    if isinstance(expected, dict):
        for k, v in expected.items():
            contains(actual[k], v, path + "." + k)
    elif isinstance(expected, list):
        assert isinstance(actual, list) and len(actual) == len(expected), path
        for i, (a, e) in enumerate(zip(actual, expected)):
            contains(a, e, "%s[%d]" % (path, i))
    else:
        assert actual == expected, path
