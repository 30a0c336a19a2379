"""The JVM reader: pylogq's segment decoder as a Spark DataSource V2 that hands Spark columns.

A Python source's rows reach Spark through a Python worker, a socket and a
copy of every value into Spark's rows. The JVM reader reads the segment files
in Spark's own task threads and gives the query columnar batches whose values
are slices of the bytes read, so Spark copies each value once, when the query
asks for it. It ships as Java sources in this package and is compiled on first
use against the jars of the installed PySpark (Spark's reader interfaces change
between releases), into a cache directory; that needs a JDK (``javac``).

:func:`jar_path` builds or finds the jar; :func:`configure` adds it to a
``SparkSession.builder``; :func:`attach` gives it to a session already
running (``ADD JAR``); :func:`available` says whether a running session has
it. :func:`pylogq.spark.read_topic` uses it, attaching it when it can.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
import threading
from typing import Any, List, Optional

from ..errors import JvmReaderUnavailable, PylogqError

__all__ = ["SOURCE_CLASS", "JvmReaderUnavailable", "attach", "available", "configure", "jar_path", "java_sources"]

#: The DataSource V2 provider class, the name ``spark.read.format`` takes.
SOURCE_CLASS = "pylogq.spark.jvm.SegmentSource"
JAVA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "java")
_JAVA_RELEASE = "17"  # Spark 4 runs on Java 17 or later
_built: Optional[str] = None
# How a session has the reader, kept on the session object: on its classpath since it
# started (every thread finds it), attached while running (the session's jar loader has
# it), or not at all.
_AT_START, _ATTACHED, _ABSENT = "start", "attached", ""
_attach_lock = threading.Lock()


def java_sources() -> List[str]:
    """The Java source files of the reader, sorted."""
    found: List[str] = []
    for root, _, names in os.walk(JAVA_DIR):
        found.extend(os.path.join(root, n) for n in names if n.endswith(".java"))
    return sorted(found)


def _javac() -> str:
    java_home = os.environ.get("JAVA_HOME")
    candidates = [os.path.join(java_home, "bin", "javac")] if java_home else []
    found = shutil.which("javac")
    if found:
        candidates.append(found)
    for path in candidates:
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return path
    raise JvmReaderUnavailable("no Java compiler: the JVM reader needs a JDK (javac), e.g. "
                               "apt-get install default-jdk-headless, or JAVA_HOME pointing at one")


def _spark_jars() -> str:
    try:
        import pyspark
    except ImportError:
        raise JvmReaderUnavailable("pyspark is not installed") from None
    jars = os.path.join(os.path.dirname(os.path.abspath(pyspark.__file__)), "jars")
    if not os.path.isdir(jars):
        raise JvmReaderUnavailable("pyspark has no jars directory at %s" % jars)
    return jars


def _cache_dir() -> str:
    base = os.environ.get("PYLOGQ_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "pylogq")
    return os.path.join(base, "spark")


def jar_path(cache_dir: Optional[str] = None) -> str:
    """The reader's jar, compiled from :func:`java_sources` against PySpark's jars if not built yet.

    The jar's name carries a hash of the sources, the PySpark version and the
    compiler's version, so an upgrade of any builds a new one; building goes
    to a temporary directory and is renamed into place, so concurrent builds
    (several test processes, several Spark drivers) each find a whole jar.
    Raises :class:`JvmReaderUnavailable` without a JDK or PySpark, and
    :class:`~pylogq.errors.PylogqError` with the compiler's output when the
    sources do not compile against this PySpark.
    """
    global _built
    if _built is not None and cache_dir is None and os.path.exists(_built):
        return _built
    javac = _javac()
    jars = _spark_jars()
    sources = java_sources()
    if not sources:
        raise JvmReaderUnavailable("the JVM reader's sources are missing from %s" % JAVA_DIR)
    version = subprocess.run([javac, "-version"], capture_output=True, text=True, timeout=120)
    digest = hashlib.sha256()
    for path in sources:
        digest.update(os.path.relpath(path, JAVA_DIR).encode())
        with open(path, "rb") as f:
            digest.update(f.read())
    digest.update((version.stdout + version.stderr).encode())
    digest.update(sorted(os.listdir(jars)).__repr__().encode())
    directory = cache_dir or _cache_dir()
    os.makedirs(directory, exist_ok=True)
    target = os.path.join(directory, "pylogq-spark-%s.jar" % digest.hexdigest()[:16])
    if not os.path.exists(target):
        _compile(javac, jars, sources, directory, target)
    if cache_dir is None:
        _built = target
    return target


def _compile(javac: str, jars: str, sources: List[str], directory: str, target: str) -> None:
    with tempfile.TemporaryDirectory(dir=directory, prefix=".build-") as work:
        classes = os.path.join(work, "classes")
        os.mkdir(classes)
        done = subprocess.run([javac, "--release", _JAVA_RELEASE, "-nowarn", "-encoding", "UTF-8",
                               "-cp", os.path.join(jars, "*"), "-d", classes] + sources,
                              capture_output=True, text=True, timeout=600)
        if done.returncode != 0:
            raise PylogqError("the JVM reader does not compile against %s:\n%s" % (jars, done.stderr or done.stdout))
        jar = os.path.join(work, "reader.jar")
        _zip_classes(classes, jar)
        os.replace(jar, target)


def _zip_classes(classes: str, jar: str) -> None:
    """A jar of the compiled classes (a zip with a manifest; no ``jar`` tool needed)."""
    import zipfile

    with zipfile.ZipFile(jar, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\r\nCreated-By: pylogq\r\n\r\n")
        for root, _, names in os.walk(classes):
            for name in sorted(names):
                path = os.path.join(root, name)
                z.write(path, os.path.relpath(path, classes))


def configure(builder: Any, cache_dir: Optional[str] = None) -> Any:
    """``builder`` (a ``SparkSession.Builder``) with the reader's jar added to ``spark.jars``.

    The jar must be on the classpath when the session's JVM starts, as with
    Spark's own Kafka source. Raises :class:`JvmReaderUnavailable` when it
    cannot be built here.
    """
    jar = jar_path(cache_dir)
    existing = builder._options.get("spark.jars") if hasattr(builder, "_options") else None
    return builder.config("spark.jars", "%s,%s" % (existing, jar) if existing else jar)


def available(spark: Any) -> bool:
    """Whether ``spark``'s driver can load the reader now, from this thread: its jar was on
    the classpath at start, or :func:`attach` gave it to the session."""
    how = getattr(spark, "_pylogq_jvm_reader", None)
    if how is None:
        how = _AT_START if _loadable(spark) else _ABSENT
        _remember(spark, how)
    if how == _ATTACHED:
        _use_jar_loader(spark)
    return bool(how)


def attach(spark: Any, cache_dir: Optional[str] = None) -> None:
    """Give a running session the reader: ``ADD JAR`` with its jar (built first if need be).

    Spark adds the jar to the executors' class path and to the session's jar
    class loader, but makes that loader the context class loader (where Spark
    looks a data source up) of the driver thread that ran ``ADD JAR`` only;
    :func:`available` makes it the loader of each thread that reads. A session
    that has the reader is left as it is. Raises :class:`JvmReaderUnavailable`
    without a JDK or PySpark, for a Spark Connect session (no driver JVM in
    this process), or when the class still cannot be loaded.
    """
    if available(spark):
        return
    if getattr(spark, "_jsparkSession", None) is None:
        raise JvmReaderUnavailable("a Spark Connect session runs its driver elsewhere: start that server with "
                                   "the reader's jar (pylogq.spark.jvm.jar_path()) in spark.jars")
    jar = jar_path(cache_dir)
    with _attach_lock:
        if getattr(spark, "_pylogq_jvm_reader", None) != _ATTACHED:
            spark.sql("ADD JAR '%s'" % jar.replace("\\", "\\\\").replace("'", "\\'"))
            _remember(spark, _ATTACHED)
    _use_jar_loader(spark)
    if not _loadable(spark):
        _remember(spark, _ABSENT)
        raise JvmReaderUnavailable("the session took %s with ADD JAR but cannot load %s" % (jar, SOURCE_CLASS))


def _loadable(spark: Any) -> bool:
    try:
        jvm = spark._jvm
        loader = jvm.org.apache.spark.util.Utils.getContextOrSparkClassLoader()
        jvm.java.lang.Class.forName(SOURCE_CLASS, False, loader)
        return True
    except Exception:  # py4j reports a missing class as a Py4JJavaError; Spark Connect has no _jvm
        return False


def _use_jar_loader(spark: Any) -> None:
    """Make the session's jar class loader (a child of the driver's) this driver thread's context loader."""
    loader = spark._jsparkSession.sharedState().jarClassLoader()
    spark._jvm.java.lang.Thread.currentThread().setContextClassLoader(loader)


def _remember(spark: Any, how: str) -> None:
    try:
        spark._pylogq_jvm_reader = how
    except AttributeError:
        pass
