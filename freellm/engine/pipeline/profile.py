"""Client profiles: which chain a request uses, which models its key may ask for, and the system prompt
the profile enforces (seed §2 "system-prompt injection (profile-enforced)").

A key bound to a profile (``auth.api_keys: [{key, profile}]``) gets its profile's chain for ``auto``
and may ask only for the models its profile lists (a route ``provider/model`` or a bare model id; a
bare id also allows pins of that id); anything else — another profile's ``auto:OTHER`` included — is a
403 ``model_not_allowed`` before any upstream call. An unbound key may choose a profile with
``model: "auto:NAME"`` (an unknown NAME is the catalog's 404). The profile's system prompt is then
prepended to the client's system text, or replaces it, in a new request.
"""

from __future__ import annotations

from typing import Any

from freellm.config import ProfileConfig
from freellm.core.request import ChatRequest
from freellm.engine.context import RequestContext
from freellm.engine.pipeline import Draft
from freellm.errors import ClientError
from freellm.routing.scoring import resolve_strategy

__all__ = ["ProfileStage", "apply_system_prompt", "model_allowed"]


def model_allowed(profile: ProfileConfig, requested: str) -> bool:
    """``auto`` and ``auto:<strategy>`` are always allowed (the profile's own chain); otherwise the list
    decides."""
    if profile.models is None or requested.lower() == "auto":
        return True
    if requested.lower().startswith("auto:") and resolve_strategy(requested[5:]) is not None:
        return True
    wanted = requested.strip().lower()
    as_label = wanted.replace(":", "/", 1) if "/" not in wanted else wanted
    bare = as_label.split("/", 1)[1] if "/" in as_label else as_label
    for entry in profile.models:
        allowed = entry.strip().lower()
        if allowed in (wanted, as_label) or ("/" not in allowed and allowed == bare):
            return True
    return False


def apply_system_prompt(messages: list[dict[str, Any]], prompt: str, mode: str) -> list[dict[str, Any]]:
    """The messages with ``prompt`` enforced: ``prepend`` puts it before the client's leading system text
    (in the same first system message), ``replace`` drops every client system message for it."""
    if mode == "replace":
        return [{"role": "system", "content": prompt}, *(m for m in messages if m.get("role") != "system")]
    if messages and messages[0].get("role") == "system":
        first = dict(messages[0])
        content = first.get("content")
        if isinstance(content, str):
            first["content"] = f"{prompt}\n\n{content}" if content else prompt
        elif isinstance(content, list):
            first["content"] = [{"type": "text", "text": prompt}, *content]
        else:
            first["content"] = prompt
        return [first, *messages[1:]]
    return [{"role": "system", "content": prompt}, *messages]


class ProfileStage:
    name = "profile"

    def __init__(self, profiles: dict[str, ProfileConfig]) -> None:
        self._profiles = profiles

    async def __call__(self, ctx: RequestContext, draft: Draft) -> Draft:
        req: ChatRequest = draft.req
        requested = req.requested_model
        bound = ctx.bound_profile
        name: str | None = bound
        if requested.lower().startswith("auto:") and resolve_strategy(requested[5:]) is None:
            asked = requested[5:]
            if bound is not None and asked != bound:
                raise _not_allowed(requested)
            name = asked if asked in self._profiles else None  # unknown: the catalog's 404 at the gates
        elif bound is not None and not model_allowed(self._profiles[bound], requested):
            raise _not_allowed(requested)
        if name is None:
            return draft
        ctx.profile = name
        profile = self._profiles[name]
        if not profile.system_prompt:
            return draft
        messages = apply_system_prompt(
            [m.wire() for m in req.messages], profile.system_prompt, profile.system_prompt_mode
        )
        return Draft(req.replace(messages=messages), draft.plan, draft.needs)


def _not_allowed(requested: str) -> ClientError:
    return ClientError(
        403,
        f"This API key may not use the model `{requested}`.",
        type="permission_error",
        code="model_not_allowed",
        param="model",
    )
