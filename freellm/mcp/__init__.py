"""freellm's MCP server (``POST /mcp``): the gateway answering agents about itself. See docs/mcp.md.

:mod:`~freellm.mcp.protocol` is the transport and JSON-RPC layer (sans I/O), :mod:`~freellm.mcp.tools`
the tools over the admin API's functions, :mod:`~freellm.mcp.http` the aiohttp handler.
"""
