"""Placeholder: the inbound Gemini surface is being written (issue 6)."""

from __future__ import annotations

from aiohttp import web

__all__ = ["register"]


def register(app: web.Application) -> None:
    """Add this surface's routes and error style to the app."""
