"""``pylogq zookeeper-server-start [zookeeper.properties]``: ZooKeeper in the foreground.

What Kafka's ``bin/zookeeper-server-start.sh config/zookeeper.properties`` does,
with the ZooKeeper of the system (Debian's ``zookeeper`` package, 3.8): the
properties file is ZooKeeper's own ``zoo.cfg`` format, as Kafka's is. With no
file, the values of the ``zookeeper.properties`` Kafka ships (``dataDir=/tmp/zookeeper``,
``clientPort=2181``, ``maxClientCnxns=0``, ``admin.enableServer=false``). Unless the
file says otherwise, ZooKeeper binds the loopback interface
(``clientPortAddress=127.0.0.1``, and ``admin.serverAddress`` the same), as every
pylogq server does; set ``clientPortAddress=0.0.0.0`` to serve other hosts.

ZooKeeper logs to the console, as Kafka's script has it. ``KAFKA_HEAP_OPTS``
(default ``-Xmx512M -Xms512M``) and ``KAFKA_OPTS`` pass JVM options, as there.
SIGTERM and Ctrl-C are passed on to ZooKeeper, which stops; the command exits
with ZooKeeper's status (143 after SIGTERM, 130 after Ctrl-C, as the JVM reports them).
"""

from __future__ import annotations

import argparse
import os
import shlex
import shutil
import signal
import subprocess
import tempfile
import threading
from typing import Any, Dict, List, NamedTuple, Optional, Sequence, TextIO, Tuple

from ..errors import CommandError
from ._errors import report_error

__all__ = [
    "SUMMARY", "DEFAULT_PROPERTIES", "MAIN_CLASS", "INSTALL_HINT", "ZooKeeperInstall", "find_zookeeper",
    "read_properties", "effective_config", "log4j_properties", "server_command", "add_arguments", "run",
]

SUMMARY = "run ZooKeeper (the system's) in the foreground, as Kafka's zookeeper-server-start.sh does"

#: Kafka's shipped config/zookeeper.properties, bound to the loopback interface.
DEFAULT_PROPERTIES: Tuple[Tuple[str, str], ...] = (
    ("dataDir", "/tmp/zookeeper"),
    ("clientPort", "2181"),
    ("maxClientCnxns", "0"),
    ("admin.enableServer", "false"),
)
LOOPBACK = "127.0.0.1"

#: Where Debian's zookeeper package (libzookeeper-java) puts the server; its manifest names
#: the jars it needs. The log4j binding and log4j are among the package's dependencies.
ZOOKEEPER_JAR = "/usr/share/java/zookeeper.jar"
LOGGING_JARS = ("/usr/share/java/slf4j-log4j12.jar", "/usr/share/java/log4j-1.2.jar")
MAIN_CLASS = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
INSTALL_HINT = "apt-get install zookeeper"
#: Kafka's zookeeper-server-start.sh default.
DEFAULT_HEAP_OPTS = "-Xmx512M -Xms512M"


class ZooKeeperInstall(NamedTuple):
    """A Java runtime and the classpath of a ZooKeeper server."""

    java: str
    classpath: Tuple[str, ...]


def find_zookeeper(environ: Optional[Dict[str, str]] = None) -> ZooKeeperInstall:
    """Java (``$JAVA_HOME/bin/java``, else ``java`` on the PATH) and Debian's ZooKeeper jars.

    Raises CommandError saying what is missing and how to install it.
    """
    env = os.environ if environ is None else environ
    java: Optional[str] = None
    java_home = env.get("JAVA_HOME")
    if java_home and os.access(os.path.join(java_home, "bin", "java"), os.X_OK):
        java = os.path.join(java_home, "bin", "java")
    else:
        java = shutil.which("java", path=env.get("PATH", os.defpath))
    missing = []
    if java is None:
        missing.append("no Java runtime (java is not on the PATH and JAVA_HOME names none)")
    if not os.path.isfile(ZOOKEEPER_JAR):
        missing.append("ZooKeeper is not installed (no %s)" % ZOOKEEPER_JAR)
    if missing or java is None:
        raise CommandError("cannot start ZooKeeper: %s. Install Debian's ZooKeeper (which brings Java): %s"
                           % ("; ".join(missing), INSTALL_HINT))
    return ZooKeeperInstall(java, (ZOOKEEPER_JAR,) + tuple(jar for jar in LOGGING_JARS if os.path.isfile(jar)))


def read_properties(text: str) -> Dict[str, str]:
    """The keys of a properties file (``key=value`` or ``key: value`` lines, ``#`` and ``!`` comments)."""
    props: Dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        cut = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        key, value = (line[:cut], line[cut + 1:]) if cut >= 0 else (line, "")
        props[key.strip()] = value.strip()
    return props


def effective_config(text: Optional[str]) -> str:
    """The zoo.cfg ZooKeeper runs with: ``text`` (Kafka's defaults when None), bound to the
    loopback interface unless it names an address."""
    if text is None:
        text = "".join("%s=%s\n" % item for item in DEFAULT_PROPERTIES)
    props = read_properties(text)
    added = []
    # Only a static client port takes an address; a dynamic config names it per server.
    if "clientPort" in props and "clientPortAddress" not in props:
        added.append("clientPortAddress=%s" % LOOPBACK)
    if "admin.serverAddress" not in props:
        added.append("admin.serverAddress=%s" % LOOPBACK)
    if not added:
        return text
    return text.rstrip("\n") + "\n# pylogq: the loopback interface unless the file names another\n" + \
        "\n".join(added) + "\n"


def log4j_properties(log_file: Optional[str] = None) -> str:
    """A log4j 1.2 configuration: INFO to the console (Kafka's layout), or to ``log_file``."""
    if log_file is None:
        appender = "log4j.appender.out=org.apache.log4j.ConsoleAppender\n"
    else:
        appender = ("log4j.appender.out=org.apache.log4j.FileAppender\n"
                    "log4j.appender.out.File=%s\n" % log_file.replace("\\", "\\\\"))
    return ("log4j.rootLogger=INFO, out\n" + appender +
            "log4j.appender.out.layout=org.apache.log4j.PatternLayout\n"
            "log4j.appender.out.layout.ConversionPattern=[%d] %p %m (%c)%n\n")


def server_command(install: ZooKeeperInstall, config_path: str, log4j_path: str,
                   jvm_options: Sequence[str] = ()) -> List[str]:
    """The command line of a ZooKeeper server (what zkServer.sh runs, without its JMX agent)."""
    return [install.java, *jvm_options, "-Dlog4j.configuration=file:" + log4j_path,
            "-cp", os.pathsep.join(install.classpath), MAIN_CLASS, config_path]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("config", nargs="?", metavar="zookeeper.properties",
                        help="ZooKeeper's configuration (zoo.cfg format); default: Kafka's "
                             "zookeeper.properties (dataDir=/tmp/zookeeper, clientPort=2181), on 127.0.0.1")


def _exit_status(returncode: int) -> int:
    return 128 - returncode if returncode < 0 else returncode  # killed by a signal: as a shell reports it


def run(args: argparse.Namespace, out: TextIO, err: TextIO) -> int:
    """Run ZooKeeper until it exits; -> its exit status (1 when it cannot start).

    ZooKeeper writes to the process's own stdout and stderr (it is a child process).
    """
    text: Optional[str] = None
    if args.config is not None:
        try:
            with open(args.config, encoding="utf-8") as f:
                text = f.read()
        except OSError as exc:
            return report_error(err, "cannot read %s: %s" % (args.config, exc.strerror))
    try:
        install = find_zookeeper()
    except CommandError as exc:
        return report_error(err, exc)
    jvm_options = shlex.split(os.environ.get("KAFKA_HEAP_OPTS", DEFAULT_HEAP_OPTS))
    jvm_options += shlex.split(os.environ.get("KAFKA_OPTS", ""))
    with tempfile.TemporaryDirectory(prefix="pylogq-zookeeper-") as scratch:
        config_path = os.path.join(scratch, "zookeeper.properties")
        log4j_path = os.path.join(scratch, "log4j.properties")
        with open(config_path, "w", encoding="utf-8") as f:
            f.write(effective_config(text))
        with open(log4j_path, "w", encoding="utf-8") as f:
            f.write(log4j_properties())
        out.flush()
        err.flush()
        return _run_forwarding_signals(server_command(install, config_path, log4j_path, jvm_options))


def _run_forwarding_signals(command: List[str]) -> int:
    """Run ``command``, passing SIGTERM, SIGINT and SIGHUP on to it; -> its exit status."""
    # The handlers run on the main thread, between its bytecodes: no lock, and a signal
    # that comes before the child exists is kept for it.
    child: List["subprocess.Popen[bytes]"] = []
    pending: List[int] = []

    def forward(signum: int, frame: Any) -> None:
        if child:
            child[0].send_signal(signum)
        else:
            pending.append(signum)

    previous: Dict[int, Any] = {}
    if threading.current_thread() is threading.main_thread():
        for forwarded in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            if signal.getsignal(forwarded) is not signal.SIG_IGN:  # a background job keeps ignoring Ctrl-C
                previous[forwarded] = signal.signal(forwarded, forward)
    try:
        proc = subprocess.Popen(command, stdin=subprocess.DEVNULL)
        child.append(proc)
        for early in pending:
            proc.send_signal(early)
        return _exit_status(proc.wait())
    finally:
        for restored, handler in previous.items():
            signal.signal(restored, handler)
