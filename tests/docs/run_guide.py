#!/usr/bin/env python3
"""Runs the commands of a user-guide page (docs/*.md), so that the guide cannot drift from veil.

Every fenced block of the page is one of:
  ```sh runnable        shell commands, run in order (bash, `set -eu`; no pipefail, so a
                        documented failure can be shown as `cmd 2>&1 | grep EXPECTED`)
  ```python runnable    a Python program, run with /usr/bin/python3 and the built package
  ```LANG file=PATH     a listing of the repository's file PATH, which it must equal
  ```text / ```console  output shown to the reader (not run)
Anything else (a shell or Python block that is neither run nor checked) fails the test, unless
--unmarked=skip (the README, whose deployment examples name hosts that do not exist here).

The blocks run in a fresh folder holding links to the source tree's top-level entries and
`build` -> the build folder, so the page's relative paths (build/bin/..., docs/examples/...) work
and whatever it writes stays out of the tree. Background jobs (servers) are stopped at the end.

Usage: run_guide.py --source=DIR --build=DIR [--python=/usr/bin/python3] [--unmarked=skip] PAGE.md
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile

FENCE = re.compile(r"^```(.*)$")
SHOWN = {"text", "console", "json", "csv"}


def blocks(page):
    """(line number, info words, body) of each fenced block."""
    with open(page, encoding="utf-8") as f:
        lines = f.read().split("\n")
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        start, info, body = i + 1, m.group(1).split(), []
        i += 1
        while i < len(lines) and not lines[i].startswith("```"):
            body.append(lines[i])
            i += 1
        if i == len(lines):
            raise SystemExit(f"{page}:{start}: unterminated fenced block")
        i += 1
        yield start, info, "\n".join(body) + "\n"


def script_for(page, source, python, work, skip_unmarked):
    """The bash script of the page's runnable blocks; checks the listings on the way."""
    parts = ["set -eu", "trap 'kill $(jobs -p) 2>/dev/null || true; wait' EXIT", f"cd {work}"]
    for number, (line, info, body) in enumerate(blocks(page)):
        where = f"{os.path.basename(page)}:{line}"
        attrs = dict(word.split("=", 1) for word in info[1:] if "=" in word)
        if "file" in attrs:
            with open(os.path.join(source, attrs["file"]), encoding="utf-8") as f:
                if f.read() != body:
                    raise SystemExit(f"{where}: the listing differs from {attrs['file']}")
        elif info[:2] == ["sh", "runnable"]:
            parts.append(f"echo '--- {where}' >&2")
            parts.append(body)
        elif info[:2] == ["python", "runnable"]:
            program = os.path.join(work, f".guide_block_{number}.py")
            with open(program, "w", encoding="utf-8") as f:
                f.write(body)
            parts.append(f"echo '--- {where} (python)' >&2")
            parts.append(f"PYTHONPATH=build/python {python} {program}")
        elif not skip_unmarked and (not info or info[0] not in SHOWN):
            raise SystemExit(f"{where}: a ```{' '.join(info)} block that is neither run "
                             "(sh/python runnable) nor checked (file=PATH)")
    return "\n".join(parts) + "\n"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--source", required=True)
    parser.add_argument("--build", required=True)
    parser.add_argument("--python", default="/usr/bin/python3")
    parser.add_argument("--unmarked", choices=["fail", "skip"], default="fail")
    parser.add_argument("page")
    args = parser.parse_args()
    source = os.path.abspath(args.source)
    with tempfile.TemporaryDirectory(prefix="veil-guide-") as work:
        for entry in os.listdir(source):
            if entry not in ("build", ".git"):
                os.symlink(os.path.join(source, entry), os.path.join(work, entry))
        os.symlink(os.path.abspath(args.build), os.path.join(work, "build"))
        script = script_for(args.page, source, args.python, work, args.unmarked == "skip")
        env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
        result = subprocess.run(["bash", "-c", script], env=env)
    if result.returncode != 0:
        print(f"{args.page}: the guide's commands failed (exit {result.returncode})",
              file=sys.stderr)
    return result.returncode


if __name__ == "__main__":
    sys.exit(main())
