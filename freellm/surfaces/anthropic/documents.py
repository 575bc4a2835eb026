"""Anthropic ``document`` blocks (spec/surfaces.md §2 "document").

Text documents (source ``text`` or ``content``) are inlined for the upstream as
``<document-H title="T">\nBODY\n</document-H>``: ``H`` is 12 hex digits of the body's SHA-256, shifted
along the digest while the body itself contains the tag (so a document cannot close its own fence), and
the title is sanitised (no quotes, angle brackets or control characters, at most 120 characters,
``document`` by default). PDF (``base64``/``url``), Files API and empty documents cannot be forwarded: the
surface refuses them with a 400 before routing, naming the reason but never echoing the payload.
"""

from __future__ import annotations

import hashlib
import re

from freellm.surfaces.anthropic.wire import DocumentBlock

__all__ = ["document_reason", "document_text", "fence_tag"]

_TITLE_MAX = 120

_TITLE_BAD = re.compile(r"[\x00-\x1f\x7f\"<>]+")


def _title(raw: str | None) -> str:
    title = " ".join(_TITLE_BAD.sub(" ", raw or "").split())[:_TITLE_MAX].strip()
    return title or "document"


def fence_tag(body: str, digest: str | None = None) -> str:
    """``document-<12 hex of SHA-256(body)>``; the window shifts along the digest while the body contains it."""
    if digest is None:
        digest = hashlib.sha256(body.encode()).hexdigest()
    for start in range(len(digest) - 11):
        tag = f"document-{digest[start : start + 12]}"
        if tag not in body:
            return tag
    n = 0
    while f"document-{digest[:12]}-{n}" in body:
        n += 1
    return f"document-{digest[:12]}-{n}"


def document_text(block: DocumentBlock) -> str | None:
    """The inlined text of a text document, or None when it cannot be forwarded (see :func:`document_reason`)."""
    source = block.source
    kind = source.get("type")
    body: str | None = None
    if kind == "text":
        data = source.get("data")
        body = data if isinstance(data, str) else None
    elif kind == "content":
        content = source.get("content")
        if isinstance(content, str):
            body = content
        elif isinstance(content, list):
            texts = [b.get("text") for b in content if isinstance(b, dict) and b.get("type") == "text"]
            body = "\n".join(t for t in texts if isinstance(t, str) and t)
    if not body:
        return None
    tag = fence_tag(body)
    return f'<{tag} title="{_title(block.title)}">\n{body}\n</{tag}>'


def document_reason(block: DocumentBlock) -> str:
    """Why a document cannot be forwarded (the message of its 400)."""
    kind = block.source.get("type")
    if kind == "base64" or kind == "url":
        media = block.source.get("media_type")
        what = "PDF" if kind == "url" or media == "application/pdf" else "binary"
        return (
            f"{what} documents (source type `{kind}`) cannot be forwarded to the routed models; "
            "send the document's text (source type `text` or `content`) instead"
        )
    if kind == "file":
        return "documents from the Files API (source type `file`) are not supported; send the text instead"
    if kind in ("text", "content"):
        return "document is empty"
    return "document source type should be `text` or `content`"
