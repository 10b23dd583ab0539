"""Copies an .npz and adds a member 'junk' that no plan binds, whose deflated
bytes are corrupt (issue 34): python3 npz_with_junk.py IN.npz OUT.npz. A
reader that inflates it fails; one that skips members it does not use
does not notice it."""
import sys
import zipfile

src, dst = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(src) as zin, zipfile.ZipFile(dst, "w") as zout:
    for info in zin.infolist():
        zout.writestr(info, zin.read(info.filename))
    header = b"\x93NUMPY\x01\x00v\x00{'descr': '<f4', 'fortran_order': False, 'shape': (1048576,), }"
    header = header + b" " * (10 + 118 - len(header)) + b"\n"
    zout.writestr(zipfile.ZipInfo("junk.npy"), header + b"\x00" * (4 << 20),
                  compress_type=zipfile.ZIP_DEFLATED)
data = bytearray(open(dst, "rb").read())
with zipfile.ZipFile(dst) as z:
    info = z.getinfo("junk.npy")
off = info.header_offset
start = off + 30 + int.from_bytes(data[off + 26:off + 28], "little") + \
    int.from_bytes(data[off + 28:off + 30], "little")
for i in range(start + 8, start + info.compress_size - 8):
    data[i] = 0xA5
open(dst, "wb").write(bytes(data))
print("ok")
