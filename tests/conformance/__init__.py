"""The differential conformance suite's harness: Spark's own Kafka source (``format("kafka")``)
and groupkafka run side by side on one broker (docs/conformance.md). The tests are
``tests/integration/test_conformance_*.py``."""
