"""Canonical ``tools``/``tool_choice`` → Gemini ``tools`` and ``toolConfig``.

Decisions (also in ``docs/providers.md``): a function named ``google_search``/``googlesearch``/
``google_search_retrieval`` becomes native Search grounding (``{googleSearch: {}}``); the others become
``functionDeclarations`` with sanitised ``parameters`` (:mod:`.schema`; no ``parameters`` for a function
without arguments). ``tool_choice`` → ``toolConfig.functionCallingConfig``: ``auto`` → AUTO,
``required`` → ANY, ``none`` → NONE, a named function → ANY + ``allowedFunctionNames``; only sent with
declarations. History with function calls while no ``tools`` are declared gets placeholder
declarations of the called names (:func:`called_names`, :data:`PLACEHOLDER_TOOL_DESCRIPTION`) and mode
``NONE``, because Gemini refuses function parts that name no declared function.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from freellm.providers.gemini_wire.contents import Content
from freellm.providers.gemini_wire.schema import sanitize_parameters

__all__ = [
    "PLACEHOLDER_TOOL_DESCRIPTION",
    "SEARCH_TOOL_NAMES",
    "called_names",
    "tool_config_for",
    "translate_tools",
]

PLACEHOLDER_TOOL_DESCRIPTION: Final = "A tool used earlier in this conversation."
SEARCH_TOOL_NAMES: Final = frozenset({"google_search", "googlesearch", "google_search_retrieval"})


def called_names(contents: list[Content]) -> list[str]:
    """The function names the turns call or answer, in first-seen order."""
    names: list[str] = []
    for content in contents:
        for part in content["parts"]:
            for key in ("functionCall", "functionResponse"):
                inner = part.get(key)
                if isinstance(inner, dict):
                    name = inner.get("name")
                    if isinstance(name, str) and name and name not in names:
                        names.append(name)
    return names


def translate_tools(tools: Any) -> tuple[list[dict[str, Any]], bool]:
    """``(functionDeclarations, whether Search grounding is asked for)`` of canonical ``tools``."""
    declarations: list[dict[str, Any]] = []
    search = False
    if not isinstance(tools, list):
        return declarations, search
    seen: set[str] = set()
    for tool in tools:
        if not isinstance(tool, Mapping):
            continue
        fn = tool.get("function")
        if not isinstance(fn, Mapping):
            continue
        name = fn.get("name")
        if not isinstance(name, str) or not name:
            continue
        if name.lower() in SEARCH_TOOL_NAMES:
            search = True
            continue
        if name in seen:
            continue
        seen.add(name)
        entry: dict[str, Any] = {"name": name}
        description = fn.get("description")
        if isinstance(description, str) and description:
            entry["description"] = description
        params = sanitize_parameters(fn.get("parameters"))
        if params is not None:
            entry["parameters"] = params
        declarations.append(entry)
    return declarations, search


def tool_config_for(choice: Any, declarations: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The ``toolConfig`` for a ``tool_choice``, or None when it sets nothing."""
    config: dict[str, Any]
    if choice == "auto":
        config = {"mode": "AUTO"}
    elif choice in ("required", "any"):
        config = {"mode": "ANY"}
    elif choice == "none":
        config = {"mode": "NONE"}
    elif isinstance(choice, Mapping):
        fn = choice.get("function")
        name = fn.get("name") if isinstance(fn, Mapping) else None
        config = {"mode": "ANY"}
        if isinstance(name, str) and any(d["name"] == name for d in declarations):
            config["allowedFunctionNames"] = [name]
    else:
        return None
    return {"functionCallingConfig": config}
