"""The PySpark data source and sink of aiorocketmq topics, and example jobs.

``aiorocketmq.pipeline.source.RocketMQDataSource`` is the ``aiorocketmq`` format (docs/pipeline.md);
``aiorocketmq.pipeline.session.spark_session`` builds a session (``local[2]`` by default) with it registered.
"""
