"""The built-in tool-output filters, tried in this order after the custom ones: JSON (left whole for
jsoncompact), git, installs, test runners, cargo, tsc, lint, build, docker, file lists, search, stack
traces, catch-all.

Drop patterns only name noise (progress, passing tests, hints, cache hits); a line naming an error, a
failure or a diff hunk is never dropped whatever a pattern says. The JSON rule comes first (the spec lists
it later) so a JSON result is never cut by a line-based rule before jsoncompact can read it."""

from __future__ import annotations

from typing import Any

from freellm.compression.filters.model import CompiledRule, FilterRule, compile_rule

__all__ = ["BUILTIN_DEFINITIONS", "BUILTIN_RULES"]

_SHELL = r"^\s*(?:\S+=\S+\s+)*(?:sudo\s+)?(?:npx\s+|uv run\s+|poetry run\s+|python3? -m\s+)?"

BUILTIN_DEFINITIONS: tuple[dict[str, Any], ...] = (
    {
        "id": "json",
        "detect": {"json": True},
        "collapse_runs": None,
        "head_tail": False,
        "max_chars": 0,
    },
    {
        "id": "git",
        "detect": {
            "tool_names": ["git", "git_status", "git_diff", "git_log"],
            "commands": [_SHELL + r"git\b"],
            "content": [r"^On branch \S+", r"^diff --git ", r"^commit [0-9a-f]{40}\b", r"^Your branch is "],
        },
        "drop_lines": [
            r'^\s*\(use "git [^"]*"(?: to [^)]*)?(?: or "git [^"]*"[^)]*)?\)\s*$',
            r"^\s*\(use \"git .*\)\s*$",
            r"^(?:remote: )?(?:Enumerating|Counting|Compressing|Writing|Receiving|Resolving) objects:",
            r"^remote: Total \d+",
            r"^index [0-9a-f]{7,}\.\.[0-9a-f]{7,}(?: \d{6})?$",
            r'^no changes added to commit \(use "git add"',
        ],
    },
    {
        "id": "installs",
        "detect": {
            "tool_names": ["npm", "pip", "yarn", "pnpm", "poetry", "apt", "uv"],
            "commands": [_SHELL + r"(?:npm|pnpm|yarn|pip3?|uv pip|uv sync|poetry|apt(?:-get)?|brew|gem|bundle)\s+"
                         r"(?:install|i|add|ci|sync|update|upgrade)\b"],
            "content": [
                r"^(?:npm (?:WARN|notice|ERR!)|added \d+ packages?\b|Collecting \S+|Requirement already satisfied"
                r"|Successfully installed|Installing collected packages|Resolving dependencies|Progress: resolved"
                r"|(?:Get|Hit):\d+ \S+|Setting up \S+)",
            ],
        },
        "drop_lines": [
            r"^\s*Collecting \S+",
            r"^\s*Downloading \S+",
            r"^\s*Using cached \S+",
            r"^\s*Requirement already satisfied",
            r"^\s*(?:Obtaining|Preparing metadata|Getting requirements|Installing build dependencies|"
            r"Building wheels? for|Created wheel for|Stored in directory|Attempting uninstall|Found existing installation|"
            r"Uninstalling|Successfully uninstalled)\b",
            r"^\s*(?:━|█|▓|▒|░|#|=|>|-|\||\s)*\d+(?:\.\d+)?%",
            r"^\s*━{3,}",
            r"^npm (?:notice|http fetch|timing|sill|verb)\b",
            r"^npm WARN deprecated\b",
            r"^(?:Get|Hit|Ign):\d+ ",
            r"^(?:Reading package lists|Building dependency tree|Reading state information)\.\.\.",
            r"^(?:Selecting previously unselected|Preparing to unpack|Unpacking|Setting up|Processing triggers for) ",
            r"^Progress: resolved \d+",
            r"^\s*[+-] \S+ \d+\.\d+\.\d+\S*$",
        ],
        "keep_lines": [r"^added \d+ packages?", r"Successfully installed", r"vulnerabilit"],
    },
    {
        "id": "test-runners",
        "detect": {
            "tool_names": ["pytest", "jest", "vitest", "mocha", "go_test", "cargo_test", "run_tests"],
            "commands": [_SHELL + r"(?:pytest|py\.test|jest|vitest|mocha|go test|cargo test|npm (?:run )?test"
                         r"|yarn test|pnpm test|tox|nox|rspec|phpunit)\b"],
            "content": [
                r"^=+ test session starts =+$",
                r"^collected \d+ items?",
                r"::\S+ (?:PASSED|FAILED|SKIPPED|ERROR|XFAIL|XPASS)\b",
                r"^\s*(?:PASS|FAIL) \S+\.(?:test|spec)\.[cm]?[jt]sx?\b",
                r"^=== RUN\s",
                r"^--- (?:PASS|FAIL):",
                r"^test \S+ \.\.\. (?:ok|FAILED|ignored)$",
                r"^running \d+ tests?$",
            ],
        },
        "drop_lines": [
            r"::\S+ PASSED\b",
            r"^[\w/.\\-]+\.py \.+\s*(?:\[\s*\d+%\])?$",
            r"^\s*(?:✓|√|✔) ",
            r"^\s*PASS \S+",
            r"^=== (?:RUN|PAUSE|CONT)\s",
            r"^\s*--- PASS: ",
            r"^ok\s+\S+\s+(?:\d+(?:\.\d+)?s|\(cached\))$",
            r"^test \S+ \.\.\. ok$",
            r"^\s*$",
        ],
    },
    {
        "id": "cargo",
        "detect": {
            "tool_names": ["cargo"],
            "commands": [_SHELL + r"cargo\s+(?:build|check|run|clippy|install|update|fetch)\b"],
            "content": [r"^\s+(?:Compiling|Checking) \S+ v\d", r"^\s+Finished .*target", r"^\s+Updating crates\.io index"],
        },
        "drop_lines": [
            r"^\s+(?:Compiling|Checking|Downloaded|Downloading|Fresh|Locking|Adding|Updating|Documenting|Blocking)"
            r" \S+ v\d",
            r"^\s+Downloaded \d+ crates?",
            r"^\s+Updating crates\.io index",
            r"^\s+(?:Blocking|Waiting) (?:waiting )?for file lock",
        ],
    },
    {
        "id": "tsc",
        "detect": {
            "tool_names": ["tsc"],
            "commands": [_SHELL + r"(?:tsc|vue-tsc)\b"],
            "content": [r"\(\d+,\d+\): error TS\d+:", r"^\S+:\d+:\d+ - error TS\d+:", r"^Found \d+ errors? in "],
        },
        "drop_lines": [r"^\s*~+\s*$"],
    },
    {
        "id": "lint",
        "detect": {
            "tool_names": ["eslint", "ruff", "flake8", "pylint", "mypy", "clippy", "golangci-lint", "biome"],
            "commands": [_SHELL + r"(?:eslint|ruff|flake8|pylint|mypy|golangci-lint|biome|stylelint|shellcheck)\b"],
            "content": [
                r"^\s*\d+:\d+\s+(?:error|warning)\s",
                r"^✖ \d+ problems?",
                r"^[\w./-]+:\d+:\d+: [A-Z]{1,3}\d{2,4}\b",
                r"^[\w./-]+:\d+: (?:error|note|warning):",
                r"^Found \d+ errors? in \d+ files?",
            ],
        },
        "drop_lines": [r"^\s*$"],
    },
    {
        "id": "build",
        "detect": {
            "tool_names": ["make", "gradle", "mvn", "webpack", "vite"],
            "commands": [_SHELL + r"(?:make|cmake|gradle|\./gradlew|mvn|webpack|vite build|next build"
                         r"|npm run build|yarn build|pnpm build|go build|dotnet build)\b"],
            "content": [
                r"^vite v\d",
                r"^webpack \d",
                r"\bmodules transformed\b",
                r"^\[INFO\] ",
                r"^> Task :",
                r"^BUILD (?:SUCCESSFUL|FAILED)",
                r"^make(?:\[\d+\])?: ",
            ],
        },
        "drop_lines": [
            r"^\s*(?:transforming|rendering chunks|computing gzip size)\b",
            r"^\[INFO\] (?:Download(?:ing|ed) from|-+\s*$|\s*$)",
            r"^> Task :\S+(?: UP-TO-DATE| NO-SOURCE| FROM-CACHE| SKIPPED)?$",
            r"^\s*(?:CC|CXX|LD|AR|AS)\s+\S+$",
            r"^make(?:\[\d+\])?: (?:Entering|Leaving) directory",
            r"^\s*\[\s*\d+%\] (?:Building|Linking|Built target)",
            r"^\s*\d+% ",
        ],
    },
    {
        "id": "docker",
        "detect": {
            "tool_names": ["docker", "docker_build", "podman"],
            "commands": [_SHELL + r"(?:docker|podman)(?:-compose| compose)?\s+(?:build|pull|push|compose|up|run)\b"],
            "content": [r"^Step \d+/\d+ :", r"^#\d+ \[", r"^\s*---> ", r"Pulling fs layer", r"^Sending build context"],
        },
        "drop_lines": [
            r"^[0-9a-f]{12}: (?:Pulling fs layer|Waiting|Downloading|Verifying Checksum|Download complete|Extracting"
            r"|Pull complete|Already exists|Pushing|Pushed|Preparing|Layer already exists)",
            r"^\s*---> (?:Using cache|Running in [0-9a-f]+|[0-9a-f]{12})$",
            r"^Removing intermediate container",
            r"^#\d+ (?:DONE|CACHED)\b",
            r"^#\d+ (?:transferring|resolve|sha256:|extracting|exporting layers|writing image|naming to)",
            r"^#\d+ \d+\.\d+ ",
        ],
    },
    {
        "id": "file-lists",
        "detect": {
            "tool_names": ["ls", "list_dir", "list_directory", "list_files", "glob", "find", "tree", "find_files"],
            "commands": [_SHELL + r"(?:ls|find|tree|fd|du)\b"],
            "content": [r"^[dlrwxst-]{10}[+@.]?\s+\d+ ", r"^(?:├── |└── |│   )"],
        },
        "drop_lines": [r"(?:^|/)(?:node_modules|\.git|__pycache__|\.venv|\.mypy_cache|\.pytest_cache)/"],
    },
    {
        "id": "search",
        "detect": {
            "tool_names": ["grep", "rg", "ripgrep", "search", "search_files", "find_in_files", "codebase_search",
                           "grep_search"],
            "commands": [_SHELL + r"(?:grep|egrep|rg|ag|ack|git grep)\b"],
            "content": [r"^[\w./-]+\.\w+:\d+[:-]"],
        },
    },
    {
        "id": "stack-traces",
        "detect": {
            "content": [
                r"^Traceback \(most recent call last\):",
                r"^\s+at [\w$.<>\[\] ]+ \(.*:\d+:\d+\)$",
                r"^\s+at [\w$.]+\([\w$]+\.java:\d+\)$",
                r"^goroutine \d+ \[",
                r"^thread '.+' panicked at",
            ],
        },
        "drop_lines": [r"^\s+at .*\((?:node:internal|internal/)", r"^\s+at .*node_modules/"],
    },
    {"id": "catch-all", "catch_all": True},
)

def _expand(d: dict[str, Any]) -> list[dict[str, Any]]:
    """A rule matches by tool name only when it has no content patterns (the rule semantics); a built-in
    that lists both becomes two adjacent rules with the same id: by name (and command), then by content."""
    detect = d.get("detect", {})
    if not (detect.get("tool_names") and detect.get("content")):
        return [d]
    by_name = {**d, "detect": {k: v for k, v in detect.items() if k != "content"}}
    by_content = {**d, "detect": {k: v for k, v in detect.items() if k != "tool_names"}}
    return [by_name, by_content]


BUILTIN_RULES: tuple[CompiledRule, ...] = tuple(
    compile_rule(FilterRule.model_validate(x)) for d in BUILTIN_DEFINITIONS for x in _expand(d)
)
