"""The filter-rule schema (one rule = how to shorten one kind of tool output) and its compiled form.

A rule, in JSON (snake_case or the reference's camelCase)::

    {"id": "pytest",
     "detect": {"tool_names": ["pytest"], "commands": ["^pytest\\\\b"], "content": ["^=+ test session starts"],
                "json": false},
     "strip_ansi": true,
     "drop_lines": [{"pattern": "::\\\\S+ PASSED\\\\b", "unless": "xfail"}, "^\\\\s*$"],
     "keep_lines": ["^collected \\\\d+"],
     "collapse_runs": {"min": 3},
     "head_tail": true,
     "max_chars": null}

It matches if it is ``catch_all``, if the tool name is listed and it has no content patterns, or if any
content pattern (multiline, case-insensitive) or shell-command pattern matches. ``drop_lines`` and
``keep_lines`` patterns are searched in each line as written (add ``(?i)`` for case-insensitivity).
``head_tail: false`` disables the line cap, ``max_chars: 0`` the character cap, ``collapse_runs: null``
the run collapsing.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from pydantic.alias_generators import to_camel

__all__ = ["CollapseRuns", "CompiledRule", "Detect", "DropLine", "FilterRule", "HeadTail", "compile_rule"]

MAX_PATTERN_CHARS = 1000


class _RuleModel(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, alias_generator=to_camel, populate_by_name=True)


def _check_regex(pattern: str, flags: int = 0) -> str:
    if len(pattern) > MAX_PATTERN_CHARS:
        raise ValueError(f"pattern longer than {MAX_PATTERN_CHARS} characters")
    try:
        re.compile(pattern, flags)
    except re.error as exc:
        raise ValueError(f"bad regex {pattern!r}: {exc}") from exc
    return pattern


class DropLine(_RuleModel):
    pattern: str
    unless: str | None = None

    @field_validator("pattern", "unless")
    @classmethod
    def _regex(cls, v: str | None) -> str | None:
        return None if v is None else _check_regex(v)


class Detect(_RuleModel):
    tool_names: tuple[str, ...] = ()
    commands: tuple[str, ...] = ()
    content: tuple[str, ...] = ()
    json_: bool = Field(default=False, alias="json")

    @field_validator("commands", "content")
    @classmethod
    def _regexes(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        for p in v:
            _check_regex(p, re.M | re.I)
        return v


class CollapseRuns(_RuleModel):
    min: int = Field(default=3, ge=2)


class HeadTail(_RuleModel):
    head: int = Field(ge=0)
    tail: int = Field(ge=0)


class FilterRule(_RuleModel):
    id: str = Field(min_length=1, max_length=64)
    catch_all: bool = False
    detect: Detect = Field(default_factory=lambda: Detect())
    strip_ansi: bool = True
    drop_lines: tuple[DropLine, ...] = ()
    keep_lines: tuple[str, ...] = ()
    collapse_runs: CollapseRuns | None = Field(default_factory=lambda: CollapseRuns())
    head_tail: bool | HeadTail = True
    max_chars: int | None = Field(default=None, ge=0)

    @field_validator("drop_lines", mode="before")
    @classmethod
    def _drop_strings(cls, v: Any) -> Any:
        if isinstance(v, list | tuple):
            return [{"pattern": x} if isinstance(x, str) else x for x in v]
        return v

    @field_validator("collapse_runs", mode="before")
    @classmethod
    def _collapse_bool(cls, v: Any) -> Any:
        if v is True:
            return {}
        if v is False:
            return None
        return v

    @field_validator("keep_lines")
    @classmethod
    def _keep_regexes(cls, v: tuple[str, ...]) -> tuple[str, ...]:
        for p in v:
            _check_regex(p)
        return v

    @model_validator(mode="after")
    def _detects_something(self) -> FilterRule:
        d = self.detect
        if not (self.catch_all or d.tool_names or d.commands or d.content or d.json_):
            raise ValueError("a rule needs detect.tool_names, detect.commands, detect.content, detect.json or catch_all")
        return self


@dataclass(frozen=True, slots=True)
class CompiledRule:
    rule: FilterRule
    tool_names: frozenset[str]
    commands: tuple[re.Pattern[str], ...]
    content: tuple[re.Pattern[str], ...]
    drops: tuple[tuple[re.Pattern[str], re.Pattern[str] | None], ...]
    keeps: tuple[re.Pattern[str], ...]

    @property
    def id(self) -> str:
        return self.rule.id

    def matches(self, tool_name: str, command: str | None, window: str, is_json: Callable[[], bool]) -> bool:
        """Whether the rule applies (``is_json`` is only called when the rule asks for JSON)."""
        if self.rule.catch_all:
            return True
        if self.tool_names and tool_name and not self.content and tool_name in self.tool_names:
            return True
        if command is not None and any(p.search(command) for p in self.commands):
            return True
        if self.rule.detect.json_ and is_json():
            return True
        return any(p.search(window) for p in self.content)


def compile_rule(rule: FilterRule) -> CompiledRule:
    return CompiledRule(
        rule=rule,
        tool_names=frozenset(n.lower() for n in rule.detect.tool_names),
        commands=tuple(re.compile(p, re.M | re.I) for p in rule.detect.commands),
        content=tuple(re.compile(p, re.M | re.I) for p in rule.detect.content),
        drops=tuple((re.compile(d.pattern), re.compile(d.unless) if d.unless else None) for d in rule.drop_lines),
        keeps=tuple(re.compile(p) for p in rule.keep_lines),
    )
