"""Tool calls that survive weak models, and output that keeps its promises.

Each module holds one idea; the pump calls them through its hooks, once per turn, at the end:

* :mod:`~freellm.engine.tools.rescue` — inline tool-call dialects (Kimi/DeepSeek sections, function
  tags, Hermes/Qwen ``<tool_call>`` XML, bare JSON) parsed into structured calls;
* :mod:`~freellm.engine.tools.repair` — arguments repaired against the declared JSON schemas;
* :mod:`~freellm.engine.tools.validate` — optional strict validation of arguments (``jsonschema``);
* :mod:`~freellm.engine.tools.structured` — ``response_format`` JSON enforcement and healing;
* :mod:`~freellm.engine.tools.think` — a leading ``<think>`` block split off into reasoning (per chunk);
* :mod:`~freellm.engine.tools.hooks` — builds the pump's hooks for one request.

This package's ``__init__`` imports nothing, so the pump can import the think splitter without a cycle.
"""
