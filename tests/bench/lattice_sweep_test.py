"""scripts/lattice-sweep on small tables: one JSON line per protocol, height and batch with every
record checked (errors 0), the markdown table naming each, and the plot where gnuplot exists.

Usage: lattice_sweep_test.py REPO_ROOT VEIL_BENCH OUT_DIR
"""
import json
import os
import shutil
import subprocess
import sys

root, bench, out = sys.argv[1:4]
shutil.rmtree(out, ignore_errors=True)
env = dict(os.environ, VEIL_BENCH=bench, SWEEP_PROTOCOLS="simple double-pack exppack-d",
           SWEEP_LOG_ROWS="10", SWEEP_BATCHES="1 2", SWEEP_THREADS="1")
run = subprocess.run([os.path.join(root, "scripts", "lattice-sweep"), out], env=env,
                     capture_output=True, text=True)
assert run.returncode == 0, run.stderr
lines = [json.loads(line) for line in open(os.path.join(out, "sweep.jsonl"))]
# exppack-d at batch 1 only: 2 protocols x 2 batches + 1.
assert len(lines) == 5, len(lines)
seen = {(d["protocol"], d["rows"], d["batch"]) for d in lines}
for p in ("lwe-simple", "lwe-double-pack"):
    for batch in (1, 2):
        assert (p, 1024, batch) in seen, (p, batch)
assert ("lwe-exppack-d", 1024, 1) in seen
for d in lines:
    assert d["errors"] == 0, d
    assert d["server_ms_per_query"] > 0 and d["response_bytes"] > 0, d
table = open(os.path.join(out, "sweep.md")).read()
assert table.count("\n") == 2 + len(lines), table
for name in ("SimplePIR", "double packing", "ExpPack(D)"):
    assert f"| {name} | 2^10 | 1 |" in table, name
assert run.stdout == table, "the table is printed"
if shutil.which("gnuplot"):
    assert os.path.getsize(os.path.join(out, "sweep.png")) > 10000
# A failing run stops with the benchmark's error.
bad = subprocess.run([os.path.join(root, "scripts", "lattice-sweep"), out],
                     env=dict(env, SWEEP_PROTOCOLS="no-such-protocol"), capture_output=True,
                     text=True)
assert bad.returncode != 0 and "no-such-protocol at 2^10, batch 1 failed" in bad.stderr, bad.stderr
print("lattice-sweep: ok")
