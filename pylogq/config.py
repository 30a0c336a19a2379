"""Kafka's configuration machinery: properties files, typed keys, and the topic-level ``LogConfig``.

Keys are Kafka's. Each setting has a dotted key (``segment.bytes``) and an
attribute named after it with dots turned into underscores
(``segment_bytes``); constructors accept either spelling, and
``from_properties`` reads a Java ``.properties`` text. Values are parsed and
validated the way Kafka's ``ConfigDef`` does::

    INT     32-bit integer      int, or a string of decimal digits
    LONG    64-bit integer      int, or a string of decimal digits
    DOUBLE  float               int, float, or a numeric string ("Infinity" too)
    BOOLEAN bool                bool, or the string "true"/"false" (any case)
    STRING  str                 str, surrounding whitespace trimmed
    LIST    tuple of str        a comma-separated string, or a list/tuple of str

An unknown key, a value of the wrong type and a value outside its range all
raise :class:`pylogq.errors.ConfigError` naming the key; unknown keys come
with the closest known key as a suggestion.

This module sits at the bottom of the package, beside :mod:`pylogq.errors`:
every layer's settings are declared on it (the log manager's in
:mod:`pylogq.storage.config`, the broker's in :mod:`pylogq.cluster.broker.config`,
the listeners' in :mod:`pylogq.server.config`), and the topic-level
:class:`LogConfig` lives here because clients validate topic configs with it
too, as Kafka's clients share ``TopicConfig``.
"""

from __future__ import annotations

import math
import os
import re
from typing import Any, ClassVar, Dict, Iterable, List, Mapping, Optional, Tuple, Type, TypeVar

from .errors import ConfigError

__all__ = [
    "LONG_MAX",
    "INT_MAX",
    "CLEANUP_POLICY_COMPACT",
    "CLEANUP_POLICY_DELETE",
    "CREATE_TIME",
    "LOG_APPEND_TIME",
    "COMPRESSION_TYPES",
    "Config",
    "LogConfig",
    "client_keywords",
    "parse_properties",
    "parse_setting",
    "sensitive",
    "setting",
    "suggest",
    "to_string",
    "java_double",
]

INT_MIN = -(2**31)
INT_MAX = 2**31 - 1
LONG_MIN = -(2**63)
LONG_MAX = 2**63 - 1

CLEANUP_POLICY_COMPACT = "compact"
CLEANUP_POLICY_DELETE = "delete"
CLEANUP_POLICIES = (CLEANUP_POLICY_COMPACT, CLEANUP_POLICY_DELETE)
CREATE_TIME = "CreateTime"
LOG_APPEND_TIME = "LogAppendTime"
TIMESTAMP_TYPES = (CREATE_TIME, LOG_APPEND_TIME)
COMPRESSION_TYPES = ("producer", "uncompressed", "gzip", "snappy", "lz4", "zstd")

#: Kafka's minimum segment size: LegacyRecord.RECORD_OVERHEAD_V0, the smallest record that fits.
MIN_SEGMENT_BYTES = 14
DEFAULT_MESSAGE_FORMAT_VERSION = "3.0-IV1"

_INT = "INT"
_LONG = "LONG"
_DOUBLE = "DOUBLE"
_BOOLEAN = "BOOLEAN"
_STRING = "STRING"
_LIST = "LIST"

_DIGITS = re.compile(r"[+-]?[0-9]+\Z")

# The keys of Kafka's PASSWORD settings (under a listener's prefix too): JAAS configs, the stores'
# passwords, inline PEM keys and certificates, the password encoder's secrets.
_SENSITIVE_SUFFIXES = (".secret", "ssl.keystore.key", "ssl.keystore.certificate.chain", "ssl.truststore.certificates")


def sensitive(key: str) -> bool:
    """Whether setting ``key``'s value is never shown: not by DescribeConfigs (Kafka's PASSWORD
    type), not in a config's repr or a log line."""
    return "jaas" in key or "password" in key or key.endswith(_SENSITIVE_SUFFIXES)


# --------------------------------------------------------------------------- properties files


_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _logical_lines(text: str) -> Iterable[str]:
    """Java's logical lines: comments and blanks dropped, backslash continuations joined."""
    pending: Optional[str] = None
    for natural in text.splitlines():
        line = natural.lstrip(" \t\f")
        if pending is None:
            if not line or line[0] in "#!":
                continue
        else:
            line = pending + line
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2 == 1:
            pending = line[:-1]
            continue
        pending = None
        yield line
    if pending is not None:
        yield pending


def _unescape(raw: str) -> str:
    out: List[str] = []
    i = 0
    n = len(raw)
    while i < n:
        c = raw[i]
        if c != "\\" or i + 1 >= n:
            out.append(c)
            i += 1
            continue
        nxt = raw[i + 1]
        if nxt == "u" and i + 6 <= n and re.fullmatch(r"[0-9a-fA-F]{4}", raw[i + 2:i + 6]):
            out.append(chr(int(raw[i + 2:i + 6], 16)))
            i += 6
            continue
        out.append(_ESCAPES.get(nxt, nxt))
        i += 2
    return "".join(out)


def parse_properties(text: str) -> Dict[str, str]:
    """Parse a Java ``.properties`` text into a dict of strings (a later key wins).

    Follows ``java.util.Properties.load``: ``#`` and ``!`` start comment
    lines; the key ends at the first unescaped ``=``, ``:`` or whitespace;
    a line ending in an odd number of backslashes continues on the next one
    (whose leading whitespace is dropped); ``\\t \\n \\r \\f \\uXXXX`` and
    ``\\<char>`` escapes are decoded. Values are also stripped of trailing
    whitespace, which Kafka trims anyway.
    """
    result: Dict[str, str] = {}
    for line in _logical_lines(text):
        i = 0
        n = len(line)
        while i < n:
            c = line[i]
            if c == "\\":
                i += 2
                continue
            if c in "=:" or c in " \t\f":
                break
            i += 1
        key_end = min(i, n)
        j = key_end
        while j < n and line[j] in " \t\f":
            j += 1
        if j < n and line[j] in "=:":
            j += 1
            while j < n and line[j] in " \t\f":
                j += 1
        key = _unescape(line[:key_end])
        result[key] = _unescape(line[j:]).rstrip()
    return result


_INTEGER_TEXT = re.compile(r"[+-]?\d+")


def client_keywords(properties: Mapping[str, str]) -> Dict[str, Any]:
    """Kafka's dotted client settings (``linger.ms=5``) as a pylogq client's keyword arguments
    (``linger_ms=5``): dots and dashes become underscores, and a value that reads as an int or
    a boolean (any case) becomes one; other values stay strings, for the client to check."""
    out: Dict[str, Any] = {}
    for key, value in properties.items():
        text = value.strip()
        lowered = text.lower()
        typed: Any = value
        if lowered in ("true", "false"):
            typed = lowered == "true"
        elif _INTEGER_TEXT.fullmatch(text):
            typed = int(text)
        out[key.replace(".", "_").replace("-", "_")] = typed
    return out


# --------------------------------------------------------------------------- value parsing


class _Spec:
    """One setting: its dotted key, Kafka type, default and validation rule."""

    __slots__ = ("key", "kind", "default", "at_least", "at_most", "choices", "nullable", "paths", "non_empty", "doc")

    def __init__(self, key: str, kind: str, default: Any, at_least: Optional[float] = None,
                 at_most: Optional[float] = None, choices: Optional[Tuple[str, ...]] = None,
                 nullable: bool = False, paths: bool = False, non_empty: bool = False, doc: str = "") -> None:
        self.key = key
        self.kind = kind
        self.default = default
        self.at_least = at_least
        self.at_most = at_most
        self.choices = choices
        self.nullable = nullable
        self.paths = paths
        self.non_empty = non_empty
        self.doc = doc

    def __repr__(self) -> str:
        return "_Spec(%r, %r, %r)" % (self.key, self.kind, self.default)


def setting(key: str, kind: str, default: Any, *, at_least: Optional[float] = None,
             at_most: Optional[float] = None, choices: Optional[Tuple[str, ...]] = None,
             nullable: bool = False, paths: bool = False, non_empty: bool = False, doc: str = "") -> Any:
    """A setting of a :class:`Config` subclass, declared as ``segment_bytes: int =
    setting("segment.bytes", ...)``: the class reads as the default, an instance as its value."""
    return _Spec(key, kind, default, at_least, at_most, choices, nullable, paths, non_empty, doc)


def _invalid(key: str, value: Any, rule: str) -> ConfigError:
    return ConfigError("Invalid value %r for configuration %s: %s" % (value, key, rule))


def suggest(word: str, candidates: Iterable[str]) -> str:
    import difflib  # only for an unknown name: not on the startup path

    pool = list(candidates)
    lowered = {c.lower(): c for c in pool}
    match = difflib.get_close_matches(word.lower(), list(lowered), n=1, cutoff=0.6)
    return "; did you mean %r?" % lowered[match[0]] if match else ""


def _parse_integer(spec: _Spec, value: Any) -> int:
    bits, low, high = (32, INT_MIN, INT_MAX) if spec.kind == _INT else (64, LONG_MIN, LONG_MAX)
    if isinstance(value, bool):
        raise _invalid(spec.key, value, "expected a %d-bit integer (%s), not a boolean" % (bits, spec.kind))
    if isinstance(value, int):
        number = int(value)
    elif isinstance(value, str):
        text = value.strip()
        if not _DIGITS.match(text):
            raise _invalid(spec.key, value, "not a number of type %s" % spec.kind)
        number = int(text)
    else:
        raise _invalid(spec.key, value, "expected a %d-bit integer (%s), got %s"
                       % (bits, spec.kind, type(value).__name__))
    if not low <= number <= high:
        raise _invalid(spec.key, value, "out of range for type %s [%d, %d]" % (spec.kind, low, high))
    return number


def _parse_double(spec: _Spec, value: Any) -> float:
    if isinstance(value, bool):
        raise _invalid(spec.key, value, "expected a number (DOUBLE), not a boolean")
    if isinstance(value, (int, float)):
        number = float(value)
    elif isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            raise _invalid(spec.key, value, "not a number of type DOUBLE") from None
    else:
        raise _invalid(spec.key, value, "expected a number (DOUBLE), got %s" % type(value).__name__)
    if math.isnan(number):
        raise _invalid(spec.key, value, "NaN is not a valid DOUBLE setting")
    return number


def _parse_boolean(spec: _Spec, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str):
        text = value.strip().lower()
        if text in ("true", "false"):
            return text == "true"
    raise _invalid(spec.key, value, "expected value to be either true or false")


def _parse_string(spec: _Spec, value: Any) -> str:
    if not isinstance(value, str):
        raise _invalid(spec.key, value, "expected a string, got %s" % type(value).__name__)
    return value.strip()


def _path(spec: _Spec, value: Any, item: "os.PathLike[Any]") -> str:
    path = os.fspath(item)
    if not isinstance(path, str):
        raise _invalid(spec.key, value, "expected a str path, found %r" % (path,))
    return path.strip()


def _parse_list(spec: _Spec, value: Any) -> Tuple[str, ...]:
    items: List[str] = []
    if spec.paths and isinstance(value, os.PathLike):
        items = [_path(spec, value, value)]
    elif isinstance(value, str):
        text = value.strip()
        items = [part.strip() for part in text.split(",")] if text else []
    elif isinstance(value, (list, tuple)):
        for item in value:
            if isinstance(item, str):
                items.append(item.strip())
            elif spec.paths and isinstance(item, os.PathLike):
                items.append(_path(spec, value, item))
            else:
                raise _invalid(spec.key, value, "expected a list of strings, found %r" % (item,))
    else:
        raise _invalid(spec.key, value, "expected a comma-separated string or a list of strings, got %s"
                       % type(value).__name__)
    if any(not item for item in items):
        raise _invalid(spec.key, value, "empty entry in the list")
    if len(set(items)) != len(items):
        raise _invalid(spec.key, value, "duplicate entry in the list")
    if spec.non_empty and not items:
        raise _invalid(spec.key, value, "at least one entry is required")
    return tuple(items)


def _check_choice(spec: _Spec, value: Any, item: str) -> None:
    assert spec.choices is not None
    if item not in spec.choices:
        raise _invalid(spec.key, value, "%r is not one of %s%s"
                       % (item, ", ".join(spec.choices), suggest(item, spec.choices)))


def _parse_value(spec: _Spec, value: Any) -> Any:
    """``value`` converted to the spec's type and checked against its rule."""
    if value is None:
        if spec.nullable:
            return None
        raise _invalid(spec.key, value, "a value of type %s is required" % spec.kind)
    result: Any
    if spec.kind in (_INT, _LONG):
        result = _parse_integer(spec, value)
    elif spec.kind == _DOUBLE:
        result = _parse_double(spec, value)
    elif spec.kind == _BOOLEAN:
        result = _parse_boolean(spec, value)
    elif spec.kind == _STRING:
        result = _parse_string(spec, value)
        if spec.choices is not None:
            _check_choice(spec, value, result)
    else:
        result = _parse_list(spec, value)
        if spec.choices is not None:
            for item in result:
                _check_choice(spec, value, item)
    if spec.at_least is not None and result < spec.at_least:
        raise _invalid(spec.key, value, "value must be at least %s" % _number(spec.at_least))
    if spec.at_most is not None and result > spec.at_most:
        raise _invalid(spec.key, value, "value must be no more than %s" % _number(spec.at_most))
    return result


def parse_setting(key: str, kind: str, value: Any, *, at_least: Optional[float] = None) -> Any:
    """``value`` parsed and checked as a setting ``key`` of Kafka type ``kind`` would be (for a
    key no Config class declares); raises ConfigError naming the key."""
    return _parse_value(_Spec(key, kind, None, at_least=at_least), value)


def _number(bound: float) -> str:
    return str(int(bound)) if float(bound).is_integer() else repr(bound)


def to_string(value: Any) -> Optional[str]:
    """A value in Kafka's string form, as a properties file or DescribeConfigs carries it."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, float):
        return java_double(value)
    if isinstance(value, tuple):
        return ",".join(value)
    return str(value)


def java_double(value: float) -> str:
    """A double as Java's ``Double.toString`` writes it (``1048576.0``, ``2.097152E7``)."""
    if value != value or value in (float("inf"), float("-inf")):
        return {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}[repr(value)]
    if value == 0:
        return "-0.0" if math.copysign(1.0, value) < 0 else "0.0"
    magnitude = abs(value)
    if 1e-3 <= magnitude < 1e7:
        text = repr(float(value))
        return text if "." in text else text + ".0"
    import decimal  # only for a large or small double: not on the startup path

    sign, digits, exponent = decimal.Decimal(repr(float(value))).normalize().as_tuple()
    assert isinstance(exponent, int)
    text = "".join(str(d) for d in digits)
    power = exponent + len(text) - 1
    mantissa = text[0] + "." + (text[1:] or "0")
    return "%s%sE%d" % ("-" if sign else "", mantissa, power)


def _escape(value: str) -> str:
    """``value`` escaped so that :func:`parse_properties` reads it back unchanged."""
    out = value.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t")
    return "\\" + out if out.startswith((" ", "\f")) else out


# --------------------------------------------------------------------------- the shared machinery


_C = TypeVar("_C", bound="Config")


class Config:
    """Construction, validation, comparison and conversion shared by the config classes.

    A subclass declares its settings as class attributes made by :func:`setting`, in
    Kafka's order; instances are immutable, compare and hash by their values, and show
    them in their repr. (Not dataclasses: generating a dataclass's methods for the
    hundred-odd settings cost every process a few milliseconds of its start.)
    """

    #: Alternative keys and the key they stand for; the main key wins when both are given.
    _ALIASES: ClassVar[Mapping[str, str]] = {}
    #: (attribute -> spec, every accepted spelling -> attribute) of each class, its bases' first.
    _spec_table: ClassVar[Tuple[Dict[str, _Spec], Dict[str, str]]] = ({}, {})
    #: Attributes besides the settings that equality and the repr include (not the hash).
    _COMPARED: ClassVar[Tuple[str, ...]] = ()

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        specs = dict(cls._spec_table[0])
        for name, value in list(vars(cls).items()):
            if not isinstance(value, _Spec):
                continue
            # A key's dots and dashes (MirrorMaker's offset-syncs.topic.location) are underscores.
            if value.key.replace(".", "_").replace("-", "_") != name:
                raise TypeError("setting %s does not match its key %s" % (name, value.key))
            specs[name] = value
            setattr(cls, name, value.default)  # the class reads as Kafka's default
        names: Dict[str, str] = {}
        for name, spec in specs.items():
            names[name] = name
            names[spec.key] = name
        cls._spec_table = (specs, names)

    def __init__(self, **settings: Any) -> None:
        self._build({}, settings, strict=True)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("cannot assign to %s.%s: a %s is immutable" % (type(self).__name__, name, type(self).__name__))

    def __delattr__(self, name: str) -> None:
        raise AttributeError("cannot delete %s.%s: a %s is immutable" % (type(self).__name__, name, type(self).__name__))

    def _key(self) -> Tuple[Any, ...]:
        return tuple(getattr(self, attr) for attr in self._spec_table[0])

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._key() == other._key() and all(
            getattr(self, attr) == getattr(other, attr) for attr in self._COMPARED)

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        attrs = list(self._spec_table[0]) + list(self._COMPARED)
        return "%s(%s)" % (type(self).__qualname__, ", ".join("%s=%r" % (a, getattr(self, a)) for a in attrs))

    # -- tables

    @classmethod
    def _table(cls) -> Tuple[Dict[str, _Spec], Dict[str, str]]:
        """(attribute -> spec, every accepted spelling -> attribute)."""
        return cls._spec_table

    @classmethod
    def build(cls: Type[_C], settings: Mapping[str, Any]) -> _C:
        """An instance from a mapping of dotted and/or snake_case keys (unknown keys raise)."""
        config = object.__new__(cls)
        config._build({}, settings, strict=True)
        return config

    @classmethod
    def accepts(cls, key: str) -> bool:
        """Whether ``key`` (dotted, snake_case or an alias) names one of this class's settings."""
        return key in cls._table()[1] or key in cls._ALIASES or key.replace("_", ".") in cls._ALIASES

    @classmethod
    def attribute(cls, key: str) -> Optional[str]:
        """The attribute a key names (either spelling), or None for a key of another class."""
        return cls._table()[1].get(key)

    @classmethod
    def parse(cls, key: str, value: Any, spelled: Optional[str] = None) -> Any:
        """``value`` parsed and checked as this class's setting ``key`` (either spelling) is;
        the ConfigError of a bad value names ``spelled``, the key as it was written (a
        prefixed or per-flow key such as ``A->B.tasks.max``), or else ``key``."""
        specs, names = cls._table()
        attr = names.get(key)
        if attr is None:
            raise ConfigError("Unknown configuration %r for %s%s" % (key, cls.__name__, suggest(key, names)))
        spec = specs[attr]
        if spelled is not None and spelled != spec.key:
            spec = _Spec(spelled, spec.kind, spec.default, spec.at_least, spec.at_most, spec.choices,
                         spec.nullable, spec.paths, spec.non_empty, spec.doc)
        return _parse_value(spec, value)

    @classmethod
    def describe_key(cls, key: str) -> Optional[Tuple[str, str]]:
        """(Kafka's type name, e.g. ``"LONG"``, and the documentation) of a setting, or None
        for a key of another class."""
        attribute = cls._table()[1].get(key)
        if attribute is None:
            return None
        spec = cls._table()[0][attribute]
        return spec.kind, spec.doc

    @classmethod
    def known_keys(cls) -> Tuple[str, ...]:
        """Every dotted key this class knows, in declaration order."""
        return tuple(spec.key for spec in cls._table()[0].values())

    @classmethod
    def defaults(cls) -> Dict[str, Any]:
        """Dotted key -> Kafka's default value."""
        return {spec.key: spec.default for spec in cls._table()[0].values()}

    # -- construction

    def _build(self, base: Mapping[str, Any], changes: Mapping[str, Any], strict: bool,
               extra: Optional[Mapping[str, Any]] = None) -> None:
        specs, names = self._table()
        given: Dict[str, Any] = {}
        spelled: Dict[str, str] = {}
        aliased: Dict[str, Any] = {}
        unknown: Dict[str, Any] = dict(extra or {})
        for key, value in changes.items():
            if not isinstance(key, str):
                raise ConfigError("configuration keys must be strings, got %r" % (key,))
            alias = self._ALIASES.get(key) or self._ALIASES.get(key.replace("_", "."))
            if alias is not None:
                aliased[names[alias]] = value
                continue
            attr = names.get(key)
            if attr is None:
                if strict:
                    raise ConfigError("Unknown configuration %r for %s%s" % (
                        key, type(self).__name__, suggest(key, list(names) + list(self._ALIASES))))
                unknown[key] = value
                continue
            if attr in given:
                raise ConfigError("configuration %s given twice (as %r and %r)" % (specs[attr].key, spelled[attr], key))
            given[attr] = value
            spelled[attr] = key
        for attr, value in aliased.items():
            given.setdefault(attr, value)
        for attr, spec in specs.items():
            if attr in given:
                value = _parse_value(spec, given[attr])
            elif attr in base:
                value = base[attr]
            else:
                value = spec.default
            object.__setattr__(self, attr, value)
        self._finish(unknown)
        self._validate()

    def _finish(self, unknown: Dict[str, Any]) -> None:
        """Store keys this class does not know (only reached when not strict)."""

    def _validate(self) -> None:
        """Checks that involve more than one setting."""

    def _values(self) -> Dict[str, Any]:
        return {attr: getattr(self, attr) for attr in self._table()[0]}

    def _replaced(self: _C, changes: Mapping[str, Any], strict: bool = True) -> _C:
        clone = object.__new__(type(self))
        clone._build(self._values(), changes, strict, self._extra())
        return clone

    def _extra(self) -> Mapping[str, Any]:
        return {}

    # -- conversion

    def to_dict(self) -> Dict[str, Any]:
        """Dotted key -> value for every setting (lists as tuples)."""
        return {spec.key: getattr(self, attr) for attr, spec in self._table()[0].items()}

    def to_strings(self) -> Dict[str, Optional[str]]:
        """Dotted key -> Kafka's string form of the value (None for an unset optional setting)."""
        return {key: to_string(value) for key, value in self.to_dict().items()}

    def to_properties(self) -> str:
        """The settings that differ from Kafka's defaults as ``.properties`` text."""
        lines = ["%s=%s" % (key, _escape(to_string(value) or "")) for key, value in self.overrides().items()]
        return "".join(line + "\n" for line in lines)

    def overrides(self) -> Dict[str, Any]:
        """Dotted key -> value for the settings that differ from Kafka's defaults."""
        return {spec.key: getattr(self, attr) for attr, spec in self._table()[0].items()
                if getattr(self, attr) != spec.default}


# --------------------------------------------------------------------------- topic level


class LogConfig(Config):
    """Kafka's topic-level log settings with Kafka's defaults; immutable and hashable.

    ``LogConfig(segment_bytes=1024)``, ``LogConfig.from_dict({"segment.bytes":
    "1024"})`` and ``LogConfig.from_properties("segment.bytes=1024")`` build the
    same value. Every instance has passed validation, so readers of a
    ``LogConfig`` need not re-check ranges. Safe to share between threads.
    """

    segment_bytes: int = setting("segment.bytes", _INT, 1073741824, at_least=MIN_SEGMENT_BYTES,
                                  doc="size at which the active segment rolls")
    segment_ms: int = setting("segment.ms", _LONG, 604800000, at_least=1,
                               doc="age at which the active segment rolls even if not full")
    segment_jitter_ms: int = setting("segment.jitter.ms", _LONG, 0, at_least=0,
                                      doc="maximum random jitter subtracted from segment.ms")
    segment_index_bytes: int = setting("segment.index.bytes", _INT, 10485760, at_least=4,
                                        doc="size of each segment's preallocated offset index")
    index_interval_bytes: int = setting("index.interval.bytes", _INT, 4096, at_least=0,
                                         doc="bytes appended between two offset index entries")
    max_message_bytes: int = setting("max.message.bytes", _INT, 1048588, at_least=0,
                                      doc="largest record batch the log accepts")
    message_timestamp_type: str = setting("message.timestamp.type", _STRING, CREATE_TIME, choices=TIMESTAMP_TYPES,
                                           doc="CreateTime keeps the producer's timestamp, LogAppendTime stamps the broker's")
    message_timestamp_difference_max_ms: int = setting("message.timestamp.difference.max.ms", _LONG, LONG_MAX,
                                                        at_least=0)
    message_timestamp_before_max_ms: int = setting("message.timestamp.before.max.ms", _LONG, LONG_MAX, at_least=0)
    message_timestamp_after_max_ms: int = setting("message.timestamp.after.max.ms", _LONG, LONG_MAX, at_least=0)
    message_format_version: str = setting("message.format.version", _STRING, DEFAULT_MESSAGE_FORMAT_VERSION,
                                           doc="accepted and stored; pylogq writes the format each batch arrives in")
    message_downconversion_enable: bool = setting("message.downconversion.enable", _BOOLEAN, True)
    flush_messages: int = setting("flush.messages", _LONG, LONG_MAX, at_least=1,
                                   doc="records appended between two forced fsyncs")
    flush_ms: int = setting("flush.ms", _LONG, LONG_MAX, at_least=0,
                             doc="milliseconds between two forced fsyncs")
    retention_ms: int = setting("retention.ms", _LONG, 604800000, at_least=-1,
                                 doc="age after which segments are deleted; -1 keeps them forever")
    retention_bytes: int = setting("retention.bytes", _LONG, -1,
                                    doc="partition size above which old segments are deleted; negative is unlimited")
    local_retention_ms: int = setting("local.retention.ms", _LONG, -2, at_least=-2)
    local_retention_bytes: int = setting("local.retention.bytes", _LONG, -2, at_least=-2)
    remote_storage_enable: bool = setting("remote.storage.enable", _BOOLEAN, False)
    cleanup_policy: Tuple[str, ...] = setting("cleanup.policy", _LIST, (CLEANUP_POLICY_DELETE,),
                                               choices=CLEANUP_POLICIES,
                                               doc="delete, compact, or both (compact,delete)")
    min_cleanable_dirty_ratio: float = setting("min.cleanable.dirty.ratio", _DOUBLE, 0.5, at_least=0, at_most=1,
                                                doc="dirty share of the log above which it is cleaned")
    delete_retention_ms: int = setting("delete.retention.ms", _LONG, 86400000, at_least=0,
                                        doc="how long tombstones survive compaction")
    min_compaction_lag_ms: int = setting("min.compaction.lag.ms", _LONG, 0, at_least=0)
    max_compaction_lag_ms: int = setting("max.compaction.lag.ms", _LONG, LONG_MAX, at_least=1)
    file_delete_delay_ms: int = setting("file.delete.delay.ms", _LONG, 60000, at_least=0,
                                         doc="delay between renaming a segment to .deleted and removing it")
    preallocate: bool = setting("preallocate", _BOOLEAN, False)
    min_insync_replicas: int = setting("min.insync.replicas", _INT, 1, at_least=1)
    unclean_leader_election_enable: bool = setting("unclean.leader.election.enable", _BOOLEAN, False)
    compression_type: str = setting("compression.type", _STRING, "producer", choices=COMPRESSION_TYPES)
    leader_replication_throttled_replicas: Tuple[str, ...] = setting(
        "leader.replication.throttled.replicas", _LIST, ())
    follower_replication_throttled_replicas: Tuple[str, ...] = setting(
        "follower.replication.throttled.replicas", _LIST, ())

    @classmethod
    def from_dict(cls, settings: Mapping[str, Any]) -> "LogConfig":
        """A LogConfig from a mapping of dotted and/or snake_case keys."""
        config = object.__new__(cls)
        config._build({}, settings, strict=True)
        return config

    @classmethod
    def from_properties(cls, text: str) -> "LogConfig":
        """A LogConfig from ``.properties`` text with dotted keys."""
        return cls.from_dict(parse_properties(text))

    def with_overrides(self, **settings: Any) -> "LogConfig":
        """A new LogConfig with ``settings`` (either spelling) replacing this one's values."""
        return self._replaced(settings)

    def merged(self, settings: Mapping[str, Any]) -> "LogConfig":
        """A new LogConfig with the mapping's settings replacing this one's values."""
        return self._replaced(settings)

    def _validate(self) -> None:
        if self.min_compaction_lag_ms > self.max_compaction_lag_ms:
            raise ConfigError("conflicting settings: min.compaction.lag.ms (%d) > max.compaction.lag.ms (%d)"
                              % (self.min_compaction_lag_ms, self.max_compaction_lag_ms))

    @property
    def compact(self) -> bool:
        """True when cleanup.policy includes compact."""
        return CLEANUP_POLICY_COMPACT in self.cleanup_policy

    @property
    def delete(self) -> bool:
        """True when cleanup.policy includes delete."""
        return CLEANUP_POLICY_DELETE in self.cleanup_policy

    @property
    def log_append_time(self) -> bool:
        """True when the broker stamps batches with its own clock (LogAppendTime)."""
        return self.message_timestamp_type == LOG_APPEND_TIME


