"""What the jobs share: the connector options file, common flags, logging, exit codes.

The options file is a Java-style properties file (``key=value``, ``#`` or ``!`` comments).
Keys are the connector's options exactly as given to ``.option(...)``; keys starting with
``job.`` are settings of the job itself (e.g. ``job.output``, ``job.checkpoint``,
``job.trigger``). Flags override the file.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable, Mapping, Sequence

from spark_groupsource.logs import LOG_LEVEL_ENV

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2


class BadInput(Exception):
    """A flag, the options file or an option is wrong: exit 2 with the message."""


def read_properties(path: str) -> dict[str, str]:
    """``key=value`` (or ``key: value``) lines; blank lines and ``#``/``!`` comments skipped."""
    try:
        with open(path, encoding="utf-8") as fh:
            lines = fh.read().splitlines()
    except OSError as exc:
        raise BadInput(f"cannot read the options file {path}: {exc.strerror}") from None
    out: dict[str, str] = {}
    for number, line in enumerate(lines, 1):
        text = line.strip()
        if not text or text[0] in "#!":
            continue
        sep = min((i for i in (text.find("="), text.find(":")) if i > 0), default=-1)
        if sep < 0:
            raise BadInput(f"{path}:{number}: expected key=value, got {text!r}")
        out[text[:sep].strip()] = text[sep + 1:].strip()
    return out


def key_value(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"expected KEY=VALUE, got {text!r}")
    return key.strip(), value.strip()


def add_common_flags(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("connector")
    g.add_argument("--config", metavar="FILE", help="connector options file (key=value), e.g. conf/groupkafka.properties")
    g.add_argument("--bootstrap", metavar="HOSTS", help="kafka.bootstrap.servers")
    g.add_argument("--group", metavar="ID", help="kafka.group.id")
    g.add_argument("--topic", metavar="T1,T2", help="subscribe")
    g.add_argument("--pattern", metavar="REGEX", help="subscribePattern")
    g.add_argument("--assignor", metavar="NAMES", help="assignor (e.g. range or cooperative-sticky,range)")
    g.add_argument(
        "-o", "--option", metavar="KEY=VALUE", type=key_value, action="append", default=[],
        help="any connector option (repeatable), e.g. -o failOnDataLoss=false",
    )
    parser.add_argument(
        "--log-level", default=os.environ.get(LOG_LEVEL_ENV, "INFO"),
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        help="level of the connector's own logs (rebalances, commits); default INFO",
    )


STREAM_ONLY = frozenset({"maxoffsetspertrigger"})
BATCH_ONLY = frozenset({"endingoffsets", "endingtimestamp", "endingoffsetsbytimestamp", "groupcoordinated"})


def gather_options(args: argparse.Namespace, *, batch: bool) -> tuple[dict[str, str], dict[str, str]]:
    """(connector options, job settings) from the file, then the flags.

    One options file serves both jobs: options of the other kind of query found in the
    file are left out (with a log line); given as flags they are errors.
    """
    merged = read_properties(args.config) if args.config else {}
    other = STREAM_ONLY if batch else BATCH_ONLY
    for key in [k for k in merged if k.lower() in other]:
        logging.getLogger("spark_groupsource.jobs").info(
            "%s from %s does not apply to a %s job; left out", key, args.config, "batch" if batch else "streaming"
        )
        del merged[key]
    flags = {
        "kafka.bootstrap.servers": args.bootstrap,
        "kafka.group.id": args.group,
        "subscribe": args.topic,
        "subscribePattern": args.pattern,
        "assignor": args.assignor,
    }
    if args.topic and args.pattern:
        raise BadInput("give --topic or --pattern, not both")
    for key, value in flags.items():
        if value is not None:
            if key in ("subscribe", "subscribePattern"):
                merged.pop("subscribe", None)
                merged.pop("subscribePattern", None)
            merged[key] = value
    merged.update(dict(args.option))
    job = {k[len("job."):]: v for k, v in merged.items() if k.startswith("job.")}
    connector = {k: v for k, v in merged.items() if not k.startswith("job.")}
    return connector, job


def configure_logging(level: str) -> None:
    """Python logging for the driver: WARN overall, the connector at ``level``.

    The connector logs through ``logging`` under ``spark_groupsource.*`` (log4j does not see
    it), so a job must configure it itself; kafka-python stays at WARNING.
    """
    logging.basicConfig(
        stream=sys.stderr, level=logging.WARNING,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    logging.getLogger("spark_groupsource").setLevel(level)
    # Spark's Python workers (the stream's driver-side runner among them) log at this level too
    os.environ[LOG_LEVEL_ENV] = level


def spark_session(app_name: str):
    """The SparkSession (spark-submit's settings apply) with the data source registered."""
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    from spark_groupsource.source import GroupKafkaDataSource

    builder = SparkSession.builder.appName(app_name)
    level = os.environ.get(LOG_LEVEL_ENV)
    if level:  # workers are started by the JVM: hand them the level through its conf
        builder = builder.config(f"spark.executorEnv.{LOG_LEVEL_ENV}", level)
    spark = builder.getOrCreate()
    spark.dataSource.register(GroupKafkaDataSource)
    return spark


def run(main: Callable[[Sequence[str] | None], int], argv: Sequence[str] | None = None) -> None:
    """Run ``main`` and turn errors into one readable line and an exit code."""
    from spark_groupsource.errors import GroupKafkaError, OptionError

    try:
        code = main(argv)
    except (BadInput, OptionError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        code = EXIT_BAD_INPUT
    except GroupKafkaError as exc:
        print(f"error: {exc}", file=sys.stderr)
        code = EXIT_FAILED
    except KeyboardInterrupt:
        print("error: interrupted", file=sys.stderr)
        code = 130
    except Exception as exc:  # noqa: BLE001 - Spark/py4j errors: one line, not a stack dump
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
        print(f"error: {type(exc).__name__}: {first}", file=sys.stderr)
        logging.getLogger("spark_groupsource.jobs").debug("job failed", exc_info=True)
        code = EXIT_FAILED
    sys.stdout.flush()
    sys.exit(code)


def offsets_text(offsets: Mapping[str, object]) -> str:
    return ",".join(f"{k}:{v}" for k, v in offsets.items())
