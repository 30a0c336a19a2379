"""The principal of an SSL client: its certificate's subject, by Kafka's ``ssl.principal.mapping.rules``.

Kafka names a client that showed a certificate ``User:<name>``, the name being the
certificate's subject distinguished name as Java's ``X500Principal.getName()`` writes it
(RFC 2253: the last RDN first, CN/C/L/ST/O/OU/STREET/DC/UID by keyword, any other
attribute as its dotted OID with the DER value in hex, ``,=+<>#;"\\`` escaped), passed
through the mapping rules (Kafka's SslPrincipalMapper)::

    ssl.principal.mapping.rules=RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L,DEFAULT

Each rule is ``RULE:pattern/replacement/`` with an optional ``L`` or ``U`` (lower or upper
case the result) or ``DEFAULT`` (the DN as it is). The first rule whose pattern matches
the whole DN gives the name; the pattern is a regular expression (Java's syntax, which
Python's :mod:`re` reads alike for everything but Java-only constructs), the replacement
Java's (``$1`` a group, ``\\$`` a dollar sign), with Kafka's treatment of references to
groups the pattern does not have (taken literally). No rule matching is an error: the
client is refused, as Kafka refuses it. Rules are checked when the listener is built
(an invalid one is a ConfigError there).
"""

from __future__ import annotations

import re
from typing import Any, Callable, List, Match, Optional, Pattern

from ..errors import ConfigError, PrincipalMappingError

__all__ = ["ANONYMOUS", "SslPrincipalMapper", "rfc2253_name"]

#: The principal of a client that did not authenticate (PLAINTEXT, SSL without a certificate).
ANONYMOUS = "User:ANONYMOUS"

# Kafka's SslPrincipalMapper patterns, as they are: (DEFAULT) | RULE:pattern/replacement/[LU] | anything.
_RULE = r"(DEFAULT)|RULE:((\\.|[^\\/])*)/((\\.|[^\\/])*)/([LU]?).*?|(.*?)"
_RULE_SPLITTER = re.compile(r"\s*(" + _RULE + r")\s*(,\s*|$)")
_RULE_PARSER = re.compile(_RULE)
_BACK_REFERENCE = re.compile(r"\$(\d+)")


def _escape_literal_back_references(unescaped: str, groups: int) -> str:
    """Kafka's treatment of ``$n`` past the pattern's groups: a reference to a group the
    pattern lacks drops digits from the right while that finds none (``$12`` of one group
    is ``$1`` then ``2``), and one still too large is a literal ``$n``. Positions are taken
    from the replacement as given, as Kafka's loop takes them."""
    if groups == 0:
        return unescaped
    value = unescaped
    for m in _BACK_REFERENCE.finditer(unescaped):
        digits = m.group(1)
        if digits.startswith("0"):
            continue
        index = int(digits)
        while index > groups and index >= 10:
            index //= 10
        if index > groups:
            start = m.start(1)
            value = value[:start - 1] + "\\" + value[start - 1:]
    return value


def _replacer(replacement: str, groups: int, rule: str) -> Callable[["Match[str]"], str]:
    """Java's ``Matcher.appendReplacement`` of ``replacement``: ``\\x`` is x, ``$n`` group n
    (as many digits as name a group), ``${name}`` a named group."""
    pieces: List[Any] = []  # str literals, int group numbers, or group names in a tuple
    i, n = 0, len(replacement)
    literal: List[str] = []
    while i < n:
        c = replacement[i]
        if c == "\\":
            i += 1
            if i == n:
                raise ConfigError("ssl.principal.mapping.rules: rule %r: character to be escaped is missing" % rule)
            literal.append(replacement[i])
            i += 1
        elif c == "$":
            i += 1
            if i == n:
                raise ConfigError("ssl.principal.mapping.rules: rule %r: Illegal group reference: group index is "
                                  "missing" % rule)
            if literal:
                pieces.append("".join(literal))
                literal = []
            if replacement[i] == "{":
                end = replacement.find("}", i)
                if end < 0:
                    raise ConfigError("ssl.principal.mapping.rules: rule %r: named capturing group is missing "
                                      "trailing '}'" % rule)
                pieces.append((replacement[i + 1:end],))
                i = end + 1
                continue
            if not replacement[i].isdigit():
                raise ConfigError("ssl.principal.mapping.rules: rule %r: Illegal group reference" % rule)
            ref = int(replacement[i])
            i += 1
            while i < n and replacement[i].isdigit() and ref * 10 + int(replacement[i]) <= groups:
                ref = ref * 10 + int(replacement[i])
                i += 1
            if ref > groups:
                raise ConfigError("ssl.principal.mapping.rules: rule %r: No group %d" % (rule, ref))
            pieces.append(ref)
        else:
            literal.append(c)
            i += 1
    if literal:
        pieces.append("".join(literal))

    def expand(m: "Match[str]") -> str:
        out = []
        for piece in pieces:
            if isinstance(piece, str):
                out.append(piece)
            else:
                group = m.group(piece if isinstance(piece, int) else piece[0])
                if group is not None:
                    out.append(group)
        return "".join(out)

    return expand


class _Rule:
    """One rule: DEFAULT, or a pattern, its replacement and a case change."""

    def __init__(self, text: str, pattern: Optional[str] = None, replacement: Optional[str] = None,
                 case: str = "") -> None:
        self.text = text
        self.pattern: Optional[Pattern[str]] = None
        self.replacement = replacement
        self.case = case
        self._expand: Optional[Callable[["Match[str]"], str]] = None
        if pattern is not None:
            try:
                self.pattern = re.compile(pattern)
            except re.error as exc:
                raise ConfigError("ssl.principal.mapping.rules: invalid pattern in rule %r: %s" % (text, exc)) \
                    from None
            groups = self.pattern.groups
            self._expand = _replacer(_escape_literal_back_references(replacement or "", groups), groups, text)

    def apply(self, dn: str) -> Optional[str]:
        if self.pattern is None:
            return dn
        if self.pattern.fullmatch(dn) is None:
            return None
        assert self._expand is not None
        result = self.pattern.sub(self._expand, dn)
        if self.case == "L":
            return result.lower()
        if self.case == "U":
            return result.upper()
        return result

    def __repr__(self) -> str:
        if self.pattern is None:
            return "DEFAULT"
        out = "RULE:" + self.pattern.pattern
        if self.replacement is not None:
            out += "/" + self.replacement
        if self.case:
            out += "/" + self.case
        return out


class SslPrincipalMapper:
    """Kafka's ``ssl.principal.mapping.rules``; immutable and thread-safe once built."""

    def __init__(self, rules: Optional[str] = "DEFAULT") -> None:
        text = "DEFAULT" if rules is None else rules
        self.rules: List[_Rule] = []
        for m in _RULE_SPLITTER.finditer(text.strip()):
            rule = m.group(1)
            parsed = _RULE_PARSER.match(rule)
            if parsed is None:
                raise ConfigError("ssl.principal.mapping.rules: Invalid rule: %s" % rule)
            if parsed.end() != len(rule):
                raise ConfigError("ssl.principal.mapping.rules: Invalid rule: `%s`, unmatched substring: `%s`"
                                  % (rule, rule[parsed.end():]))
            if parsed.group(1) is not None:
                self.rules.append(_Rule(rule))
            elif parsed.group(2) is not None:
                self.rules.append(_Rule(rule, parsed.group(2), parsed.group(4), parsed.group(6) or ""))

    def name(self, dn: str) -> str:
        """The principal name of ``dn``; PrincipalMappingError when no rule gives one."""
        for rule in self.rules:
            found = rule.apply(dn)
            if found is not None:
                return found
        raise PrincipalMappingError("No rules apply to %s, rules %s" % (dn, self.rules))

    def __repr__(self) -> str:
        return "SslPrincipalMapper(rules = [%s])" % ", ".join(repr(r) for r in self.rules)


# -- the subject's name as Java's X500Principal.getName() writes it -----------------------------

# The attributes RFC 2253 gives a keyword to (Java writes every other one as its OID).
_KEYWORDS = {"2.5.4.3": "CN", "2.5.4.6": "C", "2.5.4.7": "L", "2.5.4.8": "ST", "2.5.4.10": "O", "2.5.4.11": "OU",
             "2.5.4.9": "STREET", "0.9.2342.19200300.100.1.25": "DC", "0.9.2342.19200300.100.1.1": "UID"}
_ESCAPED = ',=+<>#;"\\'
# ASN.1 string types Java writes as text; their encodings, for the DER of an attribute as hex.
_TEXT_TAGS = {12: "utf-8", 19: "ascii", 20: "latin-1", 22: "ascii", 27: "latin-1", 30: "utf-16-be"}
_ENCODINGS = {12: "utf-8", 19: "ascii", 20: "latin-1", 22: "ascii", 27: "latin-1", 30: "utf-16-be",
              28: "utf-32-be", 18: "ascii", 26: "ascii"}


def _der_length(n: int) -> bytes:
    if n < 0x80:
        return bytes([n])
    body = n.to_bytes((n.bit_length() + 7) // 8, "big")
    return bytes([0x80 | len(body)]) + body


def _value_text(value: str) -> str:
    escaped = []
    for c in value:
        if c in _ESCAPED:
            escaped.append("\\" + c)
        elif c == "\0":
            escaped.append("\\00")
        else:
            escaped.append(c)
    chars = "".join(escaped)
    lead = len(chars) - len(chars.lstrip(" \r"))
    trail = len(chars.rstrip(" \r"))
    return "".join(("\\" + c) if i < lead or i >= trail else c for i, c in enumerate(chars))


def _attribute(attr: Any) -> str:
    oid = attr.oid.dotted_string
    keyword = _KEYWORDS.get(oid)
    tag = int(getattr(getattr(attr, "_type", None), "value", 12))
    value = attr.value
    if keyword is not None and isinstance(value, str) and tag in _TEXT_TAGS:
        return "%s=%s" % (keyword, _value_text(value))
    content = value if isinstance(value, bytes) else value.encode(_ENCODINGS.get(tag, "utf-8"))
    der = bytes([tag]) + _der_length(len(content)) + content
    return "%s=#%s" % (keyword or oid, der.hex())


def rfc2253_name(der_certificate: bytes) -> str:
    """The subject of a DER certificate as Java's ``X500Principal.getName()`` (RFC 2253) writes it."""
    from cryptography import x509

    subject = x509.load_der_x509_certificate(der_certificate).subject
    return ",".join("+".join(_attribute(a) for a in rdn) for rdn in reversed(subject.rdns))
