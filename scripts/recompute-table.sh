#!/usr/bin/env bash
# Runs test/drivers/check_memory_pass.py for every example model and recompute
# policy and prints one summary line each (the table of docs/recompute.md).
# DROPOUT=0.1 re-runs the transformer and gpt with dropout on.
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${BUILD_DIR:-$ROOT/build}/bin"
WORK="$(mktemp -d)"
for m in ${MODELS:-mlp resnet18 transformer gpt}; do
  for p in "policy=ops ops=relu,gelu,add,layer_norm,batch_norm,dropout" "policy=every-k k=2" "policy=sqrt" "policy=all"; do
    out=$(PYTHONPATH="$ROOT/python" /usr/bin/python3 "$ROOT/test/drivers/check_memory_pass.py" \
          --model "$m" --bin "$BIN" \
          --work "$WORK/$m" --threads "${THREADS:-2}" --dropout "${DROPOUT:-0}" \
          "--pipeline=--offload-recompute=\"$p report=-\"" 2>&1)
    rc=$?
    rec=$(echo "$out" | sed -n 's/^recompute @forward (policy [a-z-]*): \(.*\)/\1/p')
    peak=$(echo "$out" | sed -n "s/^$m: peak \(.*\)/\1/p")
    same=$(echo "$out" | sed -n "s/^$m: [0-9]* outputs compared, \(.*\)/\1/p")
    echo "$m | $p | $rec | $peak | $same | rc=$rc"
  done
done
rm -rf "$WORK"
