"""Hostile variants of a good .pt2 archive (issue 34), with the standard
library only: python3 hostile_pt2.py GOOD.pt2 OUTDIR

  deep-model.pt2    models/model.json nested 100,000 deep (200 KB)
  deep-config.pt2   model_weights_config.json nested 100,000 deep
  inflate.pt2       models/model.json deflated from 300 MiB of spaces (~300 KB)
  crc.pt2           one byte of a stored weight changed, its CRC-32 not
  expanded.pt2      fc1.weight described as a [65536, 65536] broadcast of its
                    storage (strides 0): 16 GiB from 512 bytes (FuzzJson)
"""
import sys
import zipfile
import zlib

good, out = sys.argv[1], sys.argv[2]
src = zipfile.ZipFile(good)
names = src.namelist()
model = next(n for n in names if n.endswith("models/model.json"))
config = next(n for n in names if n.endswith("model_weights_config.json"))
deep = b"[" * 100000 + b"]" * 100000


def rewrite(path, replace):
    with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as dst:
        for info in src.infolist():
            data = replace.get(info.filename, src.read(info.filename))
            if callable(data):
                data(dst, info)
            else:
                dst.writestr(info.filename, data)


rewrite(out + "/deep-model.pt2", {model: deep})
rewrite(out + "/deep-config.pt2", {config: deep})


def inflating(dst, info):
    # 300 MiB of spaces, streamed through deflate (never held whole).
    zi = zipfile.ZipInfo(info.filename)
    zi.compress_type = zipfile.ZIP_DEFLATED
    with dst.open(zi, "w", force_zip64=True) as f:
        piece = b" " * (1 << 20)
        for _ in range(300):
            f.write(piece)


rewrite(out + "/inflate.pt2", {model: inflating})

# One data byte of the first weight flipped in place: the archive still
# parses, the member's CRC-32 no longer matches.
data = bytearray(open(good, "rb").read())
weight = next(i for i in src.infolist() if "/data/weights/weight_" in i.filename)
assert weight.compress_type == zipfile.ZIP_STORED
off = weight.header_offset
name_len = int.from_bytes(data[off + 26:off + 28], "little")
extra_len = int.from_bytes(data[off + 28:off + 30], "little")
start = off + 30 + name_len + extra_len
data[start + 5] ^= 0x40
open(out + "/crc.pt2", "wb").write(bytes(data))
# A weight whose strides broadcast a few bytes of storage to 16 GiB.
import json
cfg = json.loads(src.read(config))
meta = cfg["config"]["fc1.weight"]["tensor_meta"]
meta["sizes"] = [{"as_int": 65536}, {"as_int": 65536}]
meta["strides"] = [{"as_int": 0}, {"as_int": 0}]
rewrite(out + "/expanded.pt2", {config: json.dumps(cfg).encode()})
print("ok")
