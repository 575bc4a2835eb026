"""Gemini's embedding actions: ``POST …/models/{model}:embedContent`` and ``:batchEmbedContents``.

``embedContent {content: {parts: [{text}]}, taskType?, title?, outputDimensionality?}`` answers
``{embedding: {values}}``; ``batchEmbedContents {requests: [...]}`` (each request naming the path's
model) answers ``{embeddings: [{values}]}``. The path's model routes like ``/v1/embeddings``' ``model``
— a family, a member's id (``text-embedding-004``) or a pin; an unknown one is a 404 in Gemini's
envelope. A content's text parts are joined into one input. Field names are taken in camelCase and
snake_case, as the Gemini API takes them.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from freellm.core.embeddings import EmbeddingRequest
from freellm.engine.embeddings import EmbeddingTurn
from freellm.errors import ClientError
from freellm.server.body import read_json
from freellm.server.embed_http import respond_embeddings
from freellm.server.state import GATEWAY
from freellm.surfaces.gemini_wire.mapping import strip_model_prefix

__all__ = ["EMBED_ACTIONS", "batch_embed_contents", "embed_content", "parse_batch_embed", "parse_embed_content"]

EMBED_ACTIONS = ("embedContent", "batchEmbedContents")


async def embed_content(request: web.Request, model: str) -> web.Response:
    req = parse_embed_content(await read_json(request), model)
    return await respond_embeddings(
        request, req, surface="gemini-embed", render=lambda turn: {"embedding": {"values": turn.answer.vectors[0]}}
    )


async def batch_embed_contents(request: web.Request, model: str) -> web.Response:
    max_inputs = request.app[GATEWAY].settings.embeddings.max_inputs
    req = parse_batch_embed(await read_json(request), model, max_inputs=max_inputs)

    def render(turn: EmbeddingTurn) -> dict[str, Any]:
        return {"embeddings": [{"values": v} for v in turn.answer.vectors]}

    return await respond_embeddings(request, req, surface="gemini-embed", render=render)


def _field(body: dict[str, Any], camel: str, snake: str) -> Any:
    return body[camel] if camel in body else body.get(snake)


def _item(body: Any, where: str) -> tuple[str, str | None, str | None, int | None]:
    """(text, taskType, title, outputDimensionality) of one ``EmbedContentRequest``."""
    if not isinstance(body, dict):
        raise ClientError(400, f"Invalid JSON payload: `{where}` must be an object.")
    content = body.get("content")
    parts = content.get("parts") if isinstance(content, dict) else None
    if not isinstance(parts, list) or not parts:
        raise ClientError(400, f"`{where}content.parts` must be a non-empty list.")
    texts: list[str] = []
    for i, part in enumerate(parts):
        text = part.get("text") if isinstance(part, dict) else None
        if not isinstance(text, str):
            raise ClientError(400, f"`{where}content.parts[{i}]` must be a text part (embeddings take text only).")
        texts.append(text)
    joined = "\n".join(texts)
    if not joined:
        raise ClientError(400, f"`{where}content` must not be empty.")
    task = _field(body, "taskType", "task_type")
    if task is not None and not isinstance(task, str):
        raise ClientError(400, f"`{where}taskType` must be a string.")
    title = body.get("title")
    if title is not None and not isinstance(title, str):
        raise ClientError(400, f"`{where}title` must be a string.")
    dims = _field(body, "outputDimensionality", "output_dimensionality")
    if dims is not None and (not isinstance(dims, int) or isinstance(dims, bool) or not 1 <= dims <= 65536):
        raise ClientError(400, f"`{where}outputDimensionality` must be a positive integer.")
    return joined, task, title, dims


def parse_embed_content(body: Any, model: str) -> EmbeddingRequest:
    text, task, title, dims = _item(body, "")
    return EmbeddingRequest(model, (text,), dimensions=dims, task_type=task, titles=(title,))


def parse_batch_embed(body: Any, model: str, *, max_inputs: int) -> EmbeddingRequest:
    """Every request must name the path's model (as Gemini checks) and, here, share one task type and
    one output size — one upstream call serves them all."""
    if not isinstance(body, dict):
        raise ClientError(400, "Invalid JSON payload: the body must be an object.")
    requests = body.get("requests")
    if not isinstance(requests, list) or not requests:
        raise ClientError(400, "`requests` must be a non-empty list.")
    if len(requests) > max_inputs:
        raise ClientError(400, f"`requests` may hold at most {max_inputs} items (got {len(requests)}).")
    items = [_item(r, f"requests[{i}].") for i, r in enumerate(requests)]
    for i, r in enumerate(requests):
        named = r.get("model")
        if named is not None and (not isinstance(named, str) or strip_model_prefix(named) != model):
            raise ClientError(400, f"`requests[{i}].model` must be `models/{model}`, the model of the URL.")
    if len({(task, dims) for _, task, _, dims in items}) > 1:
        raise ClientError(400, "Every request of a batch must have the same `taskType` and `outputDimensionality`.")
    _, task, _, dims = items[0]
    return EmbeddingRequest(
        model, tuple(t for t, *_ in items), dimensions=dims, task_type=task, titles=tuple(t for _, _, t, _ in items)
    )
