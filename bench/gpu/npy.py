#!/usr/bin/env python3
"""Float32 .npy <-> raw little-endian .f32 without numpy (the CPU machine has none).

  npy.py make N OUT.npy OUT.f32   N deterministic xyz samples in [-1, 1), shape [N, 3]
  npy.py raw IN.npy OUT.f32       the data of a float32 C-order .npy (as kiln run writes them)
"""
import struct
import sys


def write_npy(path, dims, values):
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (%s), }" % "".join(f"{d}, " for d in dims)
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
        f.write(struct.pack(f"<{len(values)}f", *values))


def read_npy_data(path):
    data = open(path, "rb").read()
    assert data[:6] == b"\x93NUMPY", path
    major = data[6]
    hlen = struct.unpack("<H", data[8:10])[0] if major == 1 else struct.unpack("<I", data[8:12])[0]
    start = (10 if major == 1 else 12) + hlen
    header = data[(10 if major == 1 else 12):start].decode()
    assert "'<f4'" in header and "'fortran_order': False" in header, header
    return data[start:]


def main():
    if sys.argv[1] == "make":
        n = int(sys.argv[2])
        # A fixed LCG: the same samples on every machine.
        s, vals = 12345, []
        for _ in range(n * 3):
            s = (s * 1103515245 + 12345) % (1 << 31)
            vals.append(s / float(1 << 30) - 1.0)
        write_npy(sys.argv[3], [n, 3], vals)
        open(sys.argv[4], "wb").write(struct.pack(f"<{len(vals)}f", *vals))
    elif sys.argv[1] == "raw":
        open(sys.argv[3], "wb").write(read_npy_data(sys.argv[2]))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
