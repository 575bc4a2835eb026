"""The Gemini surface's modules; the entry point is :mod:`freellm.surfaces.gemini`."""
