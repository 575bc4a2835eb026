"""The canonical form: a validated chat request and chat.completion.chunk-shaped dicts."""
