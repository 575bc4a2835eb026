"""State shared by the router, limits, cooldowns and the request log, behind one protocol."""
