"""``freellm setup <client>``: point a coding client at the gateway by editing that client's own config.

Each client module computes new file contents from the old ones (pure, tested alone); :mod:`.apply` does
every read and write: the plan (parse everything first, so a bad file stops setup before anything is
touched), byte-for-byte backups, a manifest of what was created, atomic writes, and ``--undo``.
"""

from __future__ import annotations

from typing import Final

from freellm.setup import aider, claude, codex, gemini, opencode
from freellm.setup.merge import Client, Locations, ParseError, Target

__all__ = ["CLIENTS", "Client", "Locations", "ParseError", "Target"]

CLIENTS: Final[dict[str, Client]] = {
    c.name: c for c in (claude.CLIENT, codex.CLIENT, gemini.CLIENT, opencode.CLIENT, aider.CLIENT)
}
