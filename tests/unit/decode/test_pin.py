"""The reader schema ids kept in stream offsets (issue 55)."""

from __future__ import annotations

import pytest

from spark_groupsource.decode.pin import SchemaPinError, choose, join, split

PLAIN = '{"v":1,"ranges":{"t":{"0":[0,5]}},"known":{"t":1}}'


def test_join_and_split_round_trip_exactly():
    joined = join(PLAIN, {"value": 7, "key": 3})
    assert joined == '{"v":1,"ranges":{"t":{"0":[0,5]}},"known":{"t":1},"schemas":{"key":3,"value":7}}'
    assert split(joined) == (PLAIN, {"key": 3, "value": 7})
    assert split(PLAIN) == (PLAIN, {})
    assert join(PLAIN, {}) == PLAIN
    data, pins = split({"v": 1, "ranges": {}, "schemas": {"value": 7}})
    assert data == {"v": 1, "ranges": {}} and pins == {"value": 7}
    assert split(None) == (None, {})


def test_choose():
    kw = dict(describe_loaded="id 2", describe_checkpoint="id 1")
    assert choose("value", 2, None, explicit_version=False, same_columns=False, **kw) == 2
    assert choose("value", 2, 2, explicit_version=False, same_columns=False, **kw) == 2
    assert choose("value", 2, 1, explicit_version=False, same_columns=True, **kw) == 1
    assert choose("value", 2, 1, explicit_version=True, same_columns=False, **kw) == 2
    # an explicit version moves the query on with the same columns too (e.g. an enum value added)
    assert choose("value", 2, 1, explicit_version=True, same_columns=True, **kw) == 2
    with pytest.raises(SchemaPinError, match="the checkpoint's value reader schema is id 1"):
        choose("value", 2, 1, explicit_version=False, same_columns=False, **kw)
