"""``ssl.principal.mapping.rules`` against Kafka's own cases (SslPrincipalMapperTest and the
security documentation's examples), and certificate subjects as Java's X500Principal names them."""

from __future__ import annotations

import datetime
from typing import List

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from pylogq.errors import ConfigError, PrincipalMappingError
from pylogq.server.ssl_principal import SslPrincipalMapper, rfc2253_name

KAFKA_VALID = [
    "DEFAULT",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L, DEFAULT",
    "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/",
    "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L",
    "RULE:^cn=(.?),ou=(.?),dc=(.?),dc=(.?)$/$1@$2/U",
    "RULE:^CN=([^,ADEFLTU,]+)(,.*|$)/$1/",
    "RULE:^CN=([^,DEFAULT,]+)(,.*|$)/$1/",
]
KAFKA_INVALID = [
    "default", "DEFAUL", "DEFAULT/L", "DEFAULT/U",
    "RULE:CN=(.*?),OU=ServiceUsers.*/$1",
    "rule:^CN=(.*?),OU=ServiceUsers.*$/$1/",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L/U",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/L",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/U",
    "RULE:^CN=(.*?),OU=ServiceUsers.*$/LU",
]


@pytest.mark.parametrize("rules", KAFKA_VALID)
def test_kafka_valid_rules(rules: str) -> None:
    SslPrincipalMapper(rules)


@pytest.mark.parametrize("rules", KAFKA_INVALID)
def test_kafka_invalid_rules(rules: str) -> None:
    with pytest.raises(ConfigError, match="ssl.principal.mapping.rules: Invalid rule"):
        SslPrincipalMapper(rules)


def test_kafka_mapper_cases() -> None:
    mapper = SslPrincipalMapper(", ".join([
        "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/L",
        "RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L",
        "RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U",
        "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U",
        "DEFAULT"]))
    assert mapper.name("CN=Duke,OU=ServiceUsers,O=Org,C=US") == "duke"
    assert mapper.name("CN=Duke,OU=SME,O=mycp,L=Fulton,ST=MD,C=US") == "duke@sme"
    assert mapper.name("cn=duke,ou=sme,dc=mycp,dc=com") == "DUKE@SME"
    assert mapper.name("cN=duke,OU=JavaSoft,O=Sun Microsystems") == "DUKE"
    assert mapper.name("OU=JavaSoft,O=Sun Microsystems,C=US") == "OU=JavaSoft,O=Sun Microsystems,C=US"


@pytest.mark.parametrize("expected, rules", [
    ("[]", ""),
    ("[DEFAULT]", "DEFAULT"),
    ("[RULE:/]", "RULE://"),
    ("[RULE:/.*]", "RULE:/.*/"),
    ("[RULE:/.*/L]", "RULE:/.*/L"),
    ("[RULE:/, DEFAULT]", "RULE://,DEFAULT"),
    ("[RULE:/, DEFAULT]", "  RULE:// ,  DEFAULT  "),
    ("[RULE:   /     , DEFAULT]", "  RULE:   /     / ,  DEFAULT  "),
    ("[RULE:  /     /U, DEFAULT]", "  RULE:  /     /U   ,DEFAULT  "),
    ("[RULE:([A-Z]*)/$1/U, RULE:([a-z]+)/$1, DEFAULT]", "  RULE:([A-Z]*)/$1/U   ,RULE:([a-z]+)/$1/,   DEFAULT  "),
    ("[]", ",   , , ,      , , ,   "),
    ("[RULE:/, DEFAULT]", ",,RULE://,,,DEFAULT,,"),
    ("[RULE: /   , DEFAULT]", ",  , RULE: /   /    ,,,   DEFAULT, ,   "),
    ("[RULE:   /  /U, DEFAULT]", "     ,  , RULE:   /  /U    ,,  ,DEFAULT, ,"),
    (r"[RULE:\/\\\(\)\n\t/\/\/]", r"RULE:\/\\\(\)\n\t/\/\//"),
    (r"[RULE:\**\/+/*/L, RULE:\/*\**/**]", r"RULE:\**\/+/*/L,RULE:\/*\**/**/"),
    (r"[RULE:,RULE:,/,RULE:,\//U, RULE:,/RULE:,, RULE:,RULE:,/L,RULE:,/L, RULE:, DEFAULT, /DEFAULT, DEFAULT]",
     r"RULE:,RULE:,/,RULE:,\//U,RULE:,/RULE:,/,RULE:,RULE:,/L,RULE:,/L,RULE:, DEFAULT, /DEFAULT/,DEFAULT"),
])
def test_kafka_rule_splitting(expected: str, rules: str) -> None:
    assert repr(SslPrincipalMapper(rules)) == "SslPrincipalMapper(rules = %s)" % expected


def test_kafka_comma_with_whitespace() -> None:
    mapper = SslPrincipalMapper(r"RULE:^CN=((\\, *|\w)+)(,.*|$)/$1/,DEFAULT")
    assert mapper.name(r"CN=Tkac\, Adam,OU=ITZ,DC=geodis,DC=cz") == r"Tkac\, Adam"


def test_kafka_documentation_examples() -> None:
    """The examples of Kafka's security documentation (Customizing SSL User Name)."""
    rules = "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L," \
            "RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/L,DEFAULT"
    mapper = SslPrincipalMapper(rules)
    assert mapper.name("CN=serviceuser,OU=ServiceUsers,O=Unknown,L=Unknown,ST=Unknown,C=Unknown") == "serviceuser"
    assert mapper.name("CN=adminUser,OU=Admin,O=Unknown,L=Unknown,ST=Unknown,C=Unknown") == "adminuser@admin"
    upper = SslPrincipalMapper("RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/U")
    assert upper.name("CN=adminUser,OU=Admin,O=Unknown,L=Unknown,ST=Unknown,C=Unknown") == "ADMINUSER@ADMIN"


def test_default_rules_and_no_matching_rule() -> None:
    assert SslPrincipalMapper(None).name("CN=a,O=b") == "CN=a,O=b"
    assert SslPrincipalMapper("DEFAULT").name("CN=a,O=b") == "CN=a,O=b"
    with pytest.raises(PrincipalMappingError, match="No rules apply to CN=a,O=b"):
        SslPrincipalMapper("RULE:^CN=(.*?),OU=Users$/$1/").name("CN=a,O=b")
    with pytest.raises(PrincipalMappingError):
        SslPrincipalMapper("").name("CN=a")


def test_java_replacement_syntax() -> None:
    """Java's replacement: ``\\$`` a dollar sign, references past the groups taken literally
    (Kafka's escapeLiteralBackReferences), ``$12`` of one group is group 1 then ``2``."""
    assert SslPrincipalMapper(r"RULE:^CN=(.*?)$/\$$1/").name("CN=x") == "$x"
    assert SslPrincipalMapper("RULE:^CN=(.*?)$/$1-$2/").name("CN=x") == "x-$2"
    assert SslPrincipalMapper("RULE:^CN=(.*?)$/$12/").name("CN=x") == "x2"
    assert SslPrincipalMapper("RULE:^CN=(?P<who>.*?)$/${who}!/").name("CN=x") == "x!"
    with pytest.raises(ConfigError, match="invalid pattern"):
        SslPrincipalMapper("RULE:^CN=(.*?$/$1/")


def _cert(subject: x509.Name) -> bytes:
    key = ec.generate_private_key(ec.SECP256R1())
    now = datetime.datetime.now(datetime.timezone.utc)
    cert = (x509.CertificateBuilder().subject_name(subject).issuer_name(subject).public_key(key.public_key())
            .serial_number(1).not_valid_before(now).not_valid_after(now + datetime.timedelta(days=1))
            .sign(key, hashes.SHA256()))
    return cert.public_bytes(serialization.Encoding.DER)


def _name(*attributes: x509.NameAttribute) -> x509.Name:
    return x509.Name(list(attributes))


A = x509.NameAttribute


@pytest.mark.parametrize("attributes, expected", [
    # Java names the RDNs last first, by RFC 2253's keywords.
    ([A(NameOID.COUNTRY_NAME, "US"), A(NameOID.STATE_OR_PROVINCE_NAME, "CA"), A(NameOID.LOCALITY_NAME, "SF"),
      A(NameOID.ORGANIZATION_NAME, "pylogq"), A(NameOID.ORGANIZATIONAL_UNIT_NAME, "Clients"),
      A(NameOID.COMMON_NAME, "alice")], "CN=alice,OU=Clients,O=pylogq,L=SF,ST=CA,C=US"),
    ([A(NameOID.DOMAIN_COMPONENT, "com"), A(NameOID.DOMAIN_COMPONENT, "example"), A(NameOID.USER_ID, "bob")],
     "UID=bob,DC=example,DC=com"),
    # Escapes: ,=+<>#;"\ anywhere, a space at either end.
    ([A(NameOID.COMMON_NAME, 'Smith, John+Jr <x>;"q"=\\#')], 'CN=Smith\\, John\\+Jr \\<x\\>\\;\\"q\\"\\=\\\\\\#'),
    ([A(NameOID.COMMON_NAME, " #x ")], "CN=\\ \\#x\\ "),
    # An attribute without an RFC 2253 keyword: its OID and its DER value in hex.
    ([A(NameOID.COMMON_NAME, "carol"), A(NameOID.EMAIL_ADDRESS, "a@b.c")],
     "1.2.840.113549.1.9.1=#16056140622e63,CN=carol"),
    ([A(NameOID.SERIAL_NUMBER, "42"), A(NameOID.COMMON_NAME, "dave")], "CN=dave,2.5.4.5=#13023432"),
    ([A(NameOID.COMMON_NAME, "żółw")], "CN=żółw"),
])
def test_rfc2253_names(attributes: List[x509.NameAttribute], expected: str) -> None:
    assert rfc2253_name(_cert(_name(*attributes))) == expected


def test_multi_valued_rdn() -> None:
    subject = x509.Name([x509.RelativeDistinguishedName([A(NameOID.COMMON_NAME, "a"), A(NameOID.USER_ID, "b")]),
                         x509.RelativeDistinguishedName([A(NameOID.ORGANIZATION_NAME, "o")])])
    assert rfc2253_name(_cert(subject)) == "O=o,CN=a+UID=b"
