"""The soak: a long chaos run with resource sampling (python -m soak, make soak; docs/chaos.md)."""
