"""Pairing every Gemini function call with exactly one function response, in order.

Gemini 400s when "the number of function response parts is not equal to the number of function call
parts", and expects the responses at the start of the user turn right after the model turn that made
the calls. Canonical histories often break this (lost results, reordered results, ids a client dropped),
so the translated contents are repaired. Decisions (also in ``docs/providers.md``): in a user turn the
function responses come first, in the order of the calls they answer; a call without a result gets a
``{"output": "(no result)"}`` response; a result whose call is not in the previous model turn is sent as
text.
"""

from __future__ import annotations

from typing import Any, Final

import orjson

from freellm.providers.gemini_wire.contents import CALL_ID, NATIVE, Content, Part, append_parts

__all__ = ["MISSING_RESULT_TEXT", "repair_pairing"]

MISSING_RESULT_TEXT: Final = "(no result)"


def repair_pairing(contents: list[Content]) -> list[Content]:
    """Each model turn's calls answered (in order) at the start of the next user turn, nothing else."""
    out: list[Content] = []
    pending: list[Part] = []  # functionCall parts of the previous model turn
    for content in contents:
        if content["role"] == "model":
            if pending:
                append_parts(out, "user", _placeholders(pending))
            append_parts(out, "model", content["parts"])
            pending = [p for p in content["parts"] if "functionCall" in p]
            continue
        responses: dict[int, Part] = {}
        others: list[Part] = []
        for part in content["parts"]:
            if "functionResponse" not in part:
                others.append(part)
                continue
            slot = next(
                (
                    i
                    for i, call in enumerate(pending)
                    if i not in responses and call[CALL_ID] and call[CALL_ID] == part[CALL_ID]
                ),
                None,
            )
            if slot is None:
                # Same name, id unknown (a client that lost ids): answer the first open call of that name.
                slot = next(
                    (
                        i
                        for i, call in enumerate(pending)
                        if i not in responses
                        and not part[CALL_ID]
                        and call["functionCall"]["name"] == part["functionResponse"]["name"]
                    ),
                    None,
                )
            if slot is None:
                others.append(_result_as_text(part))
            else:
                call = pending[slot]
                fr = part["functionResponse"]
                fr["name"] = call["functionCall"]["name"]
                responses[slot] = part
        ordered: list[Part] = []
        for i, call in enumerate(pending):
            ordered.append(responses[i] if i in responses else _placeholders([call])[0])
        append_parts(out, "user", ordered + others)
        pending = []
    if pending:
        append_parts(out, "user", _placeholders(pending))
    return out


def _placeholders(calls: list[Part]) -> list[Part]:
    out: list[Part] = []
    for call in calls:
        body: dict[str, Any] = {
            "name": call["functionCall"]["name"],
            "response": {"output": MISSING_RESULT_TEXT},
        }
        if call.get(NATIVE):
            body = {"id": call[CALL_ID], **body}
        out.append({"functionResponse": body, CALL_ID: call[CALL_ID], NATIVE: call.get(NATIVE, False)})
    return out


def _result_as_text(part: Part) -> Part:
    fr = part["functionResponse"]
    response = fr.get("response")
    if isinstance(response, dict) and set(response) == {"output"} and isinstance(response["output"], str):
        text = response["output"]
    else:
        text = orjson.dumps(response).decode()
    label = fr.get("name") or part.get(CALL_ID) or "tool"
    return {"text": f"[tool result {label}]\n{text}".rstrip()}
