"""Only the native fetch path's C extension; everything else is in pyproject.toml.

``optional=True``: where no C compiler is at hand, the package installs without it and the
executors read with confluent-kafka's Consumer (spark_groupsource/executor/native.py says
why the native path is unavailable). `make setup` checks that it was built.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "spark_groupsource.executor._rdkafka_arrow",
            sources=["spark_groupsource/executor/_rdkafka_arrow.c"],
            extra_compile_args=["-O2", "-std=c11", "-Wall", "-Wno-unused-parameter"],
            libraries=["dl"],
            optional=True,
        )
    ]
)
