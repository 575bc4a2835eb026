"""Custom tool-output filters: every ``*.json`` file of the filters directory, read once when the
compressor is built. A file holds one rule, a list of rules or ``{"rules": [...]}`` (schema:
:mod:`freellm.compression.filters.model`). At most ``MAX_CUSTOM_RULES`` rules in all (files in name
order). A broken file — unreadable, not JSON, off-schema, a bad regex — is logged by name, reported and
skipped; it never stops the gateway."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from freellm.compression.filters.model import CompiledRule, FilterRule, compile_rule

__all__ = ["MAX_CUSTOM_RULES", "load_custom_filters"]

log = logging.getLogger("freellm.compression")

MAX_CUSTOM_RULES = 100


def _rules_of(data: Any) -> list[Any]:
    if isinstance(data, list):
        return data
    if isinstance(data, dict) and "rules" in data and "id" not in data:
        rules = data["rules"]
        if not isinstance(rules, list):
            raise ValueError('"rules" must be a list')
        return rules
    if isinstance(data, dict):
        return [data]
    raise ValueError("expected a rule object, a list of rules or {\"rules\": [...]}")


def _validation_reason(exc: ValidationError) -> str:
    errs = exc.errors()
    e = errs[0]
    where = ".".join(str(x) for x in e["loc"]) or "rule"
    more = f" (+{len(errs) - 1} more)" if len(errs) > 1 else ""
    return f"{where}: {e['msg']}{more}"


def load_custom_filters(directory: Path | None) -> tuple[list[CompiledRule], list[str]]:
    """(compiled rules in file-name order, ``"<file name>: <reason>"`` for every problem)."""
    rules: list[CompiledRule] = []
    errors: list[str] = []
    if directory is None or not directory.is_dir():
        return rules, errors

    def fail(name: str, reason: str) -> None:
        errors.append(f"{name}: {reason}")
        log.warning("compression filter file %s skipped: %s", name, reason)

    for path in sorted(directory.glob("*.json")):
        name = path.name
        try:
            data = json.loads(path.read_bytes())
        except OSError as exc:
            fail(name, f"cannot read ({exc.strerror or exc})")
            continue
        except ValueError as exc:
            fail(name, f"not valid JSON ({exc})")
            continue
        try:
            raw_rules = _rules_of(data)
            parsed: list[FilterRule] = []
            for n, raw in enumerate(raw_rules):
                try:
                    parsed.append(FilterRule.model_validate(raw))
                except ValidationError as exc:
                    raise ValueError(f"rule {n}: {_validation_reason(exc)}") from exc
        except ValueError as exc:
            fail(name, str(exc))
            continue
        room = MAX_CUSTOM_RULES - len(rules)
        if len(parsed) > room:
            fail(name, f"more than {MAX_CUSTOM_RULES} custom rules in all; ignored its last {len(parsed) - room}")
            parsed = parsed[:room]
        rules.extend(compile_rule(r) for r in parsed)
    return rules, errors
