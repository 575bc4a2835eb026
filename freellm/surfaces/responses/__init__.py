"""The stateful OpenAI Responses API surface (``/v1/responses``).

* :mod:`.request` / :mod:`.inputs` — the Responses wire → the canonical chat request;
* :mod:`.objects` — the response object, output items and usage;
* :mod:`.stream` — the stream renderer (a pure translator, golden-tested);
* :mod:`.state` — the stored document and ``previous_response_id`` chains;
* :mod:`.http` — the routes and the error style.

The entry point is :func:`freellm.surfaces.openai_responses.register`.
"""
