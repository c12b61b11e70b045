"""Only the C extensions; everything else is in pyproject.toml.

``optional=True``: where no C compiler is at hand, the package installs without them: the
executors read with confluent-kafka's Consumer (spark_groupsource/executor/native.py says
why the native path is unavailable) and decode Avro with fastavro alone
(spark_groupsource/decode/avro_native.py). `make setup` checks that both were built.
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
        ),
        Extension(
            "spark_groupsource.decode._avro_arrow",
            sources=["spark_groupsource/decode/_avro_arrow.c"],
            extra_compile_args=["-O2", "-std=c11", "-Wall", "-Wno-unused-parameter"],
            optional=True,
        ),
    ]
)
