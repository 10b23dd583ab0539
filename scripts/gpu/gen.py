"""Deterministic tensors from a seed, bit-identical on every machine.

The GPU bring-up kit (docs/gpu.md) carries no weights or image batches: both
sides (this machine when it makes the host backend's reference results, the
GPU machine when it runs the plans) generate them from a spec and a seed with
this module. It uses only integer arithmetic on numpy uint64 arrays (which
wrap modulo 2**64) and IEEE operations that are correctly rounded (an exact
integer-to-double conversion, multiplications by powers of two, one product
and one double-to-float rounding), so numpy 1.x and 2.x on any x86-64 or
Arm machine produce the same bits. Nothing here calls a transcendental
function or numpy's random generators, whose results are not promised to
stay the same across versions.

Element i (0-based) of the tensor NAME is a function of (seed, NAME, i)
alone: a counter-based splitmix64 stream,

    key    = mix64(seed * GOLDEN  xor  fnv1a64(NAME))
    z_i    = mix64(key + (i + 1) * GOLDEN)          (mod 2**64)

where mix64 is splitmix64's finalizer. From z_i:

    uniform  bound b:  float32(((z_i >> 11) * 2**-53 * 2 - 1) * b)   in [-b, b)
    randint  high h:   z_i mod h                                      int64
    const    value v:  v

A spec is a list of entries {"name", "shape", "dtype" (f32|i64), "init"
(uniform|const|randint|tokens), "bound"|"value"|"high"}. "tokens" entries
(a language model's x and y) slice one [B, T+1] randint stream named
"tokens": x = seq[:, :T] ("part": "x"), y = seq[:, 1:] ("part": "y").

Command line (what the kit's run.sh calls):

    gen.py SPEC.json --params OUT.npz --inputs OUT.npz [--seed N]
    gen.py SPEC.json --digest          # sha256 of every tensor, in spec order
"""
import argparse
import hashlib
import json
import sys
import zipfile

import numpy as np

MASK = (1 << 64) - 1
GOLDEN = 0x9E3779B97F4A7C15
C1 = 0xBF58476D1CE4E5B9
C2 = 0x94D049BB133111EB
CHUNK = 1 << 22

_U = np.uint64


def fnv1a64(text):
    """FNV-1a 64-bit hash of the UTF-8 bytes of `text` (a Python int)."""
    h = 0xCBF29CE484222325
    for b in text.encode("utf-8"):
        h = ((h ^ b) * 0x100000001B3) & MASK
    return h


def mix64(z):
    """splitmix64's finalizer on a Python int."""
    z &= MASK
    z = ((z ^ (z >> 30)) * C1) & MASK
    z = ((z ^ (z >> 27)) * C2) & MASK
    return z ^ (z >> 31)


def stream_key(seed, name):
    return mix64(((seed * GOLDEN) & MASK) ^ fnv1a64(name))


def _mix_array(z):
    """splitmix64's finalizer on a uint64 array (in place; wraps mod 2**64)."""
    z ^= z >> _U(30)
    z *= _U(C1)
    z ^= z >> _U(27)
    z *= _U(C2)
    z ^= z >> _U(31)
    return z


def words(key, start, count):
    """z_i for i in [start, start + count) of the stream `key` (uint64)."""
    z = np.arange(start + 1, start + count + 1, dtype=np.uint64)
    z *= _U(GOLDEN)
    z += _U(key)
    return _mix_array(z)


def uniform_from_words(z, bound):
    u = (z >> _U(11)).astype(np.float64) * (1.0 / 9007199254740992.0)  # exact, [0, 1)
    return ((u * 2.0 - 1.0) * float(bound)).astype(np.float32)


_DTYPES = {"f32": np.float32, "i64": np.int64}


def make(entry, seed):
    """The tensor an entry of a spec describes (a numpy array)."""
    shape = tuple(int(d) for d in entry["shape"])
    dtype = entry["dtype"]
    if dtype not in _DTYPES:
        raise ValueError("%s: dtype %r is not one of f32, i64" % (entry["name"], dtype))
    n = 1
    for d in shape:
        n *= d
    init = entry["init"]
    if init == "const":
        return np.full(shape, entry["value"], dtype=_DTYPES[dtype])
    if init == "tokens":
        b, t = shape
        seq = make({"name": "tokens", "shape": [b, t + 1], "dtype": "i64", "init": "randint",
                    "high": entry["high"]}, seed)
        part = seq[:, :t] if entry["part"] == "x" else seq[:, 1:]
        return np.ascontiguousarray(part)
    key = stream_key(seed, entry["name"])
    out = np.empty(n, dtype=_DTYPES[dtype])
    for start in range(0, n, CHUNK):
        count = min(CHUNK, n - start)
        z = words(key, start, count)
        if init == "uniform":
            if dtype != "f32":
                raise ValueError("%s: uniform needs f32" % entry["name"])
            out[start:start + count] = uniform_from_words(z, entry["bound"])
        elif init == "randint":
            out[start:start + count] = (z % _U(int(entry["high"]))).astype(np.int64)
        else:
            raise ValueError("%s: unknown init %r" % (entry["name"], init))
    return out.reshape(shape)


def write_npz(path, entries, seed):
    """Writes the tensors of `entries` to an uncompressed .npz, one at a time
    (so memory holds one tensor, not the whole file). Returns the sha256 hex
    digest over (name, dtype, shape, bytes) of every tensor in order."""
    h = hashlib.sha256()
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED, allowZip64=True) as zf:
        for e in entries:
            a = make(e, seed)
            _digest_one(h, e["name"], a)
            with zf.open(e["name"] + ".npy", "w", force_zip64=True) as f:
                np.lib.format.write_array(f, a, allow_pickle=False)
    return h.hexdigest()


def _digest_one(h, name, a):
    h.update(("%s|%s|%s|" % (name, a.dtype.str, ",".join(str(d) for d in a.shape))).encode())
    h.update(np.ascontiguousarray(a).tobytes())


def digest(entries, seed):
    h = hashlib.sha256()
    for e in entries:
        _digest_one(h, e["name"], make(e, seed))
    return h.hexdigest()


def load_spec(path):
    with open(path) as f:
        spec = json.load(f)
    for key in ("seed", "params", "inputs"):
        if key not in spec:
            raise ValueError("%s: spec lacks %r" % (path, key))
    return spec


def generate(spec, params_path, inputs_path):
    """Writes the spec's parameters and inputs; returns their digests."""
    return {"params": write_npz(params_path, spec["params"], spec["seed"]),
            "inputs": write_npz(inputs_path, spec["inputs"], spec["seed"])}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n", 2)[2])
    ap.add_argument("spec", help="spec.json of a model (from prepare.py)")
    ap.add_argument("--params", help="write the parameters and state here (.npz)")
    ap.add_argument("--inputs", help="write the inputs here (.npz)")
    ap.add_argument("--digest", action="store_true", help="print the digests, write nothing")
    a = ap.parse_args(argv)
    spec = load_spec(a.spec)
    if a.digest:
        print(json.dumps({"params": digest(spec["params"], spec["seed"]),
                          "inputs": digest(spec["inputs"], spec["seed"])}))
        return 0
    if not a.params or not a.inputs:
        ap.error("give --params and --inputs, or --digest")
    print(json.dumps(generate(spec, a.params, a.inputs)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
