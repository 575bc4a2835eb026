"""Token estimation for routing and the budget guardrail (spec/core.md §9).

A deliberately cheap heuristic, identical to the reference's: ceil(chars / 4) per text block, a flat
figure per image part, tool schemas not counted. The per-message sums are computed once per request
(cached on the :class:`~freellm.core.request.ChatRequest`), so calling these repeatedly is free.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from freellm.core.request import ChatRequest

__all__ = ["estimate_input_tokens", "estimate_text_tokens", "routing_estimate"]


def estimate_text_tokens(n_chars: int) -> int:
    """ceil(n_chars / 4); 0 for an empty (or negative) length."""
    return (n_chars + 3) // 4 if n_chars > 0 else 0


def estimate_input_tokens(req: ChatRequest, *, image_tokens: int = 1000) -> int:
    """Σ ceil(len(text)/4) over the text blocks of every message + ``image_tokens`` per image part."""
    return req.text_token_estimate + image_tokens * req.image_count


def routing_estimate(
    req: ChatRequest,
    *,
    reserve_default: int = 1000,
    reserve_cap: int = 2000,
    image_tokens: int = 1000,
) -> int:
    """Input estimate + the output reserve min(max_tokens, or ``reserve_default`` if unset; ``reserve_cap``).

    The defaults are :class:`~freellm.config.RoutingConfig`'s ``output_reserve_default``,
    ``output_reserve_cap`` and ``image_token_estimate``.
    """
    reserve = min(req.max_tokens or reserve_default, reserve_cap)
    return estimate_input_tokens(req, image_tokens=image_tokens) + reserve
