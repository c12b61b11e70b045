"""docs/options.md names every option the code accepts (config/names.py OPTION_NAMES)."""

from __future__ import annotations

from pathlib import Path

from spark_groupsource.config.names import OPTION_NAMES

DOC = Path(__file__).resolve().parents[3] / "docs" / "options.md"


def undocumented(names: list[str], text: str) -> list[str]:
    return [n for n in names if f"`{n}`" not in text]


def test_every_option_is_documented():
    assert undocumented(OPTION_NAMES, DOC.read_text()) == []


def test_an_undocumented_option_is_caught():
    assert undocumented([*OPTION_NAMES, "metrics.nonesuch"], DOC.read_text()) == ["metrics.nonesuch"]
