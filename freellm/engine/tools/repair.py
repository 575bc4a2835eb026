"""Tool-call argument repair against the request's JSON schemas (spec/core.md §5).

Weak models double-encode: the whole ``arguments`` object arrives as a JSON *string*, or a parameter the
schema declares as an array or object arrives as a string holding that array's JSON
(``{"paths": "[\\"a.py\\", \\"b.py\\"]"}``). A client that validates against its own schema then rejects
the call. Repair, applied to every call of every turn:

1. a whole ``arguments`` value that is a JSON string encoding an object is unwrapped;
2. the value is walked against the parameters schema: a string is decoded only where the schema node
   says ``array`` or ``object`` (and not ``string``) *and* the string decodes to that type; decoded values
   are walked again. Arrays follow ``items``; objects follow ``properties``; local ``$ref`` s
   (``#/$defs/…``, ``#/definitions/…``) are followed; ``anyOf``/``oneOf``/``allOf`` alternatives count
   (so pydantic's ``Optional[list[str]]`` works);
3. keys the schema does not describe, string-typed parameters and type mismatches are left alone;
4. the arguments are re-serialised only when something changed: valid arguments are never altered,
   byte for byte.

Arguments that are not JSON at all are returned unchanged (the pump drops such calls).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import orjson

from freellm.engine.pump import ToolCall

__all__ = ["repair_arguments", "repair_calls"]

Schema = Mapping[str, Any]

_MAX_DEPTH: Final = 32
_MAX_UNWRAP: Final = 3
_COMBINERS: Final = ("anyOf", "oneOf", "allOf")


def repair_calls(calls: list[ToolCall], schemas: Mapping[str, Schema]) -> list[ToolCall]:
    """Repair every call's arguments in place (against its tool's schema, if declared); returns ``calls``."""
    for call in calls:
        call.arguments = repair_arguments(call.arguments, schemas.get(call.name))
    return calls


def repair_arguments(arguments: str, schema: Schema | None) -> str:
    """The repaired argument text; ``arguments`` itself (the same string) when nothing needed fixing."""
    try:
        value = orjson.loads(arguments)
    except orjson.JSONDecodeError:
        return arguments
    changed = False
    unwrapped = value
    for _ in range(_MAX_UNWRAP):
        if not isinstance(unwrapped, str):
            break
        try:
            unwrapped = orjson.loads(unwrapped)
        except orjson.JSONDecodeError:
            break
    if isinstance(unwrapped, dict) and unwrapped is not value:
        value, changed = unwrapped, True
    if schema and isinstance(schema, Mapping):
        value, walked = _walk(value, schema, schema, 0)
        changed = changed or walked
    return orjson.dumps(value).decode() if changed else arguments


def _walk(value: Any, node: Any, root: Schema, depth: int) -> tuple[Any, bool]:
    if depth > _MAX_DEPTH or not isinstance(node, Mapping):
        return value, False
    node = _resolve(node, root)
    if isinstance(value, str):
        wanted = _containers(node, root)
        if not wanted:
            return value, False
        try:
            decoded = orjson.loads(value)
        except orjson.JSONDecodeError:
            return value, False
        if (isinstance(decoded, list) and "array" in wanted) or (isinstance(decoded, dict) and "object" in wanted):
            walked, _ = _walk(decoded, node, root, depth + 1)
            return walked, True
        return value, False
    if isinstance(value, dict):
        out = value
        changed = False
        for key, sub in _properties(node, root).items():
            if key in value:
                new, did = _walk(value[key], sub, root, depth + 1)
                if did:
                    if out is value:
                        out = dict(value)
                    out[key] = new
                    changed = True
        return out, changed
    if isinstance(value, list):
        items = _items(node, root)
        if items is None:
            return value, False
        result = value
        changed = False
        for i, item in enumerate(value):
            new, did = _walk(item, items, root, depth + 1)
            if did:
                if result is value:
                    result = list(value)
                result[i] = new
                changed = True
        return result, changed
    return value, False


def _resolve(node: Schema, root: Schema) -> Schema:
    """Follow a local ``$ref`` chain (bounded); an unresolvable ref resolves to an empty schema."""
    for _ in range(_MAX_DEPTH):
        ref = node.get("$ref")
        if not isinstance(ref, str):
            return node
        target: Any = root
        if ref != "#":
            if not ref.startswith("#/"):
                return {}
            for part in ref[2:].split("/"):
                part = part.replace("~1", "/").replace("~0", "~")
                target = target.get(part) if isinstance(target, Mapping) else None
        if not isinstance(target, Mapping):
            return {}
        node = target
    return {}


def _alternatives(node: Schema, root: Schema) -> list[Schema]:
    """The node itself and every (resolved) ``anyOf``/``oneOf``/``allOf`` alternative, one level deep."""
    out = [node]
    for key in _COMBINERS:
        alts = node.get(key)
        if isinstance(alts, list):
            out.extend(_resolve(a, root) for a in alts if isinstance(a, Mapping))
    return out


def _types(node: Schema) -> set[str] | None:
    """The JSON types a node allows; None when it says nothing (any type)."""
    kind = node.get("type")
    if isinstance(kind, str):
        return {kind}
    if isinstance(kind, list):
        return {k for k in kind if isinstance(k, str)}
    if "properties" in node:
        return {"object"}
    if "items" in node:
        return {"array"}
    return None


def _containers(node: Schema, root: Schema) -> set[str]:
    """``{"array"}``/``{"object"}`` the node allows, or empty when a string is acceptable (or unknown)."""
    found: set[str] = set()
    string_ok = False
    says_something = False
    for alt in _alternatives(node, root):
        kinds = _types(alt)
        if kinds is None:
            if alt is node and any(isinstance(node.get(k), list) for k in _COMBINERS):
                continue  # the combiner's alternatives speak for it
            string_ok = True
            continue
        says_something = True
        if "string" in kinds:
            string_ok = True
        found |= kinds & {"array", "object"}
    if string_ok or not says_something:
        return set()
    return found


def _properties(node: Schema, root: Schema) -> dict[str, Any]:
    props: dict[str, Any] = {}
    for alt in _alternatives(node, root):
        p = alt.get("properties")
        if isinstance(p, Mapping):
            for key, sub in p.items():
                props.setdefault(key, sub)
    return props


def _items(node: Schema, root: Schema) -> Schema | None:
    for alt in _alternatives(node, root):
        items = alt.get("items")
        if isinstance(items, Mapping):
            return items
    return None
