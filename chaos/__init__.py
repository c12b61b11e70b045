"""The chaos suite of issue #8: `python -m chaos` (see docs/chaos.md)."""
