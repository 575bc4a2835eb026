"""Over-the-wire regression tests for faults the fuzz suite (tests/fuzz, docs/fuzzing.md) found, each
named after its fault (the parser-level ones are in tests/unit/test_fuzz_regressions.py)."""

from __future__ import annotations

import httpx2 as httpx
import pytest

from tests.integration.helpers import MakeGateway, one_route

ADMIN_KEY = "sk-admin-regress"


@pytest.mark.parametrize("flag", ["tools", "vision"])
def test_routing_explain_non_boolean_flag_is_400(make_gateway: MakeGateway, flag: str) -> None:
    """``vision=null`` (or any word but true/false/1/0/yes/no) was read as false: the explanation then
    answered a question the caller had not asked."""
    gw, _ = one_route(make_gateway, extra={"auth": {"admin_keys": [ADMIN_KEY]}})
    headers = {"Authorization": f"Bearer {ADMIN_KEY}"}
    bad = httpx.get(f"{gw.base_url}/admin/routing/explain", params={flag: "null"}, headers=headers)
    assert bad.status_code == 400, bad.text
    assert bad.json()["error"]["param"] == flag
    good = httpx.get(f"{gw.base_url}/admin/routing/explain", params={flag: "False"}, headers=headers)
    assert good.status_code == 200, good.text
