"""Regression tests for the faults the fuzz suite (tests/fuzz, docs/fuzzing.md) found, one per fault,
each named after it. Parser-level where the fault lives in a parser, so they run in milliseconds."""

from __future__ import annotations

from typing import Any

import pytest

from freellm.admin.openapi import document
from freellm.errors import ClientError
from freellm.surfaces.responses.request import parse_responses_request


def _refused(body: dict[str, Any]) -> ClientError:
    with pytest.raises(ClientError) as caught:
        parse_responses_request(body)
    return caught.value


@pytest.mark.parametrize("kind", [["input_text"], {"a": 1}])
def test_responses_content_part_type_unhashable_is_400(kind: Any) -> None:
    """A content part whose ``type`` was a list or object reached a set lookup and raised TypeError (500)."""
    err = _refused({"model": "m", "input": [{"role": "user", "content": [{"type": kind, "text": "hi"}]}]})
    assert (err.status, err.param) == (400, "input[0].content[0].type")


@pytest.mark.parametrize("kind", [["function"], {"a": 1}])
def test_responses_tool_type_unhashable_is_400(kind: Any) -> None:
    """A tool whose ``type`` was a list or object reached a set lookup and raised TypeError (500)."""
    err = _refused({"model": "m", "input": "hi", "tools": [{"type": kind, "name": "f"}]})
    assert (err.status, err.param) == (400, "tools[0].type")


def test_admin_openapi_documents_what_the_routes_answer() -> None:
    """schemathesis found the document understating the API: creations answer 201 (documented 200),
    unknown providers, keys and profiles 404, bad query parameters 400, duplicates 409, and the
    compression preview's body was undocumented."""
    paths = document()["paths"]

    def statuses(path: str, method: str) -> set[str]:
        return set(paths[path][method]["responses"])

    assert {"201", "400", "409"} <= statuses("/admin/providers", "post")
    assert "200" not in statuses("/admin/providers", "post")
    assert {"201", "404", "409"} <= statuses("/admin/providers/{name}/keys", "post")
    assert "404" in statuses("/admin/providers/{name}/keys/{key_id}", "patch")
    assert {"400", "404"} <= statuses("/admin/routing/explain", "get")
    assert "400" in statuses("/admin/requests", "get")
    preview = paths["/admin/compression/preview"]["post"]
    assert preview["requestBody"]["content"]["application/json"]["schema"] == {"$ref": "#/components/schemas/CompressionPreview"}
