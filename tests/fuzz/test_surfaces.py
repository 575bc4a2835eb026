"""Hostile bodies on every inbound surface, against one gateway for the whole module.

For each surface: mutations of a valid request, arbitrary JSON documents and bytes that are not clean
JSON. Every reply must keep :func:`tests.fuzz.support.check_reply` (no 5xx, no traceback, the surface's
own envelope); after each test the worker still answers ``/health``, nothing logged a traceback, and the
records seeded before the first example read back byte for byte.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.fuzz.strategies import json_documents, mutated, raw_bodies
from tests.fuzz.support import FuzzGateway, Surface, assert_records_intact, fuzz_settings
from tests.fuzz.surfaces import SURFACES

_IDS = [s.name for s in SURFACES]


def _send(fuzzed: FuzzGateway, surface: Surface, body: bytes) -> None:
    fuzzed.check(surface.envelope, fuzzed.post(surface.path, body, surface.headers))


def _after(fuzzed: FuzzGateway) -> None:
    fuzzed.assert_healthy()
    assert_records_intact(fuzzed)


@pytest.mark.parametrize("surface", SURFACES, ids=_IDS)
def test_mutated_valid_bodies(fuzzed: FuzzGateway, surface: Surface) -> None:
    @fuzz_settings(30)
    @given(body=st.data())
    def run(body: st.DataObject) -> None:
        _send(fuzzed, surface, body.draw(mutated(surface.valid), label="body"))

    run()
    _after(fuzzed)


@pytest.mark.parametrize("surface", SURFACES, ids=_IDS)
def test_arbitrary_json(fuzzed: FuzzGateway, surface: Surface) -> None:
    @fuzz_settings(15)
    @given(body=json_documents())
    def run(body: bytes) -> None:
        _send(fuzzed, surface, body)

    run()
    _after(fuzzed)


@pytest.mark.parametrize("surface", SURFACES, ids=_IDS)
def test_bytes_that_are_not_clean_json(fuzzed: FuzzGateway, surface: Surface) -> None:
    @fuzz_settings(15)
    @given(body=st.data())
    def run(body: st.DataObject) -> None:
        _send(fuzzed, surface, body.draw(raw_bodies(surface.valid), label="body"))

    run()
    _after(fuzzed)
