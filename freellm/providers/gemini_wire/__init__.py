"""The Gemini ``generateContent`` wire, sans-IO: request translation, schema sanitising, stream
translation, error wording and the thought-signature cache.

:mod:`freellm.providers.gemini` does the I/O (HTTP, image fetching); everything here is pure and tested
with golden files.
"""

from freellm.providers.gemini_wire.errors import gemini_error_message, inband_error, retry_delay_of
from freellm.providers.gemini_wire.generation import THINKING_BUDGETS
from freellm.providers.gemini_wire.media import InlineData, fetchable_urls, sniff_image_type
from freellm.providers.gemini_wire.models import is_gemma, needs_thought_signatures
from freellm.providers.gemini_wire.request import to_gemini_request
from freellm.providers.gemini_wire.schema import sanitize_parameters, sanitize_schema
from freellm.providers.gemini_wire.signatures import SKIP_SIGNATURE, SignatureCache, canonical_args
from freellm.providers.gemini_wire.stream import (
    GeminiStreamTranslator,
    finish_reason_of,
    new_call_id,
    response_to_chunks,
    usage_of,
)

__all__ = [
    "SKIP_SIGNATURE",
    "THINKING_BUDGETS",
    "GeminiStreamTranslator",
    "InlineData",
    "SignatureCache",
    "canonical_args",
    "fetchable_urls",
    "finish_reason_of",
    "gemini_error_message",
    "inband_error",
    "is_gemma",
    "needs_thought_signatures",
    "new_call_id",
    "response_to_chunks",
    "retry_delay_of",
    "sanitize_parameters",
    "sanitize_schema",
    "sniff_image_type",
    "to_gemini_request",
    "usage_of",
]
