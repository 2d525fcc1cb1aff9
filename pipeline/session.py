"""A Spark session for the pipeline: ``local[2]`` unless told otherwise, the source registered.

``spark_session(master=None)`` uses, in order: the ``master`` argument, a master already set
(``spark-submit --master``, ``spark.master`` in the configuration), then ``local[2]`` (which
binds to 127.0.0.1 unless ``SPARK_LOCAL_IP`` says otherwise). Nothing else assumes local
mode: on a cluster the executors need this package, ``protocol`` and grpcio importable;
``ship_code`` zips ``pipeline`` and ``protocol`` and adds them to the session (``addPyFile``)
when the master is not local.
"""

from __future__ import annotations

import os
import sys
import tempfile
import zipfile
from pathlib import Path
from typing import Any

__all__ = ["DEFAULT_MASTER", "register", "ship_code", "spark_session"]

DEFAULT_MASTER = "local[2]"


def _is_local(master: str) -> bool:
    """One JVM, executors inside it (``local``, ``local[N]``, ``local[*]``, ``local[N,F]``)."""
    return master == "local" or master.startswith("local[")


def register(spark: Any) -> None:
    """Register the ``aiorocketmq`` format with ``spark``."""
    from aiorocketmq.pipeline.source import RocketMQDataSource

    spark.dataSource.register(RocketMQDataSource)


def ship_code(spark: Any) -> Path:
    """Zip ``pipeline`` and ``protocol`` and add the zip to the session's Python path."""
    root = Path(__file__).resolve().parent.parent
    fd, name = tempfile.mkstemp(prefix="aiorocketmq-pipeline-", suffix=".zip")
    os.close(fd)
    with zipfile.ZipFile(name, "w", zipfile.ZIP_DEFLATED) as zf:
        for package in ("pipeline", "protocol"):
            for path in sorted((root / package).rglob("*")):
                if (
                    path.is_file()
                    and "__pycache__" not in path.parts
                    and path.suffix in (".py", ".pyi", ".typed")
                ):
                    zf.write(path, path.relative_to(root).as_posix())
    spark.sparkContext.addPyFile(name)
    return Path(name)


def spark_session(
    app_name: str = "aiorocketmq-pipeline",
    *,
    master: str | None = None,
    config: dict[str, str] | None = None,
) -> Any:
    """A (new or the running) Spark session with the ``aiorocketmq`` format registered."""
    from pyspark import SparkConf
    from pyspark.sql import SparkSession

    # Python workers run this interpreter unless the user chose another one.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    builder = SparkSession.builder.appName(app_name)
    if master is None and not SparkConf().contains("spark.master"):
        master = DEFAULT_MASTER
    if master is not None and _is_local(master):
        # Local mode talks to itself only: bind to loopback, not the host's external address.
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    if master is not None:
        builder = builder.master(master)
    for key, value in (config or {}).items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    register(spark)
    if not _is_local(spark.sparkContext.master):
        ship_code(spark)
    return spark
