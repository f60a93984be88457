#!/usr/bin/env python3
"""Exports the six model families Baton targets, with random weights, through both
torch.onnx.export exporters, and records inputs, PyTorch's outputs and onnxruntime's outputs.

Usage (needs torch, torchvision, transformers, onnx, onnxscript, onnxruntime):
  python3 tests/e2e/export_real_models.py OUT_DIR            # small configurations (committed)
  python3 tests/e2e/export_real_models.py OUT_DIR --full     # full size (benchmarks; not committed)
  python3 tests/e2e/export_real_models.py OUT_DIR --only resnet,bert

Writes OUT_DIR/{manifest.json, CASE.onnx, CASE.input_<i>.npy, CASE.output_<i>.npy} where the
outputs are PyTorch's (the reference), and records onnxruntime's error against them. Families:
torchvision ResNet, MobileNetV3, SqueezeNet 1.1, ViT; transformers BERT and GPT-2 (and, named by
--only, issue 38's zoo: DenseNet-121, RegNetY-400MF, Swin-T, EfficientNet-B0, ConvNeXt-T, Whisper's
encoder, a UNet with ConvTranspose and bilinear Resize, an LSTM tagger, ESPCN, and issue 41's
T5 encoder and LLaMA-style stack). Each is exported
by the TorchScript exporter (opset 17) and the dynamo exporter (opsets 18 and 20). The
TorchScript exports have a symbolic batch (and sequence) dimension, fixed at compile time with
--shape (the manifest's "shapes") or kept dynamic with --dim. The style dynamo18dyn exports with
torch.export dynamic shapes (Dims named batch and sequence; traced at batch 2, since torch.export
specializes a size-1 dimension). Text models take int64 token ids (and an attention mask).

Exporter pitfalls (ENVIRONMENT.md): the TorchScript exporter fails on torchvision ViT under
torch.no_grad() (exported without it), on GPT-2 called without attention_mask, and on BERT with
positional inputs (wrapped to take keywords).
"""
import argparse
import json
import os
import sys

import numpy as np
import onnxruntime as ort
import torch
import torchvision
import transformers
from torch import nn

SEED = 20261123


# ---- the families ---------------------------------------------------------------------------


class SmallResNet(nn.Module):
    """torchvision's ResNet structure (its Bottleneck blocks, stem, pooling, head) with narrow
    widths, so the committed model is small; --full uses torchvision.models.resnet50."""

    def __init__(self, widths=(8, 16, 32, 64), layers=(1, 1, 1, 1), num_classes=10):
        super().__init__()
        block = torchvision.models.resnet.Bottleneck
        self.inplanes = widths[0]
        self.conv1 = nn.Conv2d(3, widths[0], kernel_size=7, stride=2, padding=3, bias=False)
        self.bn1 = nn.BatchNorm2d(widths[0])
        self.relu = nn.ReLU(inplace=True)
        self.maxpool = nn.MaxPool2d(kernel_size=3, stride=2, padding=1)
        stages = []
        for i, (w, n) in enumerate(zip(widths, layers)):
            stride = 1 if i == 0 else 2
            downsample = nn.Sequential(
                nn.Conv2d(self.inplanes, w * block.expansion, 1, stride=stride, bias=False),
                nn.BatchNorm2d(w * block.expansion))
            blocks = [block(self.inplanes, w, stride, downsample)]
            self.inplanes = w * block.expansion
            blocks += [block(self.inplanes, w) for _ in range(1, n)]
            stages.append(nn.Sequential(*blocks))
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(self.inplanes, num_classes)

    def forward(self, x):
        x = self.maxpool(self.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


def randomize_batchnorm(model):
    """Random BatchNorm statistics and affine parameters, so folding them matters."""
    g = torch.Generator().manual_seed(SEED)
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            with torch.no_grad():
                m.running_mean.copy_(torch.randn(m.num_features, generator=g) * 0.1)
                m.running_var.copy_(torch.rand(m.num_features, generator=g) + 0.5)
                m.weight.copy_(torch.rand(m.num_features, generator=g) + 0.5)
                m.bias.copy_(torch.randn(m.num_features, generator=g) * 0.1)
    return model


def image_input(batch, size):
    return torch.randn(batch, 3, size, size, generator=torch.Generator().manual_seed(SEED))


def resnet(full, batch=1):
    model = torchvision.models.resnet50() if full else SmallResNet()
    return randomize_batchnorm(model).eval(), (image_input(batch, 224 if full else 32),), ["input"]


def mobilenet(full, batch=1):
    kwargs = {} if full else dict(width_mult=0.25, reduced_tail=True, num_classes=10)
    model = torchvision.models.mobilenet_v3_large(**kwargs)
    return randomize_batchnorm(model).eval(), (image_input(batch, 224 if full else 64),), ["input"]


class SmallSqueezeNet(nn.Module):
    """torchvision's SqueezeNet 1.1 structure (its Fire modules, ceil_mode max pools, the
    convolutional classifier) with a quarter of the widths; --full uses squeezenet1_1."""

    def __init__(self, num_classes=10):
        super().__init__()
        fire = torchvision.models.squeezenet.Fire
        pool = lambda: nn.MaxPool2d(kernel_size=3, stride=2, ceil_mode=True)  # noqa: E731
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, kernel_size=3, stride=2), nn.ReLU(inplace=True), pool(),
            fire(16, 4, 16, 16), fire(32, 4, 16, 16), pool(),
            fire(32, 8, 32, 32), fire(64, 8, 32, 32), pool(),
            fire(64, 12, 48, 48), fire(96, 12, 48, 48), fire(96, 16, 64, 64),
            fire(128, 16, 64, 64))
        self.classifier = nn.Sequential(
            nn.Dropout(p=0.5), nn.Conv2d(128, num_classes, kernel_size=1), nn.ReLU(inplace=True),
            nn.AdaptiveAvgPool2d((1, 1)))

    def forward(self, x):
        return torch.flatten(self.classifier(self.features(x)), 1)


def squeezenet(full, batch=1):
    model = torchvision.models.squeezenet1_1() if full else SmallSqueezeNet()
    return model.eval(), (image_input(batch, 224 if full else 64),), ["input"]


def vit(full, batch=1):
    if full:
        model = torchvision.models.vit_b_16()
    else:
        model = torchvision.models.VisionTransformer(image_size=32, patch_size=8, num_layers=2,
                                                     num_heads=2, hidden_dim=32, mlp_dim=64,
                                                     num_classes=10)
    # torchvision zero-initializes the head (and the class token): the output would be all
    # zeros, which compares equal to anything.
    g = torch.Generator().manual_seed(SEED)
    with torch.no_grad():
        model.heads.head.weight.copy_(torch.randn(model.heads.head.weight.shape, generator=g) * 0.1)
        model.heads.head.bias.copy_(torch.randn(model.heads.head.bias.shape, generator=g) * 0.1)
        model.class_token.copy_(torch.randn(model.class_token.shape, generator=g) * 0.1)
    return model.eval(), (image_input(batch, 224 if full else 32),), ["input"]


class KeywordCall(nn.Module):
    """Calls a transformers model with keyword arguments (the TorchScript exporter fails on
    BERT with positional inputs) and returns its first output tensor."""

    def __init__(self, model, names):
        super().__init__()
        self.model = model
        self.names = names

    def forward(self, *args):
        return self.model(**dict(zip(self.names, args)))[0]


def text_inputs(batch, seq, vocab, mask):
    g = torch.Generator().manual_seed(SEED)
    ids = torch.randint(0, vocab, (batch, seq), generator=g, dtype=torch.int64)
    if not mask:
        return (ids,)
    attention = torch.ones(batch, seq, dtype=torch.int64)
    attention[:, seq - seq // 4:] = 0  # padding at the end of every sequence
    return ids, attention


def bert(full, batch=1):
    config = transformers.BertConfig() if full else transformers.BertConfig(
        vocab_size=100, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=64)
    config.attn_implementation = "eager"
    model = transformers.BertModel(config, add_pooling_layer=True).eval()
    names = ["input_ids", "attention_mask"]
    return KeywordCall(model, names).eval(), text_inputs(batch, 128 if full else 16,
                                                        config.vocab_size, True), names


def gpt2(full, batch=1):
    config = transformers.GPT2Config() if full else transformers.GPT2Config(
        vocab_size=100, n_embd=32, n_layer=2, n_head=2, n_positions=64)
    config.attn_implementation = "eager"
    model = transformers.GPT2LMHeadModel(config).eval()
    names = ["input_ids", "attention_mask"]
    return KeywordCall(model, names).eval(), text_inputs(batch, 128 if full else 16,
                                                        config.vocab_size, True), names


FAMILIES = {"resnet": resnet, "mobilenet": mobilenet, "squeezenet": squeezenet, "vit": vit,
            "bert": bert, "gpt2": gpt2}


# ---- the model zoo of issue 38: architectures whose ops the GPU took last ----------------------
# Written only when --only names them (the committed small models are the six families). Small
# configurations are the same architectures at a smaller input (torchvision's models have no
# narrower variants) or with fewer and narrower layers (Whisper, the UNet).


def densenet(full, batch=1):
    """DenseNet-121: standalone BatchNormalization before each convolution, Concat of up to 33
    feature maps in the dense blocks."""
    model = torchvision.models.densenet121()
    return randomize_batchnorm(model).eval(), (image_input(batch, 224 if full else 64),), ["input"]


def regnet(full, batch=1):
    """RegNetY-400MF: grouped 3x3 convolutions (8-channel groups), squeeze-excite."""
    model = torchvision.models.regnet_y_400mf()
    return randomize_batchnorm(model).eval(), (image_input(batch, 224 if full else 64),), ["input"]


def swin(full, batch=1):
    """Swin-T: Pad to the window grid, shifted windows (torch.roll), windowed attention with a
    relative position bias and masks, LayerNorm. Small: the same blocks, two stages 48 and 96
    wide (1 MB of weights, so it is committed), at 64x64 so the first stage pads 16x16 to 21x21;
    its windowed attention is large enough that all windows' rows together pass OpenBLAS's
    small-GEMM bound while one window's do not (the MatMul scratch bug of 2026-12-01)."""
    model = torchvision.models.swin_t() if full else torchvision.models.swin_transformer.SwinTransformer(
        patch_size=[4, 4], embed_dim=48, depths=[2, 2], num_heads=[2, 4], window_size=[7, 7],
        num_classes=10)
    g = torch.Generator().manual_seed(SEED)
    with torch.no_grad():  # torchvision zero-initializes the relative position tables
        if not full:  # a default head over 96 pooled features gives outputs of about 0.03
            model.head.weight.copy_(torch.randn(model.head.weight.shape, generator=g) * 0.3)
            model.head.bias.copy_(torch.randn(model.head.bias.shape, generator=g) * 0.3)
        for m in model.modules():
            if hasattr(m, "relative_position_bias_table"):
                m.relative_position_bias_table.copy_(
                    torch.randn(m.relative_position_bias_table.shape, generator=g) * 0.5)
    return model.eval(), (image_input(batch, 224 if full else 64),), ["input"]


def efficientnet(full, batch=1):
    """EfficientNet-B0: depthwise convolutions, SiLU, squeeze-excite."""
    model = torchvision.models.efficientnet_b0()
    return randomize_batchnorm(model).eval(), (image_input(batch, 224 if full else 64),), ["input"]


def convnext(full, batch=1):
    """ConvNeXt-T: depthwise 7x7 convolutions, channels-last LayerNorm (permutes), Linear + GELU,
    layer scale."""
    model = torchvision.models.convnext_tiny()
    g = torch.Generator().manual_seed(SEED)
    with torch.no_grad():  # layer scale starts at 1e-6: the blocks would add almost nothing
        for m in model.modules():
            if hasattr(m, "layer_scale"):
                m.layer_scale.copy_(torch.rand(m.layer_scale.shape, generator=g) * 0.5 + 0.5)
    return model.eval(), (image_input(batch, 224 if full else 64),), ["input"]


class WhisperEncoder(nn.Module):
    """transformers' Whisper encoder (two 1-D convolutions, GELU, attention, LayerNorm) on log-mel
    features, returning its last hidden state."""

    def __init__(self, config):
        super().__init__()
        self.encoder = transformers.WhisperModel(config).get_encoder()

    def forward(self, features):
        return self.encoder(features)[0]


def whisper(full, batch=1):
    # Full: whisper-base's encoder (80 mel bins, 3000 frames, 512 wide, 6 layers).
    config = transformers.WhisperConfig(
        d_model=512, encoder_layers=6, encoder_attention_heads=8, decoder_layers=1,
        decoder_attention_heads=8, encoder_ffn_dim=2048, decoder_ffn_dim=2048) if full else \
        transformers.WhisperConfig(d_model=64, encoder_layers=2, encoder_attention_heads=2,
                                   decoder_layers=1, decoder_attention_heads=2,
                                   encoder_ffn_dim=128, decoder_ffn_dim=128,
                                   max_source_positions=100)
    config.attn_implementation = "eager"
    frames = 3000 if full else 200
    g = torch.Generator().manual_seed(SEED)
    features = torch.randn(batch, config.num_mel_bins, frames, generator=g)
    return WhisperEncoder(config).eval(), (features,), ["input"]


class UNet(nn.Module):
    """A UNet: double 3x3 convolutions with BatchNorm and ReLU, max-pool down, up by a 2x2
    stride-2 ConvTranspose at every level but the last, which upsamples with bilinear Resize."""

    def __init__(self, width, levels, classes=3):
        super().__init__()

        def block(i, o):
            return nn.Sequential(nn.Conv2d(i, o, 3, padding=1), nn.BatchNorm2d(o), nn.ReLU(),
                                 nn.Conv2d(o, o, 3, padding=1), nn.BatchNorm2d(o), nn.ReLU())

        widths = [width * 2 ** i for i in range(levels + 1)]
        self.down = nn.ModuleList([block(3, widths[0])] +
                                  [block(widths[i], widths[i + 1]) for i in range(levels)])
        self.up = nn.ModuleList()
        self.merge = nn.ModuleList()
        for i in reversed(range(levels)):
            if i == 0:
                self.up.append(nn.Sequential(
                    nn.Upsample(scale_factor=2, mode="bilinear", align_corners=False),
                    nn.Conv2d(widths[1], widths[0], 1)))
            else:
                self.up.append(nn.ConvTranspose2d(widths[i + 1], widths[i], 2, stride=2))
            self.merge.append(block(2 * widths[i], widths[i]))
        self.head = nn.Conv2d(widths[0], classes, 1)

    def forward(self, x):
        skips = []
        for i, d in enumerate(self.down):
            x = d(x if i == 0 else nn.functional.max_pool2d(x, 2))
            skips.append(x)
        skips.pop()
        for up, merge in zip(self.up, self.merge):
            x = merge(torch.cat([up(x), skips.pop()], 1))
        return self.head(x)


def unet(full, batch=1):
    model = UNet(64, 4) if full else UNet(8, 2)
    return randomize_batchnorm(model).eval(), (image_input(batch, 256 if full else 32),), ["input"]


class LstmTagger(nn.Module):
    """A sequence tagger: token embedding, a two-layer bidirectional LSTM, a per-token Linear
    over the tags. Takes int64 token ids [batch, sequence] (varargs, like KeywordCall, so the
    dynamo exporter's dynamic shapes take the same form as the text families')."""

    def __init__(self, vocab, width, hidden, tags):
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.lstm = nn.LSTM(width, hidden, num_layers=2, bidirectional=True, batch_first=True)
        self.head = nn.Linear(2 * hidden, tags)

    def forward(self, *args):
        out, _ = self.lstm(self.embed(args[0]))
        return self.head(out)


def lstm_tagger(full, batch=1):
    vocab = 30000 if full else 200
    model = LstmTagger(vocab, 256, 256, 17) if full else LstmTagger(vocab, 16, 24, 9)
    g = torch.Generator().manual_seed(SEED)
    ids = torch.randint(0, vocab, (batch, 64 if full else 12), generator=g)
    return model.eval(), (ids,), ["input_ids"]


class Espcn(nn.Module):
    """ESPCN super-resolution (Shi et al. 2016): two tanh convolutions, a convolution to
    3 * r^2 channels and PixelShuffle (ONNX DepthToSpace, CRD mode) by the factor r."""

    def __init__(self, width, factor):
        super().__init__()
        self.body = nn.Sequential(
            nn.Conv2d(3, width, 5, padding=2), nn.Tanh(),
            nn.Conv2d(width, width // 2, 3, padding=1), nn.Tanh(),
            nn.Conv2d(width // 2, 3 * factor * factor, 3, padding=1), nn.PixelShuffle(factor))

    def forward(self, x):
        return self.body(x)


def espcn(full, batch=1):
    model = Espcn(64, 3) if full else Espcn(16, 3)
    return model.eval(), (image_input(batch, 224 if full else 16),), ["input"]


def t5(full, batch=1):
    """T5's encoder (t5-small when full): RMS LayerNorm written as Pow(x, 2), ReduceMean and Rsqrt,
    relative position buckets (Log, Min, Where), bias-free projections, ReLU feed-forward."""
    config = transformers.T5Config() if full else transformers.T5Config(
        vocab_size=100, d_model=32, d_kv=8, d_ff=64, num_layers=2, num_heads=4)
    config.attn_implementation = "eager"
    model = transformers.T5EncoderModel(config).eval()
    names = ["input_ids", "attention_mask"]
    return KeywordCall(model, names).eval(), text_inputs(batch, 128 if full else 16,
                                                        config.vocab_size, True), names


def llama(full, batch=1):
    """A LLaMA-style decoder stack run as an encoder (no cache): RMSNorm, rotary embeddings,
    grouped-query attention (4 query heads per key/value head), SiLU-gated feed-forward. Full is
    a small model (512 wide, 6 layers), not a released checkpoint's size."""
    config = transformers.LlamaConfig(
        vocab_size=32000 if full else 100, hidden_size=512 if full else 32,
        intermediate_size=1408 if full else 64, num_hidden_layers=6 if full else 2,
        num_attention_heads=8 if full else 4, num_key_value_heads=2 if full else 1,
        max_position_embeddings=512, use_cache=False)
    config.attn_implementation = "eager"
    model = transformers.LlamaModel(config).eval()
    names = ["input_ids", "attention_mask"]
    return KeywordCall(model, names).eval(), text_inputs(batch, 128 if full else 16,
                                                        config.vocab_size, True), names


ZOO = {"densenet": densenet, "regnet": regnet, "swin": swin, "efficientnet": efficientnet,
       "convnext": convnext, "whisper": whisper, "unet": unet, "lstm_tagger": lstm_tagger,
       "espcn": espcn, "t5": t5, "llama": llama}
ALL_FAMILIES = {**FAMILIES, **ZOO}


# ---- export ---------------------------------------------------------------------------------


def export_onnx(path, model, inputs, names, dynamo, opset, dynamic=False):
    """Writes the ONNX file only; returns the --shape values it needs ({} for the static
    dynamo export). Also used by bench/gpu_models.py and bench/gpu_bench.py."""
    kwargs = dict(input_names=names, output_names=["output"], opset_version=opset)
    text = inputs[0].dtype == torch.int64
    if dynamo and dynamic:
        # Dim.DYNAMIC lets torch.export derive each dimension's constraints (named Dims with
        # ranges fail on the transformers models' guards); the ONNX dim_params are then
        # torch's names for them ("s0"-style, or "batch" where it keeps the input's name).
        axes = {0: torch.export.Dim.DYNAMIC}
        if text:
            axes[1] = torch.export.Dim.DYNAMIC
        # Text models are KeywordCall(*args): their inputs are one tuple to torch.export.
        shapes = tuple(dict(axes) for _ in names)
        torch.onnx.export(model, inputs, path, dynamo=True, external_data=False,
                          dynamic_shapes=(shapes,) if text else shapes, **kwargs)
        return {n: list(t.shape) for n, t in zip(names, inputs)}
    if dynamo:
        torch.onnx.export(model, inputs, path, dynamo=True, external_data=False, **kwargs)
        return {}
    # Symbolic batch (and sequence for text): the manifest fixes them with --shape.
    axes = {0: "batch", 1: "sequence"} if text else {0: "batch"}
    kwargs["dynamic_axes"] = {n: axes for n in names}
    torch.onnx.export(model, inputs, path, dynamo=False, **kwargs)
    return {n: list(t.shape) for n, t in zip(names, inputs)}


def export(out_dir, name, model, inputs, names, dynamo, opset, dynamic=False):
    path = os.path.join(out_dir, name + ".onnx")
    shapes = export_onnx(path, model, inputs, names, dynamo, opset, dynamic)
    with torch.no_grad():
        reference = model(*inputs).numpy()
    for i, t in enumerate(inputs):
        np.save(os.path.join(out_dir, f"{name}.input_{i}.npy"), t.numpy())
    np.save(os.path.join(out_dir, f"{name}.output_0.npy"), reference)
    sess = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    feed = {n: t.numpy() for n, t in zip([i.name for i in sess.get_inputs()], inputs)}
    (ort_out,) = sess.run(None, feed)
    err = float(np.linalg.norm(ort_out - reference) / np.linalg.norm(reference))
    return {
        "name": name, "model": name + ".onnx", "inputs": names, "outputs": 1, "shapes": shapes,
        "tolerance": 1e-4, "exporter": "dynamo" if dynamo else "torchscript", "opset": opset,
        "torch": torch.__version__, "reference": "torch", "onnxruntime_vs_torch": err,
        "bytes": os.path.getsize(path),
    }


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("out_dir")
    parser.add_argument("--full", action="store_true")
    parser.add_argument("--only", default="")
    parser.add_argument("--styles", default="torchscript17,dynamo18,dynamo20",
                        help="exporter styles to write (benchmarks need one)")
    args = parser.parse_args()
    os.makedirs(args.out_dir, exist_ok=True)
    only = [f for f in args.only.split(",") if f]
    cases = []
    for family, make in (ALL_FAMILIES if only else FAMILIES).items():
        if only and family not in only:
            continue
        for dynamo, opset, dynamic in ((False, 17, False), (True, 18, False), (True, 20, False),
                                       (True, 18, True)):
            style = f"{'dynamo' if dynamo else 'torchscript'}{opset}{'dyn' if dynamic else ''}"
            if style not in args.styles.split(","):
                continue
            torch.manual_seed(SEED)
            model, inputs, names = make(args.full, batch=2) if dynamic else make(args.full)
            name = f"{style}_{family}"
            try:
                case = export(args.out_dir, name, model, inputs, names, dynamo, opset, dynamic)
            except Exception as e:  # report and go on: one exporter failing is information
                print(f"{name}: export failed: {type(e).__name__}: {str(e)[:2000]}", file=sys.stderr)
                continue
            cases.append(case)
            print(f"{name}: {case['bytes'] / 1e6:.2f} MB, onnxruntime vs torch "
                  f"{case['onnxruntime_vs_torch']:.2e}", flush=True)
    with open(os.path.join(args.out_dir, "manifest.json"), "w") as f:
        json.dump({"cases": cases}, f, indent=2)


if __name__ == "__main__":
    main()
