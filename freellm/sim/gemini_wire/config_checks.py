"""Checking the configuration blocks of a ``generateContent`` request: tools, schemas, tool/generation config.

Gemini validates function declarations and response schemas against its own OpenAPI subset and 400s
on anything else; a gateway must rewrite JSON Schema before sending it, and this module is what proves
it did. Refused, with Google's wording: unknown tool kinds and declaration keys, invalid function names,
schema keywords Gemini does not know (``additionalProperties``, ``$schema``…), type arrays, a schema
without ``type`` (unless it is an ``anyOf``), ``properties``/``required`` on a non-object and ``items``
on a non-array, empty object ``properties``, arrays without ``items``, ``enum`` on non-strings, string
formats other than ``enum``/``date-time``, ``required`` naming an undefined property, an unknown
``functionCallingConfig.mode`` or ``allowedFunctionNames`` outside mode ANY or naming an undeclared
function, unknown generation keys, out-of-range ``temperature``/``topP``, more than 5 stop sequences,
both ``thinkingBudget`` and ``thinkingLevel``, and JSON mode together with function declarations.
"""

from __future__ import annotations

import re
from typing import Any, Final

from freellm.sim.gemini_wire.fields import FUNCTION_NAME, field_of, invalid, unknown_field
from freellm.sim.wire import WireRequestError

__all__ = ["check_generation", "check_tool_config", "check_tools"]

_SCHEMA_KEYS: Final = frozenset(
    {
        "type",
        "format",
        "title",
        "description",
        "nullable",
        "enum",
        "maxItems",
        "minItems",
        "properties",
        "required",
        "minProperties",
        "maxProperties",
        "minLength",
        "maxLength",
        "pattern",
        "example",
        "anyOf",
        "propertyOrdering",
        "default",
        "items",
        "minimum",
        "maximum",
    }
)
_SCHEMA_TYPES: Final = frozenset({"string", "number", "integer", "boolean", "array", "object", "null"})
_GENERATION_KEYS: Final = frozenset(
    {
        "stopSequences",
        "responseMimeType",
        "responseSchema",
        "responseJsonSchema",
        "responseModalities",
        "candidateCount",
        "maxOutputTokens",
        "temperature",
        "topP",
        "topK",
        "seed",
        "presencePenalty",
        "frequencyPenalty",
        "responseLogprobs",
        "logprobs",
        "enableEnhancedCivicAnswers",
        "speechConfig",
        "thinkingConfig",
        "mediaResolution",
    }
)
_THINKING_KEYS: Final = frozenset({"thinkingBudget", "includeThoughts", "thinkingLevel"})
_TOOL_KINDS: Final = frozenset(
    {
        "functionDeclarations",
        "function_declarations",
        "googleSearch",
        "google_search",
        "googleSearchRetrieval",
        "codeExecution",
        "code_execution",
        "urlContext",
        "url_context",
    }
)
_DECLARATION_KEYS: Final = frozenset(
    {
        "name",
        "description",
        "parameters",
        "parametersJsonSchema",
        "response",
        "responseJsonSchema",
        "behavior",
    }
)
_MAX_STOP_SEQUENCES: Final = 5


def check_tools(tools: Any) -> list[str]:
    """Check ``tools``; return the declared function names."""
    if tools is None:
        return []
    if not isinstance(tools, list):
        raise WireRequestError("Invalid value at 'tools': expected a list")
    names: list[str] = []
    for i, tool in enumerate(tools):
        where = f"tools[{i}]"
        if not isinstance(tool, dict):
            raise WireRequestError(f"Invalid value at '{where}': expected an object")
        for key in tool:
            if key not in _TOOL_KINDS:
                raise unknown_field(key, where)
        declarations = field_of(tool, "functionDeclarations", "function_declarations")
        if declarations is None:
            continue
        if not isinstance(declarations, list):
            raise WireRequestError(f"Invalid value at '{where}.function_declarations': expected a list")
        for j, decl in enumerate(declarations):
            at = f"{where}.function_declarations[{j}]"
            if not isinstance(decl, dict):
                raise WireRequestError(f"Invalid value at '{at}': expected an object")
            for key in decl:
                if key not in _DECLARATION_KEYS:
                    raise unknown_field(key, at)
            name = decl.get("name")
            if not isinstance(name, str) or not FUNCTION_NAME.match(name):
                raise invalid(
                    f"{at}.name",
                    "Invalid function name. Must start with a letter or an underscore. Must be a-z, A-Z, "
                    "0-9, or contain underscores, dots, colons and dashes, with a maximum length of 64.",
                )
            if "parameters" in decl:
                _check_schema(decl["parameters"], f"{at}.parameters")
            names.append(name)
    return names


def _check_schema(node: Any, path: str) -> None:
    if not isinstance(node, dict):
        raise WireRequestError(f"Invalid value at '{path}': expected an object")
    for key in node:
        if key not in _SCHEMA_KEYS:
            raise unknown_field(key, path)
    kind = node.get("type")
    if isinstance(kind, list):
        raise WireRequestError(
            f"Invalid value at '{path}.type': Proto field is not repeating, cannot start list."
        )
    if kind is not None and (not isinstance(kind, str) or kind.lower() not in _SCHEMA_TYPES):
        raise WireRequestError(
            f"Invalid value at '{path}.type' (type.googleapis.com/google.ai.generativelanguage.v1beta.Type), "
            f'"{kind}"'
        )
    kind = kind.lower() if isinstance(kind, str) else None
    if kind is None and "anyOf" not in node:
        raise invalid(f"{path}.type", "must be specified when not using one_of, any_of or all_of fields")
    for key, owner in (("properties", "object"), ("required", "object"), ("items", "array")):
        if key in node and kind != owner:
            raise invalid(f"{path}.{key}", f"only allowed for {owner.upper()} type")
    props = node.get("properties")
    if props is not None:
        if not isinstance(props, dict):
            raise WireRequestError(f"Invalid value at '{path}.properties': expected an object")
        if kind == "object" and not props:
            raise invalid(f"{path}.properties", "should be non-empty for OBJECT type")
        for name, sub in props.items():
            _check_schema(sub, f"{path}.properties[{name}].value")
    required = node.get("required")
    if required is not None:
        if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
            raise WireRequestError(f"Invalid value at '{path}.required': expected a list of strings")
        for k, name in enumerate(required):
            if not isinstance(props, dict) or name not in props:
                raise invalid(f"{path}.required[{k}]", "property is not defined")
    if kind == "array" and "items" not in node:
        raise invalid(f"{path}.items", "missing field.")
    if "items" in node:
        _check_schema(node["items"], f"{path}.items")
    enum = node.get("enum")
    if enum is not None:
        if not isinstance(enum, list) or not all(isinstance(v, str) for v in enum):
            raise WireRequestError(f"Invalid value at '{path}.enum': expected a list of strings")
        if kind not in (None, "string"):
            raise invalid(f"{path}.enum", "only allowed for STRING type")
    fmt = node.get("format")
    if isinstance(fmt, str) and kind == "string" and fmt not in ("enum", "date-time"):
        raise invalid(f"{path}.format", "only 'enum' and 'date-time' are supported for STRING type")
    branches = node.get("anyOf")
    if branches is not None:
        if not isinstance(branches, list):
            raise WireRequestError(f"Invalid value at '{path}.any_of': expected a list")
        for k, sub in enumerate(branches):
            _check_schema(sub, f"{path}.any_of[{k}]")


def check_tool_config(config: Any, declared: list[str]) -> None:
    """Check ``toolConfig`` against the ``declared`` function names."""
    if config is None:
        return
    if not isinstance(config, dict):
        raise WireRequestError("Invalid value at 'tool_config': expected an object")
    for key in config:
        if key not in ("functionCallingConfig", "function_calling_config", "retrievalConfig"):
            raise unknown_field(key, "tool_config")
    fcc = field_of(config, "functionCallingConfig", "function_calling_config")
    if fcc is None:
        return
    if not isinstance(fcc, dict):
        raise WireRequestError("Invalid value at 'tool_config.function_calling_config': expected an object")
    for key in fcc:
        if key not in ("mode", "allowedFunctionNames", "allowed_function_names"):
            raise unknown_field(key, "tool_config.function_calling_config")
    mode = fcc.get("mode", "AUTO")
    if mode not in ("AUTO", "ANY", "NONE", "VALIDATED", "MODE_UNSPECIFIED"):
        raise WireRequestError(
            "Invalid value at 'tool_config.function_calling_config.mode' "
            f'(type.googleapis.com/google.ai.generativelanguage.v1beta.FunctionCallingConfig.Mode), "{mode}"'
        )
    allowed = field_of(fcc, "allowedFunctionNames", "allowed_function_names")
    if allowed:
        if mode not in ("ANY", "VALIDATED"):
            raise invalid(
                "tool_config.function_calling_config.allowed_function_names",
                "allowed_function_names can only be set when mode is ANY.",
            )
        for name in allowed:
            if name not in declared:
                raise invalid(
                    "tool_config.function_calling_config.allowed_function_names",
                    f"function {name} is not declared.",
                )


def check_generation(config: Any, have_functions: bool) -> None:
    """Check ``generationConfig`` (``have_functions``: the request declares functions)."""
    if config is None:
        return
    if not isinstance(config, dict):
        raise WireRequestError("Invalid value at 'generation_config': expected an object")
    for key in config:
        camel = re.sub(r"_([a-z])", lambda m: m.group(1).upper(), key)
        if camel not in _GENERATION_KEYS:
            raise unknown_field(key, "generation_config")
    stops = field_of(config, "stopSequences", "stop_sequences")
    if stops is not None and (not isinstance(stops, list) or len(stops) > _MAX_STOP_SEQUENCES):
        raise invalid("generation_config.stop_sequences", "at most 5 stop sequences are allowed")
    temperature = config.get("temperature")
    if temperature is not None and (not isinstance(temperature, int | float) or not 0 <= temperature <= 2):
        raise invalid("generation_config.temperature", "temperature must be in [0.0, 2.0]")
    top_p = field_of(config, "topP", "top_p")
    if top_p is not None and (not isinstance(top_p, int | float) or not 0 <= top_p <= 1):
        raise invalid("generation_config.top_p", "top_p must be in [0.0, 1.0]")
    thinking = field_of(config, "thinkingConfig", "thinking_config")
    if thinking is not None:
        if not isinstance(thinking, dict):
            raise WireRequestError("Invalid value at 'generation_config.thinking_config': expected an object")
        for key in thinking:
            camel = re.sub(r"_([a-z])", lambda m: m.group(1).upper(), key)
            if camel not in _THINKING_KEYS:
                raise unknown_field(key, "generation_config.thinking_config")
        if field_of(thinking, "thinkingBudget", "thinking_budget") is not None and (
            field_of(thinking, "thinkingLevel", "thinking_level") is not None
        ):
            raise WireRequestError(
                "You cannot set both thinking_level and the legacy thinking_budget parameter."
            )
    mime = field_of(config, "responseMimeType", "response_mime_type")
    if have_functions and mime == "application/json":
        raise WireRequestError(
            "Function calling with a response mime type: 'application/json' is unsupported"
        )
    schema = field_of(config, "responseSchema", "response_schema")
    if schema is not None:
        _check_schema(schema, "generation_config.response_schema")
