#!/usr/bin/python3
"""kiln's generated C on the emulated Cortex-M4, float against int8: executed instructions per
inference, flash and RAM.

Usage: /usr/bin/python3 bench/mcu_int8.py [--kiln build/kiln] [--samples N] [--opt -O2] [--json]
                                          [--cpu cortex-m4|cortex-m7|generic] [MODEL.onnx ...]
Models default to models/kws_cnn.onnx; --mlperf-tiny adds the other three MLPerf Tiny
architectures (visual wake words MobileNetV1-0.25, ResNet-8, the FC autoencoder), made with seeded
weights by scripts/make_mlperf_tiny.py. For each model:
  float  `kiln compile MODEL --target c`
  int8   `kiln quantize MODEL --random N` (QDQ: int8 weights per channel, int8 activations), then
         `kiln compile --target c`, whose lowering runs fuse-qdq: Conv / MatMul become
         QLinearConv / QLinearMatMul on int8 data with int8 weights in flash
Each is linked with a main that runs the model R times on fixed pseudo-random inputs
(arm-none-eabi-gcc, OPT, -mcpu=cortex-m4 -mfpu=fpv4-sp-d16 -mfloat-abi=hard) and run on qemu's
mps2-an386 under scripts/qemu_insn_count.c (scripts/cortex_m4_run --count-instructions): the count
for R = 3 minus the count for R = 1, halved, is one inference without start-up and I/O. Exact and
deterministic: executed instructions, not cycles. --cpu cortex-m7 builds for a Cortex-M7
(-mcpu=cortex-m7 -mfpu=fpv5-d16) and counts on qemu's mps2-an500, without the cycle estimate.
Flash: .text + .rodata of NAME.o and NAME_params.o (the model alone, no C library). RAM: the
workspace (KILN_NAME_WORKSPACE_SIZE) plus the objects' .data + .bss.
--cmsis-nn: also the CMSIS-NN baseline (bench/cmsis_nn_harness.py writes a program calling the
model's layers one by one through ../shared/third_party/cmsis-nn, built with the same flags plus
the library's sources), counted the same way.
--functions N: also the N functions that execute the most instructions per inference, from a
build with -fno-inline (node functions and kernels keep their symbols; the total then differs a
little from the inlined build's), counted per function by the same plugin (--count-functions).
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

MAIN = r"""
#include <stdio.h>
#include <stdlib.h>
#include "NAME.h"

static uint8_t arena[KILN_UPPER_WORKSPACE_SIZE + 1] __attribute__((aligned(16)));

int main(int argc, char **argv) {
  const kiln_model_descriptor *d = &kiln_NAME_descriptor;
  struct kiln_NAME_inputs in;
  struct kiln_NAME_outputs out;
  struct kiln_NAME_workspace ws;
  uint32_t seed = 12345u;
  int runs = argc > 1 ? atoi(argv[1]) : 1, i, r;
  double sum = 0;
  for (i = 0; i < d->num_inputs; ++i) {
    size_t n = d->inputs[i].size_bytes, k;
    uint8_t *p = (uint8_t *)malloc(n + 1);
    if (!p) return 3;
    for (k = 0; k < n; ++k) p[k] = 0;
    if (d->inputs[i].dtype == 1)
      for (k = 0; k < n / 4; ++k) {
        seed = seed * 1664525u + 1013904223u;
        ((float *)p)[k] = (float)(seed >> 8) / 8388608.0f - 1.0f;
      }
    kiln_NAME_set_input(&in, i, p);
  }
  for (i = 0; i < d->num_outputs; ++i) {
    void *p = malloc(d->outputs[i].size_bytes + 1);
    if (!p) return 3;
    kiln_NAME_set_output(&out, i, p);
  }
  ws.arena = arena;
  for (r = 0; r < runs; ++r)
    if (kiln_NAME_run(&in, &out, &ws) != KILN_OK) return 2;
  for (i = 0; i < d->num_outputs; ++i) {
    size_t k;
    if (d->outputs[i].dtype != 1) continue;
    for (k = 0; k < d->outputs[i].size_bytes / 4; ++k) sum += ((float **)&out)[i][k];
  }
  printf("checksum %.6f\n", sum);
  return 0;
}
"""


FPU = {"cortex-m4": "fpv4-sp-d16", "cortex-m7": "fpv5-d16"}


def num(v):
    """v with thousands separators, or n/a for None."""
    return "n/a" if v is None else f"{v:,}"


def run(cmd, **kw):
    r = subprocess.run(cmd, capture_output=True, text=True, **kw)
    if r.returncode != 0:
        sys.exit(f"mcu_int8: {' '.join(cmd)} failed ({r.returncode}):\n{r.stdout}{r.stderr}")
    return r


def sections(obj):
    """.text+.rodata and .data+.bss bytes of one object file (arm-none-eabi-size -A)."""
    flash = ram = 0
    for line in run(["arm-none-eabi-size", "-A", obj]).stdout.splitlines():
        parts = line.split()
        if len(parts) < 2 or not parts[1].isdigit():
            continue
        name, size = parts[0], int(parts[1])
        if name.startswith((".text", ".rodata")):
            flash += size
        elif name.startswith((".data", ".bss")):
            ram += size
    return flash, ram


def board():
    """The CPU the programs are built for and run on: a Cortex-M7 (mps2-an500) for --cpu
    cortex-m7, else a Cortex-M4 (mps2-an386)."""
    return "cortex-m7" if ARGS.cpu == "cortex-m7" else "cortex-m4"


def per_inference(elf, flags=()):
    """The counter's lines for R = 3 minus those for R = 1, halved: {name: instructions}, with
    the whole program under "total" (and "cycles", estimated, on the Cortex-M4)."""
    counts = {}
    if board() == "cortex-m4":
        flags = [*flags, "--count-mix"]
    for runs, sign in ((1, -1), (3, 1)):
        r = run([os.path.join(ROOT, "scripts", "cortex_m4_run"), "--cpu", board(),
                 "--count-instructions", *flags, "--timeout", "600", "--elf", elf,
                 "--run", str(runs)])
        m = re.search(r"kiln instructions: (\d+)", r.stderr)
        if not m:
            sys.exit(f"mcu_int8: no instruction count for {elf}:\n{r.stderr}")
        counts["total"] = counts.get("total", 0) + sign * int(m.group(1))
        c = re.search(r"kiln cycles \(estimate\): (\d+)", r.stderr)
        if c:
            counts["cycles"] = counts.get("cycles", 0) + sign * int(c.group(1))
        for n, fn in re.findall(r"kiln function: (\d+) (\S+)", r.stderr):
            counts[fn] = counts.get(fn, 0) + sign * int(n)
    return {k: v // 2 for k, v in counts.items()}


def build(out_dir, name, sources, elf, flags):
    run([os.path.join(ROOT, "scripts", "cortex_m4_run"), "--cpu", board(), "--out", elf,
         "--no-run", "--", *flags, "-I", out_dir] + sources)


def measure(model, name, out_dir, opt):
    """Instructions per inference, flash and RAM of one model's generated C."""
    run([ARGS.kiln, "compile", model, "--target", "c", "--name", name, "--out", out_dir,
         "--cpu", ARGS.cpu])
    main_c = os.path.join(out_dir, "bench_main.c")
    with open(main_c, "w") as f:
        f.write(MAIN.replace("NAME", name).replace("UPPER", name.upper()))
    elf = os.path.join(out_dir, "bench.elf")
    sources = [os.path.join(out_dir, f"{name}.c"), os.path.join(out_dir, f"{name}_params.c"), main_c]
    build(out_dir, name, sources, elf, [opt])
    top = []
    if ARGS.functions:
        build(out_dir, name, sources, elf + ".noinline", [opt, "-fno-inline"])
        counts = per_inference(elf + ".noinline", ["--count-functions"])
        total = counts.pop("total")
        top = sorted(((v, k) for k, v in counts.items() if v > 0), reverse=True)[:ARGS.functions]
        top = [{"function": k, "instructions": v, "share": v / total} for v, k in top]
    counted = per_inference(elf)
    counts = {1: 0, 3: 2 * counted["total"]}
    flash = ram = 0
    for src in sources[:2]:
        obj = src[:-2] + ".o"
        run(["arm-none-eabi-gcc", "-std=c99", opt, "-mcpu=" + board(), "-mthumb",
             "-mfloat-abi=hard", "-mfpu=" + FPU[board()], "-c", src, "-I", out_dir, "-o", obj])
        f, r_ = sections(obj)
        flash += f
        ram += r_
    with open(os.path.join(out_dir, f"{name}.h")) as f:
        ws = int(re.search(r"WORKSPACE_SIZE (\d+)", f.read()).group(1))
    return {"instructions": (counts[3] - counts[1]) // 2, "cycles": counted.get("cycles"),
            "flash": flash, "ram": ram + ws,
            "workspace": ws, "functions": top}


def measure_cmsis_nn(model, out_dir, opt):
    """Instructions per inference, flash and RAM of the CMSIS-NN layer-by-layer harness that
    bench/cmsis_nn_harness.py writes for the model."""
    cmsis = os.path.join(ROOT, "..", "shared", "third_party", "cmsis-nn")
    sources = sorted(
        os.path.join(d, f) for d, _, files in os.walk(os.path.join(cmsis, "Source"))
        for f in files if f.endswith(".c") and "f16" not in f and "f32" not in f)
    os.makedirs(out_dir, exist_ok=True)
    harness = os.path.join(out_dir, "harness.c")
    sizes_json = json.loads(run([sys.executable, os.path.join(ROOT, "bench", "cmsis_nn_harness.py"),
                                 model, harness]).stdout)
    elf = os.path.join(out_dir, "harness.elf")
    # CMSIS-NN is not written for -pedantic -Werror: its warnings are not ours.
    build(out_dir, "harness", [harness] + sources, elf,
          [opt, "-std=gnu11", "-w", "-Wno-error", "-I", os.path.join(cmsis, "Include")])
    counts = per_inference(elf, ["--count-functions"])
    total = counts.pop("total")
    cycles = counts.pop("cycles", None)
    top = sorted(((v, k) for k, v in counts.items() if v > 0), reverse=True)[:ARGS.functions]
    # Flash: the code of the CMSIS-NN functions an inference executes, plus the parameters as TFLM
    # holds them (weights, biases, per-channel multipliers and shifts). RAM: the activations live
    # at once and the most scratch its kernels asked for (the harness reserves more).
    sizes = {}
    for line in run(["arm-none-eabi-nm", "-S", "--defined-only", elf]).stdout.splitlines():
        parts = line.split()
        if len(parts) == 4:
            sizes[parts[3]] = int(parts[1], 16)
    code = sum(sizes.get(k, 0) for k, v in counts.items() if v > 0 and k.startswith("arm_"))
    r = run([os.path.join(ROOT, "scripts", "cortex_m4_run"), "--cpu", board(), "--elf", elf,
             "--run", "1"])
    m = re.search(r"scratch (\d+)", r.stdout + r.stderr)
    ram = sizes_json["ram"] + (int(m.group(1)) if m else 0)
    return {"instructions": total, "cycles": cycles, "flash": code + sizes_json["params"],
            "code": code, "params": sizes_json["params"], "ram": ram,
            "functions": [{"function": k, "instructions": v, "share": v / total} for v, k in top]}


def main():
    global ARGS
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("models", nargs="*", default=[os.path.join(ROOT, "models", "kws_cnn.onnx")])
    p.add_argument("--kiln", default=os.path.join(ROOT, "build", "kiln"))
    p.add_argument("--samples", type=int, default=16, help="calibration samples (--random)")
    p.add_argument("--opt", default="-O2", help="the optimization flag for arm-none-eabi-gcc")
    p.add_argument("--cpu", default="cortex-m4", choices=["cortex-m4", "cortex-m7", "generic"],
                   help="kiln compile --cpu: cortex-m4 (the DSP extension) or generic, run on a "
                        "Cortex-M4; cortex-m7, run on a Cortex-M7 (mps2-an500; no cycle estimate)")
    p.add_argument("--functions", type=int, default=0,
                   help="list the N functions executing the most instructions per inference")
    p.add_argument("--cmsis-nn", action="store_true",
                   help="also count each model's CMSIS-NN layer-by-layer harness "
                        "(bench/cmsis_nn_harness.py)")
    p.add_argument("--mlperf-tiny", action="store_true",
                   help="also the other MLPerf Tiny networks (scripts/make_mlperf_tiny.py)")
    p.add_argument("--json", action="store_true")
    ARGS = p.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        models = list(ARGS.models)
        if ARGS.mlperf_tiny:
            nets = os.path.join(tmp, "mlperf_tiny")
            run([sys.executable, os.path.join(ROOT, "scripts", "make_mlperf_tiny.py"), nets])
            models += [os.path.join(nets, n + ".onnx")
                       for n in ("vww_mobilenet", "resnet8", "fc_autoencoder")]
        for model in models:
            base = re.sub(r"\W", "_", os.path.splitext(os.path.basename(model))[0])
            qdq = os.path.join(tmp, base + "_int8.onnx")
            run([ARGS.kiln, "quantize", model, "--random", str(ARGS.samples), "-o", qdq])
            row = {"model": os.path.basename(model)}
            for kind, path in (("float", model), ("int8", qdq)):
                row[kind] = measure(path, base, os.path.join(tmp, f"{base}_{kind}"), ARGS.opt)
            if ARGS.cmsis_nn:
                row["cmsis-nn"] = measure_cmsis_nn(model, os.path.join(tmp, f"{base}_cmsis_nn"),
                                                   ARGS.opt)
            rows.append(row)
    if ARGS.json:
        print(json.dumps(rows, indent=1))
        return
    print(f"| model | float instr. | int8 instr. | int8/float | float cycles* | int8 cycles* | "
          f"float flash | int8 flash | float RAM | int8 RAM |  ({ARGS.opt}, --cpu {ARGS.cpu}, "
          f"{board().replace('cortex-m', 'Cortex-M')} under qemu)")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        f, q = r["float"], r["int8"]
        print(f"| {r['model']} | {f['instructions']:,} | {q['instructions']:,} | "
              f"{q['instructions'] / f['instructions']:.2f} | {num(f['cycles'])} | "
              f"{num(q['cycles'])} | "
              f"{f['flash']:,} | {q['flash']:,} | {f['ram']:,} | {q['ram']:,} |")
    if board() == "cortex-m4":
        print("* estimated from the executed instruction mix with the Cortex-M4's documented "
              "timings (scripts/qemu_insn_count.c); counts are not cycles")
    for r in rows:
        if "cmsis-nn" in r:
            c = r["cmsis-nn"]["instructions"]
            cf = r["cmsis-nn"]
            print(f"\n{r['model']}: CMSIS-NN layer by layer {c:,} instructions "
                  f"({num(cf['cycles'])} cycles*), flash "
                  f"{cf['flash']:,} ({cf['code']:,} code executed + {cf['params']:,} parameters), "
                  f"RAM {cf['ram']:,}; kiln int8 / CMSIS-NN {r['int8']['instructions'] / c:.2f} "
                  f"in instructions, {r['int8']['flash'] / cf['flash']:.2f} in flash, "
                  f"{r['int8']['ram'] / cf['ram']:.2f} in RAM")
    for r in rows:
        for kind in ("float", "int8", "cmsis-nn"):
            for fn in r.get(kind, {}).get("functions", []):
                print(f"  {r['model']} {kind}: {fn['instructions']:>12,} "
                      f"({100 * fn['share']:4.1f}%) {fn['function']}")


if __name__ == "__main__":
    main()
