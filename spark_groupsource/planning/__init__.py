"""The driver's side of reading: what the next micro-batch or batch plan reads.

- :mod:`.stream_driver`  the stream's state machine: positions, replay, pauses, the commit hook
- :mod:`.batch_plan`     one offset range per partition for ``spark.read`` and backfills
- :mod:`.offsets`        stream offsets and range planning, pure functions over plain data
- :mod:`.admission`      how many records a micro-batch may take and whether it may start yet
- :mod:`.outage`         partitions left out while the cluster cannot answer for them
- :mod:`.offset_reader`  every broker offset query the planners make, behind one interface
"""
