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


def conv_bn_act(cin, cout, k=3, s=1, act=nn.SiLU, groups=1):
    return nn.Sequential(nn.Conv2d(cin, cout, k, s, (k - 1) // 2, groups=groups, bias=False),
                         nn.BatchNorm2d(cout), act())


class DcganGenerator(nn.Module):
    """DCGAN's generator: a 100-d code up to a 64 x 64 image through strided ConvTransposes
    with BatchNorm and ReLU, Tanh at the end."""

    def __init__(self, nz=100, ngf=64):
        super().__init__()
        chans = [nz, ngf * 8, ngf * 4, ngf * 2, ngf]
        layers = []
        for i in range(4):
            layers += [nn.ConvTranspose2d(chans[i], chans[i + 1], 4, 1 if i == 0 else 2,
                                          0 if i == 0 else 1, bias=False),
                       nn.BatchNorm2d(chans[i + 1]), nn.ReLU()]
        self.net = nn.Sequential(*layers, nn.ConvTranspose2d(ngf, 3, 4, 2, 1), nn.Tanh())

    def forward(self, z):
        return self.net(z)


class StyleTransfer(nn.Module):
    """Johnson et al.'s fast style transfer network: reflection padding, InstanceNorm, two
    strided convs down, five residual blocks, nearest upsampling and convs back up."""

    @staticmethod
    def conv(cin, cout, k, s=1, norm=True, relu=True):
        layers = [nn.ReflectionPad2d(k // 2), nn.Conv2d(cin, cout, k, s)]
        if norm:
            layers.append(nn.InstanceNorm2d(cout, affine=True))
        if relu:
            layers.append(nn.ReLU())
        return nn.Sequential(*layers)

    def __init__(self):
        super().__init__()
        c = self.conv
        self.down = nn.Sequential(c(3, 32, 9), c(32, 64, 3, 2), c(64, 128, 3, 2))
        self.res = nn.ModuleList(nn.Sequential(c(128, 128, 3), c(128, 128, 3, relu=False))
                                 for _ in range(5))
        self.up = nn.Sequential(nn.Upsample(scale_factor=2), c(128, 64, 3),
                                nn.Upsample(scale_factor=2), c(64, 32, 3),
                                c(32, 3, 9, norm=False, relu=False))

    def forward(self, x):
        y = self.down(x)
        for block in self.res:
            y = y + block(y)
        return self.up(y)


class YoloSmall(nn.Module):
    """A YOLOv5-n-like detector: SiLU conv-BN blocks, CSP bottlenecks, SPPF's chained 5 x 5
    max pools, a feature pyramid by nearest upsampling and concatenation, 1x1 heads."""

    class C3(nn.Module):
        def __init__(self, cin, cout, n=1):
            super().__init__()
            h = cout // 2
            self.a, self.b = conv_bn_act(cin, h, 1), conv_bn_act(cin, h, 1)
            self.m = nn.Sequential(*(nn.Sequential(conv_bn_act(h, h, 1), conv_bn_act(h, h, 3))
                                     for _ in range(n)))
            self.out = conv_bn_act(2 * h, cout, 1)

        def forward(self, x):
            a = self.a(x)
            return self.out(torch.cat([self.m(a) + a, self.b(x)], 1))

    def __init__(self, w=16, outputs=255):
        super().__init__()
        C3 = self.C3
        self.s1 = nn.Sequential(conv_bn_act(3, w, 6, 2), conv_bn_act(w, 2 * w, 3, 2), C3(2 * w, 2 * w),
                                conv_bn_act(2 * w, 4 * w, 3, 2), C3(4 * w, 4 * w, 2))
        self.s2 = nn.Sequential(conv_bn_act(4 * w, 8 * w, 3, 2), C3(8 * w, 8 * w, 3))
        self.s3 = nn.Sequential(conv_bn_act(8 * w, 16 * w, 3, 2), C3(16 * w, 16 * w))
        self.sppf_in, self.sppf_out = conv_bn_act(16 * w, 8 * w, 1), conv_bn_act(32 * w, 16 * w, 1)
        self.lat3, self.top3 = conv_bn_act(16 * w, 8 * w, 1), C3(16 * w, 8 * w)
        self.lat2, self.top2 = conv_bn_act(8 * w, 4 * w, 1), C3(8 * w, 4 * w)
        self.heads = nn.ModuleList(nn.Conv2d(c, outputs, 1) for c in (4 * w, 8 * w))

    def forward(self, x):
        p3 = self.s1(x)
        p4 = self.s2(p3)
        p5 = self.sppf_in(self.s3(p4))
        m1 = nn.functional.max_pool2d(p5, 5, 1, 2)
        m2 = nn.functional.max_pool2d(m1, 5, 1, 2)
        m3 = nn.functional.max_pool2d(m2, 5, 1, 2)
        p5 = self.lat3(self.sppf_out(torch.cat([p5, m1, m2, m3], 1)))
        up = nn.functional.interpolate(p5, scale_factor=2.0, mode="nearest")
        t4 = self.top3(torch.cat([up, p4], 1))
        up = nn.functional.interpolate(self.lat2(t4), scale_factor=2.0, mode="nearest")
        t3 = self.top2(torch.cat([up, p3], 1))
        a, b = self.heads[0](t3), self.heads[1](t4)
        return torch.cat([a.flatten(2), b.flatten(2)], 2).transpose(1, 2)


class Espcn(nn.Module):
    """ESPCN 3x super-resolution: tanh convs, then a sub-pixel convolution (DepthToSpace)."""

    def __init__(self, r=3):
        super().__init__()
        self.net = nn.Sequential(nn.Conv2d(1, 64, 5, padding=2), nn.Tanh(),
                                 nn.Conv2d(64, 32, 3, padding=1), nn.Tanh(),
                                 nn.Conv2d(32, r * r, 3, padding=1), nn.PixelShuffle(r))

    def forward(self, x):
        return self.net(x)


class Wav2VecSmall(nn.Module):
    """wav2vec 2.0's shape at a quarter of its width: a strided Conv1d feature extractor (GroupNorm
    on the first layer, GELU), LayerNorm and a projection, two GELU transformer layers."""

    def __init__(self, ch=128, d=192):
        super().__init__()
        spec = [(10, 5), (3, 2), (3, 2), (3, 2), (3, 2), (2, 2), (2, 2)]
        layers, cin = [], 1
        for i, (k, s) in enumerate(spec):
            layers.append(nn.Conv1d(cin, ch, k, s, bias=False))
            if i == 0:
                layers.append(nn.GroupNorm(ch, ch))
            layers.append(nn.GELU())
            cin = ch
        self.features = nn.Sequential(*layers)
        self.norm, self.proj = nn.LayerNorm(ch), nn.Linear(ch, d)
        self.encoder = nn.TransformerEncoder(
            nn.TransformerEncoderLayer(d, 4, 4 * d, activation="gelu", batch_first=True), 2)

    def forward(self, wave):
        f = self.features(wave).transpose(1, 2)
        return self.encoder(self.proj(self.norm(f)))


class Tcn(nn.Module):
    """A temporal convolutional network: residual blocks of dilated causal Conv1d (kernel 3,
    dilations 1-32) with ReLU, then a per-step linear layer."""

    def __init__(self, cin=16, ch=64, levels=6, classes=8):
        super().__init__()
        self.inp = nn.Conv1d(cin, ch, 1)
        self.convs = nn.ModuleList(nn.Conv1d(ch, ch, 3, dilation=2 ** i) for i in range(levels))
        self.out = nn.Conv1d(ch, classes, 1)

    def forward(self, x):
        y = self.inp(x)
        for i, conv in enumerate(self.convs):
            pad = 2 * 2 ** i
            y = y + torch.relu(conv(nn.functional.pad(y, (pad, 0))))
        return self.out(y)


class PointNet(nn.Module):
    """PointNet's classifier without the transform nets: shared MLPs as 1x1 Conv1d with BatchNorm
    over the points, a max over points, fully connected layers."""

    def __init__(self, classes=40):
        super().__init__()
        chans = [3, 64, 64, 128, 1024]
        layers = []
        for a, b in zip(chans, chans[1:]):
            layers += [nn.Conv1d(a, b, 1), nn.BatchNorm1d(b), nn.ReLU()]
        self.mlp = nn.Sequential(*layers)
        self.fc = nn.Sequential(nn.Linear(1024, 512), nn.ReLU(), nn.Linear(512, 256), nn.ReLU(),
                                nn.Linear(256, classes))

    def forward(self, pts):
        return self.fc(self.mlp(pts).amax(2))


class LstmLm(nn.Module):
    """A word-level language model's body: a 2-layer LSTM of hidden 256 over 35 steps, batch 4,
    then a projection to a 2,000-word vocabulary."""

    def __init__(self, emb=128, hidden=256, vocab=2000):
        super().__init__()
        self.rnn = nn.LSTM(emb, hidden, 2)
        self.out = nn.Linear(hidden, vocab)

    def forward(self, x):
        return self.out(self.rnn(x)[0])


class MlpMixer(nn.Module):
    """MLP-Mixer at S/16's layout, 4 layers of width 256: token mixing MLPs over the transposed
    patches, channel mixing over channels, LayerNorm before each."""

    class Layer(nn.Module):
        def __init__(self, tokens, d):
            super().__init__()
            self.n1, self.n2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.tok = nn.Sequential(nn.Linear(tokens, 128), nn.GELU(), nn.Linear(128, tokens))
            self.ch = nn.Sequential(nn.Linear(d, 1024), nn.GELU(), nn.Linear(1024, d))

        def forward(self, x):
            x = x + self.tok(self.n1(x).transpose(1, 2)).transpose(1, 2)
            return x + self.ch(self.n2(x))

    def __init__(self, d=256, layers=4, classes=100):
        super().__init__()
        self.stem = nn.Conv2d(3, d, 16, 16)
        self.layers = nn.Sequential(*(self.Layer(196, d) for _ in range(layers)))
        self.head = nn.Sequential(nn.LayerNorm(d), nn.Linear(d, classes))

    def forward(self, x):
        x = self.layers(self.stem(x).flatten(2).transpose(1, 2))
        return self.head(x.mean(1))


class DeepLab(nn.Module):
    """torchvision's DeepLabV3 on MobileNetV3-Large: dilated depthwise convs, ASPP, bilinear
    upsampling to the input."""

    def __init__(self):
        super().__init__()
        self.net = torchvision.models.segmentation.deeplabv3_mobilenet_v3_large(
            weights=None, weights_backbone=None, num_classes=21, aux_loss=False)

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
        # More families (bench/host_speed.py --models MORE_ARCH_MODELS): strided ConvTranspose,
        # InstanceNorm with reflection padding, SiLU detectors with SPPF pools, DepthToSpace,
        # strided and dilated Conv1d, point-cloud MLPs, a larger LSTM, token-mixing MLPs, and
        # torchvision's other classifiers and a dilated segmentation head.
        "dcgan_generator": (DcganGenerator(), [8, 100, 1, 1], {}),
        "style_transfer": (StyleTransfer(), [1, 3, 192, 192], {}),
        "yolo_small": (YoloSmall(), [1, 3, 320, 320], {}),
        "espcn_sr": (Espcn(), [1, 1, 224, 224], {}),
        "wav2vec_small": (Wav2VecSmall(), [1, 1, 16000], {}),
        "tcn": (Tcn(), [1, 16, 2048], {}),
        "pointnet": (PointNet(), [8, 3, 1024], {}),
        "lstm_lm": (LstmLm(), [35, 4, 128], {}),
        "mlp_mixer": (MlpMixer(), [1, 3, 224, 224], {}),
        "mobilenet_v3_large": (tv.mobilenet_v3_large(), [1, 3, 224, 224], {}),
        "regnet_y_400mf": (tv.regnet_y_400mf(), [1, 3, 224, 224], {}),
        "mnasnet1_0": (tv.mnasnet1_0(), [1, 3, 224, 224], {}),
        "googlenet": (tv.googlenet(aux_logits=False, init_weights=True), [1, 3, 224, 224], {}),
        "swin_t": (tv.swin_t(), [1, 3, 224, 224], {}),
        "deeplabv3_mobilenet_v3": (DeepLab(), [1, 3, 256, 256], {}),
        "r3d_18": (tv.video.r3d_18(), [1, 3, 8, 64, 64], {}),
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
