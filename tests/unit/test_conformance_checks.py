"""The conformance harness's verdicts on crafted inputs: each check must be able to fail."""

from __future__ import annotations

import pytest
from conformance.harness import ReaderRun, Rec, WaitTimedOut, assert_both_fail, failure_of


def _raise(exc: BaseException):
    def action():
        raise exc
    return action


def test_failure_of_takes_a_readers_error_as_text():
    assert failure_of(_raise(RuntimeError("boom"))) == "RuntimeError: boom"
    assert failure_of(lambda: None) is None


@pytest.mark.parametrize("exc", [WaitTimedOut("groupkafka: the query did not catch up within 90s"),
                                 AssertionError("the query did not end")])
def test_failure_of_lets_a_hang_through(exc):
    """A wait that ran out is the test's failure, never the reader error a case expects."""
    with pytest.raises(type(exc)):
        failure_of(_raise(exc))


CAUSES = {"kafka": r"No offset matched", "groupkafka": r"option 'startingTimestamp'"}


def test_both_fail_with_their_causes():
    assert_both_fail({"kafka": "IllegalArgumentException: No offset matched from request of ...",
                      "groupkafka": "PythonException: OptionError: option 'startingTimestamp': no record"},
                     CAUSES)


@pytest.mark.parametrize("fails", [
    {"kafka": "IllegalArgumentException: No offset matched", "groupkafka": None},
    {"kafka": None, "groupkafka": "OptionError: option 'startingTimestamp': no record"},
    # failed, but for another reason than the case's
    {"kafka": "IllegalArgumentException: No offset matched",
     "groupkafka": "GroupUnreachableError: could not reach any bootstrap server"},
])
def test_both_fail_refuses_a_missing_or_other_failure(fails):
    with pytest.raises(AssertionError):
        assert_both_fail(fails, CAUSES)


def _rec(offset: int, value: bytes) -> Rec:
    return Rec("t", 0, offset, None, value, None, 0)


def test_a_replay_must_bring_the_first_deliverys_rows():
    run = ReaderRun(None, "groupkafka", {}, "/nowhere", headers=False)
    run.deliver(0, [_rec(0, b"a"), _rec(1, b"b")])
    run.deliver(0, [_rec(1, b"b"), _rec(0, b"a")])  # the same rows, in another order
    assert run.replay_diffs == []
    run.deliver(0, [_rec(0, b"a"), _rec(1, b"B")])  # a replay with other content
    assert len(run.replay_diffs) == 1 and "batch 0 replayed with other rows" in run.replay_diffs[0]
    assert [r.value for r in run.records()] == [b"a", b"b"], "the first delivery is kept"
