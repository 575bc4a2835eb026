"""schemathesis against the admin API's own OpenAPI document (``GET /admin/openapi.json``), on a live
gateway with the admin key: every documented operation, with data that fits the document and data that
does not (schemathesis's positive and negative modes), checked by schemathesis's own checks (no 5xx,
status codes, content types and bodies as documented) and by this suite's invariants."""

from __future__ import annotations

from typing import Any, Final

import schemathesis
from schemathesis.checks import positive_data_acceptance

from freellm.admin.openapi import document
from tests.fuzz.support import FuzzGateway, assert_records_intact, check_reply, fuzz_settings

schema = schemathesis.openapi.from_dict(document())
"""Loaded at import from the code that builds the served document (``test_the_fuzzed_document_is_the_served_one``
checks the two are the same). Not ``schemathesis.pytest.from_fixture``: its lazy loader reads
``request.node._nodeid``, which pytest 9 no longer has (AttributeError at the first test)."""


def test_the_fuzzed_document_is_the_served_one(fuzzed: FuzzGateway) -> None:
    reply = fuzzed.client.get("/admin/openapi.json", headers=fuzzed.admin_headers())
    assert reply.status_code == 200, reply.text
    assert reply.json() == document()


_STATEFUL: Final = frozenset(
    {
        "POST /admin/providers",
        "POST /admin/providers/{name}/keys",
        "PUT /admin/chain",
        "PATCH /admin/settings",
        "POST /admin/compression/preview",
    }
)
"""Operations whose valid bodies depend on what a schema does not say: a provider name not taken yet and
a base URL the SSRF guard lets through, a key with no whitespace inside, routes that exist, a live
setting's own type, a chat message's own rules (a tool message needs its call id). A schema-valid body
may rightly be a 400 there, so schemathesis's "schema-valid request accepted" check is off for them
(every other check, and the no-5xx invariant, still runs)."""


@schema.parametrize()
@fuzz_settings(15)
def test_admin_api_conforms_to_its_document(case: Any, fuzzed: FuzzGateway) -> None:
    response = case.call(base_url=fuzzed.server.base_url, headers=fuzzed.admin_headers())
    logged, fuzzed.errors.records = fuzzed.errors.records, []
    content_type = ",".join(response.headers.get("content-type", []))
    check_reply("openai", response.status_code, response.content, content_type=content_type)
    assert not logged, "\n".join(fuzzed.errors.describe(logged))
    stateful = f"{case.method.upper()} {case.path}" in _STATEFUL
    case.validate_response(response, excluded_checks=[positive_data_acceptance] if stateful else None)


def test_admin_records_survive_schemathesis(fuzzed: FuzzGateway) -> None:
    """Runs after the schemathesis operations in this module: the worker is up and the seeded records
    (a stored response, a key added through this same admin API, request-log rows) are unchanged."""
    fuzzed.assert_healthy()
    assert_records_intact(fuzzed)

