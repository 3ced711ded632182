"""Auto-registration shim: Spark registers every top-level ``pyspark_*`` module's ``DefaultSource``.

After ``pip install pylog``, ``spark.readStream.format("pylog")`` works with no
registration code: Spark's data source lookup imports this module and
registers ``DefaultSource`` under its ``name()``, "pylog".
"""
from connector.datasource import PylogDataSource as DefaultSource

__all__ = ["DefaultSource"]
