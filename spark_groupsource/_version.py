"""The package's version, in one place: pyproject.toml reads it for the wheel's metadata
(``[tool.setuptools.dynamic]``) and ``spark_groupsource.__version__`` is it."""

__version__ = "0.1.0"
