#!/usr/bin/env python3
"""The static performance report of kiln's CUDA kernels, with no GPU (issue 27, item 3).

  /usr/bin/python3 bench/gpu/static_report.py --kiln build/kiln --out build/static_report [MODEL...]

For each model (default models/mlp_field.onnx) and each path (fp32 scalar, fp16 scalar, fp16 and
fp8 fused MLP on mma.sync, fp16 WMMA warp steps):
  - kiln compile --target cuda, and the prediction kiln's model writes into the header
    (src/codegen/cuda/cuda_perf_model.h: an SM's issue, tensor-core and shared-memory bounds on an
    H200 SXM);
  - nvcc -arch=sm_90 with ptxas -v: registers, spill bytes, and the occupancy they allow (warps
    per SM from the registers and the block's shared memory);
  - the instructions of the kernel by class, from the SASS when cuobjdump is installed, else from
    the PTX (a static count: the kernel's main loop is one warp iteration, unrolled).
Writes OUT/report.md and prints it. Exits 1 when a kernel fails to build or a fused-MLP kernel
spills.
"""
import argparse
import collections
import os
import re
import shutil
import subprocess
import sys

PATHS = [
    ("scalar32", "fp32 scalar", ["--precision", "fp32"]),
    ("scalar16", "fp16 scalar", ["--precision", "fp16", "--tensor-cores", "off"]),
    ("mma16", "fp16 fused MLP (mma.sync)", ["--precision", "fp16", "--tensor-cores", "on"]),
    ("mma8", "fp8 fused MLP (mma.sync)", ["--precision", "fp8", "--tensor-cores", "on"]),
    ("wmma16", "fp16 WMMA warp steps", ["--precision", "fp16", "--tensor-cores", "wmma"]),
]

# PTX (or SASS) opcode prefixes by class.
PTX_CLASSES = [
    ("mma", ("mma.", "wmma.mma")),
    ("ldmatrix", ("ldmatrix", "wmma.load")),
    ("shared ld/st", ("ld.shared", "st.shared", "wmma.store")),
    ("global ld/st", ("ld.global", "st.global")),
    ("fp32 fma/mul/add", ("fma.rn.f32", "mul.f32", "mul.rn.f32", "add.f32", "add.rn.f32",
                          "sub.f32", "fma.rn.ftz.f32", "mul.ftz.f32", "add.ftz.f32")),
    ("cvt", ("cvt",)),
    ("special (sin/cos/ex2/rcp)", ("sin.approx", "cos.approx", "ex2.approx", "rcp.", "lg2.approx",
                                   "sqrt.", "rsqrt.", "tanh.approx")),
    ("barriers", ("bar.", "barrier.")),
]
SASS_CLASSES = [
    ("mma", ("HMMA",)),
    ("ldmatrix", ("LDSM",)),
    ("shared ld/st", ("LDS", "STS")),
    ("global ld/st", ("LDG", "STG")),
    ("fp32 fma/mul/add", ("FFMA", "FMUL", "FADD")),
    ("cvt", ("F2F", "F2FP", "I2F", "F2I")),
    ("special (sin/cos/ex2/rcp)", ("MUFU",)),
    ("barriers", ("BAR", "WARPSYNC")),
]


def run(cmd):
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return p.returncode, p.stdout


def count(lines, classes):
    c = collections.Counter()
    for op in lines:
        for name, prefixes in classes:
            if op.startswith(prefixes):
                c[name] += 1
                break
        else:
            c["other"] += 1
    c["all"] = len(lines)
    return c


def ptx_ops(ptx, kernel):
    m = re.search(r"\.entry \w*" + kernel, ptx)  # C++-mangled under nvcc
    if not m:
        return []
    body = ptx[m.start():]
    end = body.find("\n}\n")
    ops = []
    for line in body[:end].splitlines():
        line = line.strip()
        if not line or line.startswith(("//", ".", "{", "}", "$")) or line.endswith(":"):
            continue
        line = re.sub(r"^@!?%p\d+\s+", "", line)
        ops.append(line.split()[0])
    return ops


def sass_ops(sass):
    ops = []
    for line in sass.splitlines():
        m = re.match(r"\s*/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)", line)
        if m:
            ops.append(m.group(1))
    return ops


def occupancy(registers, shared_per_block, threads_per_block):
    regs = max(8, (registers + 7) // 8 * 8)
    by_regs = 65536 // (regs * 32)
    warps_per_block = threads_per_block // 32
    blocks = by_regs // warps_per_block
    if shared_per_block:
        blocks = min(blocks, (228 * 1024) // (shared_per_block + 1024))
    return min(64, blocks * warps_per_block)


def header_define(header, name):
    m = re.search(r"#define KILN_\w+_" + name + r" \(?(\d+)", header)
    return int(m.group(1)) if m else 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kiln", default="build/kiln")
    ap.add_argument("--out", default="build/static_report")
    ap.add_argument("--nvcc", default=shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc")
    ap.add_argument("models", nargs="*", default=["models/mlp_field.onnx"])
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    have_nvcc = os.path.exists(a.nvcc)
    cuobjdump = shutil.which("cuobjdump") or (
        os.path.join(os.path.dirname(a.nvcc), "cuobjdump")
        if os.path.exists(os.path.join(os.path.dirname(a.nvcc), "cuobjdump")) else None)
    out = ["# Static performance report: kiln --target cuda, sm_90", ""]
    out.append("Predictions are kiln's model (src/codegen/cuda/cuda_perf_model.h); instruction "
               "counts are static, from the " + ("SASS (cuobjdump)" if cuobjdump else "PTX") +
               " of each kernel" + ("" if have_nvcc else " (nvcc not found: none)") + ".")
    out.append("")
    status = 0
    for model in a.models:
        stem = os.path.splitext(os.path.basename(model))[0]
        out += ["## " + model, "",
                "| path | predicted | bound | regs | spill st/ld | warps/SM | mma | ldmatrix | "
                "shared ld/st | global ld/st | fp32 fma/mul/add | cvt | special | other | all |",
                "|---|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
        for tag, what, flags in PATHS:
            name = stem.replace("-", "_") + "_" + tag
            d = os.path.join(a.out, name)
            rc, log = run([a.kiln, "compile", model, "--target", "cuda", "--name", name, "--out", d]
                          + flags)
            if rc != 0:
                out.append("| %s | not generated: %s | | | | | | | | | | | | | |"
                           % (what, log.strip().splitlines()[-1]))
                continue
            header = open(os.path.join(d, name + ".h")).read()
            m = re.search(r"predicted: ([\d.]+) G samples/s .*?bound: ([\w ]+)\)", header)
            predicted, bound = (m.group(1) + " G/s", m.group(2)) if m else ("?", "?")
            row = [what, predicted, bound]
            if not have_nvcc:
                out.append("| " + " | ".join(row + [""] * 12) + " |")
                continue
            cu = os.path.join(d, name + ".cu")
            rc, log = run([a.nvcc, "-O3", "-arch=sm_90", "-Xptxas", "-v", "-cubin", "-o",
                           os.path.join(d, name + ".cubin"), cu])
            if rc != 0:
                out.append("| %s | %s | %s | nvcc failed | | | | | | | | | | | |"
                           % (what, predicted, bound))
                status = 1
                continue
            regs = int(re.search(r"Used (\d+) registers", log).group(1))
            spill = re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", log)
            st, ld = (int(spill.group(1)), int(spill.group(2))) if spill else (0, 0)
            if tag.startswith("mma") and (st or ld):
                status = 1
            threads = header_define(header, "THREADS_PER_BLOCK") or 128
            warps = header_define(header, "WARPS_PER_BLOCK")
            if warps:
                threads = 32 * warps
            shared = header_define(header, "STAGED_BYTES") + (warps or 0) * (
                header_define(header, "TILE_BYTES") or header_define(header, "WARP_BYTES"))
            occ = occupancy(regs, shared, threads)
            if cuobjdump:
                _, sass = run([cuobjdump, "-sass", os.path.join(d, name + ".cubin")])
                c = count(sass_ops(sass), SASS_CLASSES)
            else:
                rc, _ = run([a.nvcc, "-O3", "-arch=sm_90", "-ptx", "-o",
                             os.path.join(d, name + ".ptx"), cu])
                ptx = open(os.path.join(d, name + ".ptx")).read() if rc == 0 else ""
                c = count(ptx_ops(ptx, "kiln_" + name + "_kernel"), PTX_CLASSES)
            row += [str(regs), "%d / %d" % (st, ld), str(occ)]
            row += [str(c[k]) for k in ("mma", "ldmatrix", "shared ld/st", "global ld/st",
                                        "fp32 fma/mul/add", "cvt", "special (sin/cos/ex2/rcp)",
                                        "other", "all")]
            out.append("| " + " | ".join(row) + " |")
        out.append("")
    text = "\n".join(out) + "\n"
    with open(os.path.join(a.out, "report.md"), "w") as f:
        f.write(text)
    print(text)
    return status


if __name__ == "__main__":
    sys.exit(main())
