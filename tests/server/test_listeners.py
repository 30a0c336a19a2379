"""pylogq/server/listeners.py: JAAS configuration values read as Kafka's JaasConfig reads them, and
listener lists checked as Kafka checks them."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from pylogq.client.connection import BrokerConnection
from pylogq.errors import ConfigError
from pylogq.protocol.constants import ApiKey
from pylogq.server.listeners import (
    JaasEntry,
    jaas_credentials,
    parse_jaas_config,
    parse_jaas_login,
    parse_jaas_users,
    parse_listeners,
)

from .._ports import free_port
from .._tls import start, stop

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


def test_a_client_logins_credentials() -> None:
    """What a broker authenticates to the others with and a tool's sasl.jaas.config: the login
    module's username and password, both required."""
    assert jaas_credentials('%s required username="alice" password="alice-secret";' % SCRAM, "k") == (
        "alice", "alice-secret")
    assert jaas_credentials(None, "k") is None and jaas_credentials(" ", "k") is None
    with pytest.raises(ConfigError, match=r"^k: the login module has no password option \(an example\)$"):
        jaas_credentials('%s required username="alice";' % PLAIN, "k", "an example")
    with pytest.raises(ConfigError, match="^k: the login module has no username and no password option$"):
        jaas_credentials("%s required;" % SCRAM, "k")


# -- listeners and their ports (Kafka's CoreUtils.listenerListToEndPoints) -------------------------

PORTS_MAP = {"A": "PLAINTEXT", "B": "SSL", "C": "PLAINTEXT"}


def test_an_ipv4_and_an_ipv6_listener_may_share_a_port() -> None:
    listeners = parse_listeners("A://127.0.0.1:9092,B://[::1]:9092,C://:9093", protocol_map=PORTS_MAP)
    assert [(item.name, item.host, item.port) for item in listeners] == [
        ("A", "127.0.0.1", 9092), ("B", "::1", 9092), ("C", "", 9093)]
    assert len(parse_listeners("A://0.0.0.0:9092,B://[::]:9092", protocol_map=PORTS_MAP)) == 2
    # Port 0 (any free port) is no shared port; advertised listeners may share theirs.
    assert len(parse_listeners("A://h:0,B://h:0", protocol_map=PORTS_MAP)) == 2
    assert len(parse_listeners("A://h:1,B://h:1", "advertised.listeners", PORTS_MAP, distinct_ports=False)) == 2


@pytest.mark.parametrize("text, message", [
    ("A://h:9092,B://other:9092", "Each listener must have a different port, listeners: "),
    ("A://:9092,B://h:9092", "Each listener must have a different port, listeners: "),
    ("A://127.0.0.1:9092,B://10.0.0.1:9092", "If you have two listeners on the same port then one needs to be IPv4 "
                                             "and the other IPv6, listeners: "),
    ("A://[::1]:9092,B://[fe80::1]:9092", "If you have two listeners on the same port then one needs to be IPv4"),
    ("A://127.0.0.1:9092,B://h:9092", "Each listener must have a different port unless exactly one listener has "
                                      "an IPv4 address and the other IPv6 address, listeners: "),
    ("A://127.0.0.1:9092,B://[::1]:9092,C://h:9092", "If you have two listeners on the same port then one needs"),
    ("A://127.0.0.1:9092,B://[::1]:9092,C://10.0.0.1:9092", "Each listener must have a different port unless "
                                                            "exactly one listener"),
])
def test_listeners_on_one_port_are_refused_as_kafka_refuses_them(text: str, message: str) -> None:
    with pytest.raises(ConfigError) as refused:
        parse_listeners(text, protocol_map=PORTS_MAP)
    assert str(refused.value).startswith(message), str(refused.value)
    assert text in str(refused.value)


def test_a_broker_serves_an_ipv4_and_an_ipv6_listener_on_one_port(tmp_path: Path) -> None:
    """Each connection is told its own listener's endpoint (Metadata), whichever family it came in on."""
    port = free_port()
    try:
        with socket.socket(socket.AF_INET6) as probe:
            probe.bind(("::1", 0))
    except OSError:
        # A machine without an IPv6 loopback: the broker refuses the listener it cannot
        # open, naming it, and opens none.
        with pytest.raises(ConfigError, match=r"cannot listen on V6://::1:%d: " % port):
            stop(start(tmp_path / "b", {"listeners": "V4://127.0.0.1:%d,V6://[::1]:%d" % (port, port),
                                        "listener.security.protocol.map": "V4:PLAINTEXT,V6:PLAINTEXT"}))
        return
    tls = start(tmp_path / "b", {"listeners": "V4://127.0.0.1:%d,V6://[::1]:%d" % (port, port),
                                 "listener.security.protocol.map": "V4:PLAINTEXT,V6:PLAINTEXT"})
    try:
        assert tls.addresses == {"V4": ("127.0.0.1", port), "V6": ("::1", port)}
        for host in ("127.0.0.1", "::1"):
            conn = BrokerConnection(host, port, "listeners-test", 10.0)
            try:
                brokers = conn.request(ApiKey.METADATA, {"topics": []})["brokers"]
            finally:
                conn.close()
            assert [(b["host"], b["port"]) for b in brokers] == [(host, port)]
    finally:
        stop(tls)
