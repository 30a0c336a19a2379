"""Suite-wide checks: compiled kernels really loaded, and no silent skips in CI.

``PYLOGQ_NO_EXTENSIONS=1`` runs the suite on the pure-Python twins. Otherwise
every kernel's choosers (``pylogq._speedups.KERNELS``) are imported and must
have got the compiled module: a build that silently fell back to pure Python
fails the run before any test. ``PYLOGQ_REQUIRE_ALL=1`` (set by
``.ci/run``) turns every skip into a failure, at collection and at run time,
so a missing external part is never mistaken for a pass: the hooks are
tests/_require_all.py's, which benchmarks/conftest.py shares.
``PYLOGQ_LIBRDKAFKA_SUITE=1`` selects the tests marked ``librdkafka_suite`` (librdkafka's own
test programs run against a broker cluster: minutes, and a librdkafka build the machine must
have), which every other run deselects. ``PYLOGQ_MIRROR_SOAK=1`` selects the tests marked
``mirror_soak`` (the mirror's acceptance at the issue's full size: 20,000 records a second for
60 s; tests/mirror/test_acceptance.py), which every other run deselects: the suite runs the
same test at a smaller size.
"""

from __future__ import annotations

import importlib
import os
import uuid
from typing import TYPE_CHECKING, Iterator, List

import pytest

from pylogq import _speedups

from ._require_all import header as _require_all_header
from ._require_all import pytest_make_collect_report, pytest_runtest_makereport  # noqa: F401 - hooks
from ._zookeeper import ZooKeeperServer

if TYPE_CHECKING:
    from ._certs import Certificates


def pytest_sessionstart(session: pytest.Session) -> None:
    if _speedups.NO_EXTENSIONS:
        return
    for choosers in _speedups.KERNELS.values():
        for module in choosers:
            importlib.import_module(module)  # the package's own choice, as a user gets it
    missing = ["%s (%s)" % (name, _speedups.failures.get(name))
               for name in _speedups.KERNELS if not _speedups.loaded.get(name)]
    if missing:
        raise pytest.UsageError(
            "compiled kernels expected but not loaded: %s. Build them (pip install -e .) "
            "or run with PYLOGQ_NO_EXTENSIONS=1 for the pure-Python twins." % ", ".join(missing)
        )


#: Whether the tests marked ``librdkafka_suite`` run (they are deselected otherwise).
LIBRDKAFKA_SUITE = os.environ.get("PYLOGQ_LIBRDKAFKA_SUITE", "") not in ("", "0")
#: Whether the tests marked ``mirror_soak`` run (they are deselected otherwise).
MIRROR_SOAK = os.environ.get("PYLOGQ_MIRROR_SOAK", "") not in ("", "0")


def pytest_report_header(config: pytest.Config) -> str:
    mode = "pure Python (PYLOGQ_NO_EXTENSIONS=1)" if _speedups.NO_EXTENSIONS else "compiled kernels"
    suite = "librdkafka's suite selected" if LIBRDKAFKA_SUITE else "librdkafka's suite deselected"
    soak = "mirror soak selected" if MIRROR_SOAK else "mirror soak deselected"
    return "pylogq: %s; %s; %s (PYLOGQ_LIBRDKAFKA_SUITE); %s (PYLOGQ_MIRROR_SOAK)" % (
        mode, _require_all_header(), suite, soak)


def pytest_collection_modifyitems(config: pytest.Config, items: List[pytest.Item]) -> None:
    """Two kinds of test are deselected here, not skipped (a skip would fail a run under
    ``PYLOGQ_REQUIRE_ALL=1``), and the summary says how many.

    The pure pass (``PYLOGQ_NO_EXTENSIONS=1``) is for the code that has pure-Python twins.
    Tests marked ``compiled_pass`` (replication across broker processes and ZooKeeper, and the
    mirror's tasks and workers: the controller, fetchers, mirror and clients are the same
    Python in both passes, and the twins they pass through are tested in both by the rest of
    the suite; and tests of code no record,
    CRC, codec or index passes through: the protocol layer, the metadata store, the
    assignors, configs, ACL administration and the mirror's configuration, policies, internal
    records and offset translation) run in the compiled pass only.

    Tests marked ``librdkafka_suite`` run only when ``PYLOGQ_LIBRDKAFKA_SUITE=1`` asks for them:
    they take minutes and need a librdkafka build (tests/cluster/test_librdkafka_suite.py).
    Tests marked ``mirror_soak`` run only when ``PYLOGQ_MIRROR_SOAK=1`` asks for them: minutes
    of load at the mirror's full acceptance size, and the acceptance harness checked end to end
    with a plain consume-and-produce loop standing in for the mirror."""
    def dropped(item: pytest.Item) -> bool:
        if _speedups.NO_EXTENSIONS and item.get_closest_marker("compiled_pass") is not None:
            return True
        if not MIRROR_SOAK and item.get_closest_marker("mirror_soak") is not None:
            return True
        return not LIBRDKAFKA_SUITE and item.get_closest_marker("librdkafka_suite") is not None

    kept = [item for item in items if not dropped(item)]
    if len(kept) != len(items):
        config.hook.pytest_deselected(items=[item for item in items if dropped(item)])
        items[:] = kept


#: The implementations a twin-parametrized test runs against.
IMPLEMENTATIONS = ["pure"] if _speedups.NO_EXTENSIONS else ["compiled", "pure"]


@pytest.fixture(scope="session")
def zookeeper(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ZooKeeperServer]:
    """One real ZooKeeper (Debian's, standalone) for the whole test session; skips without Java or ZooKeeper."""
    server = ZooKeeperServer(tmp_path_factory.mktemp("zookeeper"))
    server.start()
    yield server
    server.stop()


@pytest.fixture
def zookeeper_connect(zookeeper: ZooKeeperServer) -> Iterator[str]:
    """A ``zookeeper.connect`` string with a chroot of the test's own, deleted after it."""
    if not zookeeper.running:  # a test that stopped the shared server
        zookeeper.start()
    connect = zookeeper.fresh_chroot("pylogq-test-%s" % uuid.uuid4().hex[:12])
    yield connect
    zookeeper.delete_chroot(connect)


@pytest.fixture(scope="session")
def certs(tmp_path_factory: pytest.TempPathFactory) -> "Certificates":
    """The TLS tests' CA, broker and client certificates (tests/_certs.py), made once per session."""
    from ._certs import make_certificates  # with a TLS test only: it loads cryptography

    return make_certificates(tmp_path_factory.mktemp("certs"))
