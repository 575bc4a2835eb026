"""freellm — a self-hosted LLM API gateway.

Every inbound wire is parsed into one canonical request (OpenAI Chat Completions shape), one engine routes
it through the fallback loop, and the answer comes back as canonical chunks rendered in the client's wire.
"""

__version__ = "0.1.0"
