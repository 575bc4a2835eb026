"""Dependency audit for CI (docs/security.md): pip-audit over the venv, failing on any known vulnerability.

pip-audit looks every distribution up in PyPI's advisory data (its per-release JSON API). Where that API
cannot be reached — a machine that sees only a package mirror — every package comes back "could not be
audited" and pip-audit on its own would still print "No known vulnerabilities found". This says so
instead, loudly, and passes: an audit that could not run is reported as not run, never as clean.
``FREELLM_AUDIT_STRICT=1`` makes an incomplete audit fail the run too.

    .venv/bin/python .ci/audit.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

PIP_AUDIT = Path(sys.executable).with_name("pip-audit")


def main() -> int:
    run = subprocess.run(
        [str(PIP_AUDIT), "--skip-editable", "--progress-spinner", "off", "--format", "json"],
        capture_output=True,
        text=True,
    )
    try:
        deps = json.loads(run.stdout)["dependencies"]
    except (ValueError, KeyError):
        print(f"pip-audit failed (exit {run.returncode}):\n{run.stderr[-2000:]}", file=sys.stderr)
        return 1
    vulnerable = [d for d in deps if d.get("vulns")]
    skipped = [d for d in deps if d.get("skip_reason")]
    for dep in vulnerable:
        ids = ", ".join(v.get("id", "?") for v in dep["vulns"])
        print(f"VULNERABLE {dep['name']} {dep.get('version', '?')}: {ids}", file=sys.stderr)
    audited = len(deps) - len(skipped)
    print(f"pip-audit: {audited} of {len(deps)} distributions audited, {len(vulnerable)} with known vulnerabilities")
    if skipped:
        reason = skipped[0].get("skip_reason", "")
        print(
            f"WARNING: {len(skipped)} distributions NOT audited (the advisory data is unreachable from this "
            f"machine?), e.g. {skipped[0]['name']}: {reason}",
            file=sys.stderr,
        )
    if vulnerable:
        return 1
    if skipped and os.environ.get("FREELLM_AUDIT_STRICT") == "1":
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
