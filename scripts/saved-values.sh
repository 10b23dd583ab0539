#!/usr/bin/env bash
# Prints offload's and PyTorch's saved-value totals for the four example models
# (the figures of docs/saved-values.md). Needs a build (scripts/setup.sh).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BIN="${BUILD_DIR:-$ROOT/build}/bin"
OUT="$(mktemp -d)"
/usr/bin/python3 "$ROOT/python/export_models.py" --out "$OUT" > /dev/null
for m in mlp resnet18 transformer gpt; do
  args=$(/usr/bin/python3 -c "
import json; m = json.load(open('$OUT/$m.json'))
a = ['--input %s=%s' % (k, v) for k, v in m['inputs'].items()]
print(' '.join(a + ([] if m.get('returns_loss') else ['--loss ' + m['loss']])))")
  "$BIN/offload-import" "$OUT/$m.pt" $args -o "$OUT/$m.mlir"
  ours=$("$BIN/offload-opt" "$OUT/$m.mlir" --offload-autodiff \
           --offload-saved-value-report=per-value=false -o /dev/null 2>&1 | sed -n 's/.*total: \([0-9]*\) bytes.*/\1/p')
  torch=$(/usr/bin/python3 "$ROOT/python/saved_tensor_bytes.py" --model "$OUT/$m" --json |
          /usr/bin/python3 -c "import json,sys; d=json.load(sys.stdin); print(d['activation_bytes']+d['buffer_bytes']+d['loss_bytes'])")
  printf '%-12s offload %12s bytes   PyTorch %12s bytes\n' "$m" "$ours" "$torch"
done
rm -rf "$OUT"
