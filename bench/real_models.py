#!/usr/bin/python3
"""Exports real architectures from Debian's PyTorch, runs them through kiln, and checks kiln's
outputs against PyTorch's (relative L2 error <= 1e-4), from the .onnx file and from the ONNX JSON +
safetensors pair that `kiln convert` writes.

Usage: /usr/bin/python3 bench/real_models.py [--kiln build/kiln] [--work build/real_models] [names...]
Needs: python3-torch, python3-torchvision, python3-onnx, python3-numpy (Debian).
Prints one line per model and exits 1 if any model fails to match.
"""
import argparse
import math
import os
import subprocess
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torchvision

torch.manual_seed(0)


class SinCosMLP(nn.Module):
    """A neural-field MLP: sin/cos encoding of 3-D points, 4 hidden layers of 64."""

    def __init__(self, octaves=6, width=64):
        super().__init__()
        self.register_buffer("freqs", (2.0 ** torch.arange(octaves)) * math.pi)
        layers, d = [], 3 + 6 * octaves
        for _ in range(4):
            layers += [nn.Linear(d, width), nn.ReLU()]
            d = width
        self.body = nn.Sequential(*layers, nn.Linear(width, 4))

    def forward(self, x):
        s = (x[..., None] * self.freqs).flatten(-2)
        return torch.sigmoid(self.body(torch.cat([x, torch.sin(s), torch.cos(s)], -1)))


class KwsCnn(nn.Module):
    """DS-CNN keyword spotting on 49x10 MFCC features."""

    def __init__(self, ch=64, classes=12):
        super().__init__()
        blocks = [nn.Conv2d(1, ch, (10, 4), (2, 2), (5, 1)), nn.BatchNorm2d(ch), nn.ReLU()]
        for _ in range(4):
            blocks += [nn.Conv2d(ch, ch, 3, 1, 1, groups=ch), nn.BatchNorm2d(ch), nn.ReLU(),
                       nn.Conv2d(ch, ch, 1), nn.BatchNorm2d(ch), nn.ReLU()]
        self.features = nn.Sequential(*blocks)
        self.fc = nn.Linear(ch, classes)

    def forward(self, x):
        return self.fc(torch.flatten(nn.functional.adaptive_avg_pool2d(self.features(x), 1), 1))


class TransformerBlock(nn.Module):
    def __init__(self):
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(d_model=128, nhead=4, dim_feedforward=256,
                                                batch_first=True, activation="gelu")

    def forward(self, x):
        return self.layer(x)


class OddNames(nn.Module):
    """Branches and tensor names with quotes, slashes, colons and leading digits."""

    def __init__(self):
        super().__init__()
        self.a = nn.Linear(16, 16)
        self.b = nn.Linear(16, 16)

    def forward(self, x):
        return torch.tanh(self.a(x)) * torch.sigmoid(self.b(x)) + x


class Tagger(nn.Module):
    """A sequence tagger: a 2-layer bidirectional LSTM (hidden 64) or a 1-layer GRU over
    [steps, batch, features], then a linear layer per step."""

    def __init__(self, cell="lstm", features=32, hidden=64, layers=2, tags=10):
        super().__init__()
        if cell == "lstm":
            self.rnn = nn.LSTM(features, hidden, num_layers=layers, bidirectional=True)
            width = 2 * hidden
        else:
            self.rnn = nn.GRU(features, hidden, num_layers=layers)
            width = hidden
        self.out = nn.Linear(width, tags)

    def forward(self, x):
        return self.out(self.rnn(x)[0])


class UNetSmall(nn.Module):
    """A small U-Net: conv blocks with GroupNorm and SiLU, max-pool down, one ConvTranspose and
    one bilinear upsampling on the way up, skip connections by concatenation."""

    @staticmethod
    def block(cin, cout):
        return nn.Sequential(nn.Conv2d(cin, cout, 3, padding=1), nn.GroupNorm(8, cout), nn.SiLU(),
                             nn.Conv2d(cout, cout, 3, padding=1), nn.GroupNorm(8, cout), nn.SiLU())

    def __init__(self, ch=32, classes=2):
        super().__init__()
        self.enc1, self.enc2 = self.block(3, ch), self.block(ch, 2 * ch)
        self.mid = self.block(2 * ch, 4 * ch)
        self.up2 = nn.ConvTranspose2d(4 * ch, 2 * ch, 2, stride=2)
        self.dec2 = self.block(4 * ch, 2 * ch)
        self.up1 = nn.Sequential(nn.Upsample(scale_factor=2, mode="bilinear"),
                                 nn.Conv2d(2 * ch, ch, 1))
        self.dec1 = self.block(2 * ch, ch)
        self.head = nn.Conv2d(ch, classes, 1)

    def forward(self, x):
        e1 = self.enc1(x)
        e2 = self.enc2(nn.functional.max_pool2d(e1, 2))
        m = self.mid(nn.functional.max_pool2d(e2, 2))
        d2 = self.dec2(torch.cat([self.up2(m), e2], 1))
        return self.head(self.dec1(torch.cat([self.up1(d2), e1], 1)))


class Segmenter(nn.Module):
    """torchvision's LR-ASPP on MobileNetV3-Large: 21 classes upsampled bilinearly to the input."""

    def __init__(self):
        super().__init__()
        self.net = torchvision.models.segmentation.lraspp_mobilenet_v3_large(
            weights=None, weights_backbone=None, num_classes=21)

    def forward(self, x):
        return self.net(x)["out"]


def vit_tiny():
    """ViT-Ti's width (192, 3 heads, MLP 768) with 6 of its 12 layers: torchvision's
    VisionTransformer, a transformer-style model this repository does not ship. torchvision
    zero-initializes the classifier head; random weights there make its output worth comparing."""
    torch.manual_seed(0)
    m = torchvision.models.VisionTransformer(image_size=224, patch_size=16, num_layers=6,
                                             num_heads=3, hidden_dim=192, mlp_dim=768)
    nn.init.normal_(m.heads.head.weight, std=0.02)
    return m


def models():
    tv = torchvision.models
    return {
        "resnet18": (tv.resnet18(), [1, 3, 224, 224], {}),
        "mobilenet_v2": (tv.mobilenet_v2(), [1, 3, 224, 224], {}),
        "squeezenet1_1": (tv.squeezenet1_1(), [1, 3, 224, 224], {}),
        "shufflenet_v2": (tv.shufflenet_v2_x1_0(), [1, 3, 224, 224], {}),
        "efficientnet_b0": (tv.efficientnet_b0(), [1, 3, 224, 224], {}),
        "transformer_block": (TransformerBlock(), [2, 16, 128], {}),
        "mlp_sincos": (SinCosMLP(), [1024, 3], {"dynamic": True}),
        "kws_cnn": (KwsCnn(), [1, 1, 49, 10], {}),
        "vit_tiny": (vit_tiny(), [1, 3, 224, 224], {}),
        "odd_names": (OddNames(), [4, 16], {"names": (["in:put/0\"x"], ["0out/'y':z"])}),
        # Architectures no other list here holds (bench/host_speed.py --models ARCH_MODELS).
        "lstm_tagger": (Tagger("lstm"), [50, 2, 32], {}),
        "gru_tagger": (Tagger("gru", features=20, hidden=48, layers=1), [30, 3, 20], {}),
        "unet_small": (UNetSmall(), [1, 3, 128, 128], {}),
        "lraspp_mobilenet_v3": (Segmenter(), [1, 3, 256, 256], {}),
        "transformer_encoder": (nn.TransformerEncoder(
            nn.TransformerEncoderLayer(256, 4, 1024, batch_first=True), 4), [1, 128, 256], {}),
        "convnext_tiny": (tv.convnext_tiny(), [1, 3, 224, 224], {}),
        "resnext50": (tv.resnext50_32x4d(), [1, 3, 224, 224], {}),
    }


def rel_l2(a, b):
    a = a.astype(np.float64).ravel()
    b = b.astype(np.float64).ravel()
    return float(np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-30))


def kiln_run(kiln, model, inputs, out_dir, extra=()):
    args = [kiln, "run", model, "--output-dir", out_dir, *extra]
    for name, path in inputs:
        args += ["--input", f"{name}={path}"]
    t0 = time.time()
    r = subprocess.run(args, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(r.stderr.strip())
    return np.load(os.path.join(out_dir, "output_0.npy")), time.time() - t0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--kiln", default="build/kiln")
    ap.add_argument("--work", default="build/real_models")
    ap.add_argument("names", nargs="*")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    failures = 0
    print(f"{'model':20} {'params':>10} {'onnx rel-L2':>12} {'json rel-L2':>12} {'kiln s':>8}")
    for name, (module, shape, opts) in models().items():
        if args.names and name not in args.names:
            continue
        module.eval()
        d = os.path.join(args.work, name)
        os.makedirs(d, exist_ok=True)
        x = torch.randn(*shape)
        with torch.no_grad():
            y = module(x).numpy()
        in_names, out_names = opts.get("names", (["input"], ["output"]))
        path = os.path.join(d, "model.onnx")
        dyn = {in_names[0]: {0: "batch"}, out_names[0]: {0: "batch"}} if opts.get("dynamic") else None
        torch.onnx.export(module, (x,), path, input_names=in_names, output_names=out_names,
                          opset_version=17, dynamic_axes=dyn, do_constant_folding=True)
        np.save(os.path.join(d, "input.npy"), x.numpy())
        np.save(os.path.join(d, "expected.npy"), y)
        inputs = [(in_names[0], os.path.join(d, "input.npy"))]
        params = sum(p.numel() for p in module.parameters())
        try:
            extra = ["--shape", f"{in_names[0]}={','.join(map(str, shape))}"] if opts.get("dynamic") else []
            got, secs = kiln_run(args.kiln, path, inputs, os.path.join(d, "out"), extra)
            e_onnx = rel_l2(got, y)
            subprocess.run([args.kiln, "convert", path, "--to", "json", "--weights",
                            os.path.join(d, "model.safetensors"), "-o", os.path.join(d, "model.json")],
                           check=True, capture_output=True)
            got_j, _ = kiln_run(args.kiln, os.path.join(d, "model.json"), inputs,
                                os.path.join(d, "out_json"),
                                ["--weights", os.path.join(d, "model.safetensors"), *extra])
            e_json = rel_l2(got_j, y)
            ok = e_onnx <= 1e-4 and e_json <= 1e-4
            failures += not ok
            print(f"{name:20} {params:>10} {e_onnx:>12.2e} {e_json:>12.2e} {secs:>8.2f}"
                  f"{'' if ok else '  MISMATCH'}")
        except Exception as e:  # report and go on with the next model
            failures += 1
            print(f"{name:20} {params:>10} FAILED: {str(e)[:200]}")
        sys.stdout.flush()
    print(f"{'all models match' if failures == 0 else str(failures) + ' model(s) failed'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
