"""The base of every settings model, and the one error a bad configuration raises."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

__all__ = ["ConfigError", "ConfigModel"]


class ConfigError(Exception):
    """A configuration file that cannot be used: unreadable, not YAML, or invalid (the message names
    every bad key)."""


class ConfigModel(BaseModel):
    """A settings section: unknown keys are an error (a typo must not be silently ignored)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)
