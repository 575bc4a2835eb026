"""The Anthropic Messages wire, sans-IO: request translation, stream translation, error wording.

:mod:`freellm.providers.anthropic` does the I/O; everything here is pure and tested with golden files.
"""

from freellm.providers.anthropic_wire.errors import anthropic_error_message, inband_error
from freellm.providers.anthropic_wire.request import (
    ANTHROPIC_VERSION,
    DEFAULT_MAX_TOKENS,
    THINKING_BUDGETS,
    to_messages_request,
)
from freellm.providers.anthropic_wire.stream import AnthropicStreamTranslator, message_to_chunks

__all__ = [
    "ANTHROPIC_VERSION",
    "DEFAULT_MAX_TOKENS",
    "THINKING_BUDGETS",
    "AnthropicStreamTranslator",
    "anthropic_error_message",
    "inband_error",
    "message_to_chunks",
    "to_messages_request",
]
