"""The error hierarchy mirrors Kafka's protocol error codes, and every exception pylogq defines is in it."""

from __future__ import annotations

import ast
import builtins
import importlib
import inspect
import pkgutil
import re
from pathlib import Path

import pytest
from kafka import errors as kp_errors

import pylogq
from pylogq import _speedups, errors

#: The error hierarchy, read from the sources: the same in both passes, the compiled pass only
#: (tests/conftest.py).
pytestmark = pytest.mark.compiled_pass

PACKAGE = Path(pylogq.__file__).parent


def test_codes_names_and_retriable_flags_match_kafka_python():
    # kafka-python's table is an independent transcription of Kafka's codes.
    # Where Kafka renamed a code, pylogq uses the current name.
    renamed = {6: "NOT_LEADER_OR_FOLLOWER", 10: "MESSAGE_TOO_LARGE"}
    checked = 0
    for name in dir(kp_errors):
        theirs = getattr(kp_errors, name)
        if not (isinstance(theirs, type) and issubclass(theirs, kp_errors.BrokerResponseError)):
            continue
        code = getattr(theirs, "errno", None)
        if not isinstance(code, int) or code in (0, -1):
            continue
        ours = errors.error_for_code(code)
        assert ours.name == renamed.get(code, theirs.message), code
        if code != 2:  # Kafka's CorruptRecordException is retriable; kafka-python marks it not
            assert ours.retriable == bool(theirs.retriable), (code, ours)
        checked += 1
    assert checked > 100


def test_corrupt_record_error():
    exc = errors.CorruptRecordError("batch at offset 5 failed its CRC")
    assert exc.code == 2 and exc.name == "CORRUPT_MESSAGE" and exc.retriable
    assert str(exc) == "[Error 2] CORRUPT_MESSAGE: batch at offset 5 failed its CRC"
    assert isinstance(exc, errors.BrokerError) and isinstance(exc, errors.PylogqError)


def test_default_message_and_lookup():
    exc = errors.UnsupportedVersionError()
    assert exc.code == 35 and "unsupported version" in str(exc)
    assert errors.error_for_code(0) is None
    assert errors.error_for_code(1) is errors.OffsetOutOfRangeError
    assert errors.error_for_code(6) is errors.NotLeaderOrFollowerError
    assert errors.error_for_code(-1) is errors.UnknownServerError
    assert errors.error_for_code(10_000) is errors.UnknownServerError


@pytest.mark.parametrize("code", [3, 5, 6, 7, 13, 14, 15, 16])
def test_retriable_codes(code):
    assert errors.error_for_code(code).retriable


def test_every_code_is_unique():
    seen = {}
    stack = [errors.BrokerError]
    while stack:
        cls = stack.pop()
        stack.extend(cls.__subclasses__())
        if cls in (errors.BrokerError, errors.RetriableError) or "code" not in vars(cls):
            continue  # a refinement (an index's corruption, a lost connection) shares its parent's code
        assert cls.code not in seen, (cls, seen.get(cls.code))
        seen[cls.code] = cls


def test_local_errors_are_not_broker_errors():
    assert issubclass(errors.ConfigError, ValueError)
    assert not issubclass(errors.UnsupportedCodecError, errors.BrokerError)


# ------------------------------------------------------------------ one hierarchy, in one module


def _modules():
    """Every module of the package, compiled kernels included (not ``__main__``, which runs the CLI)."""
    names = ["pylogq"] + [m.name for m in pkgutil.walk_packages(pylogq.__path__, "pylogq.")
                          if m.name.rpartition(".")[2] != "__main__"]
    for name in names:
        try:
            yield importlib.import_module(name)
        except ImportError:
            if not (_speedups.NO_EXTENSIONS and name.startswith("pylogq._core.")):
                raise  # an unbuilt kernel is expected only in a pure-Python run


def _is_warning(cls):
    # Warning categories (spark's DataLossWarning) are passed to warnings.warn, never raised:
    # they stay beside the code that warns.
    return issubclass(cls, Warning)


def test_every_exception_class_is_defined_in_errors_and_is_a_pylogq_error():
    outside, foreign = [], []
    for module in _modules():
        for name, value in vars(module).items():
            if not (inspect.isclass(value) and issubclass(value, BaseException)) or _is_warning(value):
                continue
            if value.__module__ == module.__name__ and module is not errors:
                outside.append("%s.%s" % (module.__name__, name))
            if value.__module__ == errors.__name__ and not issubclass(value, errors.PylogqError):
                foreign.append(name)
    assert not outside, "exception classes defined outside pylogq.errors: %s" % ", ".join(outside)
    assert not foreign


def _exception_names():
    names = {n for n, v in vars(builtins).items() if inspect.isclass(v) and issubclass(v, BaseException)}
    return names | {n for n, v in vars(errors).items() if inspect.isclass(v) and issubclass(v, BaseException)}


def test_no_exception_class_is_defined_in_a_function_or_a_kernel_source_either():
    """What the import walk cannot see: classes in function bodies, and Cython sources."""
    exceptions = _exception_names()
    found = []
    for path in PACKAGE.rglob("*.py"):
        if path == PACKAGE / "errors.py":
            continue
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.ClassDef):
                bases = {ast.unparse(b).rpartition(".")[2] for b in node.bases}
                if bases & exceptions and not bases & {"Warning", "UserWarning", "RuntimeWarning"}:
                    found.append("%s:%d %s" % (path.relative_to(PACKAGE), node.lineno, node.name))
    for path in list(PACKAGE.rglob("*.pyx")) + list(PACKAGE.rglob("*.pxd")):
        for lineno, line in enumerate(path.read_text().splitlines(), 1):
            match = re.match(r"\s*(?:cdef\s+)?class\s+(\w+)\s*\(([^)]*)\)", line)
            if match and {b.strip().rpartition(".")[2] for b in match.group(2).split(",")} & exceptions:
                found.append("%s:%d %s" % (path.relative_to(PACKAGE), lineno, match.group(1)))
    assert not found


def test_errors_all_lists_every_public_class():
    public = {n for n, v in vars(errors).items() if inspect.isclass(v) and not n.startswith("_")
              and issubclass(v, BaseException) and v.__module__ == errors.__name__}
    assert public <= set(errors.__all__)


# The public modules that name an error as part of their own API; every other module imports
# its errors from pylogq.errors and does not export them again.
PUBLIC_ERROR_EXPORTS = {("pylogq.spark", "DataLossError"), ("pylogq.spark.jvm", "JvmReaderUnavailable")}


def test_errors_are_exported_by_pylogq_errors_only() -> None:
    classes = {name for name, value in vars(errors).items() if isinstance(value, type)
               and issubclass(value, BaseException) and value.__module__ == errors.__name__}
    package = Path(errors.__file__).parent
    exported = set()
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        module = ".".join(parts)
        if module == errors.__name__:
            continue
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets):
                try:
                    names = ast.literal_eval(node.value)
                except ValueError:
                    continue  # built, not a literal (protocol/__init__ adds messages.__all__): checked below
                exported |= {(module, name) for name in names if name in classes}
    import pylogq.protocol

    exported |= {("pylogq.protocol", name) for name in pylogq.protocol.__all__ if name in classes}
    assert exported == PUBLIC_ERROR_EXPORTS
    for module, name in PUBLIC_ERROR_EXPORTS:
        assert getattr(importlib.import_module(module), name) is getattr(errors, name)


def test_refinements_keep_their_parents_codes():
    refinements = {
        errors.CorruptIndexError: errors.CorruptRecordError,
        errors.KafkaConnectionError: errors.NetworkExceptionError,
        errors.NoBrokersAvailable: errors.NetworkExceptionError,
        errors.KafkaTimeoutError: errors.RequestTimedOutError,
        errors.BufferExhaustedError: errors.RequestTimedOutError,
        errors.NoOffsetForPartitionError: errors.OffsetOutOfRangeError,
    }
    for cls, parent in refinements.items():
        assert issubclass(cls, parent) and (cls.code, cls.name, cls.retriable) == (parent.code, parent.name,
                                                                                    parent.retriable)
        assert errors.error_for_code(cls.code) is parent


def test_builtin_bases_keep_callers_that_catch_the_builtin():
    # A reader racing a segment's deletion catches ValueError (a closed mmap's error) and retries;
    # a closed index must land in the same handler.
    for cls in (errors.IndexFullError, errors.InvalidIndexEntryError, errors.IndexClosedError,
                errors.InvalidConsumerProtocolError, errors.ConfigError):
        assert issubclass(cls, ValueError) and issubclass(cls, errors.PylogqError)
    # One IllegalStateError for the producer and the consumer, a RuntimeError as Java's is.
    assert issubclass(errors.IllegalStateError, RuntimeError)


def test_local_errors_keep_their_fields():
    exc = errors.CorruptCheckpointError("/d/cp", 3, "bad line")
    assert (exc.path, exc.line, exc.problem) == ("/d/cp", 3, "bad line")
    assert str(exc) == "corrupt checkpoint file /d/cp, line 3: bad line"
    loss = errors.DataLossError("gone", topic="t", partition=1, start=5, end=9)
    assert (loss.topic, loss.partition, loss.start, loss.end) == ("t", 1, 5, 9) and str(loss) == "gone"
    for cls in (errors.CloseConnection, errors.DumpError, errors.CommandError, errors.ProtocolError):
        assert issubclass(cls, errors.PylogqError) and not issubclass(cls, errors.BrokerError)
