#!/usr/bin/env python3
"""Every flag that veil-bench's suites read (flags.Int("name"), .Str, .Double, .Has) and every flag
that scripts/gpu-check passes to veil-bench is declared in bench/flags.cc: an undeclared flag is
refused at parse time, and the GPU suites run only on a device, never in CI, so this is where
such a slip is caught before a device run is spent on it.

Usage: flags_declared.py SOURCE_DIR
"""

import glob
import os
import re
import sys


def main():
    source = sys.argv[1]
    with open(os.path.join(source, "bench", "flags.cc"), encoding="utf-8") as f:
        declared = set(re.findall(r"ABSL_FLAG\([^,]+,\s*(\w+)\s*,", f.read()))
    declared.add("json_out")  # bench/main.cc reads it itself
    used = {}  # dashed name -> where
    for path in sorted(glob.glob(os.path.join(source, "bench", "*.cc"))):
        with open(path, encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                for name in re.findall(r"\bflags\.(?:Int|Str|Double|Has)\(\s*\"([a-z0-9-]+)\"", line):
                    used.setdefault(name, f"{os.path.relpath(path, source)}:{n}")
    with open(os.path.join(source, "scripts", "gpu-check"), encoding="utf-8") as f:
        for n, line in enumerate(f, 1):
            if re.match(r"\s*bench \S", line):
                for name in re.findall(r"\s--([a-z0-9-]+)", line):
                    used.setdefault(name, f"scripts/gpu-check:{n}")
    missing = sorted(f"{where}: --{name}" for name, where in used.items()
                     if name.replace("-", "_") not in declared)
    for m in missing:
        print(f"not declared in bench/flags.cc: {m}")
    if len(used) < 20:
        print(f"only {len(used)} flags found: the patterns no longer match the sources")
        return 1
    print(f"{len(used)} flags used, all declared" if not missing else "")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main())
