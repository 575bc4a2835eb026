"""Vendor model names that must never 404: a family map from names like ``claude-opus-4-7`` or
``gemini-2.5-flash-lite`` to a route, a group or ``auto``.

Claude Code and Gemini CLI send their vendor's model names whatever gateway they talk to. A name that
is already routable (a configured route, group or ``auto``) is used as is; anything else is classified
into the longest family key of the operator's ``model_map`` it contains (``flash-lite`` beats
``flash``) and routed to that family's target — which itself falls back to ``auto`` if not routable.
"""

from __future__ import annotations

from collections.abc import Iterable

from freellm.errors import ClientError
from freellm.routing.catalog import Catalog

__all__ = ["DEFAULT_FAMILY", "is_routable", "longest_family", "resolve_mapped"]

DEFAULT_FAMILY = "default"


def is_routable(catalog: Catalog, name: str) -> bool:
    try:
        catalog.resolve(name)
    except ClientError:
        return False
    return True


def longest_family(name: str, model_map: Iterable[str], *, default_names: frozenset[str]) -> str:
    """The longest ``model_map`` key contained in the lower-cased ``name`` (``default`` when none)."""
    lower = name.strip().lower()
    if lower in default_names:
        return DEFAULT_FAMILY
    families = sorted((k for k in model_map if k.lower() != DEFAULT_FAMILY), key=len, reverse=True)
    for family in families:
        if family.lower() in lower:
            return family
    return DEFAULT_FAMILY


def resolve_mapped(name: str, family: str, catalog: Catalog, model_map: dict[str, str]) -> str:
    """``name`` if routable, else the family's target (or the default family's), else ``auto``."""
    if name and is_routable(catalog, name):
        return name
    target = model_map.get(family) or model_map.get(DEFAULT_FAMILY) or "auto"
    return target if is_routable(catalog, target) else "auto"
