"""``python -m chaos``: run the chaos scenarios against a dev broker and print one row each.

    python -m chaos                 # every scenario (make chaos)
    python -m chaos --quick         # the short version run by the tests
    python -m chaos --only driver_kill9,commit_errors
    python -m chaos --list
    python -m chaos --protocol consumer   # the scenarios that apply to KIP-848 members (make chaos-consumer)
    python -m chaos --protocol consumer --broker mock   # ... on the mock, with its fault injection

``--broker``: ``mock`` (librdkafka's mock cluster, 3 brokers: every scenario, fault injection
included), ``kafka`` (Apache Kafka from the jars the dev broker finds, ``--kafka-brokers`` nodes,
default 1: the scenarios that need no injected fault; the others are listed as skipped, with
why), or ``auto`` (the default): ``kafka`` for ``--protocol consumer`` when the Kafka jars are
present, else ``mock``; ``mock`` for ``--protocol classic`` (its Kafka run is future work).
``--kafka-home DIR``: the Apache Kafka installation to run (default: ``$GROUPKAFKA_KAFKA_HOME``,
else ../shared/kafka); its ``java-consumer.sh`` is the Java plain member, so e.g.
``--kafka-home ../shared/kafka-latest`` runs broker and Java client on 4.3.1.

SIGTERM or SIGINT (a CI timeout, Ctrl-C, kill) stops the scenario under way: its members,
producer, plain consumers and brokers are stopped (a second signal kills them at once), its row
and the table are printed, and the exit code is 143 (SIGTERM) or 130 (SIGINT).

Exit code 0 when every scenario passed; 1 when any lost a record, had a query fail where it
should not (or not fail where it should), a committed offset move backwards, duplicates
beyond one micro-batch per partition handover, or broke a rule of the history checker
(chaos/history.py); 1 too when no scenario ran, or one of the suite was skipped because the
machine cannot run it (its Java consumer); 2 on bad arguments.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

from chaos.procs import Interrupt
from chaos.report import table
from chaos.run import BACKENDS, PROTOCOLS, Row, Run
from chaos.scenarios import SCENARIOS, Spec, for_protocol, why_not


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m chaos", description=__doc__.split("\n\n")[0])
    p.add_argument("--list", action="store_true", help="list the scenarios and exit")
    p.add_argument("--only", help="comma-separated scenario names")
    p.add_argument("--quick", action="store_true", help="only the short version's scenarios")
    p.add_argument("--protocol", choices=PROTOCOLS, default="classic",
                   help="the members' group protocol: classic (our assignors) or consumer (KIP-848: "
                   "kafka.group.protocol=consumer queries, group.protocol=consumer plain consumers)")
    p.add_argument("--broker", choices=("auto", *BACKENDS), default="auto",
                   help="the dev broker: kafka (Apache Kafka; the scenarios without mock fault injection), "
                   "mock (every scenario), auto (default: kafka for --protocol consumer when its jars are "
                   "present, else mock)")
    p.add_argument("--kafka-brokers", type=int, default=None, choices=(1, 3),
                   help="nodes of the Kafka cluster with --broker kafka (default 3 for --protocol classic: "
                   "the real-cluster faults need them; 1 for --protocol consumer)")
    p.add_argument("--kafka-home", metavar="DIR",
                   help="the Apache Kafka installation (and its java-consumer.sh) for --broker kafka "
                   "(default: $GROUPKAFKA_KAFKA_HOME, else ../shared/kafka)")
    p.add_argument("--workdir", help="where sinks, checkpoints and logs go (default: a new temp dir)")
    p.add_argument("--json", dest="json_path", help="results file (default: <workdir>/results.json)")
    p.add_argument("--quiet-timeout", type=float, default=120.0,
                   help="seconds to wait after production for the commits to reach the log end")
    return p.parse_args(argv)


def choose_broker(requested: str, protocol: str) -> tuple[str, str | None]:
    """(backend, why) for ``--broker``: ``auto`` is kafka in the consumer mode when its jars are
    present; ``why`` says why auto fell back to the mock (None otherwise). ``kafka`` without
    the jars raises ValueError naming what is missing."""
    from spark_groupsource.devbroker import kafka_missing as missing

    if requested == "kafka":
        why = missing()
        if why:
            raise ValueError(f"--broker kafka: no Apache Kafka: {why}")
        return "kafka", None
    if requested == "mock":
        return "mock", None
    if protocol != "consumer":
        return "mock", None
    why = missing()
    return ("mock", f"no Apache Kafka ({why}); running on the mock") if why else ("kafka", None)


def use_kafka_home(home: str) -> str:
    """Make ``home`` the Kafka of this run: GROUPKAFKA_KAFKA_HOME is what the dev broker (a child
    process) and the Java plain members' script lookup read. Returns its description."""
    from spark_groupsource.devbroker._kafka import KAFKA_HOME_ENV, check

    home = os.path.abspath(home)
    line = check(home)  # DevBrokerError when there are no jars there
    os.environ[KAFKA_HOME_ENV] = home
    return line.removeprefix("kafka: OK ")


def main(argv: list[str] | None = None) -> int:
    args = _parse(argv)
    protocol = args.protocol
    kafka_label = ""
    if args.kafka_home:
        from spark_groupsource.devbroker import DevBrokerError

        try:
            kafka_label = use_kafka_home(args.kafka_home)
        except DevBrokerError as exc:
            print(f"--kafka-home: {exc}", file=sys.stderr)
            return 2
    try:
        backend, fallback = choose_broker(args.broker, protocol)
    except ValueError as exc:
        print(str(exc), file=sys.stderr)
        return 2
    nodes_n = args.kafka_brokers or (1 if protocol == "consumer" else 3)
    where = f"--protocol {protocol} --broker {backend}"
    specs = for_protocol(protocol, backend, nodes_n)
    skipped = [s for s in SCENARIOS if s not in specs]
    if args.list:
        print(f"group protocol {protocol}, broker {backend}:")
        for s in specs:
            print(f"{s.name:22} {'quick ' if protocol in s.quick else '      '}{s.about}")
        if skipped:
            print(f"\nnot run with {where}:")
            for s in skipped:
                print(f"{s.name:22}       {why_not(s.name, protocol, backend, nodes_n)}")
        return 0
    if args.only:
        names = [n.strip() for n in args.only.split(",") if n.strip()]
        known = {s.name for s in specs}
        unknown = [n for n in names if n not in known]
        if unknown:
            why = [f"{n}: {why_not(n, protocol, backend, nodes_n)}" for n in unknown if why_not(n, protocol, backend, nodes_n)]
            print(f"unknown scenario(s) {unknown} for {where}; see --list"
                  + "".join(f"\n  {w}" for w in why), file=sys.stderr)
            return 2
        specs = [s for s in specs if s.name in names]
    else:  # the network scenarios have a target of their own (make chaos-net)
        specs = [s for s in specs if not s.named_only]
    if args.quick:
        specs = [s for s in specs if protocol in s.quick]
    if not specs:
        print(f"chaos: no scenario to run for {where}{' --quick' if args.quick else ''}"
              f"{' --only ' + args.only if args.only else ''}: an empty suite proves nothing", file=sys.stderr)
        return 1
    workdir = args.workdir or tempfile.mkdtemp(prefix="groupkafka-chaos-")
    os.makedirs(workdir, exist_ok=True)
    json_path = args.json_path or os.path.join(workdir, "results.json")
    if fallback:
        print(f"chaos: {fallback}", flush=True)
    nodes = f" ({nodes_n} node{'s' if nodes_n > 1 else ''})" if backend == "kafka" else ""
    if backend == "kafka":
        if not kafka_label:
            from spark_groupsource.devbroker._kafka import check

            kafka_label = check().removeprefix("kafka: OK ")
        nodes += f", {kafka_label}"
    print(f"chaos: {len(specs)} scenarios, group protocol {protocol}, broker {backend}{nodes}, "
          f"work directory {workdir}", flush=True)
    # those of this protocol left out on this broker (on the mock, the Kafka-only ones go unsaid)
    not_run = {s.name: why_not(s.name, protocol, backend, nodes_n) for s in skipped
               if protocol in s.protocols and (backend != "mock" or "mock" in s.backends)}
    for name, why in not_run.items():
        print(f"chaos: skipped on {backend}: {name}: {why}", flush=True)
    rows: list[Row] = []
    t0 = time.monotonic()
    stop = Interrupt().install()
    try:
        for spec in specs:
            print(f"chaos: {spec.name}: {spec.about}", flush=True)
            row = _scenario(spec, stop, protocol=protocol, backend=backend, nodes_n=nodes_n, workdir=workdir,
                            quiet_timeout=args.quiet_timeout)
            rows.append(row)
            verdict = "ok" if row.ok else "FAIL: " + "; ".join(row.reasons)
            print(f"chaos: {spec.name}: {verdict} ({row.elapsed_s:.0f}s)", flush=True)
            with open(json_path, "w") as f:
                json.dump({"workdir": workdir, "protocol": protocol, "broker": backend, "kafka": kafka_label or None,
                           "skipped": not_run,
                           "rows": [r.to_json() for r in rows]}, f, indent=1)
            if stop.signum is not None:
                break
    except KeyboardInterrupt:
        pass  # between two scenarios: nothing of theirs is running
    if stop.signum is not None:
        print(f"chaos: stopped by {stop.name}; {len(specs) - len(rows)} scenarios not run",
              flush=True)
    print()
    print(table(rows))
    for name, why in not_run.items():
        print(f"skipped on {backend}: {name}: {why}")
    print(f"\n{sum(r.ok for r in rows)}/{len(rows)} scenarios ({protocol} protocol, {backend} broker) passed in "
          f"{time.monotonic() - t0:.0f}s; results: {json_path}")
    # a scenario of this suite left out because the machine cannot run it (no Java consumer)
    # is a hole in the suite, not a pass; those outside it by design (another broker) are not
    missing = {} if args.only else {n: w for n, w in not_run.items() if _cannot_run_here(n, protocol, backend, nodes_n)
                                    and (not args.quick or protocol in next(s for s in SCENARIOS if s.name == n).quick)}
    for name, why in missing.items():
        print(f"chaos: FAIL: {name} could not run here: {why}")
    return stop.exit_code or exit_code(rows, missing)


def _scenario(spec: Spec, stop: Interrupt, *, protocol: str, backend: str, nodes_n: int, workdir: str,
              quiet_timeout: float) -> Row:
    """One scenario's row. A SIGTERM or SIGINT (``stop``) ends it where it is: what it started
    is stopped (:meth:`Run.finish`, then kill -9 of anything left) and the row says so."""
    t_setup = time.monotonic()
    run: Run | None = None
    try:
        run = Run(spec.name, workdir, partitions=spec.partitions, protocol=protocol, backend=backend,
                  brokers=nodes_n if backend == "kafka" else None)
        stop.hurry = run.kill_all
        error: BaseException | None = None
        try:
            spec.run(run)
        except (Exception, KeyboardInterrupt) as exc:  # noqa: BLE001 - reported in the row, the suite goes on
            error = exc
        try:
            return run.finish(quiet_timeout, error)
        except Exception as exc:  # noqa: BLE001 - a bug in judging must not hide the other rows
            return Row(spec.name, reasons=[f"judging failed: {type(exc).__name__}: {exc}"], protocol=protocol,
                       broker=backend)
    except KeyboardInterrupt as exc:  # during the set-up, or the stop of finish itself
        return Row(spec.name, reasons=[f"stopped by {exc} before its verdict"], protocol=protocol, broker=backend,
                   elapsed_s=round(time.monotonic() - t_setup, 1))
    except Exception as exc:  # noqa: BLE001 - a failed set-up fails this row, the suite goes on
        return Row(spec.name, reasons=[f"set-up failed (broker, topic): {type(exc).__name__}: {exc}"],
                   protocol=protocol, broker=backend, elapsed_s=round(time.monotonic() - t_setup, 1))
    finally:
        if run is not None and stop.signum is not None:
            run.kill_all()  # a stop cut short leaves nothing behind
            run.broker.stop()


def exit_code(rows: list[Row], missing: dict[str, str]) -> int:
    """0 only when scenarios ran, every one passed, and none of the suite was skipped for want
    of a tool here (``missing``: name -> why)."""
    return 0 if rows and all(r.ok for r in rows) and not missing else 1


def _cannot_run_here(name: str, protocol: str, backend: str, nodes: int) -> bool:
    """A scenario this protocol and broker would run, skipped only for want of a tool here."""
    spec = next((s for s in SCENARIOS if s.name == name), None)
    return (spec is not None and protocol in spec.protocols and backend in spec.backends
            and (backend != "kafka" or spec.kafka_nodes <= nodes) and backend in spec.java_on)


if __name__ == "__main__":
    sys.exit(main())
