#!/usr/bin/env python3
"""Interop test of DESIGN.md 2.3: a reader that `flatc --python` generates from the seed schema
(src/bundle/bundled_program_schema.fbs + scalar_type.fbs) reads a bundle kiln wrote and finds the
tensors kiln was given (inputs) and computed (expected outputs, checked against `kiln run` on the
same inputs), the program, the method name, identity dim_order and 16-byte aligned data.

Needs Debian's python3-flatbuffers, no numpy. Run by CTest (tests/CMakeLists.txt):
  read_bundle.py --kiln KILN --flatc FLATC --schema-dir src/bundle --models models --work DIR
"""
import argparse
import importlib
import json
import math
import os
import re
import shutil
import struct
import subprocess
import sys

FLOAT = 6  # executorch_flatbuffer.ScalarType.FLOAT


def run(cmd):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if p.returncode != 0:
        sys.exit("FAILED: %s\n%s%s" % (" ".join(cmd), p.stdout, p.stderr))
    return p.stdout


def write_npy_f32(path, dims, values):
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (%s), }" % (
        "".join("%d, " % d for d in dims) if len(dims) != 1 else "%d," % dims[0])
    pad = 64 - (10 + len(header) + 1) % 64
    header = header + " " * pad + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode("latin1"))
        f.write(struct.pack("<%df" % len(values), *values))


def npy_data(path):
    """(dims, raw little-endian bytes) of a version 1-3 .npy file."""
    b = open(path, "rb").read()
    assert b[:6] == b"\x93NUMPY", path
    if b[6] == 1:
        n, start = struct.unpack("<H", b[8:10])[0], 10
    else:
        n, start = struct.unpack("<I", b[8:12])[0], 12
    header = b[start:start + n].decode("latin1")
    dims = [int(x) for x in re.search(r"'shape': \(([^)]*)\)", header).group(1).replace(",", " ").split()]
    return dims, b[start + n:]


def vector_bytes(table, field_offset):
    """The bytes of a [ubyte] field and their offset in the buffer (the generated accessors give
    elements one at a time; this is the same lookup they make)."""
    o = table._tab.Offset(field_offset)
    if o == 0:
        return b"", None
    start = table._tab.Vector(o)
    n = table._tab.VectorLen(o)
    return bytes(table._tab.Bytes[start:start + n]), start


def check(cond, what):
    if not cond:
        sys.exit("FAILED: " + what)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kiln", required=True)
    ap.add_argument("--flatc", required=True)
    ap.add_argument("--schema-dir", required=True)
    ap.add_argument("--models", required=True)
    ap.add_argument("--work", required=True)
    a = ap.parse_args()
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    gen = os.path.join(a.work, "gen")
    run([a.flatc, "--python", "-o", gen, os.path.join(a.schema_dir, "bundled_program_schema.fbs"),
         os.path.join(a.schema_dir, "scalar_type.fbs")])
    sys.path.insert(0, gen)
    BundledProgram = importlib.import_module("bundled_program_flatbuffer.BundledProgram").BundledProgram
    ValueUnion = importlib.import_module("bundled_program_flatbuffer.ValueUnion").ValueUnion
    TensorT = importlib.import_module("bundled_program_flatbuffer.Tensor").Tensor

    model = os.path.join(a.models, "kws_cnn.onnx")
    # The input's name, from kiln's own summary of a probe bundle.
    probe = os.path.join(a.work, "probe.bpte")
    run([a.kiln, "bundle", model, "-o", probe])
    name = re.search(r"input\s+'([^']*)'", run([a.kiln, "inspect", probe])).group(1)

    dims = [1, 1, 49, 10]
    n = 1 * 1 * 49 * 10
    inputs = []
    for k in range(2):
        path = os.path.join(a.work, "x%d.npy" % k)
        write_npy_f32(path, dims, [math.sin(0.37 * i + k) * (1 + k) for i in range(n)])
        inputs.append(path)
    bpte = os.path.join(a.work, "kws.bpte")
    run([a.kiln, "bundle", model, "--input", name + "=" + inputs[0], "--input", name + "=" + inputs[1], "-o", bpte])
    expected = []
    for k in range(2):
        out = os.path.join(a.work, "run%d" % k)
        run([a.kiln, "run", model, "--input", name + "=" + inputs[k], "--output-dir", out])
        names = json.load(open(os.path.join(out, "outputs.json")))
        expected.append([os.path.join(out, "output_%s.npy" % i) for i in sorted(names, key=int)])

    buf = bytearray(open(bpte, "rb").read())
    check(BundledProgram.BundledProgramBufferHasIdentifier(buf, 0), "file identifier BP06")
    root = BundledProgram.GetRootAs(buf, 0)
    check(root.Version() == 0, "version 0, got %d" % root.Version())
    check(root.ExecutionPlanTestsLength() == 1, "one execution plan test")
    plan = root.ExecutionPlanTests(0)
    check(plan.MethodName() == b"forward", "method 'forward', got %r" % plan.MethodName())
    program, at = vector_bytes(root, 8)  # BundledProgram.program: field 2, vtable offset 4 + 2 * 2
    check(len(program) == root.ProgramLength() and at % 16 == 0, "program 16-byte aligned at %s" % at)
    check(program[4:8] == b"KILN", "the program is a .kiln file, identifier %r" % program[4:8])
    check(plan.TestSetsLength() == 2, "two test sets, got %d" % plan.TestSetsLength())
    tensors = 0
    for k in range(2):
        s = plan.TestSets(k)
        check(s.InputsLength() == 1 and s.ExpectedOutputsLength() == len(expected[k]), "set %d counts" % k)
        pairs = [(s.Inputs(0), inputs[k])] + [(s.ExpectedOutputs(i), expected[k][i]) for i in range(len(expected[k]))]
        for value, npy in pairs:
            check(value.ValType() == ValueUnion.Tensor, "set %d: a Tensor value" % k)
            t = TensorT()
            t.Init(value.Val().Bytes, value.Val().Pos)
            want_dims, want_bytes = npy_data(npy)
            sizes = [t.Sizes(d) for d in range(t.SizesLength())]
            check(t.ScalarType() == FLOAT, "set %d %s: FLOAT, got %d" % (k, npy, t.ScalarType()))
            check(sizes == want_dims, "set %d %s: sizes %s, want %s" % (k, npy, sizes, want_dims))
            check([t.DimOrder(d) for d in range(t.DimOrderLength())] == list(range(len(sizes))),
                  "set %d %s: identity dim_order" % (k, npy))
            data, at = vector_bytes(t, 8)  # Tensor.data: field 2
            check(at is not None and at % 16 == 0, "set %d %s: data 16-byte aligned (at %s)" % (k, npy, at))
            check(data == want_bytes, "set %d %s: the bundle's bytes differ from the file's" % (k, npy))
            tensors += 1
    print("read %s with the flatc-generated Python reader: %d test sets, %d tensors as given and computed, "
          "program %d bytes" % (bpte, plan.TestSetsLength(), tensors, len(program)))


if __name__ == "__main__":
    main()
