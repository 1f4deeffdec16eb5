#!/usr/bin/env python3
"""PyTorch baselines for models/mlp_field.onnx on the GPU: eager and torch.compile, fp32 and fp16,
batches 2^16 .. 2^22, on the weights kiln convert wrote (PREPARED/field.safetensors, read here
without the safetensors package). First checks eager fp32 against the host executor's outputs.
Prints markdown table rows like bench_main.cu.

  torch_bench.py PREPARED
"""
import json
import math
import struct
import sys
import time

import torch


def load_safetensors(path):
    data = open(path, "rb").read()
    n = struct.unpack("<Q", data[:8])[0]
    header = json.loads(data[8:8 + n])
    body = data[8 + n:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info["dtype"] != "F32":  # enc.reps (INT64) is written into make_field
            continue
        b, e = info["data_offsets"]
        out[name] = torch.frombuffer(bytearray(body[b:e]), dtype=torch.float32).reshape(info["shape"])
    return out


def make_field(w, dtype):
    w = {k: v.cuda().to(dtype) for k, v in w.items()}
    reps = 6  # enc.reps = [1, 6] in the model

    def field(xyz):
        scaled = xyz.repeat(1, reps) * w["enc.freqs"]
        h = torch.cat([xyz, torch.sin(scaled), torch.cos(scaled)], dim=1)
        for k in range(4):
            h = torch.relu(h @ w[f"fc{k}.weight"] + w[f"fc{k}.bias"])
        return torch.sigmoid(h @ w["head.weight"] + w["head.bias"])

    return field


def time_fn(fn, x, iters=20):
    for _ in range(3):
        fn(x)
    torch.cuda.synchronize()
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record()
    for _ in range(iters):
        fn(x)
    b.record()
    torch.cuda.synchronize()
    return a.elapsed_time(b) / iters


def main():
    prepared = sys.argv[1]
    w = load_safetensors(f"{prepared}/field.safetensors")
    xyz = torch.frombuffer(bytearray(open(f"{prepared}/xyz.f32", "rb").read()), dtype=torch.float32).reshape(-1, 3)
    ref = torch.frombuffer(bytearray(open(f"{prepared}/ref.f32", "rb").read()), dtype=torch.float32).reshape(-1, 4)
    with torch.no_grad():
        got = make_field(w, torch.float32)(xyz.cuda()).cpu()
    err = (got - ref).norm().item() / ref.norm().item()
    print(f"| torch eager fp32 | check: {xyz.shape[0]} samples, rel. L2 error {err:.3g} against the host executor | | |")
    sys.stdout.flush()
    for dtype, tag in ((torch.float32, "fp32"), (torch.float16, "fp16")):
        eager = make_field(w, dtype)
        compiled = torch.compile(eager, dynamic=True)
        for kind, fn in (("eager", eager), ("torch.compile", compiled)):
            t0 = time.time()
            for p in range(16, 23):
                n = 1 << p
                x = (torch.rand(n, 3, device="cuda") * 2 - 1).to(dtype)
                with torch.no_grad():
                    ms = time_fn(fn, x)
                print(f"| torch {kind} {tag} | 2^{p} | {ms:.4f} | {n / (ms * 1e-3) / 1e9:.3f} |")
                sys.stdout.flush()
            print(f"<!-- torch {kind} {tag}: {time.time() - t0:.1f} s including compilation -->")


if __name__ == "__main__":
    main()
