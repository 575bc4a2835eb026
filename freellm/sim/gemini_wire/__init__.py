"""The simulator's Gemini ``generateContent`` wire: request checks, rendering of plans, errors, model lists.

Split by concern:

* :mod:`.wire` — the :class:`GeminiWire` object the shared flow talks to, its three instances (unary,
  SSE, JSON-array stream) and :func:`wire_for_action`/:func:`split_target` for routing;
* :mod:`.request_checks` — the body, turns and parts checked as the Gemini API checks them, with its
  wording; :mod:`.config_checks` — the same for ``tools``, schemas, ``toolConfig`` and
  ``generationConfig``; :mod:`.fields` — the field spellings and error wording both share;
* :mod:`.render` — a plan as a ``GenerateContentResponse`` or its stream frames;
* :mod:`.errors` — the ``google.rpc.Status`` error bodies;
* :mod:`.embed` — the ``embedContent``/``batchEmbedContents`` actions (checked, answered with
  deterministic vectors), routed by :func:`embed_dialect_for_action`.
"""

from freellm.sim.gemini_wire.embed import GEMINI_EMBED_ACTIONS, embed_dialect_for_action
from freellm.sim.gemini_wire.render import finish_reason_of, thought_signature_of
from freellm.sim.gemini_wire.wire import (
    GEMINI_ACTIONS,
    GEMINI_JSON_STREAM_WIRE,
    GEMINI_SSE_WIRE,
    GEMINI_UNARY_WIRE,
    GeminiWire,
    split_target,
    wire_for_action,
)

__all__ = [
    "GEMINI_ACTIONS",
    "GEMINI_EMBED_ACTIONS",
    "GEMINI_JSON_STREAM_WIRE",
    "GEMINI_SSE_WIRE",
    "GEMINI_UNARY_WIRE",
    "GeminiWire",
    "embed_dialect_for_action",
    "finish_reason_of",
    "split_target",
    "thought_signature_of",
    "wire_for_action",
]
