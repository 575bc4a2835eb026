"""The Anthropic Messages surface's modules; the entry point is :mod:`freellm.surfaces.anthropic_messages`."""
