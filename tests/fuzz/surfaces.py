"""Every inbound surface the fuzz suite drives: its path, a valid request, its error envelope."""

from __future__ import annotations

from typing import Final

from tests.fuzz.support import CHAT_MODEL, EMBED_MODEL, Surface

__all__ = ["MCP_HEADERS", "SURFACES"]

_USER = {"role": "user", "content": "hi"}
_SCHEMA = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
_GEMINI = {
    "contents": [{"role": "user", "parts": [{"text": "hi"}]}],
    "systemInstruction": {"parts": [{"text": "be brief"}]},
    "generationConfig": {"maxOutputTokens": 16, "temperature": 0.5, "stopSequences": ["x"]},
    "tools": [{"functionDeclarations": [{"name": "weather", "parameters": _SCHEMA}]}],
}
MCP_HEADERS: Final = {"Accept": "application/json, text/event-stream"}

SURFACES: Final = (
    Surface(
        "chat",
        "/v1/chat/completions",
        {
            "model": CHAT_MODEL,
            "messages": [{"role": "system", "content": "be brief"}, _USER],
            "stream": False,
            "max_tokens": 16,
            "temperature": 0.5,
            "tools": [{"type": "function", "function": {"name": "weather", "parameters": _SCHEMA}}],
            "response_format": {"type": "text"},
        },
        "openai",
    ),
    Surface("completions", "/v1/completions", {"model": CHAT_MODEL, "prompt": "hi", "max_tokens": 16, "stream": False}, "openai"),
    Surface(
        "responses",
        "/v1/responses",
        {
            "model": CHAT_MODEL,
            "input": [{"role": "user", "content": [{"type": "input_text", "text": "hi"}]}],
            "instructions": "be brief",
            "max_output_tokens": 16,
            "tools": [{"type": "function", "name": "weather", "parameters": _SCHEMA}],
            "text": {"format": {"type": "text"}},
        },
        "openai",
    ),
    Surface("embeddings", "/v1/embeddings", {"model": EMBED_MODEL, "input": ["a", "b"], "encoding_format": "float"}, "openai"),
    Surface(
        "messages",
        "/v1/messages",
        {
            "model": CHAT_MODEL,
            "max_tokens": 16,
            "system": [{"type": "text", "text": "be brief"}],
            "messages": [{"role": "user", "content": [{"type": "text", "text": "hi"}]}],
            "tools": [{"name": "weather", "input_schema": _SCHEMA}],
            "metadata": {"user_id": "u1"},
        },
        "anthropic",
    ),
    Surface(
        "count_tokens",
        "/v1/messages/count_tokens",
        {"model": CHAT_MODEL, "messages": [{"role": "user", "content": "hi"}], "system": "be brief"},
        "anthropic",
    ),
    Surface("generateContent", f"/v1beta/models/{CHAT_MODEL}:generateContent", _GEMINI, "gemini"),
    Surface("streamGenerateContent", f"/v1beta/models/{CHAT_MODEL}:streamGenerateContent?alt=sse", _GEMINI, "gemini"),
    Surface("countTokens", f"/v1beta/models/{CHAT_MODEL}:countTokens", {"contents": _GEMINI["contents"]}, "gemini"),
    Surface(
        "embedContent",
        f"/v1beta/models/{EMBED_MODEL}:embedContent",
        {"content": {"parts": [{"text": "hi"}]}, "taskType": "RETRIEVAL_QUERY", "outputDimensionality": 4},
        "gemini",
    ),
    Surface(
        "batchEmbedContents",
        f"/v1beta/models/{EMBED_MODEL}:batchEmbedContents",
        {"requests": [{"model": f"models/{EMBED_MODEL}", "content": {"parts": [{"text": "hi"}]}}]},
        "gemini",
    ),
    Surface(
        "ollama_chat",
        "/api/chat",
        {"model": CHAT_MODEL, "messages": [_USER], "stream": False, "options": {"temperature": 0.5, "num_predict": 16}},
        "ollama",
    ),
    Surface("ollama_generate", "/api/generate", {"model": CHAT_MODEL, "prompt": "hi", "system": "s", "stream": False}, "ollama"),
    Surface("ollama_show", "/api/show", {"model": CHAT_MODEL}, "ollama"),
    Surface("ollama_embed", "/api/embed", {"model": EMBED_MODEL, "input": ["hi"]}, "ollama"),
    Surface("ollama_embeddings", "/api/embeddings", {"model": EMBED_MODEL, "prompt": "hi"}, "ollama"),
    Surface(
        "mcp_call",
        "/mcp",
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "routing_explain", "arguments": {"model": "auto"}}},
        "mcp",
        MCP_HEADERS,
    ),
    Surface(
        "mcp_initialize",
        "/mcp",
        {
            "jsonrpc": "2.0",
            "id": "a",
            "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "fuzz", "version": "1"}},
        },
        "mcp",
        MCP_HEADERS,
    ),
)
