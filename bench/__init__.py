"""freellm's benchmark: the gateway side by side with direct calls, a bare floor proxy and peers.

Run it with ``python -m bench run`` from the repository root; see docs/benchmarks.md.
"""
