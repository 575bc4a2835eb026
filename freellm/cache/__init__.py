"""The response cache (seed §13, docs/cache.md): exact-match answers replayed without an upstream call.

* :mod:`~freellm.cache.control` — what the request's headers and the config say (on, off, default),
* :mod:`~freellm.cache.key` — the exhaustive key over the canonical request after every earlier stage,
* :mod:`~freellm.cache.store` — :class:`ResponseCache`: one LRU + TTL budget for JSON bodies (persisted
  through the ``StateStore``) and stream replays (memory only), and its statistics,
* :mod:`~freellm.cache.recorder` — capturing a stream's bytes as they go to the client.
"""

from freellm.cache.control import CacheChoice, cache_choice
from freellm.cache.key import cache_key
from freellm.cache.recorder import StreamRecorder
from freellm.cache.store import CachedReply, ResponseCache

__all__ = ["CacheChoice", "CachedReply", "ResponseCache", "StreamRecorder", "cache_choice", "cache_key"]
