# Every target runs inside .venv, which `make setup` creates from constraints.txt.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PYTEST_ARGS ?=
# `make test` runs two pytest-xdist workers (tests/conftest.py keeps every in-process Spark test on
# one of them); TEST_WORKERS=0 runs everything in this process.
TEST_WORKERS ?= 2
XDIST := $(if $(filter 0,$(TEST_WORKERS)),-p no:xdist,-n $(TEST_WORKERS) --dist loadgroup)

.PHONY: setup test test-extended test-unit test-integration lint bench bench-many demo chaos chaos-consumer chaos-kafka chaos-net clean

setup:
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade "pip>=24"
	$(PY) -m pip install --quiet -c constraints.txt -e ".[test,demo]"
	# the native fetch path (setup.py builds it; optional for pip, required here)
	$(PY) -c "from spark_groupsource.executor import native; r = native.unavailable_reason(); assert r is None, r"
	$(PY) -c "from spark_groupsource.decode import avro_native; r = avro_native.unavailable_reason(); assert r is None, r"
	# bytecode in pyspark.zip: Spark's Python workers start in a third of the CPU (see the script)
	$(PY) conf/precompile_pyspark.py
	# kafka is optional: without ../shared/kafka (or GROUPKAFKA_KAFKA_HOME) its tests skip
	$(PY) -m spark_groupsource.devbroker --check --optional kafka
	# a real Prometheus (and promtool) for the metrics tests: Debian's package, installed when
	# absent and this runs as root with apt-get; else those tests skip saying so (docs/metrics.md)
	@if command -v prometheus >/dev/null && command -v promtool >/dev/null; then echo "prometheus: present"; \
	elif [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends prometheus >/dev/null \
	  || { apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends prometheus >/dev/null; } \
	  || echo "prometheus: could not be installed; the metrics tests that scrape skip"; \
	else echo "prometheus: absent (install Debian's prometheus package as root); the metrics tests that scrape skip"; fi

# CI's set: Apache Kafka 4.3.1, the compat set also on 3.9.1; 4.0.1's compat set is in
# test-compat and the tests marked `extended` in test-extended (docs/development.md: CI's 45 minutes)
test:
	GROUPKAFKA_COMPAT_KAFKA_HOME=$${GROUPKAFKA_COMPAT_KAFKA_HOME:-none} $(PY) -m pytest $(XDIST) $(PYTEST_ARGS)

# The tests marked `extended` (tests/conftest.py): heavy multi-node and matrix cases whose
# guarantee CI keeps through a lighter case, left out of `make test` for CI's 45-minute bound
# (docs/development.md lists them and why). Run before resolving what they cover.
test-extended:
	GROUPKAFKA_TEST_SET=extended $(PY) -m pytest $(XDIST) $(PYTEST_ARGS)

test-unit:
	$(PY) -m pytest -m "not integration" $(PYTEST_ARGS)

test-integration:
	$(PY) -m pytest $(XDIST) -m integration $(PYTEST_ARGS)

# ruff, then the package's import rules (layers, no dev broker in the product, no cycles:
# [tool.importlinter] in pyproject.toml, docs/architecture.md)
lint:
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports
	# every repository path named in a doc or a comment exists (conf/check_paths.py)
	$(PY) conf/check_paths.py

# The last line's N: 1 KB and 10 KB records enough that even the small read's ranges are long
# (over 128 MiB each), so both reads get the deeper prefetch of spark_groupsource/executor/prefetch.py
bench:
	$(PY) bench/assignors.py
	$(PY) bench/leader_round.py
	$(PY) bench/throughput.py
	$(PY) bench/small_batches.py
	$(PY) bench/steady_state.py
	$(PY) bench/steady_state.py --sizes 100 --codecs none --n 1000000 --partitions 64 --max-offsets-per-trigger 256000 --sustained-s 0
	$(PY) bench/steady_state.py --sizes 100 --codecs none,lz4,zstd --n 2000000 --max-offsets-per-trigger 0 --sustained-s 0 --readers spark,groupkafka,groupkafka-packed,floor,direct
	$(PY) bench/steady_state.py --sizes 1000,10000 --codecs none,lz4,zstd --n 13000000 --max-offsets-per-trigger 0 --sustained-s 0 --readers spark,groupkafka,groupkafka-packed,floor,direct
	$(PY) bench/registry_decode.py

# One query on 10,000 partitions of one topic at 300 records/s (issue 54): planning per trigger,
# the group commit's size, the checkpoint's offset files and their growth over 20 triggers
# (docs/benchmarks.md). Minutes, most of them Kafka creating the partitions. BENCH_ARGS: see
# `python bench/many_partitions.py --help` (--partitions, --topics, --rate, --triggers).
BENCH_ARGS ?=
bench-many:
	$(PY) bench/many_partitions.py $(BENCH_ARGS)

# A dev broker, a producer, two queries and a librdkafka consumer in one group, drawn into
# build/demo/ownership.png and build/demo/summary.txt (a few minutes). DEMO_ARGS: see
# `python -m demo --help`.
DEMO_ARGS ?=
demo:
	$(PY) -c "import matplotlib" 2>/dev/null || $(PY) -m pip install --quiet -c constraints.txt -e ".[demo]"
	$(PY) -m demo $(DEMO_ARGS)

# Fault-injection scenarios against the mock broker (see docs/chaos.md): sized for
# ~25 min on 2 idle cores (a run on a loaded shared machine took 40 min).
# CHAOS_ARGS="--only driver_kill9,commit_errors" to pick scenarios, --list to see them.
CHAOS_ARGS ?=
chaos:
	$(PY) -m chaos $(CHAOS_ARGS)

# The scenarios that apply to KIP-848 members (kafka.group.protocol=consumer queries,
# group.protocol=consumer plain consumers): `python -m chaos --protocol consumer --list`. On
# Apache Kafka (one node) when its jars are present, skipping the 3 scenarios that need the
# mock's fault injection (19 min measured on 2 heavily loaded cores); else on the mock, every scenario (~20 min).
# CHAOS_ARGS="--broker mock" runs them all on the mock.
chaos-consumer:
	$(PY) -m chaos --protocol consumer $(CHAOS_ARGS)

# The scenarios on a 3-node Apache Kafka cluster (RF 3, min.insync.replicas 2): the real
# cluster's faults (broker crash, coordinator crash, rolling restart, frozen broker, the whole
# cluster down) and every scenario that needs no mock fault injection; the churns' plain members
# are Java consumers (the Kafka's own java-consumer.sh). ~30 min. See docs/chaos.md.
# CHAOS_KAFKA_HOME=../shared/kafka-latest runs it on Apache Kafka 4.3.1 (default: the dev
# broker's Kafka, $GROUPKAFKA_KAFKA_HOME or ../shared/kafka); docs/kafka-versions.md has the tables.
CHAOS_KAFKA_HOME ?=
chaos-kafka:
	$(PY) -m chaos --broker kafka --kafka-brokers 3 $(if $(CHAOS_KAFKA_HOME),--kafka-home $(CHAOS_KAFKA_HOME)) $(CHAOS_ARGS)

# A soak (issue 54; soak/, docs/chaos.md "Soak"): the 3-node cluster of chaos-kafka, two queries
# and a Java consumer in one group, a producer at a fixed rate, one chaos fault every 10 min (in
# turn: broker kill -9, member kill -9, rolling restart, broker SIGSTOP), every minute each
# member's RSS, open files and threads, its checkpoint, trigger p99 and the group's lag into
# samples.csv; the chaos verdict, files and threads flat after warm-up, RSS slope bounded; a plot.
# SOAK_MINUTES=15 by default (~25 min in all on a loaded machine); hours by hand
# (SOAK_MINUTES=120). SOAK_ARGS: see `python -m soak --help` (--rate, --fault-every, --faults).
SOAK_MINUTES ?= 15
SOAK_KAFKA_HOME ?= ../shared/kafka-latest
SOAK_ARGS ?=
.PHONY: soak
soak:
	$(PY) -m soak --minutes $(SOAK_MINUTES) --kafka-home $(SOAK_KAFKA_HOME) $(SOAK_ARGS)

# Network faults on real sockets and clock jumps (issue 53; chaos/netfaults.py, docs/chaos.md):
# the 3-node cluster of chaos-kafka, one query's driver or executors cut off through our fault
# proxies (silent drop and TCP resets). clock_jumps (the queries' wall clocks stepped by our
# LD_PRELOAD shim, chaos/clockstep.c, built with the system cc; Debian's libfaketime breaks
# Python's time.sleep, docs/chaos.md) runs on its own: CHAOS_ARGS="--only clock_jumps". ~20 min.
# CHAOS_KAFKA_HOME as for chaos-kafka (the tables: Kafka 4.3.1).
NET_SCENARIOS := net_coordinator_drop,net_coordinator_reset,net_driver_drop,net_driver_reset,net_leader_drop,net_leader_reset
chaos-net:
	$(PY) -m chaos --broker kafka --kafka-brokers 3 $(if $(CHAOS_KAFKA_HOME),--kafka-home $(CHAOS_KAFKA_HOME)) --only $(NET_SCENARIOS) $(CHAOS_ARGS)

# A release: the sdist, and the wheel built from it (in an isolated build environment, as pip
# builds it), checked by twine and by what they must and must not hold (release/check_dist.py).
dist:
	rm -rf dist
	$(PY) -m build --outdir dist .
	$(VENV)/bin/twine check --strict dist/*
	$(PY) release/check_dist.py dist --require-extensions

# The release installed as users install it, each in a fresh venv under build/user-install/, and
# a topic read on Apache Kafka from there (release/user_install.py): the wheel with the newest
# dependencies its ranges allow; the sdist without a C compiler; the wheel with every dependency
# at its lower bound (conf/constraints-lowest.txt) and the unit tests. ~15 min; by hand, not in
# CI (docs/development.md has the last run). DIST_CHECKS picks some: DIST_CHECKS=newest; `cluster`
# runs the standalone-cluster tests (tests/integration/test_deploy_cluster.py) on the built wheel.
DIST_KAFKA_HOME ?= ../shared/kafka-latest
DIST_CHECKS ?= newest no-compiler lowest cluster
.PHONY: dist dist-check
dist-check: dist
	for c in $(filter-out cluster,$(DIST_CHECKS)); do $(PY) release/user_install.py $$c --kafka-home $(DIST_KAFKA_HOME) || exit 1; done
	$(if $(filter cluster,$(DIST_CHECKS)),GROUPKAFKA_TEST_WHEEL=$$(ls dist/*.whl) GROUPKAFKA_TEST_SET=all $(PY) -m pytest -p no:xdist tests/integration/test_deploy_cluster.py)


# What `make test` leaves out, run before a release and after changes to the group members or the
# stream reader (docs/development.md, "make test-compat", says why and has the last run):
# 1. every test marked kafka39 on Apache Kafka 3.9.1 (GROUPKAFKA_KAFKA39_HOME, default
#    ../shared/kafka-3.9): Spark's-source conformance, security, Java-client ports, assignor interop;
# 2. the Spark-facing tests on PySpark $(PYSPARK_COMPAT), the lowest pyproject.toml accepts, in a
#    venv of its own ($(VENV_PYSPARK_COMPAT): constraints.txt with that pyspark, the project editable).
PYSPARK_COMPAT ?= 4.2.1
VENV_PYSPARK_COMPAT := .venv-pyspark$(subst .,,$(basename $(PYSPARK_COMPAT)))
PYSPARK_COMPAT_TESTS ?= tests/integration/test_stream_basic.py tests/integration/test_stream_admission.py \
	tests/integration/test_batch_reads.py tests/integration/test_batch_backfill.py \
	tests/integration/test_jobs_spark_submit.py tests/integration/test_conformance_records.py \
	tests/integration/test_spark_connect.py
.PHONY: test-compat test-compat-kafka40 test-compat-kafka39 test-compat-pyspark
# both parts run even when the first fails; the target fails if either did
test-compat:
	$(MAKE) test-compat-kafka40; c=$$?; $(MAKE) test-compat-kafka39; k=$$?; $(MAKE) test-compat-pyspark; p=$$?; exit $$((c | k | p))

# the compat set on Apache Kafka 4.0.1 (test id kafka-compat)
test-compat-kafka40:
	GROUPKAFKA_KAFKA39_HOME=none GROUPKAFKA_TEST_SET=all $(PY) -m pytest $(XDIST) -k "kafka-compat" $(PYTEST_ARGS)

test-compat-kafka39:
	GROUPKAFKA_KAFKA39_SET=all GROUPKAFKA_TEST_SET=all $(PY) -m pytest $(XDIST) -k "kafka-3.9 or kafka_3_9" $(PYTEST_ARGS)

test-compat-pyspark:
	test -x $(VENV_PYSPARK_COMPAT)/bin/python || $(PYTHON) -m venv $(VENV_PYSPARK_COMPAT)
	mkdir -p build && sed 's/^pyspark==.*/pyspark==$(PYSPARK_COMPAT)/' constraints.txt > build/constraints-pyspark-compat.txt
	$(VENV_PYSPARK_COMPAT)/bin/python -m pip install --quiet -c build/constraints-pyspark-compat.txt -e ".[test]"
	$(VENV_PYSPARK_COMPAT)/bin/python -c "import pyspark; assert pyspark.__version__ == '$(PYSPARK_COMPAT)', pyspark.__version__"
	$(VENV_PYSPARK_COMPAT)/bin/python conf/precompile_pyspark.py
	GROUPKAFKA_COMPAT_KAFKA_HOME=none GROUPKAFKA_KAFKA39_HOME=none \
		$(VENV_PYSPARK_COMPAT)/bin/python -m pytest $(XDIST) $(PYSPARK_COMPAT_TESTS) $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) $(VENV_PYSPARK_COMPAT) build dist *.egg-info .pytest_cache
