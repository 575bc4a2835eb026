"""Generate the compression corpus (realistic agent transcripts) into ``corpus/``, deterministically.

Run ``python tests/golden/compression/make_corpus.py`` after changing it; the savings minimums recorded
in each file (``min_saving_pct``) are kept unless ``--reset-minimums`` is given, in which case they are
set to 90 % of what each mode reaches now (rounded down) — review the diff.
"""

from __future__ import annotations

import json
import random
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
OUT = HERE / "corpus"

SYSTEM = (
    "You are a careful coding agent working in a Python repository.\n"
    "Use the tools to read files, run commands and edit code.\n"
    "You must not push to the remote. Never delete files outside the working tree.\n"
    "Keep answers short and cite the paths you changed."
)

Msg = dict[str, Any]


class Ids:
    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.n = 0

    def __call__(self) -> str:
        self.n += 1
        return f"{self.prefix}_{self.n:03d}"


def call(cid: str, name: str, **args: Any) -> Msg:
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}],
    }


def result(cid: str, content: str) -> Msg:
    return {"role": "tool", "tool_call_id": cid, "content": content}


def tool_turn(ids: Ids, name: str, content: str, **args: Any) -> list[Msg]:
    cid = ids()
    return [call(cid, name, **args), result(cid, content)]


# ---------------------------------------------------------------- file contents


def parser_source(version: int) -> str:
    lines = [
        '"""A small expression parser used by the calculator service."""',
        "",
        "from __future__ import annotations",
        "",
        "import re",
        "from dataclasses import dataclass",
        "",
        'TOKEN_RE = re.compile(r"\\s*(?:(\\d+\\.?\\d*)|(.))")',
        f"MAX_DEPTH = {64 if version == 1 else 128}",
        "",
        "",
        "@dataclass",
        "class Token:",
        "    kind: str",
        "    value: str",
        "    pos: int",
        "",
        "",
        "class ParseError(Exception):",
        '    """Raised with the position of the offending token."""',
        "",
        "    def __init__(self, message: str, pos: int) -> None:",
        '        super().__init__(f"{message} at {pos}")',
        "        self.pos = pos",
        "",
        "",
        "def tokenize(text: str) -> list[Token]:",
        "    out: list[Token] = []",
        "    for m in TOKEN_RE.finditer(text):",
        "        number, op = m.groups()",
        "        if number:",
        '            out.append(Token("num", number, m.start(1)))',
        "        elif op:",
        '            out.append(Token("op", op, m.start(2)))',
        "    return out",
        "",
        "",
        "class Parser:",
        "    def __init__(self, tokens: list[Token]) -> None:",
        "        self.tokens = tokens",
        "        self.i = 0",
        "        self.depth = 0",
        "",
        "    def peek(self) -> Token | None:",
        "        return self.tokens[self.i] if self.i < len(self.tokens) else None",
        "",
        "    def expr(self) -> float:",
        "        value = self.term()",
        "        while (tok := self.peek()) is not None and tok.value in \"+-\":",
        "            self.i += 1",
        '            value = value + self.term() if tok.value == "+" else value - self.term()',
        "        return value",
        "",
        "    def term(self) -> float:",
        "        value = self.factor()",
        "        while (tok := self.peek()) is not None and tok.value in \"*/\":",
        "            self.i += 1",
        '            value = value * self.factor() if tok.value == "*" else value / self.factor()',
        "        return value",
        "",
        "    def factor(self) -> float:",
        "        tok = self.peek()",
        "        if tok is None:",
        '            raise ParseError("unexpected end", len(self.tokens))',
        "        self.i += 1",
        '        if tok.kind == "num":',
        "            return float(tok.value)",
        '        if tok.value == "(":',
        "            self.depth += 1",
        "            if self.depth > MAX_DEPTH:",
        '                raise ParseError("nesting too deep", tok.pos)',
        "            value = self.expr()",
        "            self.i += 1",
        "            self.depth -= 1",
        "            return value",
    ]
    if version == 2:
        lines += [
            '        if tok.value == "-":',
            "            return -self.factor()",
        ]
    lines += [
        '        raise ParseError(f"unexpected {tok.value!r}", tok.pos)',
        "",
        "",
        "def parse(text: str) -> float:",
        "    return Parser(tokenize(text)).expr()",
        "",
    ]
    return "\n".join(lines)


def config_source() -> str:
    return "\n".join(
        [
            "[tool.calculator]",
            'name = "calculator"',
            "port = 8080",
            "workers = 4",
            "timeout_s = 30",
            "",
            "[tool.calculator.limits]",
            "max_expression_chars = 4096",
            "max_requests_per_minute = 600",
            "",
            "[tool.calculator.logging]",
            'level = "info"',
            'format = "%(asctime)s %(levelname)s %(name)s: %(message)s"',
            "",
        ]
    )


def numbered(text: str) -> str:
    return "\n".join(f"{i:>5}\t{line}" for i, line in enumerate(text.split("\n"), 1))


# ---------------------------------------------------------------- tool outputs


def pytest_log(rng: random.Random, n: int = 300, fail_at: int = 171) -> str:
    lines = [
        "============================= test session starts ==============================",
        "platform linux -- Python 3.11.9, pytest-8.2.2, pluggy-1.5.0 -- /work/proj/.venv/bin/python",
        "cachedir: .pytest_cache",
        "rootdir: /work/proj",
        "configfile: pyproject.toml",
        "plugins: asyncio-0.23.7, hypothesis-6.103.1",
        f"collected {n} items",
        "",
    ]
    files = ["tests/test_parser.py", "tests/test_tokenize.py", "tests/test_api.py", "tests/test_limits.py"]
    for k in range(n):
        f = files[k * len(files) // n]
        pct = (k + 1) * 100 // n
        status = "FAILED" if k == fail_at else "PASSED"
        lines.append(f"{f}::test_case_{k:03d} {status} {'[' + str(pct).rjust(3) + '%]':>8}")
    lines += [
        "",
        "=================================== FAILURES ===================================",
        f"______________________________ test_case_{fail_at:03d} _______________________________",
        "",
        f"    def test_case_{fail_at:03d}():",
        '        tokens = tokenize("-(2 + 3) * 4")',
        ">       assert parse(\"-(2 + 3) * 4\") == -20.0",
        "",
        "tests/test_api.py:88: ",
        "_ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _",
        "src/calc/parser.py:94: in parse",
        "    return Parser(tokenize(text)).expr()",
        "src/calc/parser.py:61: in expr",
        "    value = self.term()",
        "src/calc/parser.py:68: in term",
        "    value = self.factor()",
        "_ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _",
        "",
        "self = <calc.parser.Parser object at 0x7f3a2c1b9d50>",
        "",
        "    def factor(self) -> float:",
        "        tok = self.peek()",
        ">       raise ParseError(f\"unexpected {tok.value!r}\", tok.pos)",
        "E       calc.parser.ParseError: unexpected '-' at 0",
        "",
        "src/calc/parser.py:88: ParseError",
        "=========================== short test summary info ============================",
        f"FAILED tests/test_api.py::test_case_{fail_at:03d} - calc.parser.ParseError: unexpected '-' at 0",
        f"========================= 1 failed, {n - 1} passed in 3.{rng.randint(10, 99)}s =========================",
    ]
    return "\n".join(lines)


def json_rows(rng: random.Random, n: int) -> str:
    statuses = ["open", "closed", "merged"]
    rows = [
        {
            "id": 4100 + k,
            "title": f"Parser fails on input case {k}",
            "state": statuses[rng.randrange(3)],
            "comments": rng.randint(0, 40),
            "score": round(rng.uniform(0, 1), 3),
            "labels": ["bug"] if k % 3 else ["bug", "parser"],
            "url": f"https://git.example.com/calc/issues/{4100 + k}",
        }
        for k in range(n)
    ]
    return json.dumps(rows, indent=2)


def json_metrics(rng: random.Random) -> str:
    return json.dumps(
        {
            "service": "calculator",
            "window": "2024-05-01T00:00:00Z/2024-05-02T00:00:00Z",
            "latency_ms": {"p50": 12.5, "p90": 48.25, "p99": 210.0},
            "errors": {"ParseError": 311, "TimeoutError": 7},
            "hosts": [{"name": f"calc-{k}", "rps": rng.randint(100, 900), "healthy": k != 2} for k in range(5)],
        },
        indent=4,
    )


def git_status() -> str:
    return "\n".join(
        [
            "On branch fix/unary-minus",
            "Your branch is up to date with 'origin/fix/unary-minus'.",
            "",
            "Changes not staged for commit:",
            '  (use "git add <file>..." to update what will be committed)',
            '  (use "git restore <file>..." to discard changes in working directory)',
            "\tmodified:   src/calc/parser.py",
            "\tmodified:   tests/test_api.py",
            "",
            "Untracked files:",
            '  (use "git add <file>..." to include in what will be committed)',
            "\tnotes/unary.md",
            "",
            'no changes added to commit (use "git add" and/or "git commit -a")',
        ]
    )


def git_diff() -> str:
    return "\n".join(
        [
            "diff --git a/src/calc/parser.py b/src/calc/parser.py",
            "index 3f2a91c..8be01d4 100644",
            "--- a/src/calc/parser.py",
            "+++ b/src/calc/parser.py",
            "@@ -7,7 +7,7 @@ from dataclasses import dataclass",
            " ",
            ' TOKEN_RE = re.compile(r"\\s*(?:(\\d+\\.?\\d*)|(.))")',
            "-MAX_DEPTH = 64",
            "+MAX_DEPTH = 128",
            " ",
            " ",
            " @dataclass",
            "@@ -84,6 +84,8 @@ class Parser:",
            "             self.i += 1",
            "             self.depth -= 1",
            "             return value",
            '+        if tok.value == "-":',
            "+            return -self.factor()",
            '         raise ParseError(f"unexpected {tok.value!r}", tok.pos)',
            " ",
            " ",
        ]
    )


def git_log(rng: random.Random, n: int = 12) -> str:
    out: list[str] = []
    for k in range(n):
        h = "".join(rng.choice("0123456789abcdef") for _ in range(40))
        out += [
            f"commit {h}",
            f"Author: Dev {k % 3} <dev{k % 3}@example.com>",
            f"Date:   Mon May {k + 1} 10:{k:02d}:00 2024 +0000",
            "",
            f"    calc: change {k} to the parser and its tests",
            "",
        ]
    return "\n".join(out)


def npm_install(rng: random.Random) -> str:
    out = []
    for k in range(40):
        out.append(f"npm WARN deprecated pkg-{k}@1.{k}.0: this package is no longer maintained")
    for k in range(60):
        out.append(f"npm http fetch GET 200 https://registry.npmjs.org/dep-{k} {rng.randint(5, 400)}ms (cache hit)")
    out += [
        "",
        "added 1342 packages, and audited 1343 packages in 41s",
        "",
        "212 packages are looking for funding",
        "  run `npm fund` for details",
        "",
        "3 moderate severity vulnerabilities",
        "",
        "To address all issues, run:",
        "  npm audit fix",
    ]
    return "\n".join(out)


def pip_install() -> str:
    pkgs = ["requests", "urllib3", "idna", "certifi", "charset-normalizer", "pydantic", "pydantic-core",
            "typing-extensions", "annotated-types", "orjson", "aiohttp", "yarl", "multidict", "frozenlist",
            "aiosignal", "attrs"]
    out = []
    for k, p in enumerate(pkgs):
        out += [
            f"Collecting {p}>={k % 5}.{k}",
            f"  Downloading {p.replace('-', '_')}-{k % 5 + 1}.{k}.0-py3-none-any.whl ({40 + k * 7} kB)",
            f"     ━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━━ {40 + k * 7}.0/{40 + k * 7}.0 kB {k + 1}.2 MB/s eta 0:00:00",
        ]
    out += [f"Requirement already satisfied: setuptools in ./.venv/lib/python3.11/site-packages (69.{k}.0)" for k in range(3)]
    out += [
        "Installing collected packages: " + ", ".join(pkgs),
        "Successfully installed " + " ".join(f"{p}-{k % 5 + 1}.{k}.0" for k, p in enumerate(pkgs)),
    ]
    return "\n".join(out)


def cargo_build() -> str:
    crates = ["libc", "cfg-if", "memchr", "once_cell", "proc-macro2", "unicode-ident", "quote", "syn", "serde",
              "serde_derive", "serde_json", "itoa", "ryu", "log", "regex-syntax", "aho-corasick", "regex",
              "bitflags", "smallvec", "scopeguard", "lock_api", "parking_lot_core", "parking_lot", "tokio"]
    out = ["    Updating crates.io index"]
    out += [f"  Downloaded {c} v{1 + k % 3}.{k}.{k % 7}" for k, c in enumerate(crates)]
    out.append(f"  Downloaded {len(crates)} crates (3.1 MB) in 1.42s")
    out += [f"   Compiling {c} v{1 + k % 3}.{k}.{k % 7}" for k, c in enumerate(crates)]
    out += [
        "   Compiling calc v0.3.0 (/work/calc)",
        "warning: unused variable: `depth`",
        "  --> src/parser.rs:41:13",
        "   |",
        "41 |         let depth = self.depth;",
        "   |             ^^^^^ help: if this is intentional, prefix it with an underscore: `_depth`",
        "   |",
        "   = note: `#[warn(unused_variables)]` on by default",
        "",
        "error[E0308]: mismatched types",
        "  --> src/parser.rs:88:20",
        "   |",
        "88 |             return -self.factor();",
        "   |                    ^^^^^^^^^^^^^^ expected `f64`, found `Result<f64, ParseError>`",
        "",
        "For more information about this error, try `rustc --explain E0308`.",
        "warning: `calc` (lib) generated 1 warning",
        "error: could not compile `calc` (lib) due to 1 previous error; 1 warning emitted",
    ]
    return "\n".join(out)


def tsc_output() -> str:
    out = []
    for k in range(14):
        out += [
            f"src/components/Calc{k}.tsx({10 + k},{5 + k % 4}): error TS2322: Type 'string' is not assignable to type 'number'.",
        ]
    out += [
        "src/api/client.ts(44,17): error TS2339: Property 'result' does not exist on type 'Response'.",
        "",
        "Found 15 errors in 15 files.",
    ]
    return "\n".join(out)


def grep_output(n: int) -> str:
    return "\n".join(
        f"src/calc/module_{k % 17}.py:{10 + k * 3}:    value = parse(expr_{k})  # parse call site {k}" for k in range(n)
    )


def docker_build(rng: random.Random) -> str:
    out = ["Sending build context to Docker daemon  4.21MB"]
    for step in range(1, 11):
        out.append(f"Step {step}/10 : RUN step-{step}")
        out.append(" ---> Using cache")
        out.append(f" ---> {''.join(rng.choice('0123456789abcdef') for _ in range(12))}")
    for _ in range(6):
        layer = "".join(rng.choice("0123456789abcdef") for _ in range(12))
        for state in ("Pulling fs layer", "Waiting", "Verifying Checksum", "Download complete", "Pull complete"):
            out.append(f"{layer}: {state}")
    out += ["Successfully built 9d1c2b3a4e5f", "Successfully tagged calc:0.3.0"]
    return "\n".join(out)


# ---------------------------------------------------------------- conversations

PROSE = [
    "I looked at the tokenizer first because the failure mentions position 0.",
    "The unary minus is read as an operator token and then rejected by factor().",
    "We should handle it in factor() so that nested expressions keep working.",
    "This keeps the grammar simple and avoids a separate pre-processing pass.",
    "I also checked the limits module; it is unrelated to this bug.",
    "The depth counter guards against very deep nesting, which is fine.",
    "Let me know if you want the change split into two commits.",
    "The API layer only forwards the expression, so no change is needed there.",
    "Performance should not change because factor() is already on the hot path.",
    "I kept the error messages identical so the client tests still match.",
]


def prose(rng: random.Random, k: int) -> str:
    return " ".join(rng.sample(PROSE, k))


def reread_after_edit(rng: random.Random) -> list[Msg]:
    ids = Ids("call_rr")
    v1, v2 = parser_source(1), parser_source(2)
    msgs: list[Msg] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "Unary minus fails in src/calc/parser.py: parse('-(2 + 3) * 4') raises. Fix it."},
    ]
    msgs += tool_turn(ids, "read_file", numbered(v1), path="src/calc/parser.py")
    msgs += tool_turn(ids, "read_file", config_source(), path="pyproject.toml")
    msgs.append({"role": "assistant", "content": "The factor() method rejects '-'. I will add a unary branch."})
    msgs += tool_turn(
        ids, "str_replace_editor", "The file src/calc/parser.py has been edited.",
        command="str_replace", path="src/calc/parser.py",
        old_str='        raise ParseError(f"unexpected {tok.value!r}", tok.pos)',
        new_str='        if tok.value == "-":\n            return -self.factor()\n        raise ParseError(f"unexpected {tok.value!r}", tok.pos)',
    )
    msgs += tool_turn(ids, "read_file", numbered(v2), path="src/calc/parser.py")
    msgs += tool_turn(ids, "read_file", config_source(), path="pyproject.toml")
    msgs.append({"role": "user", "content": "Looks right. Also raise MAX_DEPTH to 128 and show me the final file."})
    msgs += tool_turn(ids, "bash", "", command="sed -i 's/MAX_DEPTH = 64/MAX_DEPTH = 128/' src/calc/parser.py")
    msgs += tool_turn(ids, "bash", v2, command="cat src/calc/parser.py")
    msgs.append({"role": "assistant", "content": "Done: src/calc/parser.py now handles unary minus and MAX_DEPTH = 128."})
    return msgs


def pytest_failure(rng: random.Random) -> list[Msg]:
    ids = Ids("call_pt")
    msgs: list[Msg] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "Run the test suite and tell me what fails."},
    ]
    msgs += tool_turn(ids, "bash", pytest_log(rng), command="pytest -v")
    msgs.append({"role": "assistant", "content": "One test fails: test_case_171 in tests/test_api.py (unary minus)."})
    return msgs


def json_results(rng: random.Random) -> list[Msg]:
    ids = Ids("call_js")
    msgs: list[Msg] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "Find the open parser issues and the error rate for the last day."},
    ]
    msgs += tool_turn(ids, "search_issues", json_rows(rng, 24), query="parser", state="all")
    msgs += tool_turn(ids, "get_metrics", json_metrics(rng), service="calculator")
    msgs += tool_turn(ids, "search_issues", json.dumps(json.loads(json_rows(rng, 10))), query="tokenizer")
    msgs += tool_turn(ids, "list_users", json.dumps([{"login": f"dev{k}", "id": 900 + k} for k in range(5)]))
    msgs.append({"role": "assistant", "content": "There are 24 parser issues; ParseError happened 311 times (p99 210.0 ms)."})
    return msgs


def coding_conversation(rng: random.Random) -> list[Msg]:
    msgs: list[Msg] = [{"role": "system", "content": SYSTEM}]
    topics = ["tokenizer", "parser", "limits", "logging", "api", "cli", "config", "docs", "tests", "packaging",
              "errors", "release"]
    for k, topic in enumerate(topics):
        msgs.append(
            {
                "role": "user",
                "content": (
                    f"Next, the {topic}. We need to change how it reports problems; it should mention the "
                    f"line {10 + k} of src/calc/{topic}.py.\n\n{prose(rng, 3)}\nPlease keep the output under "
                    f"{80 + k} characters."
                ),
            }
        )
        body = (
            f"Here is the plan for the {topic}:\n\n"
            f"1. Read `src/calc/{topic}.py` around line {10 + k}.\n"
            f"2. Change the message format to include the position.\n"
            f"3. Add a test in tests/test_{topic}.py.\n\n"
            f"{prose(rng, 5)}\n\n"
            "```python\n"
            f"def report_{topic}(pos: int) -> str:\n"
            f'    return f"{topic} problem at {{pos}}"\n'
            "```\n\n"
            f"{prose(rng, 4)}\n\n\n\n"
            f"I decided to keep the old function as an alias because callers in src/calc/api.py use it.   \n"
        )
        msgs.append({"role": "assistant", "content": body})
    msgs.append({"role": "user", "content": "Finally, fix the parser bug with unary minus and summarise the changes."})
    return msgs


def build_outputs(rng: random.Random) -> list[Msg]:
    ids = Ids("call_bo")
    msgs: list[Msg] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "Set up the project, build everything and show me the state of the branch."},
    ]
    msgs += tool_turn(ids, "bash", git_status(), command="git status")
    msgs += tool_turn(ids, "bash", git_diff(), command="git diff")
    msgs += tool_turn(ids, "bash", git_log(rng), command="git log -n 12")
    msgs += tool_turn(ids, "bash", npm_install(rng), command="npm install")
    msgs += tool_turn(ids, "bash", pip_install(), command="pip install -e .")
    msgs += tool_turn(ids, "bash", cargo_build(), command="cargo build")
    msgs += tool_turn(ids, "bash", tsc_output(), command="npx tsc --noEmit")
    msgs += tool_turn(ids, "bash", docker_build(rng), command="docker build -t calc:0.3.0 .")
    msgs.append({"role": "assistant", "content": "cargo fails with E0308 in src/parser.rs:88 and tsc reports 15 errors."})
    return msgs


def agent_20k(rng: random.Random) -> list[Msg]:
    ids = Ids("toolu")
    msgs: list[Msg] = [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "The calculator service returns 500 for '-(2 + 3) * 4'. Investigate and fix it end to end."},
    ]
    msgs.append({"role": "assistant", "content": "I will start by finding where expressions are parsed."})
    msgs += tool_turn(ids, "grep", grep_output(150), pattern="parse(", path="src")
    msgs += tool_turn(ids, "read_file", numbered(parser_source(1)), path="src/calc/parser.py")
    msgs += tool_turn(ids, "bash", pytest_log(rng, 300, 171), command="pytest -v")
    msgs.append({"role": "assistant", "content": f"The failure is in factor(). {prose(rng, 4)}"})
    msgs.append({"role": "user", "content": f"OK. {prose(rng, 2)} Check the open issues first."})
    msgs += tool_turn(ids, "search_issues", json_rows(rng, 30), query="unary")
    msgs += tool_turn(ids, "read_file", numbered(parser_source(1)), path="src/calc/parser.py")
    msgs += tool_turn(ids, "apply_patch", "Done!", input="*** Begin Patch\n*** Update File: src/calc/parser.py\n@@\n+        if tok.value == \"-\":\n+            return -self.factor()\n*** End Patch")
    for k in range(9):
        msgs.append({"role": "user", "content": f"Step {k + 1}: {prose(rng, 3)} What about case {k}? It must stay under {100 + k} ms."})
        msgs.append({"role": "assistant", "content": f"For case {k}: {prose(rng, 6)}\n\nSee src/calc/module_{k}.py line {20 + k}."})
    msgs += tool_turn(ids, "bash", pytest_log(rng, 300, 299), command="pytest -v")
    msgs += tool_turn(ids, "read_file", numbered(parser_source(2)), path="src/calc/parser.py")
    msgs += tool_turn(ids, "bash", git_diff(), command="git diff")
    msgs += tool_turn(ids, "bash", npm_install(rng), command="npm ci")
    msgs += tool_turn(ids, "get_metrics", json_metrics(rng), service="calculator")
    msgs += tool_turn(ids, "bash", cargo_build(), command="cargo build --release")
    msgs += tool_turn(ids, "bash", git_log(rng, 40), command="git log -n 40")
    msgs += tool_turn(ids, "grep", grep_output(220), pattern="ParseError", path="src")
    msgs.append({"role": "user", "content": "Great. Fix the remaining parser bug and summarise what changed and why."})
    return msgs


ITEMS = {
    "reread_after_edit": ("Repeated reads of the same files, an edit and a sed -i in between", reread_after_edit),
    "pytest_failure": ("A 300-line pytest -v log with one failure and its traceback", pytest_failure),
    "json_results": ("Large JSON tool results: arrays of same-key objects, nested metrics", json_results),
    "coding_conversation": ("A long multi-turn coding conversation (12 turns) with code fences", coding_conversation),
    "build_outputs": ("git status/diff/log, npm and pip installs, cargo build, tsc, docker build", build_outputs),
    "agent_20k": ("A ~20k-token agent transcript mixing everything above", agent_20k),
}


def main(argv: list[str]) -> None:
    OUT.mkdir(exist_ok=True)
    for name, (description, make) in ITEMS.items():
        path = OUT / f"{name}.json"
        old = json.loads(path.read_text()) if path.exists() else {}
        doc: dict[str, Any] = {"description": description, "messages": make(random.Random(name))}
        doc["min_saving_pct"] = old.get("min_saving_pct", {})
        path.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")
    if "--reset-minimums" in argv:
        sys.path.insert(0, str(HERE.parents[2]))
        from tests.golden.compression.report import measure

        for name in ITEMS:
            path = OUT / f"{name}.json"
            doc = json.loads(path.read_text())
            doc["min_saving_pct"] = {m: int(p * 0.9) for m, p in measure(doc["messages"]).items()}
            path.write_text(json.dumps(doc, indent=1, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main(sys.argv[1:])
