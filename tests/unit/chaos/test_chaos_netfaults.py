"""chaos/netfaults.py: the Kafka framing its proxies read, and the two checks made from it."""

from __future__ import annotations

import struct

from chaos import netfaults as nf


def _cstr(s: str) -> bytes:  # compact string
    b = s.encode()
    return bytes([len(b) + 1]) + b


def _str(s: str) -> bytes:
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def test_offset_commit_v8_request_and_response_are_read():
    req = (struct.pack(">hhi", nf.OFFSET_COMMIT, 8, 42) + _str("client") + b"\x00"
           + _cstr("g") + struct.pack(">i", 7) + _cstr("m-1"))
    api, version, corr, fields = nf.parse_request(req)
    assert (api, version, corr) == (nf.OFFSET_COMMIT, 8, 42)
    assert fields == {"group": "g", "generation": 7, "member": "m-1"}
    resp = (struct.pack(">i", 42) + b"\x00" + struct.pack(">i", 0) + b"\x02" + _cstr("t") + b"\x03"
            + struct.pack(">ih", 0, 0) + b"\x00" + struct.pack(">ih", 1, 25) + b"\x00" + b"\x00" + b"\x00")
    assert nf.parse_response(nf.OFFSET_COMMIT, 8, resp) == {"errors": [0, 25]}


def test_heartbeat_v1_and_sync_group_v3_are_read():
    assert nf.parse_response(nf.HEARTBEAT, 1, struct.pack(">iih", 5, 0, 25)) == {"error": 25}
    assignment = struct.pack(">hi", 0, 1) + _str("t") + struct.pack(">iii", 2, 0, 3) + struct.pack(">i", -1)
    resp = struct.pack(">iih", 5, 0, 0) + struct.pack(">i", len(assignment)) + assignment
    assert nf.parse_response(nf.SYNC_GROUP, 3, resp) == {"error": 0, "assigned": [("t", 0), ("t", 3)]}


def _ev(t, api, request, response, sent=None):
    return nf.WireEvent(t, t - 0.01 if sent is None else sent, "driver:a", 1, api, request, response)


def test_a_commit_accepted_after_its_member_was_fenced_is_reported():
    m1 = {"group": "g", "generation": 3, "member": "m1"}
    events = [
        _ev(1.0, nf.OFFSET_COMMIT, m1, {"errors": [0]}),
        _ev(2.0, nf.HEARTBEAT, m1, {"error": 25}),
        _ev(3.0, nf.OFFSET_COMMIT, m1, {"errors": [25]}),  # refused: right
    ]
    assert nf.fenced_commits(events) == []
    assert nf.fenced_commits([*events, _ev(4.0, nf.OFFSET_COMMIT, m1, {"errors": [0]})])


def test_a_commit_of_an_older_generation_accepted_is_reported():
    old = {"group": "g", "generation": 3, "member": "m1"}
    events = [_ev(1.0, nf.JOIN_GROUP, {"group": "g"}, {"error": 0, "generation": 4, "member": "m2"}),
              _ev(2.0, nf.OFFSET_COMMIT, old, {"errors": [0]})]
    assert "generation 4" in nf.fenced_commits(events)[0]


def test_two_members_with_one_partition_in_one_generation_are_reported():
    def sync(member, gen, tps):
        return _ev(1.0, nf.SYNC_GROUP, {"group": "g", "generation": gen, "member": member},
                   {"error": 0, "assigned": tps})

    fine = [sync("m1", 3, [("t", 0)]), sync("m2", 3, [("t", 1)]), sync("m2", 4, [("t", 0)])]
    assert nf.double_assignments(fine) == []
    assert nf.double_assignments([*fine, sync("m1", 4, [("t", 0)])])


def test_frames_are_split_across_reads():
    f = nf._Frames()
    data = struct.pack(">i", 3) + b"abc" + struct.pack(">i", 2) + b"de"
    assert f.feed(data[:5]) == []
    assert f.feed(data[5:9]) == [b"abc"]
    assert f.feed(data[9:]) == [b"de"]
