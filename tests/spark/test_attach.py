"""A session started without the JVM reader gets it while running (pylogq.spark.jvm.attach).

In a process of its own: a SparkContext is one per process, and the suite's session
was built with the reader on its classpath. The child starts a plain local session,
reads a topic with ``engine="auto"`` from its main thread and from another thread
(Spark makes the added jar visible to the thread that ran ``ADD JAR`` only), and
reports what plan each read took and the rows it counted.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any, Dict

import pytest

from pylogq import Broker, records

from .conftest import _java_problem

pytestmark = pytest.mark.compiled_pass

CHILD = textwrap.dedent("""
    import json, sys, threading
    from pyspark.sql import SparkSession
    from pylogq.spark import jvm, read_topic

    log_dir, scratch = sys.argv[1], sys.argv[2]
    spark = (SparkSession.builder.master("local[2]").appName("pylogq-attach")
             .config("spark.driver.bindAddress", "127.0.0.1").config("spark.driver.host", "127.0.0.1")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.local.dir", scratch).getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    out = {"before": jvm.available(spark)}

    def read(name):
        df = read_topic(spark, log_dir, "t")
        plan = df._jdf.queryExecution().executedPlan().toString()
        out[name] = {"jvm": "BatchScan pylogq segments" in plan, "python": "MapInArrow" in plan, "rows": df.count(),
                     "values": sorted(r.value for r in df.select("value").collect())[:3]}

    read("main")
    other = threading.Thread(target=read, args=("other",))
    other.start()
    other.join()
    spark.stop()
    print(json.dumps(out, default=lambda v: v.decode()))
""")


def test_a_plain_session_reads_with_the_jvm_reader(tmp_path: Path) -> None:
    pytest.importorskip("pyspark", reason="pyspark is not installed (pip install 'pyspark>=4.0' pyarrow 'pandas<3')")
    pytest.importorskip("pyarrow", reason="pyarrow is not installed")
    problem = _java_problem()
    if problem:
        pytest.skip(problem)
    from pylogq.spark import jvm

    try:
        jvm.jar_path()  # the JDK the reader is built with
    except jvm.JvmReaderUnavailable as exc:
        pytest.skip(str(exc))
    log_dir = tmp_path / "logs"
    with Broker(str(log_dir)) as broker:
        broker.create_topic("t", 2)
        for partition in range(2):
            broker.produce("t", partition, records.build_batch([b"p%d-%04d" % (partition, i) for i in range(500)]))
    env: Dict[str, Any] = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable,
                               SPARK_LOCAL_IP="127.0.0.1")
    done = subprocess.run([sys.executable, "-c", CHILD, str(log_dir), str(tmp_path / "local")], env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["before"] is False
    expected = {"jvm": True, "python": False, "rows": 1000, "values": ["p0-0000", "p0-0001", "p0-0002"]}
    assert out["main"] == expected and out["other"] == expected
