"""The JVM reader's record decoding (``Entries``, ``Codecs``, ``Legacy``) against the
record-format corpus and against pylogq's own decoders.

The corpus (tests/records/corpus) holds the named cases: v2 batches with each codec and
framing variant, timestamp types, headers, offset gaps and control batches; v0/v1
messages and compressed wrappers; bad bytes of every kind; decompression bombs; each with
what reading it gives (records, entries, where a scan stops) or the
:class:`~pylogq.errors.RecordProblem` it fails with. The same files check pylogq's Python
decoders (tests/records/test_corpus.py). Random segments and random mutations of valid
entries, from fixed seeds, are built here and compared with what pylogq's decoder reads of
them: the same records, or the same kind of failure.

One JVM (``tests/spark/java/EntriesProbe.java``) walks every file with ``Entries.frame``
and ``Entries.decode`` and prints what it finds. The probe is compiled against the
reader's jar (:func:`pylogq.spark.jvm.jar_path`); when the package's other sources do not
compile, against the decoding sources alone. Without a JDK the module skips. It runs in
both passes of the suite: the Java code is the same, the random cases are compared with
the Cython kernels in one and their pure-Python twins in the other.
"""

from __future__ import annotations

import json
import os
import subprocess
from typing import Any, Dict, List, NamedTuple, Optional, Tuple

import pytest

from pylogq.errors import PylogqError, RecordProblem
from pylogq.spark import jvm

from ..records.corpus import load
from ..records.corpus.build import CASES, INT64_MAX, INT64_MIN, Case, blob, read_by_pylogq

PACKAGE_DIR = os.path.join(jvm.JAVA_DIR, "pylogq", "spark", "jvm")
#: The decoding core and what it needs: compiled alone when the rest of the package does not compile.
OWN_SOURCES = ("Entries.java", "Codecs.java", "Legacy.java", "RecordSink.java", "CorruptRecordException.java")
PROBE_SOURCE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "java", "EntriesProbe.java")
PROBE_CLASS = "pylogq.spark.jvm.EntriesProbe"
#: The probe's heap: well below what the decompression bombs expand to.
PROBE_HEAP = "-Xmx128m"
#: The names of ``CorruptRecordException.Kind``, which the probe prints with each error.
KINDS = tuple(p.name for p in RecordProblem)


class Checked(NamedTuple):
    """A case for the probe, and what it must read: ``want`` (the manifest's) or, for a
    generated case, what pylogq's decoder reads of ``reference``."""

    case: Case
    want: Optional[Dict[str, Any]]  # {"kind": ...} or {"records", "entries", "stop"}; None: ask pylogq


def _all_cases() -> Dict[str, Checked]:
    out: Dict[str, Checked] = {}
    for name, c in load().items():
        want: Dict[str, Any] = {"kind": c.kind} if c.kind is not None else dict(c.read or {})
        out[name] = Checked(Case(c.data, c.start, c.end, c.max_decompressed, jvm_only=c.jvm_only), want)
    for name, build in CASES.items():
        if name.startswith(("random-", "mutated-")):
            out[name] = Checked(build(), None)
    return out


CHECKED = _all_cases()


# -- the probe -------------------------------------------------------------------------------


def _compile_probe(classes: str) -> Tuple[str, List[str]]:
    """The probe compiled into ``classes``; -> (the java command, the classpath that runs the probe)."""
    try:
        javac = jvm._javac()
        jars = os.path.join(jvm._spark_jars(), "*")
    except jvm.JvmReaderUnavailable as exc:
        pytest.skip(str(exc))
    try:
        sources = [PROBE_SOURCE]
        classpath = [jvm.jar_path(), jars]
    except jvm.JvmReaderUnavailable as exc:
        pytest.skip(str(exc))
    except PylogqError:  # the package's other sources do not compile now: the decoding core alone
        sources = [os.path.join(PACKAGE_DIR, name) for name in OWN_SOURCES if
                   os.path.exists(os.path.join(PACKAGE_DIR, name))] + [PROBE_SOURCE]
        classpath = [jars]
    done = subprocess.run([javac, "--release", "17", "-nowarn", "-encoding", "UTF-8", "-cp", os.pathsep.join(classpath),
                           "-d", classes] + sources, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, "the probe does not compile:\n%s" % (done.stderr or done.stdout)
    java = os.path.join(os.path.dirname(javac), "java")
    return (java if os.path.exists(java) else "java"), [classes] + classpath


@pytest.fixture(scope="module")
def probe(tmp_path_factory: pytest.TempPathFactory) -> Dict[str, List[dict]]:
    """What the probe printed, by case: one JVM for every case."""
    work = tmp_path_factory.mktemp("jvm-entries")
    classes = work / "classes"
    classes.mkdir()
    java, classpath = _compile_probe(str(classes))
    manifest = []
    for i, (name, checked) in enumerate(CHECKED.items()):
        c = checked.case
        path = work / ("case-%04d.log" % i)
        path.write_bytes(c.data)
        start = INT64_MIN if c.start is None else c.start
        end = INT64_MAX if c.end is None else c.end
        manifest.append("\t".join([name, str(path), str(start), str(end), str(c.max_decompressed)]))
    (work / "manifest").write_text("\n".join(manifest) + "\n")
    done = subprocess.run([java, PROBE_HEAP, "-cp", os.pathsep.join(classpath), PROBE_CLASS,
                           str(work / "manifest")], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, "the probe failed:\n%s" % done.stderr
    out: Dict[str, List[dict]] = {name: [] for name in CHECKED}
    for line in done.stdout.splitlines():
        item = json.loads(line)
        out[item.pop("case")].append(item)
    return out


# -- what the JVM reads ------------------------------------------------------------------------


def jvm_view(lines: List[dict]) -> Dict[str, Any]:
    """The probe's lines for a case, in the manifest's form."""
    records: List[List[Any]] = []
    entries: List[List[Any]] = []
    stop = -1
    for item in lines:
        assert "crash" not in item, "the JVM failed on its own: %s" % item["crash"]
        if "error" in item:
            assert item.get("kind") in KINDS, "the JVM's error has no kind it may have: %s" % item
            return {"kind": item["kind"], "message": item["error"]}
        if "stop" in item:
            stop = item["stop"]
        elif "entry" in item:
            entries.append([item[k] for k in ("entry", "size", "magic", "base", "last", "count", "control")
                            if k in item])
        else:
            records.append([item["offset"], item["timestamp"], item["timestampType"], blob(_unhex(item["key"])),
                            blob(_unhex(item["value"])), [[blob(_unhex(k)), blob(_unhex(v))] for k, v in item["headers"]]])
    return {"records": records, "entries": entries, "stop": stop}


def _unhex(text: Optional[str]) -> Optional[bytes]:
    return None if text is None else bytes.fromhex(text)


# -- the tests -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(CHECKED))
def test_case(name: str, probe: Dict[str, List[dict]]) -> None:
    checked = CHECKED[name]
    got = jvm_view(probe[name])
    want = checked.want
    if want is None:  # a generated case: what pylogq reads of it
        c = checked.case
        want = read_by_pylogq(c)
        if "kind" in want:
            assert want["kind"] is not None, "pylogq's error has no kind: %s" % want["message"]
    if "kind" in want:
        assert got.get("kind") == want["kind"], "expected %s, the JVM %s" % (
            want["kind"], "fails with %s: %s" % (got["kind"], got["message"]) if "kind" in got
            else "reads %d records" % len(got["records"]))
        return
    assert "kind" not in got, "the JVM fails (%s: %s); %d records expected" % (
        got["kind"], got["message"], len(want["records"]))
    assert got["entries"] == want["entries"]
    assert got["stop"] == want["stop"]
    assert len(got["records"]) == len(want["records"])
    for mine, theirs in zip(got["records"], want["records"]):
        assert mine == theirs


def test_mutations_reach_the_record_parser() -> None:
    """The random damage is not vacuous: many mutated entries fail in the record parser, and
    the failures are of several kinds."""
    kinds = [read_by_pylogq(c.case).get("kind") for name, c in CHECKED.items() if name.startswith("mutated")]
    assert kinds.count(RecordProblem.BAD_RECORD.name) >= 30, kinds
    assert len({k for k in kinds if k is not None}) >= 3, kinds
