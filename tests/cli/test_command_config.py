"""The tools against brokers that serve only TLS, with Kafka's ``--command-config`` files.

Two brokers, each with one listener and Kafka's ACL authorizer (only ``User:alice``, a
super user, may do anything, so a tool that reached either without logging in as alice
would be refused):

- ``mtls``: an SSL listener that requires a client certificate (alice's, named by
  ``ssl.principal.mapping.rules``); the tools' file gives PKCS12 stores;
- ``scram``: a SASL_SSL listener with SCRAM-SHA-512 (alice created first with ``pylogq
  configs`` over a plain listener the broker then drops, as an operator creates the first
  user); the tools' file gives a ScramLoginModule line continued over lines and a PEM
  trust store.

Every tool runs on both (``topics``, ``configs``, ``acls``, ``produce``, ``consume``,
``groups``, ``reassign-partitions``, ``leader-election``, ``transactions``, ``perf``), the files written as
a Kafka user writes them; then the other ways of giving the stores (PEM files, inline
PEM), the refusals a wrong file meets at the broker, and the clear errors of bad files.
The certificates come from ``tests/_certs.py``.
"""

from __future__ import annotations

import io
import re
import textwrap
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest

from pylogq.cli import transactions
from pylogq.cli.command_config import client_settings, connection_options
from pylogq.cli.main import run

from .._certs import BROKER_P12_PASSWORD, CLIENT_PASSWORD, TRUST_P12_PASSWORD, Certificates
from .._tls import TlsBroker, start, stop
from .conftest import Cli, Result, run_process

PASSWORD = "alice-secret"
RULES = "RULE:^CN=(.*?),OU=Clients.*$/$1/,DEFAULT"
SCRAM_LOGIN = ("org.apache.kafka.common.security.scram.ScramLoginModule required \\\n"
               "    username=\"alice\" \\\n"
               "    password=\"%s\";" % PASSWORD)
MODES = ("mtls", "scram")


def broker_settings(certs: Certificates, mode: str) -> Dict[str, Any]:
    settings: Dict[str, Any] = {
        "ssl.keystore.type": "PKCS12", "ssl.keystore.location": certs.path("broker.p12"),
        "ssl.keystore.password": BROKER_P12_PASSWORD,
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer", "super.users": "User:alice",
        "group.initial.rebalance.delay.ms": 0, "offsets.topic.num.partitions": 1,
    }
    if mode == "mtls":
        settings.update({"listeners": "SSL://127.0.0.1:0", "ssl.client.auth": "required",
                         "ssl.truststore.type": "PKCS12", "ssl.truststore.location": certs.path("truststore.p12"),
                         "ssl.truststore.password": TRUST_P12_PASSWORD, "ssl.principal.mapping.rules": RULES})
    else:
        settings.update({"listeners": "SASL_SSL://127.0.0.1:0", "sasl.enabled.mechanisms": "SCRAM-SHA-512"})
    return settings


def client_file(certs: Certificates, mode: str) -> str:
    """The properties file a Kafka user writes for ``mode``'s broker."""
    if mode == "mtls":
        return textwrap.dedent("""\
            # client.properties: mutual TLS
            security.protocol=SSL
            ssl.truststore.type=PKCS12
            ssl.truststore.location=%s
            ssl.truststore.password=%s
            ssl.keystore.type=PKCS12
            ssl.keystore.location=%s
            ssl.keystore.password=%s
            """) % (certs.path("truststore.p12"), TRUST_P12_PASSWORD, certs.path("client.p12"), CLIENT_PASSWORD)
    return textwrap.dedent("""\
        # client.properties: SCRAM over TLS
        security.protocol=SASL_SSL
        sasl.mechanism=SCRAM-SHA-512
        sasl.jaas.config=%s
        ssl.truststore.type=PEM
        ssl.truststore.location=%s
        """) % (SCRAM_LOGIN, certs.path("ca.pem"))


def create_alice(data_dir: Path, certs: Certificates) -> None:
    """The first SCRAM user, made as an operator makes it before the broker serves only SASL and
    authorizes: with ``pylogq configs`` over a plain listener, which the broker then drops."""
    settings = dict(broker_settings(certs, "scram"), listeners="PLAINTEXT://127.0.0.1:0")
    del settings["authorizer.class.name"], settings["super.users"]
    bootstrap = start(data_dir, settings)
    try:
        created = run_process(bootstrap.bootstrap("PLAINTEXT"), "configs", "--alter", "--entity-type", "users",
                              "--entity-name", "alice", "--add-config",
                              "SCRAM-SHA-512=[iterations=4096,password=%s]" % PASSWORD)
        assert created.status == 0, created.err
    finally:
        stop(bootstrap)


class Secured:
    """A broker of one mode, its address and the tools' properties file for it."""

    def __init__(self, mode: str, tls: TlsBroker, config: Path) -> None:
        self.mode = mode
        self.tls = tls
        self.bootstrap = next(iter(tls.addresses.values()))
        self.address = "%s:%d" % self.bootstrap
        self.config = str(config)

    def run(self, *argv: str, stdin: bytes = b"", config: str = "") -> Result:
        """``pylogq ARGV --bootstrap-server ADDRESS --command-config FILE`` as the command line runs it
        (over TCP), streams captured; ``config`` '-' leaves the file out (the tool's own flag is in ARGV)."""
        raw = io.BytesIO()
        out = io.TextIOWrapper(raw, encoding="utf-8", newline="", write_through=True)
        err = io.StringIO()
        flags = [] if config == "-" else ["--command-config", config or self.config]
        status = run([*argv, "--bootstrap-server", self.address, *flags], stdin=io.BytesIO(stdin), stdout=out,
                     stderr=err, progress=False)
        out.flush()
        return Result(status, raw.getvalue().decode("utf-8"), err.getvalue())


@pytest.fixture(scope="module", params=MODES)
def secured(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
            certs: Certificates) -> Iterator[Secured]:
    mode = request.param
    data = tmp_path_factory.mktemp("broker-%s" % mode)
    if mode == "scram":
        create_alice(data / "data", certs)
    tls = start(data / "data", broker_settings(certs, mode))
    try:
        config = data / "client.properties"
        config.write_text(client_file(certs, mode))
        yield Secured(mode, tls, config)
    finally:
        stop(tls)


def ok(result: Result) -> str:
    assert (result.status, result.err) == (0, ""), result
    return result.out


# -- each tool, on each broker ------------------------------------------------------------------


def test_topics(secured: Secured) -> None:
    assert ok(secured.run("topics", "--create", "--topic", "orders", "--partitions", "2",
                          "--replication-factor", "1")) == 'Created topic "orders".\n'
    assert "orders" in ok(secured.run("topics", "--list")).split()
    described = ok(secured.run("topics", "--describe", "--topic", "orders"))
    assert described.startswith("Topic:orders\tPartitionCount:2\tReplicationFactor:1")
    assert ok(secured.run("topics", "--alter", "--topic", "orders", "--partitions", "3")).endswith(
        "Adding partitions succeeded!\n")
    assert "PartitionCount:3" in ok(secured.run("topics", "--describe", "--topic", "orders"))


def test_topics_in_a_process_of_its_own(secured: Secured) -> None:
    done = run_process(secured.address, "topics", "--create", "--topic", "by-process", "--command-config",
                       secured.config)
    assert (done.status, done.out, done.err) == (0, 'Created topic "by-process".\n', "")
    listed = run_process(secured.address, "topics", "--list", "--command-config", secured.config)
    assert listed.status == 0 and "by-process" in listed.out.split(), listed


def test_configs(secured: Secured) -> None:
    ok(secured.run("topics", "--create", "--topic", "configured"))
    assert ok(secured.run("configs", "--alter", "--topic", "configured", "--add-config", "retention.ms=3600000")) \
        == "Completed updating config for topic configured.\n"
    described = ok(secured.run("configs", "--describe", "--entity-type", "topics", "--entity-name", "configured"))
    assert "retention.ms=3600000" in described
    users = ok(secured.run("configs", "--describe", "--entity-type", "users"))
    assert users == ("SCRAM credential configs for user-principal 'alice' are SCRAM-SHA-512=iterations=4096\n"
                     if secured.mode == "scram" else "")


def test_acls(secured: Secured) -> None:
    added = ok(secured.run("acls", "--add", "--allow-principal", "User:bob", "--operation", "Read",
                           "--topic", "shared"))
    assert "User:bob" in added
    listed = ok(secured.run("acls", "--list", "--topic", "shared"))
    assert re.search(r"\(principal=User:bob, host=\*, operation=READ, permissionType=ALLOW\)", listed), listed
    ok(secured.run("acls", "--remove", "--allow-principal", "User:bob", "--operation", "Read", "--topic", "shared",
                   "--force"))
    assert "User:bob" not in ok(secured.run("acls", "--list", "--topic", "shared"))


def test_console_producer_consumer_and_groups(secured: Secured) -> None:
    lines = [b"first", b"second", b"third"]
    ok(secured.run("topics", "--create", "--topic", "console"))
    sent = secured.run("produce", "--topic", "console", "--producer.config", secured.config, "--acks", "all",
                       stdin=b"\n".join(lines) + b"\n", config="-")
    assert (sent.status, sent.err) == (0, ""), sent
    # Kafka 4.2's name for the file, and a setting of the command line beside it.
    read = secured.run("consume", "--topic", "console", "--group", "console-group", "--from-beginning",
                       "--max-messages", "3", "--command-config", secured.config,
                       "--consumer-property", "client.id=console-reader", config="-")
    assert (read.status, read.out.encode().split(b"\n")[:-1]) == (0, lines), read
    assert read.err == "Processed a total of 3 messages\n"
    assert "console-group" in ok(secured.run("groups", "--list")).split()
    described = secured.run("groups", "--describe", "--group", "console-group")
    assert described.err == "\nConsumer group 'console-group' has no active members.\n", described
    row = next(line.split() for line in described.out.splitlines() if line.startswith("console-group"))
    assert row[1:6] == ["console", "0", "3", "3", "0"], described


def test_reassign_partitions_and_leader_election(secured: Secured) -> None:
    ok(secured.run("topics", "--create", "--topic", "elected"))
    assert ok(secured.run("reassign-partitions", "--list")) == "No partition reassignments found.\n"
    # --admin.config, Kafka's name for this tool's file.
    elected = secured.run("leader-election", "--election-type", "PREFERRED", "--topic", "elected", "--partition",
                          "0", "--admin.config", secured.config, config="-")
    assert (elected.status, elected.out) == (0, "Valid replica already elected for partitions elected-0\n"), elected


def test_transactions(secured: Secured) -> None:
    ok(secured.run("topics", "--create", "--topic", "txn-tool"))
    header = "\t".join(transactions.PRODUCERS_HEADERS) + "\t\n"
    assert ok(secured.run("transactions", "describe-producers", "--topic", "txn-tool", "--partition", "0")) == header
    # Before the command, where Kafka's tool takes it.
    before = secured.run("transactions", "--command-config", secured.config, "describe-producers", "--topic",
                         "txn-tool", "--partition", "0", config="-")
    assert (before.status, before.out) == (0, header), before
    listed = "\t".join(transactions.LIST_HEADERS) + "\t\n"
    assert ok(secured.run("transactions", "list")) == listed


def test_perf(secured: Secured) -> None:
    produced = secured.run("perf", "produce", "--topic", "perf", "--num-records", "20", "--record-size", "10",
                           "--producer.config", secured.config, "--producer-props", "acks=all", config="-")
    assert produced.status == 0 and produced.out.startswith("20 records sent"), produced
    consumed = secured.run("perf", "consume", "--topic", "perf", "--messages", "20", "--hide-header",
                           "--consumer.config", secured.config, config="-")
    assert consumed.status == 0 and consumed.out.split(", ")[4] == "20", consumed


def test_a_wrong_file_or_none_is_refused_clearly(secured: Secured, tmp_path: Path) -> None:
    """The broker turns away a tool that does not log in as it asks (a wrong password, no
    certificate, no file at all): the tool fails at once with the refusal, and the broker serves
    the next."""
    wrong = tmp_path / "wrong.properties"
    text = Path(secured.config).read_text()
    if secured.mode == "scram":
        wrong.write_text(text.replace('password="%s"' % PASSWORD, 'password="guess"'))
        expected = "SASL_AUTHENTICATION_FAILED"
    else:
        wrong.write_text("\n".join(line for line in text.splitlines() if not line.startswith("ssl.keystore")))
        expected = "CERTIFICATE_REQUIRED"
    refused = secured.run("topics", "--list", config=str(wrong))
    assert refused.status == 1 and refused.out == "", refused
    assert refused.err.startswith("Error: ") and expected in refused.err, refused.err
    if secured.mode == "scram":
        assert "guess" not in refused.err  # the password given is never repeated
    plain = secured.run("topics", "--list", config="-")
    assert plain.status == 1 and plain.err.startswith("Error: NETWORK_EXCEPTION: "), plain
    ok(secured.run("topics", "--list"))


# -- the other ways of giving the stores ----------------------------------------------------------


def continued(pem: str) -> str:
    """PEM text as a properties value continued over lines, as Kafka's documentation writes it."""
    return " \\\n    ".join(pem.strip().splitlines())


@pytest.fixture(scope="module")
def mtls(tmp_path_factory: pytest.TempPathFactory, certs: Certificates) -> Iterator[Secured]:
    data = tmp_path_factory.mktemp("broker-mtls-pem")
    tls = start(data / "data", broker_settings(certs, "mtls"))
    try:
        config = data / "client.properties"
        config.write_text(client_file(certs, "mtls"))
        yield Secured("mtls", tls, config)
    finally:
        stop(tls)


@pytest.mark.parametrize("stores", ["pem-files", "inline-pem", "no-hostname-check"])
def test_pem_stores(mtls: Secured, certs: Certificates, tmp_path: Path, stores: str) -> None:
    lines = ["security.protocol=SSL", "ssl.truststore.type=PEM", "ssl.keystore.type=PEM"]
    if stores == "pem-files":
        # Kafka's PEM key store file: the encrypted key, then the chain.
        keystore = tmp_path / "client-store.pem"
        keystore.write_text(certs.text("client-key-enc.pem") + certs.text("client.pem"))
        lines += ["ssl.truststore.location=%s" % certs.path("ca.pem"), "ssl.keystore.location=%s" % keystore,
                  "ssl.key.password=%s" % CLIENT_PASSWORD]
    else:
        lines += ["ssl.truststore.certificates=%s" % continued(certs.text("ca.pem")),
                  "ssl.keystore.certificate.chain=%s" % continued(certs.text("client.pem")),
                  "ssl.keystore.key=%s" % continued(certs.text("client-key.pem"))]
    if stores == "no-hostname-check":
        lines.append("ssl.endpoint.identification.algorithm=")
    config = tmp_path / "client.properties"
    config.write_text("\n".join(lines) + "\n")
    assert ok(mtls.run("topics", "--create", "--topic", stores, config=str(config))) == 'Created topic "%s".\n' % (
        stores)


def test_the_endpoint_identification_algorithm() -> None:
    checked = connection_options({"security.protocol": "SSL"}).options["ssl_context"]
    unchecked = connection_options({"security.protocol": "SSL",
                                    "ssl.endpoint.identification.algorithm": ""}).options["ssl_context"]
    assert (checked.check_hostname, unchecked.check_hostname) == (True, False)


# -- files that cannot be used ------------------------------------------------------------------


def _error(result: Result) -> str:
    lines = result.err.splitlines()
    assert result.status == 1 and len(lines) == 1 and lines[0].startswith("Error: "), result
    return lines[0][len("Error: "):]


def bad_files(certs: Certificates, tmp: Path) -> Dict[str, List[str]]:
    """Per case: the file's lines and, last, what its error must say."""
    jks = "ssl.truststore.type JKS is not supported: pylogq reads PKCS12 and PEM key stores"
    return {
        "protocol": ["security.protocol=TLS",
                     "Invalid value 'TLS' for configuration security.protocol: String must be one of: PLAINTEXT, "
                     "SSL, SASL_PLAINTEXT, SASL_SSL"],
        "jks": ["security.protocol=SSL", "ssl.truststore.location=%s" % certs.path("truststore.p12"), jks],
        "missing-store": ["security.protocol=SSL", "ssl.truststore.type=PKCS12",
                          "ssl.truststore.location=%s" % (tmp / "nope.p12"),
                          "Invalid value '%s' for configuration ssl.truststore.location: No such file or directory"
                          % (tmp / "nope.p12")],
        "store-password": ["security.protocol=SSL", "ssl.truststore.type=PKCS12",
                           "ssl.truststore.location=%s" % certs.path("truststore.p12"),
                           "ssl.truststore.password=wrong",
                           "ssl.truststore.password: wrong password for the PKCS12 store ssl.truststore.location"],
        "keystore-password": ["security.protocol=SSL", "ssl.keystore.type=PKCS12",
                              "ssl.keystore.location=%s" % certs.path("client.p12"),
                              "SSL key store is specified, but key store password is not specified "
                              "(ssl.keystore.password)."],
        "hostname-check": ["security.protocol=SSL", "ssl.endpoint.identification.algorithm=http",
                           "Invalid value 'http' for configuration ssl.endpoint.identification.algorithm"],
        "mechanism": ["security.protocol=SASL_SSL", "sasl.jaas.config=%s" % SCRAM_LOGIN,
                      "sasl.mechanism GSSAPI is not supported by pylogq's clients (PLAIN, SCRAM-SHA-256, "
                      "SCRAM-SHA-512): it is Kafka's default, set sasl.mechanism"],
        "no-login": ["security.protocol=SASL_PLAINTEXT", "sasl.mechanism=PLAIN",
                     "sasl.jaas.config is not set: security.protocol SASL_PLAINTEXT logs in with it"],
        "login-module": ["security.protocol=SASL_PLAINTEXT", "sasl.mechanism=PLAIN",
                         'sasl.jaas.config=com.sun.security.auth.module.Krb5LoginModule required password="%s";'
                         % PASSWORD,
                         "sasl.jaas.config: login module com.sun.security.auth.module.Krb5LoginModule is not "
                         "supported"],
        "login-end": ["security.protocol=SASL_PLAINTEXT", "sasl.mechanism=SCRAM-SHA-256",
                      "sasl.jaas.config=%s" % SCRAM_LOGIN.rstrip(";"),
                      "sasl.jaas.config: the entry of login module "
                      "org.apache.kafka.common.security.scram.ScramLoginModule does not end with ';'"],
        "login-password": ["security.protocol=SASL_PLAINTEXT", "sasl.mechanism=PLAIN",
                           "sasl.jaas.config=org.apache.kafka.common.security.plain.PlainLoginModule required "
                           "username=alice;", "sasl.jaas.config: the login module has no password option"],
        "timeout": ["request.timeout.ms=soon",
                    "Invalid value 'soon' for configuration request.timeout.ms: not a number of type INT"],
    }


CASES = ("protocol", "jks", "missing-store", "store-password", "keystore-password", "hostname-check", "mechanism",
         "no-login", "login-module", "login-end", "login-password", "timeout")


@pytest.mark.parametrize("case", CASES)
def test_a_bad_file_is_a_clear_error(cli: Cli, certs: Certificates, tmp_path: Path, case: str) -> None:
    files = bad_files(certs, tmp_path)
    assert set(files) == set(CASES)  # every bad file is a case
    *lines, message = files[case]
    config = tmp_path / "client.properties"
    config.write_text("\n".join(lines) + "\n")
    error = _error(cli("topics", "--list", "--command-config", str(config)))
    assert error.startswith(message), error
    assert PASSWORD not in error


def test_every_tool_reports_a_bad_file_alike(cli: Cli, tmp_path: Path) -> None:
    config = tmp_path / "client.properties"
    config.write_text("security.protocol=SASL_SSL\nsasl.mechanism=OAUTHBEARER\n")
    expected = "sasl.mechanism OAUTHBEARER is not supported by pylogq's clients (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)"
    path = str(config)
    for argv in (["topics", "--list", "--command-config", path],
                 ["configs", "--describe", "--topic", "t", "--command-config", path],
                 ["acls", "--list", "--command-config", path],
                 ["groups", "--list", "--command-config", path],
                 ["reassign-partitions", "--list", "--command-config", path],
                 ["leader-election", "--election-type", "PREFERRED", "--all-topic-partitions", "--admin.config", path],
                 ["transactions", "--command-config", path, "list"],
                 ["produce", "--topic", "t", "--producer.config", path],
                 ["produce", "--topic", "t", "--producer-property", "security.protocol=SASL_SSL",
                  "--producer-property", "sasl.mechanism=OAUTHBEARER"],
                 ["perf", "produce", "--topic", "t", "--num-records", "1", "--record-size", "1",
                  "--command-config", path],
                 ["perf", "consume", "--topic", "t", "--messages", "1", "--consumer.config", path]):
        assert _error(cli(*argv)) == expected, argv
    consumed = cli("consume", "--topic", "t", "--consumer.config", path)
    assert consumed.status == 1 and consumed.err.splitlines()[0] == "Error: " + expected, consumed


def test_a_missing_file(cli: Cli, tmp_path: Path) -> None:
    missing = tmp_path / "missing.properties"
    assert _error(cli("acls", "--list", "--command-config", str(missing))) == \
        "cannot read %s: No such file or directory" % missing
    assert _error(cli("produce", "--topic", "t", "--producer.config", str(missing))) == \
        "cannot read %s: No such file or directory" % missing


def test_settings_the_tools_do_not_use_are_ignored_with_a_warning(cli: Cli, broker: Any, tmp_path: Path) -> None:
    config = tmp_path / "client.properties"
    config.write_text("bootstrap.servers=elsewhere:9092\nretries=5\nssl.truststore.location=/nowhere.p12\n"
                      "sasl.kerberos.service.name=kafka\nclient.id=ops\n")
    broker.create_topic("listed", 1)
    listed = cli("topics", "--list", "--command-config", str(config))
    assert (listed.status, listed.out) == (0, "listed\n")
    assert listed.err.splitlines() == [
        "Warning: %s: sasl.kerberos.service.name, ssl.truststore.location ignored (security.protocol is PLAINTEXT)"
        % config, "Warning: %s: retries ignored (not a connection setting)" % config]
    # An SSL file that names TLS keys OpenSSL has no use for: they are ignored, the rest is used.
    ssl_config = tmp_path / "ssl.properties"
    ssl_config.write_text("security.protocol=SSL\nssl.protocol=TLSv1.3\nssl.keymanager.algorithm=SunX509\n")
    produced = cli("produce", "--topic", "listed", "--producer.config", str(ssl_config), stdin=b"one\n")
    assert produced.status == 0
    assert produced.err == "Warning: %s: ssl.keymanager.algorithm, ssl.protocol ignored (pylogq's clients do not " \
                           "use it)\n" % ssl_config
    # A producer setting of the file that the producer does not know is still refused, naming it.
    typo = tmp_path / "typo.properties"
    typo.write_text("security.protocol=PLAINTEXT\nlinger.mss=5\n")
    assert _error(cli("produce", "--topic", "listed", "--producer.config", str(typo))) == \
        "unknown producer configuration: linger.mss"


def test_the_file_and_the_flag_of_one_tool_are_one_or_the_other(cli: Cli, tmp_path: Path) -> None:
    config = tmp_path / "client.properties"
    config.write_text("security.protocol=PLAINTEXT\n")
    with pytest.raises(SystemExit) as usage:
        cli("produce", "--topic", "t", "--producer.config", str(config), "--command-config", str(config))
    assert usage.value.code == 2


def test_ignored_keys_are_named_with_where_they_came_from(tmp_path: Path) -> None:
    config = tmp_path / "producer.properties"
    config.write_text("ssl.truststore.location=/nowhere\nlinger.ms=5\n")
    err = io.StringIO()
    settings = client_settings(str(config), ["sasl.mechanism=PLAIN", "acks=all"], "--producer-property", err)
    assert settings["linger_ms"] == 5 and settings["acks"] == "all"
    assert err.getvalue().splitlines() == [
        "Warning: --producer-property: sasl.mechanism ignored (security.protocol is PLAINTEXT)",
        "Warning: %s: ssl.truststore.location ignored (security.protocol is PLAINTEXT)" % config]
