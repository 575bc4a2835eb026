"""Fuzzing every inbound surface and the admin API against one long-lived real gateway (docs/fuzzing.md)."""
