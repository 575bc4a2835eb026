"""A deterministic ~20k-token coding-agent transcript: the request body of the compression rows.

Prompt compression (docs/compression.md) exists for bodies like this one, not for the benchmark's
one-line default: a system prompt, then turn after turn of an agent reading files, running tests and
installs, listing directories and querying an API, with long tool outputs. The transcript carries what
the ``lossless`` engines act on, so the row measures them doing work rather than scanning and
finding nothing:

* ``dedup``: the same file read twice, the same failure section printed by two test runs;
* ``lite``: trailing blanks and runs of blank lines in logs;
* ``jsoncompact``: pretty-printed JSON arrays of objects with the same keys (API listings), and
  pretty-printed JSON objects (a package manifest);

and what the lossy engines would (passing-test lines, ``npm WARN deprecated`` lines, file listings),
which ``lossless`` must leave alone. Built from a fixed seed, so every run sends the same bytes; the
size is measured with freellm's own estimator (characters / 4).
"""

from __future__ import annotations

import json
import random

TARGET_TOKENS = 20_000
SEED = 17

SYSTEM = (
    "You are a coding agent working in a Python repository. Use the tools to inspect files, run commands "
    "and edit code. Never invent file contents: read them first. You MUST run the test suite before you "
    "say a change is done, and you must not change public function signatures without saying so.\n\n"
    "Tools: read_file(path), write_file(path, content), bash(command), list_files(path), http_get(url)."
)

MODULES = ["parser", "lexer", "render", "cache", "router", "limits", "store", "config", "auth", "metrics"]


def _source_file(rng: random.Random, name: str) -> str:
    lines = [f'"""The {name} module."""', "", "from __future__ import annotations", "", "import re", ""]
    for i in range(rng.randint(8, 14)):
        lines += [
            f"def {name}_step_{i}(value: int, scale: float = {rng.randint(1, 9)}.{rng.randint(0, 99):02d}) -> float:",
            f'    """Step {i} of the {name}: scales the value and clamps it to {rng.randint(100, 999)}."""',
            f"    if value < {rng.randint(0, 50)}:",
            f"        raise ValueError(f'{name} step {i}: value {{value}} below the floor')",
            f"    return min(value * scale, {rng.randint(1000, 9999)}.0)  ",
            "",
            "",
        ]
    return "\n".join(lines)


def _pytest_log(rng: random.Random, module: str, failing: bool) -> str:
    out = [
        "============================= test session starts ==============================",
        "platform linux -- Python 3.11.7, pytest-8.3.4, pluggy-1.5.0",
        "rootdir: /work/repo",
        f"collected {rng.randint(90, 130)} items",
        "",
    ]
    n = rng.randint(80, 120)
    for i in range(n):
        mod = MODULES[i % len(MODULES)]
        out.append(
            f"tests/test_{mod}.py::test_{mod}_case_{i} PASSED{' ' * rng.randint(1, 20)}[{100 * i // n:3d}%]"
        )
    if failing:
        out += [
            f"tests/test_{module}.py::test_{module}_edge FAILED                       [ 99%]",
            "",
            "=================================== FAILURES ===================================",
            f"_____________________________ test_{module}_edge ______________________________",
            "",
            "    def test_edge():",
            f">       assert {module}_step_3(7) == 21.0",
            "E       AssertionError: assert 14.5 == 21.0",
            f"E        +  where 14.5 = {module}_step_3(7)",
            "",
            f"tests/test_{module}.py:41: AssertionError",
            "=========================== short test summary info ============================",
            f"FAILED tests/test_{module}.py::test_{module}_edge - AssertionError: assert 14.5 == 21.0",
            f"======================== 1 failed, {n} passed in 4.21s =========================",
        ]
    else:
        out.append(f"============================== {n} passed in 4.02s ===============================")
    return "\n".join(out) + "\n\n\n\n"


def _npm_log(rng: random.Random) -> str:
    out = []
    for i in range(rng.randint(25, 40)):
        out.append(
            f"npm WARN deprecated pkg-{i}@{rng.randint(1, 9)}.{rng.randint(0, 20)}.{rng.randint(0, 9)}: "
            "this package is no longer supported   "
        )
    out += ["", "", "", f"added {rng.randint(800, 1200)} packages in {rng.randint(10, 40)}s", ""]
    return "\n".join(out)


def _listing(rng: random.Random) -> str:
    out = []
    for mod in MODULES:
        for i in range(rng.randint(3, 5)):
            size = rng.randint(200, 90_000)
            out.append(
                f"-rw-r--r-- 1 dev dev {size:>7} Dec  {rng.randint(1, 28):>2} 10:{rng.randint(0, 59):02d} src/{mod}/part_{i}.py"
            )
    return "\n".join(out)


def _api_rows(rng: random.Random) -> str:
    rows = [
        {
            "id": f"job-{rng.randint(10_000, 99_999)}",
            "status": rng.choice(["queued", "running", "done", "failed"]),
            "attempts": rng.randint(0, 5),
            "duration_ms": rng.randint(10, 90_000),
            "owner": rng.choice(MODULES),
        }
        for _ in range(rng.randint(12, 20))
    ]
    return json.dumps(rows, indent=2)


def _manifest(rng: random.Random) -> str:
    deps = {f"pkg-{i}": f"^{rng.randint(1, 9)}.{rng.randint(0, 20)}.0" for i in range(24)}
    return json.dumps(
        {"name": "repo-ui", "version": "2.3.1", "private": True, "dependencies": deps}, indent=4
    )


def messages(target_tokens: int = TARGET_TOKENS) -> list[dict[str, object]]:
    """The transcript's messages (OpenAI chat shape), growing turn by turn up to ``target_tokens``."""
    rng = random.Random(SEED)
    msgs: list[dict[str, object]] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "The parser's edge case fails in CI. Find out why and fix it."},
    ]
    chars = sum(len(str(m["content"])) for m in msgs)
    read_before: dict[str, str] = {}
    turn = 0
    while chars < target_tokens * 4:
        module = MODULES[turn % len(MODULES)]
        kind = turn % 6
        call_id = f"call_{turn:03d}_{rng.randint(1000, 9999)}"
        if kind == 0:
            path = f"src/{module}.py"
            content = read_before.setdefault(path, _source_file(rng, module))
            name, args = "read_file", {"path": path}
        elif kind == 1:
            name, args = "bash", {"command": f"pytest -q tests/test_{module}.py"}
            content = _pytest_log(rng, module, failing=turn % 4 == 1)
        elif kind == 2:
            name, args = "bash", {"command": "npm install"}
            content = _npm_log(rng)
        elif kind == 3:
            name, args = "list_files", {"path": "src"}
            content = _listing(rng)
        elif kind == 4:
            name, args = "http_get", {"url": f"https://ci.example.com/api/jobs?owner={module}"}
            content = _api_rows(rng) if turn % 2 == 0 else _manifest(rng)
        else:  # re-read an earlier file: a duplicate the dedup engine replaces with a marker
            path = f"src/{MODULES[(turn // 6) % len(MODULES)]}.py"
            content = read_before.setdefault(path, _source_file(rng, module))
            name, args = "read_file", {"path": path}
        msgs.append(
            {
                "role": "assistant",
                "content": f"Step {turn}: checking {module} with {name}.",
                "tool_calls": [
                    {
                        "id": call_id,
                        "type": "function",
                        "function": {"name": name, "arguments": json.dumps(args)},
                    }
                ],
            }
        )
        msgs.append({"role": "tool", "tool_call_id": call_id, "content": content})
        chars += len(content) + 40
        turn += 1
    msgs.append({"role": "user", "content": "Summarise what you found and propose the fix."})
    return msgs


def estimated_tokens(msgs: list[dict[str, object]]) -> int:
    """freellm's estimate of the transcript (ceil(chars / 4) per message's text)."""
    return sum((len(str(m.get("content") or "")) + 3) // 4 for m in msgs)
