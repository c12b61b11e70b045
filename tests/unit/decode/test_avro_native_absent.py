"""Where the C decoder was not built (pip without a C compiler), Avro decodes with fastavro and
the user is told once per process what that costs."""

from __future__ import annotations

from spark_groupsource.decode import avro_native


def test_without_the_c_decoder_a_warning_once_per_process(monkeypatch, caplog) -> None:
    monkeypatch.setattr(avro_native, "_WHY", "the C extension is not built (no module)")
    monkeypatch.setattr(avro_native, "_said", False)
    with caplog.at_level("INFO", logger="spark_groupsource.decode"):
        for _ in range(3):
            avro_native.warn_once_if_unavailable()
    said = [r for r in caplog.records if r.name == "spark_groupsource.decode"]
    assert [r.levelname for r in said] == ["WARNING"]
    assert "not built" in said[0].getMessage() and "docs/benchmarks.md" in said[0].getMessage()


def test_with_the_c_decoder_nothing_is_said(monkeypatch, caplog) -> None:
    monkeypatch.setattr(avro_native, "_WHY", None)
    monkeypatch.setattr(avro_native, "_said", False)
    with caplog.at_level("INFO", logger="spark_groupsource.decode"):
        avro_native.warn_once_if_unavailable()
    assert not [r for r in caplog.records if r.name == "spark_groupsource.decode"]
