#!/usr/bin/env python3
"""A linear classifier whose weight is larger than the device, trained in streamed slices.

    PYTHONPATH=python /usr/bin/python3 test/drivers/check_streamed_classifier.py
        --bin build/bin --work DIR
        [--classes 1048576] [--features 256] [--batch 8] [--device-mib 256]
        [--slice-mib 32] [--steps 2] [--threads 2]

The model is one nn.Linear(features, classes) under cross-entropy, trained by
torch.optim.SGD with momentum 0.9. With the defaults its fp32 weight is
1 GiB, four times the 256 MiB device arena it must fit in.

The step is built with --offload-slice-parameters (the weight and bias become
row slices of --slice-mib), --offload-autodiff (SGD, momentum 0.9) and
--offload-host-parameters (every slice, its momentum and its gradient live on
the host; the update runs there; each slice is prefetched while the previous
one computes). offload-run then trains it on the host backend with a device
of exactly --device-mib (it refuses a plan that needs more), and the result is
compared with PyTorch's SGD on the CPU, step by step: the loss, and after the
last step the weight, bias and both momentum buffers, each within 1e-5 of
PyTorch relative to the tensor's largest magnitude (the gradient of each
slice is the same dot products in another blocking, so only rounding
differs). Exits 1 on any failure.
"""
import argparse
import os
import re
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from pipeline import check_cuda_run, compile_step, run

RTOL = 1e-5


class Classifier(nn.Module):
    def __init__(self, features, classes):
        super().__init__()
        self.fc = nn.Linear(features, classes)

    def forward(self, x):
        return self.fc(x)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bin", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--classes", type=int, default=1048576)
    ap.add_argument("--features", type=int, default=256)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--device-mib", type=int, default=256)
    ap.add_argument("--slice-mib", type=int, default=32)
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--keep", action="store_true",
                    help="keep the multi-GiB model, parameter and output files in --work")
    a = ap.parse_args(argv)
    os.makedirs(a.work, exist_ok=True)
    w = lambda n: os.path.join(a.work, n)
    torch.manual_seed(0)
    torch.set_num_threads(a.threads)
    lr, momentum = 0.1, 0.9
    t0 = time.time()

    model = Classifier(a.features, a.classes)
    with torch.no_grad():
        # Larger weights than the default init, so the logits and the
        # gradients are far from zero and the comparison means something.
        model.fc.weight.normal_(0, 0.05)
        model.fc.bias.normal_(0, 0.05)
    x = torch.randn(a.batch, a.features)
    y = torch.randint(0, a.classes, (a.batch,))
    weight_bytes = model.fc.weight.numel() * 4
    device_bytes = a.device_mib << 20
    try:
        torch.jit.trace(model, (x,)).save(w("classifier.pt"))
        np.savez(w("params.npz"), **{"fc.weight": model.fc.weight.detach().numpy(),
                                     "fc.bias": model.fc.bias.detach().numpy()})
        np.savez(w("inputs.npz"), x=x.numpy(), y=y.numpy())
        return check(a, w, model, x, y, lr, momentum, weight_bytes, device_bytes, t0)
    finally:
        # About 4 GB (the .pt and params.npz hold the 1 GiB weight, out.npz
        # the weight and its momentum): removed whether the check passed or
        # not, so a failing run does not fill a small CI disk.
        if not a.keep:
            for n in ("classifier.pt", "params.npz", "out.npz", "out.cuda.npz"):
                if os.path.exists(w(n)):
                    os.remove(w(n))


def check(a, w, model, x, y, lr, momentum, weight_bytes, device_bytes, t0):
    """Imports, plans and runs the classifier, then compares with PyTorch;
    returns the exit status (1 when a check failed)."""
    run([os.path.join(a.bin, "offload-import"), w("classifier.pt"), "-o", w("classifier.mlir"),
         "--input", f"x={a.batch}x{a.features}xf32", "--input", f"y={a.batch}xi64",
         "--loss", "cross_entropy"])
    if not a.keep:
        os.remove(w("classifier.pt"))  # 1 GiB; the step is imported
    out = compile_step(a.bin, [w("classifier.mlir"),
               f"--offload-slice-parameters=slice-bytes={a.slice_mib << 20} report=-",
               f"--offload-autodiff=optimizer=sgd lr={lr} momentum={momentum}",
               "--offload-host-parameters",
               ], w("step.mlir"), w("classifier.oflp"))
    sys.stdout.write(out)
    runner = [os.path.join(a.bin, "offload-run"), w("classifier.oflp"), "--params", w("params.npz"),
              "--inputs", w("inputs.npz"), "--steps", str(a.steps), "--threads", str(a.threads),
              "--device-bytes", str(device_bytes), "--dump", w("out.npz")]
    out = run(runner)
    sys.stdout.write(out)
    losses = [float(v) for v in re.findall(r"^step \d+: loss (\S+)", out, re.M)]
    peak = re.search(r"peak device bytes: planned (\d+) measured (\d+)", out)
    planned, measured = int(peak.group(1)), int(peak.group(2))

    # PyTorch: the same steps with torch.optim.SGD on the CPU.
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum)
    ref_losses = []
    for _ in range(a.steps):
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        ref_losses.append(float(loss))
    ref = {"fc.weight": model.fc.weight.detach().numpy(), "fc.bias": model.fc.bias.detach().numpy(),
           "fc.weight.momentum_buffer": opt.state[model.fc.weight]["momentum_buffer"].numpy(),
           "fc.bias.momentum_buffer": opt.state[model.fc.bias]["momentum_buffer"].numpy()}

    got = np.load(w("out.npz"))
    failed = False
    print(f"classifier: weight {a.classes}x{a.features} fp32 = {weight_bytes} bytes, "
          f"device {device_bytes} bytes ({weight_bytes / device_bytes:.1f}x the device)")
    ok = planned == measured and planned <= device_bytes
    failed |= not ok
    print(f"classifier: peak device bytes planned {planned} measured {measured}"
          f" (device {device_bytes})" + ("" if ok else ": FAIL"))
    for k, (l, r) in enumerate(zip(losses, ref_losses)):
        err = abs(l - r) / max(abs(r), 1e-30)
        failed |= err > RTOL
        print(f"classifier: step {k} loss {l:.7g} PyTorch {r:.7g} relative error {err:.2e}"
              + (": FAIL" if err > RTOL else ""))
    if len(losses) != a.steps:
        failed = True
        print(f"classifier: {len(losses)} losses printed, expected {a.steps}: FAIL")
    for name, r in ref.items():
        g = got[name]
        err = float(np.max(np.abs(g.astype(np.float64) - r))) / max(float(np.max(np.abs(r))), 1e-30)
        bad = g.shape != r.shape or err > RTOL
        failed |= bad
        print(f"classifier: {name} {list(g.shape)} max relative error {err:.2e}"
              + (": FAIL" if bad else ""))
    # Where a GPU is present, the same steps on the CUDA backend (the
    # workspace it adds counts against --device-bytes).
    failed |= check_cuda_run("classifier:", a.bin, w("classifier.oflp"),
                             [x for x in runner if x not in ("--device-bytes", str(device_bytes))],
                             w("out.npz"))
    print(f"classifier: {'FAIL' if failed else 'PASS'} ({time.time() - t0:.1f} s)")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
