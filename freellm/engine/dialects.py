"""Inline tool-call dialect markers: the seam the pump uses to decide whether to hold text.

Weak models sometimes write a tool call as text in their own dialect instead of a structured call.
When tools were requested, text that starts with one of these markers is held back (``dialect`` mode)
so the markup never reaches the client; text that can no longer become a marker is released at once.
Parsing the held text into structured calls (the rescue) lives with the tool-call machinery.
"""

from __future__ import annotations

__all__ = ["DIALECT_MARKERS", "could_become_marker", "starts_with_marker"]

DIALECT_MARKERS: tuple[str, ...] = (
    "<|tool_calls_section_begin|>",  # Kimi K2 / DeepSeek sections
    "<|tool_call_begin|>",  # the same family without the section wrapper
    "<tool_call>",  # Hermes / Qwen XML
    "<function=",  # Llama-style function tags
)


def starts_with_marker(probe: str) -> bool:
    """True when ``probe`` (already left-stripped) begins with a complete dialect marker."""
    return probe.startswith(DIALECT_MARKERS)


def could_become_marker(probe: str) -> bool:
    """True while ``probe`` is blank or a strict prefix of some marker, so holding it is still justified."""
    if not probe:
        return True
    return any(marker.startswith(probe) for marker in DIALECT_MARKERS)
