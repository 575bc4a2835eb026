"""The gateway's application state: created at start-up, closed at clean-up, hung on the aiohttp app."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import aiohttp
from aiohttp import web

from freellm.config import Settings
from freellm.engine.turn import Engine
from freellm.routing.catalog import Catalog
from freellm.routing.router import Router
from freellm.store.base import StateStore

if TYPE_CHECKING:
    from freellm.server.middleware import IPRateLimiter

__all__ = ["GATEWAY", "Gateway"]


@dataclass(slots=True)
class Gateway:
    settings: Settings
    data_dir: Path
    store: StateStore
    session: aiohttp.ClientSession
    catalog: Catalog
    router: Router
    engine: Engine
    client_keys: list[bytes]
    ip_limiter: IPRateLimiter
    shutting_down: bool = False


GATEWAY = web.AppKey("gateway", Gateway)
