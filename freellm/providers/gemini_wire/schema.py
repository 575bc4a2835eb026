"""JSON Schema → the subset Gemini accepts for function ``parameters`` and ``responseSchema``.

Gemini's ``Schema`` is a select subset of OpenAPI 3.0, and the API answers 400 ``Invalid JSON payload
received. Unknown name "…"`` for any other keyword. Client tool schemas are full JSON Schema (pydantic,
zod, MCP servers…), so every schema is rebuilt from an **allow-list** rather than pruned from a deny-list:
whatever this module does not know is dropped, so a keyword invented tomorrow cannot break a request.

Rules (each has a golden case in ``tests/golden/gemini_upstream/schema_*.json``):

* **kept**: ``type``, ``title``, ``description``, ``nullable``, ``enum``, ``format`` (only the values
  Gemini accepts, below), ``properties`` (property *names* are never touched, ``x-foo`` included),
  ``required`` (only names that are properties), ``items``, ``minItems``/``maxItems``,
  ``minProperties``/``maxProperties``, ``minLength``/``maxLength``, ``pattern``, ``minimum``/``maximum``,
  ``anyOf``, ``propertyOrdering``;
* **dropped**: every ``$``-keyword (``$schema``, ``$id``, ``$comment``, ``$defs``…), ``definitions``,
  ``additionalProperties``, ``default``, ``examples``/``example``, ``const`` (turned into ``enum`` first),
  ``exclusiveMinimum``/``exclusiveMaximum``, ``multipleOf``, ``uniqueItems``, ``patternProperties``,
  ``propertyNames``, ``unevaluated*``, ``if``/``then``/``else``, ``not``, ``dependent*``,
  ``content*``, ``prefixItems``, ``contains``, ``readOnly``/``writeOnly``, ``deprecated``, ``x-*``
  vendor keywords, and anything else not kept;
* **type arrays**: ``["string", "null"]`` → ``type: string`` + ``nullable: true``; several non-null types
  → ``anyOf`` with one branch per type (each branch keeps the keywords that apply to its type);
  ``type: "null"`` alone → ``nullable: true`` with no type;
* **anyOf / oneOf**: ``oneOf`` is read as ``anyOf`` (Gemini has no exclusive form); a ``{type: null}``
  branch becomes ``nullable: true``; a single remaining branch is merged into the schema (the schema's
  own keywords win);
* **allOf**: the branches are merged into the schema (properties and ``required`` united, other keywords:
  the schema's own first, then the first branch that has it);
* **$ref**: local references (``#/$defs/X``, ``#/definitions/X``, any ``#/…`` JSON pointer) are inlined,
  the referring schema's sibling keywords winning; a reference cycle stops at the second visit with a
  bare ``{type: object}`` (plus the siblings); a remote reference is dropped (its siblings stay, as an
  object);
* **format**: strings keep ``enum`` and ``date-time``, numbers ``float``/``double``, integers
  ``int32``/``int64``; every other format (``email``, ``uri``, ``uuid``, ``date``…) is dropped (the
  Gemini API rejects it);
* **enum**: values become strings (Gemini's enum is ``string[]``), a ``null`` value becomes
  ``nullable: true``; ``const`` → a one-value enum. Gemini allows ``enum`` only on strings, so on an
  integer/number/boolean the type is kept and the values are appended to the description instead;
* **shape fixes Gemini insists on**: every schema has a ``type`` unless it is an ``anyOf`` ("type: must
  be specified when not using one_of, any_of or all_of fields"): a missing one is inferred from
  ``properties`` (object), ``items`` (array) or ``enum`` (string), a ``$ref`` that cannot be inlined is
  an object, anything else (an "any value" schema such as ``{}``) becomes ``string``; type keywords
  appear only on their type ("properties: only allowed for OBJECT type": ``properties``/``required``
  only on objects, ``items``/``minItems``/``maxItems`` only on arrays, ``minLength``/``maxLength``/
  ``pattern`` only on strings, ``minimum``/``maximum`` only on numbers); an ``array`` without ``items``
  gets ``items: {type: string}``; an ``object`` with an empty ``properties`` map loses the map
  ("properties: should be non-empty for OBJECT type"); boolean schemas ``true``/``false`` → ``{}`` (so
  ``string``) / dropped property;
* **limits**: nesting deeper than :data:`MAX_DEPTH` is cut to ``{type: string}`` (a hostile or runaway
  schema cannot make the translation explode).

:func:`sanitize_parameters` is the entry point for a function's ``parameters``: an object schema with no
properties left is ``None`` (the declaration is sent without ``parameters``, which is how Gemini spells
"no arguments").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

__all__ = ["MAX_DEPTH", "sanitize_parameters", "sanitize_schema"]

MAX_DEPTH: Final = 32
"""Deeper nesting is replaced by ``{type: string}``."""

_TYPES: Final = frozenset({"string", "number", "integer", "boolean", "array", "object"})
_FORMATS: Final[dict[str, frozenset[str]]] = {
    "string": frozenset({"enum", "date-time"}),
    "number": frozenset({"float", "double"}),
    "integer": frozenset({"int32", "int64"}),
}
_COUNTS: Final = ("minItems", "maxItems", "minProperties", "maxProperties", "minLength", "maxLength")
_BOUNDS: Final = ("minimum", "maximum")

# Keywords that belong to one type: a type-array split into anyOf branches gives each branch only its own.
_TYPE_KEYWORDS: Final[dict[str, frozenset[str]]] = {
    "object": frozenset({"properties", "required", "minProperties", "maxProperties", "propertyOrdering"}),
    "array": frozenset({"items", "minItems", "maxItems"}),
    "string": frozenset({"enum", "format", "minLength", "maxLength", "pattern"}),
    "number": frozenset({"enum", "format", "minimum", "maximum"}),
    "integer": frozenset({"enum", "format", "minimum", "maximum"}),
    "boolean": frozenset(),
}
_ALL_TYPE_KEYWORDS: Final = frozenset().union(*_TYPE_KEYWORDS.values())

Schema = dict[str, Any]


def sanitize_schema(schema: Any) -> Schema:
    """The Gemini form of one JSON Schema (a new dict; the input is never modified)."""
    if not isinstance(schema, Mapping):
        return {}
    return _Sanitizer(schema).run(schema)


def sanitize_parameters(schema: Any) -> Schema | None:
    """The Gemini form of a function's ``parameters``; ``None`` when the function takes no arguments."""
    if not isinstance(schema, Mapping) or not schema:
        return None
    if "type" not in schema and not any(k in schema for k in ("anyOf", "oneOf", "allOf", "$ref")):
        schema = {"type": "object", **schema}  # a parameters root is an object unless it says otherwise
    out = sanitize_schema(schema)
    if out.get("type") in (None, "object") and not out.get("properties") and "anyOf" not in out:
        return None
    if out.get("type") != "object" and "anyOf" not in out:
        # Gemini wants an object here; a bare scalar schema becomes a one-property object.
        return {"type": "object", "properties": {"value": out}, "required": ["value"]}
    return out


class _Sanitizer:
    __slots__ = ("_root", "_visiting")

    def __init__(self, root: Mapping[str, Any]) -> None:
        self._root = root
        self._visiting: list[str] = []

    def run(self, schema: Mapping[str, Any]) -> Schema:
        return self._schema(schema, 0)

    # ---- one schema ----------------------------------------------------------------------------

    def _schema(self, node: Any, depth: int) -> Schema:
        if node is True or not isinstance(node, Mapping) or depth > MAX_DEPTH:
            return {"type": "string"}  # "any value" (or nesting cut off): a type Gemini accepts
        ref = node.get("$ref")
        if isinstance(ref, str):
            return self._ref(ref, node, depth)
        node = self._merge_all_of(node, depth)
        out: Schema = {}
        nullable = node.get("nullable") is True

        # type (a string or an array of strings)
        raw_type = node.get("type")
        types: list[str] = []
        if isinstance(raw_type, str):
            types = [raw_type.lower()]
        elif isinstance(raw_type, list):
            types = [t.lower() for t in raw_type if isinstance(t, str)]
        if "null" in types:
            nullable = True
            types = [t for t in types if t != "null"]
        types = list(dict.fromkeys(t for t in types if t in _TYPES))

        # const → enum
        enum_src = node.get("enum")
        if "const" in node and not isinstance(enum_src, list):
            enum_src = [node["const"]]
        if isinstance(enum_src, list):
            values = []
            for v in enum_src:
                if v is None:
                    nullable = True
                elif isinstance(v, str):
                    values.append(v)
                elif isinstance(v, bool):
                    values.append("true" if v else "false")
                elif isinstance(v, int | float):
                    values.append(str(v))
            if values:
                out["enum"] = list(dict.fromkeys(values))

        for key in ("title", "description"):
            value = node.get(key)
            if isinstance(value, str) and value:
                out[key] = value

        props = node.get("properties")
        if isinstance(props, Mapping):
            clean: dict[str, Schema] = {}
            for name, sub in props.items():
                if not isinstance(name, str) or sub is False:
                    continue
                clean[name] = self._schema(sub, depth + 1)
            if clean:
                out["properties"] = clean
                required = node.get("required")
                if isinstance(required, list):
                    names = [r for r in dict.fromkeys(required) if isinstance(r, str) and r in clean]
                    if names:
                        out["required"] = names
                ordering = node.get("propertyOrdering")
                if isinstance(ordering, list):
                    order = [p for p in ordering if isinstance(p, str) and p in clean]
                    if order:
                        out["propertyOrdering"] = order

        items = node.get("items")
        if isinstance(items, list):  # tuple form (draft 4-2019): the first position's schema
            items = items[0] if items else None
        if items is None and isinstance(node.get("prefixItems"), list) and node["prefixItems"]:
            items = node["prefixItems"][0]
        if isinstance(items, Mapping) or items is True:
            out["items"] = self._schema(items, depth + 1)

        for key in _COUNTS:
            value = node.get(key)
            if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
                out[key] = value
        for key in _BOUNDS:
            value = node.get(key)
            if isinstance(value, int | float) and not isinstance(value, bool):
                out[key] = value
        pattern = node.get("pattern")
        if isinstance(pattern, str) and pattern:
            out["pattern"] = pattern
        fmt = node.get("format")
        if isinstance(fmt, str):
            out["_format"] = fmt  # resolved once the type is known

        branches = node.get("anyOf")
        if not isinstance(branches, list):
            branches = node.get("oneOf")
        if isinstance(branches, list):
            clean_branches: list[Schema] = []
            for branch in branches:
                if isinstance(branch, Mapping) and _is_null_schema(branch):
                    nullable = True
                    continue
                sub = self._schema(branch, depth + 1)
                if sub.pop("nullable", False):
                    nullable = True
                clean_branches.append(sub)
            if len(clean_branches) == 1:
                for key, value in clean_branches[0].items():
                    out.setdefault(key, value)
                if not types and isinstance(out.get("type"), str):
                    types = [out["type"]]
            elif clean_branches:
                out["anyOf"] = clean_branches

        if not types and "anyOf" not in out:
            inferred = out.get("type")
            if isinstance(inferred, str):
                types = [inferred]
            elif "properties" in out:
                types = ["object"]
            elif "items" in out:
                types = ["array"]
            elif "enum" in out:
                types = ["string"]

        if len(types) > 1:
            return _split_types(out, types, nullable)
        out.pop("type", None)
        if types:
            out = {"type": types[0], **out}
        if nullable:
            out["nullable"] = True
        return _finish(out)

    # ---- $ref and allOf ------------------------------------------------------------------------

    def _ref(self, ref: str, node: Mapping[str, Any], depth: int) -> Schema:
        siblings = {k: v for k, v in node.items() if k != "$ref"}
        target = _resolve_pointer(self._root, ref) if ref.startswith("#") else None
        if not isinstance(target, Mapping) or ref in self._visiting:
            # Remote, unresolvable, or a cycle: the siblings alone, as an object (what a $ref names).
            siblings.setdefault("type", "object")
            return self._schema(siblings, depth)
        self._visiting.append(ref)
        try:
            merged = {**target, **siblings}  # the referring schema's own keywords win
            return self._schema(merged, depth + 1)
        finally:
            self._visiting.pop()

    def _merge_all_of(self, node: Mapping[str, Any], depth: int) -> Mapping[str, Any]:
        parts = node.get("allOf")
        if not isinstance(parts, list) or not parts or depth > MAX_DEPTH:
            return node
        merged: dict[str, Any] = {k: v for k, v in node.items() if k != "allOf"}
        props: dict[str, Any] = dict(merged.get("properties") or {})
        required: list[Any] = list(merged.get("required") or [])
        for part in parts:
            if not isinstance(part, Mapping):
                continue
            if isinstance(part.get("$ref"), str):
                part = self._ref_target(part, depth)
            part = self._merge_all_of(part, depth + 1)
            for key, value in part.items():
                if key == "properties" and isinstance(value, Mapping):
                    for name, sub in value.items():
                        props.setdefault(name, sub)
                elif key == "required" and isinstance(value, list):
                    required.extend(value)
                else:
                    merged.setdefault(key, value)
        if props:
            merged["properties"] = props
        if required:
            merged["required"] = required
        return merged

    def _ref_target(self, part: Mapping[str, Any], depth: int) -> Mapping[str, Any]:
        ref = part["$ref"]
        target = _resolve_pointer(self._root, ref) if ref.startswith("#") else None
        siblings = {k: v for k, v in part.items() if k != "$ref"}
        if not isinstance(target, Mapping) or ref in self._visiting:
            return siblings
        return {**target, **siblings}


def _is_null_schema(node: Mapping[str, Any]) -> bool:
    t = node.get("type")
    return t == "null" or (isinstance(t, list) and t == ["null"])


def _finish(out: Schema) -> Schema:
    """Apply the type-dependent fixes: a type for every schema, keywords only on their type, formats."""
    if "type" not in out and "anyOf" not in out:
        # Gemini: "type: must be specified when not using one_of, any_of or all_of fields".
        out = {"type": "string", **out}
    fmt = out.pop("_format", None)
    kind = out.get("type")
    formats = _FORMATS.get(kind, frozenset()) if isinstance(kind, str) else frozenset()
    if isinstance(fmt, str) and fmt in formats and (fmt != "enum" or "enum" in out):
        out["format"] = fmt
    if "enum" in out and kind != "string":
        # Gemini: "enum: only allowed for STRING type". Keep the type, say the values in words.
        allowed = "Allowed values: " + ", ".join(out.pop("enum")) + "."
        desc = out.get("description")
        out["description"] = f"{desc} {allowed}" if isinstance(desc, str) else allowed
    if isinstance(kind, str):
        # Gemini: "properties: only allowed for OBJECT type" (and the same for the other type keywords).
        own = _TYPE_KEYWORDS.get(kind, frozenset())
        for key in [k for k in out if k in _ALL_TYPE_KEYWORDS and k not in own]:
            del out[key]
    if kind == "array" and "items" not in out:
        out["items"] = {"type": "string"}
    if kind == "object" and not out.get("properties"):
        out.pop("properties", None)
        out.pop("required", None)
        out.pop("propertyOrdering", None)
    return out


def _split_types(out: Schema, types: list[str], nullable: bool) -> Schema:
    """``type: [a, b]`` → ``anyOf`` with one branch per type, each with the keywords of its type."""
    shared = {k: v for k, v in out.items() if k not in _ALL_TYPE_KEYWORDS and k not in ("type", "_format")}
    branches: list[Schema] = []
    for t in types:
        branch: Schema = {"type": t}
        for key in _TYPE_KEYWORDS[t]:
            if key == "format":
                if "_format" in out:
                    branch["_format"] = out["_format"]
            elif key in out:
                branch[key] = out[key]
        branches.append(_finish(branch))
    result: Schema = {**shared, "anyOf": branches}
    if nullable:
        result["nullable"] = True
    return result


def _resolve_pointer(root: Mapping[str, Any], ref: str) -> Any:
    """The node a local JSON pointer (``#/$defs/Name``) names, or None."""
    if ref in ("#", "#/"):
        return root
    if not ref.startswith("#/"):
        return None
    node: Any = root
    for raw in ref[2:].split("/"):
        key = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, Mapping):
            node = node.get(key)
        elif isinstance(node, list) and key.isdigit() and int(key) < len(node):
            node = node[int(key)]
        else:
            return None
    return node
