#!/usr/bin/python3
"""check_mask.py STEP.mlir: the first tensor<TxTxi1> offload.constant in the
file must equal torch.triu(torch.ones(T, T, dtype=bool), diagonal=1), the
causal mask the GPT model builds. MLIR prints large i1 splat-free constants
as hex, one bit per element, little-endian bit order."""
import re
import sys

import numpy as np
import torch

text = open(sys.argv[1]).read()
m = re.search(r'offload\.constant dense<"0x([0-9A-F]+)"> : tensor<(\d+)x(\d+)xi1>', text)
if not m:
    sys.exit("no hex i1 constant found")
t = int(m.group(2))
bits = np.unpackbits(np.frombuffer(bytes.fromhex(m.group(1)), np.uint8),
                     bitorder="little")[:t * t].reshape(t, t).astype(bool)
ref = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1).numpy()
if not (bits == ref).all():
    sys.exit("mask differs from torch.triu(ones, 1)")
print("mask ok", t)
