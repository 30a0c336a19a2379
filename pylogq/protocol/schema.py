"""One generic encoder/decoder driven by a message table shaped like Kafka's JSON schemas.

A table is a dict: ``name``, ``type`` ("request", "response" or "header"), ``apiKey``,
``validVersions``, ``flexibleVersions``, ``fields`` and optionally ``commonStructs``. Each field
has ``name`` (CamelCase, as in Kafka), ``type``, ``versions`` and optionally
``nullableVersions``, ``default``, ``tag`` with ``taggedVersions``, a field-level
``flexibleVersions`` ("none" keeps a string non-compact, as the request header's client id
does) and, for structs and arrays of structs, ``fields``. Versions are written "3+", "0-7", "5"
or "none".

Field types: int8, int16, int32, int64, uint16, uint32, varint, varlong, float64, bool, uuid,
string, bytes, records (raw bytes), ``[]T`` (array of a primitive or of a struct) and a struct
name with ``fields``. A struct declared once in ``commonStructs`` (``name`` and ``fields``) is
named by type, without ``fields``, wherever the message uses it (``[]LeaderAndIsrPartitionState``
in two places of LeaderAndIsr), as in Kafka's schemas; each field keeps its own ``versions`` at
every use. In a flexible version strings, bytes, records and arrays are compact and
every struct ends with a tagged-fields section (fields with a ``tag`` are written there when
they differ from their default; unknown tags are skipped when decoding).

Values are the typed classes of :mod:`pylogq.protocol.message_data` (generated from the
tables; :meth:`Schema.read` and :meth:`Schema.parse` build them), or dicts keyed by the same
snake_case names (``ThrottleTimeMs`` -> ``throttle_time_ms``; :meth:`Schema.decode` builds
them). Encoding takes either; a missing key is the field's default. Decoding fills the fields
the version does not carry with their defaults, so every field is always present.
"""

from __future__ import annotations

import re
import struct
from functools import partial
import uuid as _uuid
from typing import Any, Callable, Dict, List, Mapping, Optional, Tuple, Type

from ..errors import InvalidArgumentError, ProtocolError
from .types import Buffer, Reader, Writer

__all__ = ["Message", "Schema", "parse_versions", "snake_case"]

_NO_VERSION = 1 << 15
VersionRange = Optional[Tuple[int, int]]


def parse_versions(text: Optional[str]) -> VersionRange:
    """Parse "3+", "0-7", "5" or "none" into an inclusive (low, high) range; None for none."""
    if text is None or text == "none":
        return None
    text = text.strip()
    if text.endswith("+"):
        return int(text[:-1]), _NO_VERSION
    if "-" in text:
        lo, hi = text.split("-", 1)
        return int(lo), int(hi)
    return int(text), int(text)


def _in(rng: VersionRange, version: int) -> bool:
    return rng is not None and rng[0] <= version <= rng[1]


_CAMEL = re.compile(r"(?<=[a-z0-9])(?=[A-Z])|(?<=[A-Z])(?=[A-Z][a-z])")


def snake_case(name: str) -> str:
    """``ThrottleTimeMs`` -> ``throttle_time_ms``."""
    return _CAMEL.sub("_", name).lower()


class Message:
    """The base of the generated message and struct classes: fields are slots, compared in order."""

    __slots__: Tuple[str, ...] = ()

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, k) == getattr(other, k) for k in self.__slots__)

    def __ne__(self, other: object) -> bool:
        equal = self.__eq__(other)
        return equal if equal is NotImplemented else not equal

    __hash__ = None  # type: ignore[assignment]  # mutable, as Kafka's generated classes are

    def as_dict(self) -> Dict[str, Any]:
        """The fields as a dict keyed by their snake_case names, nested messages and lists of
        them as dicts too: the form :meth:`Schema.decode` gives."""
        return {key: _plain(getattr(self, key)) for key in self.__slots__}

    def __repr__(self) -> str:
        return "%s(%s)" % (type(self).__qualname__,
                           ", ".join("%s=%r" % (k, getattr(self, k)) for k in self.__slots__))


def _plain(value: Any) -> Any:
    if isinstance(value, Message):
        return value.as_dict()
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


_INT_TYPES = {"int8", "int16", "int32", "int64", "uint16", "uint32", "varint", "varlong"}
_FIXED: Dict[str, Tuple[Callable[[Reader], Any], Callable[[Writer, Any], None]]] = {
    "int8": (Reader.int8, Writer.int8),
    "int16": (Reader.int16, Writer.int16),
    "int32": (Reader.int32, Writer.int32),
    "int64": (Reader.int64, Writer.int64),
    "uint16": (Reader.uint16, Writer.uint16),
    "uint32": (Reader.uint32, Writer.uint32),
    "varint": (Reader.varint, Writer.varint),
    "varlong": (Reader.varlong, Writer.varlong),
    "float64": (Reader.float64, Writer.float64),
    "bool": (Reader.boolean, Writer.boolean),
    "uuid": (Reader.uuid, Writer.uuid),
}
_SIZED = {"string", "bytes", "records"}
_ZERO_UUID = _uuid.UUID(int=0)


def _primitive_default(ftype: str, text: Optional[str]) -> Any:
    if ftype in _INT_TYPES:
        return int(text, 0) if text else 0
    if ftype == "float64":
        return float(text) if text else 0.0
    if ftype == "bool":
        return text == "true"
    if ftype == "uuid":
        return _ZERO_UUID
    if ftype == "string":
        if text == "null":
            return None
        return text or ""
    if ftype == "bytes":
        return None if text == "null" else b""
    if ftype == "records":
        return None
    raise ValueError(f"unknown field type {ftype!r}")


class _Field:
    """One compiled field of a table."""

    __slots__ = (
        "name", "key", "type", "elem", "struct", "versions", "nullable", "tag", "tagged",
        "flexible", "default_value",
    )

    def __init__(self, spec: Mapping[str, Any], common: Optional[_CommonStructs] = None,
                 classes: Optional[Mapping[str, type]] = None) -> None:
        self.name: str = spec["name"]
        self.key = snake_case(self.name)
        self.type: str = spec["type"]
        self.versions = parse_versions(spec["versions"])
        self.nullable = parse_versions(spec.get("nullableVersions"))
        self.tag: Optional[int] = spec.get("tag")
        self.tagged = parse_versions(spec.get("taggedVersions")) if self.tag is not None else None
        self.flexible: VersionRange = parse_versions(spec.get("flexibleVersions", "0+"))
        self.elem: Optional[str] = self.type[2:] if self.type.startswith("[]") else None
        self.struct: Optional[_Struct] = (
            _Struct(spec["fields"], common, classes, self.elem or self.type) if "fields" in spec
            else common.get(self.elem or self.type) if common is not None else None)
        if self.elem is not None and self.struct is None and self.elem not in _FIXED \
                and self.elem not in _SIZED:
            raise ValueError(f"field {self.name}: array of unknown type {self.elem!r}")
        if self.elem is None and self.struct is None and self.type not in _FIXED \
                and self.type not in _SIZED:
            raise ValueError(f"field {self.name}: unknown type {self.type!r}")
        text = spec.get("default")
        if self.elem is not None:
            self.default_value: Any = None if text == "null" else []
        elif self.struct is not None:
            self.default_value = None
        else:
            self.default_value = _primitive_default(self.type, text)

    def default(self) -> Any:
        """A fresh default value (lists and struct dicts are never shared)."""
        if self.elem is not None:
            return None if self.default_value is None else []
        if self.struct is not None:
            return self.struct.defaults()
        return self.default_value

    def is_default(self, value: Any) -> bool:
        if self.elem is None and self.struct is not None:
            if value is None:
                return True
            if isinstance(value, Message):
                return bool(value == type(value)())
            return bool(value == self.struct.defaults())
        return bool(value == self.default_value)


class _Struct:
    """A list of fields with a per-version plan cached on first use, and the class a typed
    decode builds (None when the table is not bound to one)."""

    __slots__ = ("fields", "cls", "_plans")

    def __init__(self, specs: List[Mapping[str, Any]], common: Optional[_CommonStructs] = None,
                 classes: Optional[Mapping[str, type]] = None, name: str = "") -> None:
        self.fields = [_Field(s, common, classes) for s in specs]
        self.cls: Optional[type] = classes.get(name) if classes is not None else None
        self._plans: Dict[int, Tuple[List[_Field], List[_Field], List[_Field]]] = {}

    def plan(self, version: int) -> Tuple[List[_Field], List[_Field], List[_Field]]:
        """(regular fields, tagged fields by tag, fields absent in this version)."""
        p = self._plans.get(version)
        if p is None:
            regular: List[_Field] = []
            tagged: List[_Field] = []
            absent: List[_Field] = []
            for f in self.fields:
                if not _in(f.versions, version):
                    absent.append(f)
                elif f.tag is not None and _in(f.tagged, version):
                    tagged.append(f)
                else:
                    regular.append(f)
            tagged.sort(key=lambda f: f.tag or 0)
            p = self._plans[version] = (regular, tagged, absent)
        return p

    def defaults(self) -> Dict[str, Any]:
        return {f.key: f.default() for f in self.fields}

    def encode(self, w: Writer, data: Any, version: int, flexible: bool) -> None:
        regular, tagged, _ = self.plan(version)
        get = data.get if isinstance(data, Mapping) else partial(getattr, data)  # (key, missing) either way
        for f in regular:
            value = get(f.key, _MISSING)
            _encode_field(w, f, f.default() if value is _MISSING else value, version, flexible)
        if flexible:
            present = []
            for f in tagged:
                value = get(f.key, _MISSING)
                if value is not _MISSING and not f.is_default(value):
                    present.append((f, value))
            w.unsigned_varint(len(present))
            for f, value in present:
                sub = Writer()
                _encode_field(sub, f, value, version, flexible)
                w.unsigned_varint(f.tag or 0)
                w.unsigned_varint(len(sub.buf))
                w.raw(sub.buf)

    def decode(self, r: Reader, version: int, flexible: bool, typed: bool = False) -> Any:
        """The struct at the reader's position: a dict, or with ``typed`` its class."""
        regular, tagged, absent = self.plan(version)
        out: Dict[str, Any] = {}
        for f in regular:
            out[f.key] = _decode_field(r, f, version, flexible, typed)
        for f in absent:
            out[f.key] = f.default() if not typed or f.struct is None or f.elem is not None \
                else _typed_default(f.struct)
        if flexible:
            for f in tagged:
                out[f.key] = f.default() if not typed or f.struct is None or f.elem is not None \
                    else _typed_default(f.struct)
            count = r.unsigned_varint()
            for _ in range(count):
                tag = r.unsigned_varint()
                size = r.unsigned_varint()
                known = next((f for f in tagged if f.tag == tag), None)
                if known is None:
                    r.skip(size)
                    continue
                start = r.pos
                r.skip(size)
                end = r.pos
                sub = Reader(r.buffer, start, end)
                out[known.key] = _decode_field(sub, known, version, flexible, typed)
                if sub.pos != end:
                    raise ProtocolError(
                        f"tagged field {known.name} (tag {tag}) used {sub.pos - start} of {size} bytes"
                    )
        if typed:
            cls = self.cls
            if cls is None:
                raise TypeError("no class is bound to this struct: import pylogq.protocol.messages")
            return cls(**out)
        return out


def _typed_default(struct_: _Struct) -> Any:
    if struct_.cls is None:
        raise TypeError("no class is bound to this struct: import pylogq.protocol.messages")
    return struct_.cls()


class _CommonStructs:
    """A message's ``commonStructs`` by name, each compiled on its first use and then shared
    by every field that names it, as Kafka generates one class per common struct."""

    __slots__ = ("_specs", "_compiled", "_classes")

    def __init__(self, specs: List[Mapping[str, Any]], classes: Optional[Mapping[str, type]] = None) -> None:
        self._specs = {s["name"]: s for s in specs}
        self._compiled: Dict[str, Optional[_Struct]] = {}
        self._classes = classes

    def get(self, name: str) -> Optional[_Struct]:
        """The struct called ``name``; None if the message declares no such common struct."""
        if name not in self._specs:
            return None
        if name not in self._compiled:
            self._compiled[name] = None  # under construction: a struct may not contain itself
            self._compiled[name] = _Struct(self._specs[name]["fields"], self, self._classes, name)
        found = self._compiled[name]
        if found is None:
            raise ValueError(f"common struct {name} contains itself")
        return found


_MISSING = object()


def _encode_value(w: Writer, ftype: str, struct_: Optional[_Struct], value: Any, version: int,
                  compact: bool, flexible: bool) -> None:
    if struct_ is not None:
        struct_.encode(w, value, version, flexible)
    elif ftype == "string":
        w.string(value, compact)
    elif ftype in ("bytes", "records"):
        w.blob(value, compact)
    else:
        _FIXED[ftype][1](w, value)


def _encode_field(w: Writer, f: _Field, value: Any, version: int, flexible: bool) -> None:
    if value is None and not _in(f.nullable, version) and f.struct is None:
        raise InvalidArgumentError(f"field {f.name} is not nullable in version {version}")
    compact = flexible and _in(f.flexible, version)
    try:
        if f.elem is not None:
            if value is None:
                w.length(-1, compact, True)
                return
            w.length(len(value), compact, True)
            for item in value:
                _encode_value(w, f.elem, f.struct, item, version, compact, flexible)
        else:
            _encode_value(w, f.type, f.struct, f.default() if value is None and f.struct else value,
                          version, compact, flexible)
    except (struct.error, TypeError, AttributeError, OverflowError) as exc:
        raise InvalidArgumentError(f"field {f.name}: bad value {value!r}: {exc}") from None


def _decode_value(r: Reader, ftype: str, struct_: Optional[_Struct], version: int,
                  compact: bool, flexible: bool, nullable: bool, name: str, typed: bool) -> Any:
    if struct_ is not None:
        return struct_.decode(r, version, flexible, typed)
    if ftype == "string":
        value: Any = r.string(compact)
    elif ftype in ("bytes", "records"):
        value = r.blob(compact)
    else:
        return _FIXED[ftype][0](r)
    if value is None and not nullable:
        raise ProtocolError(f"null in non-nullable field {name} at position {r.pos}")
    return value


def _decode_field(r: Reader, f: _Field, version: int, flexible: bool, typed: bool) -> Any:
    compact = flexible and _in(f.flexible, version)
    nullable = _in(f.nullable, version)
    if f.elem is None:
        return _decode_value(r, f.type, f.struct, version, compact, flexible, nullable, f.name, typed)
    n = r.length(compact, True)
    if n == -1:
        if not nullable:
            raise ProtocolError(f"null array in non-nullable field {f.name} at position {r.pos}")
        return None
    if n > r.remaining:
        raise ProtocolError(
            f"insufficient data: array {f.name} of {n} elements at position {r.pos}, "
            f"have {r.remaining} bytes"
        )
    return [_decode_value(r, f.elem, f.struct, version, compact, flexible, False, f.name, typed)
            for _ in range(n)]


class Schema:
    """One Kafka message (API request, response or header) as a table read by the codec.

    Immutable once built except for per-version plans cached on first use; safe to share.
    The fields are compiled at the first encode or decode, not at construction: a broker
    imports every message's table and starts before most are used.
    """

    def __init__(self, spec: Mapping[str, Any]) -> None:
        self.name: str = spec["name"]
        self.type: str = spec["type"]
        self.api_key: Optional[int] = spec.get("apiKey")
        rng = parse_versions(spec["validVersions"])
        if rng is None:
            raise ValueError(f"{self.name}: validVersions must not be none")
        self.min_version, self.max_version = rng
        self.flexible_versions = parse_versions(spec.get("flexibleVersions", "none"))
        self._spec = spec
        self._compiled: Optional[_Struct] = None
        self._classes: Optional[Dict[str, type]] = None
        self.cls: Optional[Type[Message]] = None

    def bind(self, cls: Type[Message], structs: Mapping[str, Type[Message]]) -> None:
        """Name the classes a typed decode builds: ``cls`` for the message, ``structs`` by
        struct name (:data:`pylogq.protocol.message_data.BINDINGS`)."""
        classes: Dict[str, type] = dict(structs)
        classes[""] = cls
        self._classes = classes
        self.cls = cls
        self._compiled = None

    @property
    def _struct(self) -> _Struct:
        struct = self._compiled
        if struct is None:
            # Two threads may both compile it; either result is the same table.
            common = self._spec.get("commonStructs")
            classes = self._classes
            struct = self._compiled = _Struct(
                self._spec["fields"], _CommonStructs(common, classes) if common else None, classes, "")
        return struct

    def __repr__(self) -> str:
        return f"Schema({self.name} v{self.min_version}-{self.max_version})"

    def is_flexible(self, version: int) -> bool:
        """Whether ``version`` uses compact encodings and tagged fields."""
        return _in(self.flexible_versions, version)

    def _check(self, version: int) -> bool:
        if not self.min_version <= version <= self.max_version:
            raise InvalidArgumentError(
                f"{self.name} version {version} not in {self.min_version}-{self.max_version}"
            )
        return self.is_flexible(version)

    def has_field(self, key: str, version: int) -> bool:
        """Whether the top-level field ``key`` (snake_case) is carried at ``version``."""
        regular, tagged, _ = self._struct.plan(version)
        return any(f.key == key for f in regular) or any(f.key == key for f in tagged)

    def defaults(self) -> Dict[str, Any]:
        """Every field with its default value."""
        return self._struct.defaults()

    def encode_into(self, w: Writer, data: Any, version: int) -> None:
        """Append the encoding of ``data`` at ``version`` to ``w``."""
        flexible = self._check(version)
        self._struct.encode(w, data, version, flexible)

    def encode(self, data: Any, version: int) -> bytes:
        """Encode ``data`` (its class, or a mapping) at ``version``; missing keys take their defaults."""
        w = Writer()
        self.encode_into(w, data, version)
        return w.getvalue()

    def decode_from(self, r: Reader, version: int) -> Dict[str, Any]:
        """Decode one message at the reader's position, advancing it."""
        flexible = self._check(version)
        return self._struct.decode(r, version, flexible)

    def decode(self, data: Buffer, version: int) -> Dict[str, Any]:
        """Decode a buffer holding exactly one message at ``version``, as a dict."""
        r = Reader(data)
        out = self.decode_from(r, version)
        self._check_end(r, version)
        return out

    def read(self, r: Reader, version: int) -> Any:
        """Decode one message at the reader's position as its class, advancing the reader."""
        flexible = self._check(version)
        return self._struct.decode(r, version, flexible, True)

    def parse(self, data: Buffer, version: int) -> Any:
        """Decode a buffer holding exactly one message at ``version``, as its class."""
        r = Reader(data)
        out = self.read(r, version)
        self._check_end(r, version)
        return out

    def _check_end(self, r: Reader, version: int) -> None:
        if r.remaining:
            raise ProtocolError(
                f"{self.name} v{version}: {r.remaining} trailing bytes at position {r.pos}"
            )

