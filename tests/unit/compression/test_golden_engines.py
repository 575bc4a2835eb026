"""Golden tests, one engine at a time: input messages → the stage verdict and the output messages.

Each file in ``tests/golden/compression/engines/`` names its ``engine``, optional ``params`` (the engine's
tunables) and ``target_tokens``; every other engine is disabled. ``FREELLM_UPDATE_GOLDEN=1`` rewrites
``expected`` — review the diff.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from tests.unit.compression.helpers import make_compressor
from tests.unit.helpers import GOLDEN_ROOT, check_golden

FOLDER = GOLDEN_ROOT / "compression" / "engines"
FILES = sorted(FOLDER.glob("*.json"))


@pytest.mark.parametrize("path", FILES, ids=[p.stem for p in FILES])
def test_engine_golden(path: Path) -> None:
    doc = json.loads(path.read_text())
    engine = doc["engine"]
    compressor = make_compressor("aggressive", only=engine, engines={engine: doc.get("params", {})})
    messages = doc["messages"]
    original = copy.deepcopy(messages)
    outcome = compressor.compress(messages, mode="aggressive", target_tokens=doc.get("target_tokens"))
    assert messages == original, "input mutated"
    stage = next(s for s in outcome.stages if s.engine == engine)
    actual = {"reason": stage.reason, "saved_chars": stage.saved_chars, "messages": outcome.messages}
    check_golden(path, doc, actual)


def test_every_engine_has_goldens() -> None:
    from freellm.compression import ENGINE_IDS

    engines = {json.loads(p.read_text())["engine"] for p in FILES}
    assert engines == set(ENGINE_IDS)
