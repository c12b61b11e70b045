"""A micro-batch that completed after its partitions left this member: commit it when they come back.

A batch completes late (its commit is skipped: the partitions are no longer held under the
acquisition the batch was planned under) when the member left the group for
``kafka.max.poll.interval.ms`` while the batch ran (``group.poll_interval``), and also after a
revoke barrier gave up or a fence. Its records were processed all the same (Spark recorded the
batch). When such a partition is acquired again and the group's committed offset is still the
batch's start (nobody committed the partition meanwhile, or nobody ever did), reading it again from
the group's offset would re-read records already processed, and a query alone in its group whose
every batch outlasts the interval would re-read that batch for ever (a livelock). So the partition
continues from the batch's end, and that end is committed under the new membership. Otherwise the
group's offset decides, as for any partition acquired (another member committed part of the
batch or past it: at most that batch is read twice).

:func:`lost_ranges` and :func:`resume_offset` are the decisions, pure; :func:`resume_late_batches`
applies them for the stream driver (its reader and membership are the I/O).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping

from assignment.model import TopicPartition

log = logging.getLogger("spark_groupsource.stream")


def lost_ranges(ranges: Mapping[TopicPartition, tuple[int, int]], serials: Mapping[TopicPartition, int],
                owned: Mapping[TopicPartition, int]) -> dict[TopicPartition, tuple[int, int]]:
    """The non-empty ranges of a completed batch whose partitions this member no longer holds
    under the acquisition the batch was planned under (their commit is skipped)."""
    return {tp: (s, u) for tp, (s, u) in ranges.items()
            if u > s and tp in serials and owned.get(tp) != serials[tp]}


def resume_offset(start: int, until: int, committed: int | None) -> int | None:
    """Where a partition acquired again resumes after this member's batch over ``[start, until)``
    completed without it: ``until`` while the group's committed offset is still the batch's start
    (nobody committed the partition meanwhile) or the group has none; None when the group's
    offset decides: another member read and committed part of the batch or past it (the next
    batch starts there, as for any partition acquired: at most this batch read twice), or an
    operator moved the offset (a reset of the group while it was empty)."""
    if until > start and (committed is None or committed == start):
        return until
    return None


def resume_late_batches(driver, owned: Mapping[TopicPartition, int]) -> None:
    """For the partitions owned now under a new acquisition that a late batch covered
    (``driver.late``): read the group's offsets, and where :func:`resume_offset` says so commit
    the batch's end under the current acquisition and continue from there (``driver.positions``,
    so the planner does not resolve them again). A partition whose committed offset is not
    answered now is asked again at the next plan."""
    late: dict[TopicPartition, tuple[int, int]] = driver.late
    fresh = [tp for tp in owned if tp in late and driver.positions.get(tp, (None, None))[1] != owned[tp]]
    if not fresh:
        return
    if not driver.opts.commit_offsets:
        for tp in fresh:
            late.pop(tp)  # the group's offsets are not this query's: they decide as they are
        return
    answer = driver.reader.try_committed(driver.opts.group_id, fresh, retries=0)
    resume: dict[TopicPartition, int] = {}
    for tp in fresh:
        if tp not in answer.found:
            continue
        start, until = late.pop(tp)
        got = answer.found.get(tp)
        at = resume_offset(start, until, got)
        if at is not None:
            resume[tp] = at
            log.warning("group %s: %s is this member's again and the group's offset (%s) is still the start of its "
                        "micro-batch [%d, %d), which completed after the partition had left it: committing %d and "
                        "continuing from there (the batch's records were processed)", driver.opts.group_id, tp,
                        got, start, until, until)
    if not resume:
        return
    result = driver.membership.commit(resume, {tp: owned[tp] for tp in resume})
    for tp, at in resume.items():
        if tp in result.lost or tp in result.skipped:
            continue  # not ours under this acquisition any more: the group decides next time
        driver.positions[tp] = (at, owned[tp])
        if tp in result.committed:
            driver.committed_by_us[tp] = (at, owned[tp])
