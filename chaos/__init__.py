"""The chaos suite of issue #8: `python -m chaos` (see README, "Chaos suite")."""
