"""JAAS configuration values read as Kafka's JaasConfig reads them (pylogq/server/listeners.py)."""

from __future__ import annotations

import pytest

from pylogq.errors import ConfigError
from pylogq.server.listeners import JaasEntry, parse_jaas_config, parse_jaas_login, parse_jaas_users

SCRAM = "org.apache.kafka.common.security.scram.ScramLoginModule"
PLAIN = "org.apache.kafka.common.security.plain.PlainLoginModule"


def test_values_quoted_or_bare_with_escapes_and_comments() -> None:
    text = ('%s Required /* the tools\' user */ username="alice" password=\'a "quoted\\\' one\'\n'
            '    // a comment to the end of the line\n    tokenauth=true ;' % SCRAM)
    assert parse_jaas_config(text, "sasl.jaas.config") == [
        JaasEntry(SCRAM, "required", {"username": "alice", "password": 'a "quoted\' one', "tokenauth": "true"})]
    assert parse_jaas_login('%s required username="bob" password="p\\\\w\\"d";' % PLAIN, "k") == {
        "username": "bob", "password": 'p\\w"d'}
    two = parse_jaas_config('%s required; %s optional user_a="x";' % (PLAIN, SCRAM), "k")
    assert [(e.module, e.flag, e.options) for e in two] == [(PLAIN, "required", {}), (SCRAM, "optional",
                                                                                      {"user_a": "x"})]
    assert parse_jaas_login("", "k") is None and parse_jaas_login("  ", "k") is None


@pytest.mark.parametrize("text, message", [
    ("%s" % SCRAM, "k: the control flag (required, requisite, sufficient, optional) of login module %s is missing"
     % SCRAM),
    ("%s mandatory;" % SCRAM, "k: invalid control flag 'mandatory' of login module %s" % SCRAM),
    ('%s required username="alice"' % SCRAM, "k: the entry of login module %s does not end with ';'" % SCRAM),
    ('%s required username "alice";' % SCRAM, "k: no value for option 'username' of login module %s" % SCRAM),
    ('%s required password=;' % SCRAM, "k: no value for option 'password' of login module %s" % SCRAM),
    ('%s required password="secret;' % SCRAM, "k: unterminated quoted value or comment"),
    ('"secret" required;', "k: a JAAS login module's class name is expected, not a quoted value"),
    ("/* only a comment */", "k: no login module in the JAAS configuration"),
])
def test_malformed_values_are_refused_without_repeating_them(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as refused:
        parse_jaas_config(text, "k")
    assert str(refused.value).startswith(message), str(refused.value)
    assert "secret" not in str(refused.value)


def test_a_client_login_is_one_plain_or_scram_module() -> None:
    with pytest.raises(ConfigError, match="names one login module, not 2"):
        parse_jaas_login('%s required; %s required;' % (PLAIN, PLAIN), "k")
    with pytest.raises(ConfigError, match="login module com.example.Login is not supported"):
        parse_jaas_login('com.example.Login required password="secret";', "k")


def test_a_plain_listener_s_users_come_from_its_jaas_line_read_as_kafka_reads_it() -> None:
    users = parse_jaas_users(PLAIN + ' required user_alice="alice-secret" user_bob=bob-secret\n'
                             '    user_carol="quote\\"d";', "k")
    assert users == {"alice": "alice-secret", "bob": "bob-secret", "carol": 'quote"d'}
    assert parse_jaas_users(None) == {} and parse_jaas_users("  ") == {}
    for text, why in ((PLAIN + ' required user_alice="alice-secret"', "does not end with ';'"),
                      ('org.apache.kafka.common.security.scram.ScramLoginModule required username="a" '
                       'password="alice-secret";', "one %s login module is expected" % PLAIN)):
        with pytest.raises(ConfigError, match="^k: ") as raised:
            parse_jaas_users(text, "k")
        assert why in str(raised.value) and "alice-secret" not in str(raised.value)
