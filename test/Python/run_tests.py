#!/usr/bin/python3
"""Tests of the python/ scripts (plain unittest; run with /usr/bin/python3 and
PYTHONPATH=python, as ctest python-scripts does).

Exports all four example models into a temporary directory and checks:
  * the exported files exist and agree with their metadata (input names,
    shapes, dtypes; parameter/buffer names and values match the .pt);
  * reference.py's loss and first-step gradients for the mlp equal a direct
    eager computation from the exported weights (torch.nn.functional ops),
    and its parameters after the steps equal SGD-momentum / AdamW updates
    written out in numpy here (not torch.optim);
  * saved_tensor_bytes.py for the mlp equals the figure derived below from
    the layer shapes, and the four models' traced and eager totals agree;
  * bw_split_bytes.py keeps everything alive between B and W, reassembles
    the exact weight gradients, and frees (B only) just the loss's values
    for the mlp.
Tolerances: fp32 gradients and updates rtol 1e-5, atol 1e-6 (same math,
possibly different summation order).
"""

import json
import os
import subprocess
import sys
import tempfile
import unittest

import numpy as np
import torch
import torch.nn.functional as F

# python/ is on PYTHONPATH (ctest python-scripts sets it); the scripts run
# from the folder the imports found.
import export_models as em
import saved_tensor_bytes as stb
import bw_split_bytes as bws

PYDIR = os.path.dirname(os.path.abspath(em.__file__))

PY = sys.executable
MODELS = ["mlp", "resnet18", "transformer", "gpt"]
F32 = 4  # bytes per float32
I64 = 8  # bytes per int64


def script(name, *args):
    """Runs python/<name> and returns its stdout; fails the test on rc != 0."""
    r = subprocess.run([PY, os.path.join(PYDIR, name)] + list(args),
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True)
    if r.returncode != 0:
        raise AssertionError("%s %s failed (rc %d):\n%s%s" % (
            name, " ".join(args), r.returncode, r.stdout, r.stderr))
    return r.stdout


def parse_type(s):
    """'32x3x32x32xf32' -> ((32, 3, 32, 32), 'f32')."""
    parts = s.split("x")
    return tuple(int(p) for p in parts[:-1]), parts[-1]


NP_SUFFIX = {np.dtype(np.float32): "f32", np.dtype(np.int64): "i64"}


class ScriptsTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        torch.set_num_threads(2)
        cls.tmp = tempfile.TemporaryDirectory(prefix="offload-py-")
        cls.dir = cls.tmp.name
        out = script("export_models.py", "--out", cls.dir, "--models", ",".join(MODELS))
        cls.export_log = out

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def prefix(self, m):
        return os.path.join(self.dir, m)

    # -- export -------------------------------------------------------------
    def test_export_files_and_metadata(self):
        self.assertEqual(len(self.export_log.strip().splitlines()), len(MODELS))
        expected_x = {"mlp": ((32, 64), "f32"), "resnet18": ((32, 3, 32, 32), "f32"),
                      "transformer": ((8, 16, 64), "f32"), "gpt": ((4, 32), "i64")}
        expected_y = {"mlp": (32,), "resnet18": (32,), "transformer": (8,), "gpt": (4, 32)}
        for m in MODELS:
            p = self.prefix(m)
            for suffix in (".pt", ".json", ".inputs.npz", ".params.npz"):
                self.assertTrue(os.path.isfile(p + suffix), p + suffix)
            with open(p + ".json") as f:
                cfg = json.load(f)
            self.assertEqual(cfg["model"], m)
            self.assertEqual(set(cfg["inputs"]), {"x", "y"})
            self.assertEqual(cfg["returns_loss"], m == "gpt")
            self.assertEqual(cfg["forward_args"], ["x", "y"] if m == "gpt" else ["x"])
            self.assertEqual(cfg["loss"], "cross_entropy")
            self.assertEqual(parse_type(cfg["inputs"]["x"]), expected_x[m])
            self.assertEqual(parse_type(cfg["inputs"]["y"]), (expected_y[m], "i64"))
            with np.load(p + ".inputs.npz") as z:
                self.assertEqual(sorted(z.files), ["x", "y"])
                for k in ("x", "y"):
                    self.assertEqual((z[k].shape, NP_SUFFIX[z[k].dtype]),
                                     parse_type(cfg["inputs"][k]), (m, k))
                ymax = 10 if m != "gpt" else 256
                self.assertTrue(((z["y"] >= 0) & (z["y"] < ymax)).all())
            # Parameters and buffers: same names and values as the .pt.
            mod = torch.jit.load(p + ".pt")
            named = dict(mod.named_parameters())
            named.update(dict(mod.named_buffers()))
            with np.load(p + ".params.npz") as z:
                self.assertEqual(set(z.files), set(named), m)
                for k, t in named.items():
                    want = np.int64 if k.endswith("num_batches_tracked") else np.float32
                    self.assertEqual(z[k].dtype, want, k)
                    np.testing.assert_array_equal(z[k], t.detach().numpy(), err_msg=k)

    def test_exports_are_deterministic(self):
        with tempfile.TemporaryDirectory() as d2:
            script("export_models.py", "--out", d2, "--models", "mlp,gpt")
            for m in ("mlp", "gpt"):
                for suffix in (".inputs.npz", ".params.npz"):
                    a = np.load(self.prefix(m) + suffix)
                    b = np.load(os.path.join(d2, m) + suffix)
                    for k in a.files:
                        np.testing.assert_array_equal(a[k], b[k], err_msg=m + k)

    def test_traced_loss_matches_eager_rebuild(self):
        # The traced .pt and the eager model rebuilt from the npz compute the
        # same loss for every model.
        for m in MODELS:
            p = self.prefix(m)
            cfg, eager = em.load_eager(p)
            x, y = em.load_inputs(p)
            traced = torch.jit.load(p + ".pt")
            le = stb.forward_loss(cfg, eager.train(), x, y)
            lt = stb.forward_loss(cfg, traced.train(), x, y)
            self.assertTrue(torch.equal(le, lt), m)

    # -- reference ------------------------------------------------------------
    def mlp_eager(self):
        """Loss and grads of the mlp from its npz files, written out directly."""
        p = self.prefix("mlp")
        with np.load(p + ".params.npz") as z:
            w = {k: torch.tensor(z[k], requires_grad=True) for k in z.files}
        x, y = em.load_inputs(p)
        h = F.relu(x @ w["fc1.weight"].t() + w["fc1.bias"])
        h = F.relu(h @ w["fc2.weight"].t() + w["fc2.bias"])
        logits = h @ w["fc3.weight"].t() + w["fc3.bias"]
        logp = logits - torch.logsumexp(logits, dim=1, keepdim=True)
        loss = -logp[torch.arange(len(y)), y].mean()
        names = sorted(w)
        grads = torch.autograd.grad(loss, [w[n] for n in names])
        return (loss.item(), {n: g.numpy() for n, g in zip(names, grads)},
                {n: w[n].detach().numpy().copy() for n in names})

    def test_reference_mlp_sgd(self):
        out = os.path.join(self.dir, "ref_sgd.npz")
        script("reference.py", "--model", self.prefix("mlp"), "--steps", "1",
               "--lr", "0.05", "--momentum", "0.9", "--out", out)
        loss, grads, params = self.mlp_eager()
        z = np.load(out)
        self.assertAlmostEqual(float(z["loss"]), loss, delta=1e-5 * abs(loss))
        self.assertEqual(float(z["loss"]), float(z["loss_step0"]))
        for n, g in grads.items():
            np.testing.assert_allclose(z["grad:" + n], g, rtol=1e-5, atol=1e-6, err_msg=n)
            # One SGD step (momentum buffer starts as the gradient): p - lr g.
            np.testing.assert_allclose(z[n], params[n] - 0.05 * g, rtol=1e-5,
                                       atol=1e-6, err_msg=n)

    def test_reference_mlp_sgd_two_steps(self):
        out = os.path.join(self.dir, "ref_sgd2.npz")
        script("reference.py", "--model", self.prefix("mlp"), "--steps", "2",
               "--out", out)
        z = np.load(out)
        self.assertIn("loss_step1", z.files)
        self.assertLess(float(z["loss_step1"]), float(z["loss_step0"]))

    def test_reference_mlp_adamw(self):
        out = os.path.join(self.dir, "ref_adamw.npz")
        lr, wd, b1, b2, eps = 1e-3, 0.01, 0.9, 0.999, 1e-8
        script("reference.py", "--model", self.prefix("mlp"), "--optimizer", "adamw",
               "--steps", "1", "--out", out)
        _, grads, params = self.mlp_eager()
        z = np.load(out)
        for n, g in grads.items():
            g = g.astype(np.float64)
            p = params[n].astype(np.float64) * (1 - lr * wd)
            m_hat = (1 - b1) * g / (1 - b1)
            v_hat = (1 - b2) * g * g / (1 - b2)
            p = p - lr * m_hat / (np.sqrt(v_hat) + eps)
            np.testing.assert_allclose(z[n], p, rtol=1e-5, atol=1e-6, err_msg=n)

    # -- saved-tensor bytes ---------------------------------------------------
    def test_saved_bytes_mlp_matches_shapes(self):
        res = json.loads(script("saved_tensor_bytes.py", "--model",
                                self.prefix("mlp"), "--json"))
        with np.load(self.prefix("mlp") + ".inputs.npz") as z:
            batch, in_features = z["x"].shape
        with np.load(self.prefix("mlp") + ".params.npz") as z:
            hidden1 = z["fc1.weight"].shape[0]
            hidden2 = z["fc2.weight"].shape[0]
            classes = z["fc3.weight"].shape[0]
            w2_bytes = z["fc2.weight"].size * F32
            w3_bytes = z["fc3.weight"].size * F32
        # Activations: each ReLU's result (saved by ReLU and by the next
        # Linear: one storage), the log_softmax result (saved by log_softmax
        # and nll_loss: one storage) and nll_loss's 0-dim total_weight.
        relu_bytes = batch * hidden1 * F32 + batch * hidden2 * F32
        loss_act = batch * classes * F32 + 1 * F32
        # Inputs: x (fc1 saves its input for dW1) and the target (nll_loss).
        inputs = batch * in_features * F32 + batch * I64
        # Parameters: fc2 and fc3 save W^T for their input gradient; fc1's
        # input x needs no gradient, so fc1 saves no weight.
        params = w2_bytes + w3_bytes
        self.assertEqual(res["activation_bytes"], relu_bytes + loss_act)
        self.assertEqual(res["input_bytes"], inputs)
        self.assertEqual(res["param_bytes"], params)
        self.assertEqual(res["buffer_bytes"], 0)
        self.assertEqual(res["total_bytes"], relu_bytes + loss_act + inputs + params)
        self.assertEqual(res["traced_total_bytes"], res["total_bytes"])
        bm = res["by_module"]
        self.assertEqual(bm["relu1"]["activation"], batch * hidden1 * F32)
        self.assertEqual(bm["fc1"]["input"], batch * in_features * F32)
        self.assertEqual(bm["fc2"]["param"], w2_bytes)
        self.assertEqual(res["loss_bytes"], loss_act + batch * I64)

    def test_saved_bytes_all_models(self):
        for m in MODELS:
            res = stb.measure(self.prefix(m))
            self.assertGreater(res["activation_bytes"], 0, m)
            self.assertEqual(res["total_bytes"], sum(
                sum(r.values()) for r in res["by_module"].values()), m)
            # Eager and traced save the same tensors; they may differ only by
            # 8-byte wrapped-number scalars the trace shares (see docstring).
            self.assertLessEqual(abs(res["traced_total_bytes"] - res["total_bytes"]), 64, m)
            self.assertEqual(res["loss"], res["traced_loss"], m)
        # ResNet-18 (batch 32, 32x32): the stem conv saves x, bn1 saves conv1's
        # output (N x 64 x 16 x 16) plus its per-channel mean/invstd.
        res = stb.measure(self.prefix("resnet18"))
        self.assertEqual(res["by_module"]["conv1"]["input"], 32 * 3 * 32 * 32 * F32)
        self.assertEqual(res["by_module"]["bn1"]["activation"],
                         32 * 64 * 16 * 16 * F32 + 2 * 64 * F32)

    def test_bw_split_mlp(self):
        res = json.loads(script("bw_split_bytes.py", "--model", self.prefix("mlp"),
                                "--json"))
        self.assertTrue(res["w_grads_match"])
        self.assertEqual(res["retained_bytes"], res["forward_bytes"])
        with np.load(self.prefix("mlp") + ".params.npz") as z:
            weights = sum(z[k].size * F32 for k in z.files if k.endswith("weight"))
            classes = z["fc3.weight"].shape[0]
        batch = np.load(self.prefix("mlp") + ".inputs.npz")["x"].shape[0]
        # The stage input requires grad, so all three Linears save W^T.
        self.assertEqual(res["forward_by_kind"]["param"], weights)
        # Only the loss's saved values (log_softmax result, total_weight,
        # target) are not read by any W: everything else feeds a dW.
        self.assertEqual(res["b_only_bytes"], batch * classes * F32 + F32 + batch * I64)

    def test_bw_split_other_models(self):
        for m in ("transformer", "gpt"):
            res = bws.measure(self.prefix(m))
            self.assertTrue(res["w_grads_match"], m)
            self.assertEqual(res["retained_bytes"], res["forward_bytes"], m)
            self.assertLess(res["w_read_bytes"], res["retained_bytes"], m)


if __name__ == "__main__":
    unittest.main(verbosity=2)
