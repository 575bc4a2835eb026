"""Canonical (OpenAI chat) request body → Gemini ``generateContent`` request body.

The input is what :meth:`freellm.core.request.ChatRequest.upstream_body` builds (normalised messages:
system/user/assistant/tool roles only, every tool call with an id). The output is a body the Gemini API
accepts (it 400s on unknown fields, so only what has a Gemini equivalent is sent). Pure: remote images
are fetched by the provider beforehand and handed in as ``media``; signatures come from the provider's
:class:`~freellm.providers.gemini_wire.signatures.SignatureCache`.

:func:`to_gemini_request` is the one entry point; it composes the translators, each owning its part of
the wire and its decisions (also in ``docs/providers.md``):

* :mod:`.contents` — messages → system text and turns, parts, function calls/responses, signatures;
* :mod:`.pairing` — every call answered once, in order;
* :mod:`.media` — images, audio and files as ``inlineData``;
* :mod:`.tools` — ``tools``/``tool_choice`` → ``tools``/``toolConfig``;
* :mod:`.generation` — sampling, ``response_format`` and thinking → ``generationConfig``;
* :mod:`.models` — the model-family facts they share.

Decided here, where the pieces meet:

* **system**: the system texts (and a JSON-mode instruction, when JSON mode cannot be used) are joined
  with blank lines into ``systemInstruction``. Gemma models refuse system instructions ("Developer
  instruction is not enabled"), so for them the text is the first user turn instead.
* **opening turn**: a conversation that opens with a model turn gets a ``"."`` user turn in front; one
  with no turns sends the system text (or ``"."``) as the user turn.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from freellm.providers.gemini_wire.contents import (
    apply_signatures,
    clean_content,
    merge_adjacent,
    translate_messages,
)
from freellm.providers.gemini_wire.generation import apply_response_format, apply_sampling
from freellm.providers.gemini_wire.media import InlineData
from freellm.providers.gemini_wire.models import is_gemma
from freellm.providers.gemini_wire.pairing import repair_pairing
from freellm.providers.gemini_wire.signatures import SignatureCache
from freellm.providers.gemini_wire.tools import (
    PLACEHOLDER_TOOL_DESCRIPTION,
    called_names,
    tool_config_for,
    translate_tools,
)

__all__ = ["OPENING_USER_TEXT", "to_gemini_request"]

OPENING_USER_TEXT: Final = "."


def to_gemini_request(
    body: Mapping[str, Any],
    *,
    signatures: SignatureCache | None = None,
    media: Mapping[str, InlineData] | None = None,
) -> dict[str, Any]:
    """Translate one canonical upstream body into a Gemini ``generateContent`` body (a new dict)."""
    model = body.get("model") if isinstance(body.get("model"), str) else ""
    assert isinstance(model, str)
    media = media or {}
    system, contents = translate_messages(body.get("messages") or [], media, signatures)
    contents = repair_pairing(contents)
    declarations, search = translate_tools(body.get("tools"))
    if not declarations:
        called = called_names(contents)
        if called:
            declarations = [{"name": n, "description": PLACEHOLDER_TOOL_DESCRIPTION} for n in called]
            tool_config: dict[str, Any] | None = {"functionCallingConfig": {"mode": "NONE"}}
        else:
            tool_config = None
    else:
        tool_config = tool_config_for(body.get("tool_choice"), declarations)

    generation: dict[str, Any] = {}
    # Gemini refuses JSON mode next to function calling; Gemma refuses it altogether ("JSON mode is not
    # enabled"). Both get the format as an instruction instead.
    json_hint = apply_response_format(
        body.get("response_format"), generation, bool(declarations) or is_gemma(model)
    )
    if json_hint:
        system.append(json_hint)

    apply_signatures(contents, model, signatures)
    system_text = "\n\n".join(t for t in system if t)
    if system_text and is_gemma(model):
        contents.insert(0, {"role": "user", "parts": [{"text": system_text}]})
        contents = merge_adjacent(contents)
        system_text = ""
    if not contents:
        contents = [{"role": "user", "parts": [{"text": system_text or OPENING_USER_TEXT}]}]
        system_text = ""
    elif contents[0]["role"] != "user":
        contents.insert(0, {"role": "user", "parts": [{"text": OPENING_USER_TEXT}]})

    out: dict[str, Any] = {"contents": [clean_content(c) for c in contents]}
    if system_text:
        out["systemInstruction"] = {"parts": [{"text": system_text}]}
    tools: list[dict[str, Any]] = []
    if declarations:
        tools.append({"functionDeclarations": declarations})
    if search:
        tools.append({"googleSearch": {}})
    if tools:
        out["tools"] = tools
    if tool_config is not None and declarations:
        out["toolConfig"] = tool_config
    apply_sampling(body, generation, model)
    if generation:
        out["generationConfig"] = generation
    return out
