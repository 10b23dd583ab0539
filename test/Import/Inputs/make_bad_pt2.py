"""Damaged copies of a good .pt2 (argv[1]) in argv[2], one problem each:
bad-schema.pt2 (schema version 9.0), truncated.pt2 (the first half of the
file), short-weight.pt2 (weight_0 lacks its last 4 bytes), bad-dtype.pt2
(weight 'fc1.weight' described as float64), bad-shape.pt2 ('fc1.weight'
described as [16, 4]), no-weight.pt2 (member weight_0 removed), no-model.pt2
(models/model.json removed), no-config.pt2 (model_weights_config.json removed).
"""
import json
import os
import sys
import zipfile

src, out = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(src) as z:
    members = {n: z.read(n) for n in z.namelist()}
prefix = next(n for n in members if n.endswith("models/model.json"))[:-len("models/model.json")]


def write(name, m):
    with zipfile.ZipFile(os.path.join(out, name), "w", zipfile.ZIP_STORED) as z:
        for n, data in m.items():
            z.writestr(n, data)


def edited(member, fn):
    m = dict(members)
    m[prefix + member] = json.dumps(fn(json.loads(m[prefix + member]))).encode()
    return m


def schema(d):
    d["schema_version"] = {"major": 9, "minor": 0}
    return d


write("bad-schema.pt2", edited("models/model.json", schema))
with open(src, "rb") as f:
    data = f.read()
with open(os.path.join(out, "truncated.pt2"), "wb") as f:
    f.write(data[: len(data) // 2])
cfg = "data/weights/model_weights_config.json"
path0 = json.loads(members[prefix + cfg])["config"]["fc1.weight"]["path_name"]
m = dict(members)
m[prefix + "data/weights/" + path0] = m[prefix + "data/weights/" + path0][:-4]
write("short-weight.pt2", m)


def dtype(d):
    d["config"]["fc1.weight"]["tensor_meta"]["dtype"] = 8
    return d


def shape(d):
    t = d["config"]["fc1.weight"]["tensor_meta"]
    t["sizes"] = [{"as_int": 16}, {"as_int": 4}]
    t["strides"] = [{"as_int": 4}, {"as_int": 1}]
    return d


write("bad-dtype.pt2", edited(cfg, dtype))
write("bad-shape.pt2", edited(cfg, shape))
for name, member in [("no-weight.pt2", "data/weights/" + path0),
                     ("no-model.pt2", "models/model.json"), ("no-config.pt2", cfg)]:
    m = dict(members)
    del m[prefix + member]
    write(name, m)
print("ok")
