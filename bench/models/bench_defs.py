"""The benchmark workloads as plain PyTorch modules with fixed-seed random weights.

Each entry of WORKLOADS says how to build one model at one static input shape: a module in
eval mode, its example inputs (name -> tensor, in graph-input order), its output names and
the ONNX opset to export with. export_bench_models.py turns these into ONNX files; nothing
here touches the filesystem.

Weights are random (no downloads), but not careless: BatchNorm running statistics are
calibrated on random data and then perturbed, so the stored statistics are non-trivial
(BN->Conv folding changes the numbers) while activations stay O(1) through 50+ layers, and
LayerNorm gains/biases are randomised so LayerNorm fusion is exercised too. Outputs of O(1)
keep an output-agreement check (max abs error <= 1e-3 x max |reference|) meaningful.
"""
import math
import zlib
from dataclasses import dataclass
from typing import Callable, Dict, List, Tuple

import torch
import torchvision
from torch import nn
from torch.nn import functional as F

BASE_SEED = 20240601

# CNNs at opset 13. Transformers at opset 17: torch 1.13 exports nn.LayerNorm as one
# LayerNormalization node there (a ReduceMean/Sub/Pow/Sqrt/Div chain below 17), which every
# engine in the comparison runs natively.
CNN_OPSET = 13
TRANSFORMER_OPSET = 17


def family_seed(family: str) -> int:
    # Same family (e.g. resnet50 at B1 and B8) -> same weights, so results compare across batch.
    return BASE_SEED + zlib.crc32(family.encode())


# ---- weight randomisation -------------------------------------------------------------------

@torch.no_grad()
def randomise_batchnorm(model: nn.Module, calibration_input: torch.Tensor, gen: torch.Generator):
    """Give every BatchNorm2d running statistics that differ from identity yet keep the network
    numerically sane: measure the real statistics on one random batch, then perturb them and
    the affine parameters."""
    bns = [m for m in model.modules() if isinstance(m, nn.BatchNorm2d)]
    for bn in bns:
        bn.reset_running_stats()
        bn.momentum = None  # cumulative average: one batch -> exactly that batch's statistics
    model.train()
    model(calibration_input)
    model.eval()
    for bn in bns:
        c = bn.num_features
        bn.running_mean.add_(0.1 * bn.running_var.sqrt() * torch.randn(c, generator=gen))
        bn.running_var.mul_(0.75 + 0.5 * torch.rand(c, generator=gen))
        bn.weight.copy_(0.6 + 0.8 * torch.rand(c, generator=gen))
        bn.bias.copy_(0.1 * torch.randn(c, generator=gen))


@torch.no_grad()
def randomise_layernorm(model: nn.Module, gen: torch.Generator):
    for m in model.modules():
        if isinstance(m, nn.LayerNorm):
            m.weight.copy_(1.0 + 0.1 * torch.randn(m.weight.shape, generator=gen))
            m.bias.copy_(0.05 * torch.randn(m.bias.shape, generator=gen))


@torch.no_grad()
def init_transformer_weights(model: nn.Module, gen: torch.Generator, std: float = 0.02):
    """BERT/GPT-2 style initialisation: N(0, 0.02) matrices and embeddings, small biases."""
    for m in model.modules():
        if isinstance(m, (nn.Linear, nn.Embedding)):
            m.weight.copy_(std * torch.randn(m.weight.shape, generator=gen))
        if isinstance(m, nn.Linear) and m.bias is not None:
            m.bias.copy_(0.02 * torch.randn(m.bias.shape, generator=gen))
    randomise_layernorm(model, gen)


# ---- CNNs -----------------------------------------------------------------------------------

class ConvStack(nn.Module):
    """The paper's synthetic workload: 32 x [conv3x3 128->128, pad 1, + ReLU] at 64x64."""

    def __init__(self, layers: int = 32, channels: int = 128):
        super().__init__()
        body = []
        for _ in range(layers):
            conv = nn.Conv2d(channels, channels, 3, padding=1)
            # He init keeps the activation variance constant through a plain ReLU stack.
            nn.init.kaiming_normal_(conv.weight, nonlinearity="relu")
            nn.init.normal_(conv.bias, std=0.01)
            body += [conv, nn.ReLU()]
        self.body = nn.Sequential(*body)

    def forward(self, x):
        return self.body(x)


def conv_bn_leaky(cin: int, cout: int, k: int, stride: int = 1) -> nn.Sequential:
    return nn.Sequential(nn.Conv2d(cin, cout, k, stride, k // 2, bias=False),
                         nn.BatchNorm2d(cout), nn.LeakyReLU(0.1))


class DarknetResidual(nn.Module):
    def __init__(self, channels: int):
        super().__init__()
        self.reduce = conv_bn_leaky(channels, channels // 2, 1)
        self.expand = conv_bn_leaky(channels // 2, channels, 3)

    def forward(self, x):
        return x + self.expand(self.reduce(x))


class Darknet53(nn.Module):
    """Backbone: stem conv 32, then five stages of (stride-2 conv, n residual blocks)."""
    STAGES = ((64, 1), (128, 2), (256, 8), (512, 8), (1024, 4))

    def __init__(self):
        super().__init__()
        self.stem = conv_bn_leaky(3, 32, 3)
        stages, cin = [], 32
        for cout, blocks in self.STAGES:
            stages.append(nn.Sequential(conv_bn_leaky(cin, cout, 3, 2),
                                        *[DarknetResidual(cout) for _ in range(blocks)]))
            cin = cout
        self.stages = nn.ModuleList(stages)

    def forward(self, x):
        x = self.stem(x)
        feats = []
        for stage in self.stages:
            x = stage(x)
            feats.append(x)
        return feats[2], feats[3], feats[4]  # strides 8, 16, 32: 256, 512, 1024 channels


class YoloHead(nn.Module):
    """Five alternating 1x1/3x3 convs, then a 3x3 conv and the 1x1 detection conv."""

    def __init__(self, cin: int, width: int, outputs: int):
        super().__init__()
        self.body = nn.Sequential(
            conv_bn_leaky(cin, width, 1), conv_bn_leaky(width, 2 * width, 3),
            conv_bn_leaky(2 * width, width, 1), conv_bn_leaky(width, 2 * width, 3),
            conv_bn_leaky(2 * width, width, 1))
        self.detect = nn.Sequential(conv_bn_leaky(width, 2 * width, 3),
                                    nn.Conv2d(2 * width, outputs, 1))

    def forward(self, x):
        route = self.body(x)
        return route, self.detect(route)


class YoloV3(nn.Module):
    """YOLOv3: Darknet-53 plus three detection scales joined by 1x1 conv, nearest upsample x2
    and channel concat. Outputs are the raw head tensors (no box decoding)."""

    def __init__(self, classes: int = 80, anchors_per_scale: int = 3):
        super().__init__()
        outputs = anchors_per_scale * (5 + classes)  # 255 for COCO
        self.backbone = Darknet53()
        self.head32 = YoloHead(1024, 512, outputs)
        self.lateral16 = conv_bn_leaky(512, 256, 1)
        self.head16 = YoloHead(512 + 256, 256, outputs)
        self.lateral8 = conv_bn_leaky(256, 128, 1)
        self.head8 = YoloHead(256 + 128, 128, outputs)
        self.upsample = nn.Upsample(scale_factor=2, mode="nearest")

    def forward(self, x):
        c8, c16, c32 = self.backbone(x)
        route, out32 = self.head32(c32)
        route, out16 = self.head16(torch.cat([self.upsample(self.lateral16(route)), c16], 1))
        _, out8 = self.head8(torch.cat([self.upsample(self.lateral8(route)), c8], 1))
        return out32, out16, out8


# ---- transformers ---------------------------------------------------------------------------

@dataclass(frozen=True)
class TransformerConfig:
    layers: int
    hidden: int
    heads: int
    ffn: int
    vocab: int
    max_positions: int
    layer_norm_eps: float


BERT_BASE = TransformerConfig(12, 768, 12, 3072, 30522, 512, 1e-12)
BERT_LARGE = TransformerConfig(24, 1024, 16, 4096, 30522, 512, 1e-12)
GPT2_SMALL = TransformerConfig(12, 768, 12, 3072, 50257, 1024, 1e-5)


def split_heads(x: torch.Tensor, heads: int) -> torch.Tensor:
    b, s, h = x.shape
    return x.reshape(b, s, heads, h // heads).permute(0, 2, 1, 3)  # B, heads, S, head_dim


def merge_heads(x: torch.Tensor) -> torch.Tensor:
    b, n, s, d = x.shape
    return x.permute(0, 2, 1, 3).reshape(b, s, n * d)


class BertLayer(nn.Module):
    """Post-LayerNorm encoder layer: self-attention, add & norm, erf-GELU FFN, add & norm."""

    def __init__(self, cfg: TransformerConfig):
        super().__init__()
        self.heads = cfg.heads
        self.scale = 1.0 / math.sqrt(cfg.hidden // cfg.heads)
        self.query = nn.Linear(cfg.hidden, cfg.hidden)
        self.key = nn.Linear(cfg.hidden, cfg.hidden)
        self.value = nn.Linear(cfg.hidden, cfg.hidden)
        self.attn_out = nn.Linear(cfg.hidden, cfg.hidden)
        self.attn_norm = nn.LayerNorm(cfg.hidden, eps=cfg.layer_norm_eps)
        self.ffn_in = nn.Linear(cfg.hidden, cfg.ffn)
        self.ffn_out = nn.Linear(cfg.ffn, cfg.hidden)
        self.ffn_norm = nn.LayerNorm(cfg.hidden, eps=cfg.layer_norm_eps)

    def forward(self, x, additive_mask):
        q = split_heads(self.query(x), self.heads)
        k = split_heads(self.key(x), self.heads)
        v = split_heads(self.value(x), self.heads)
        scores = torch.matmul(q, k.transpose(-1, -2)) * self.scale + additive_mask
        context = merge_heads(torch.matmul(torch.softmax(scores, -1), v))
        x = self.attn_norm(x + self.attn_out(context))
        return self.ffn_norm(x + self.ffn_out(F.gelu(self.ffn_in(x))))


class Bert(nn.Module):
    """BERT encoder with word + position + token-type embeddings, a padding mask and the
    tanh pooler on the first token. Outputs (last_hidden_state, pooler_output)."""

    def __init__(self, cfg: TransformerConfig):
        super().__init__()
        self.word = nn.Embedding(cfg.vocab, cfg.hidden)
        self.position = nn.Embedding(cfg.max_positions, cfg.hidden)
        self.token_type = nn.Embedding(2, cfg.hidden)
        self.embed_norm = nn.LayerNorm(cfg.hidden, eps=cfg.layer_norm_eps)
        self.layers = nn.ModuleList(BertLayer(cfg) for _ in range(cfg.layers))
        self.pooler = nn.Linear(cfg.hidden, cfg.hidden)
        self.register_buffer("position_ids", torch.arange(cfg.max_positions)[None], persistent=False)

    def forward(self, input_ids, token_type_ids, attention_mask):
        seq = input_ids.shape[1]
        x = self.word(input_ids) + self.token_type(token_type_ids) + \
            self.position(self.position_ids[:, :seq])
        x = self.embed_norm(x)
        # 1 = attend, 0 = padding -> 0 / -10000 added to the scores, broadcast over heads, queries.
        additive_mask = (1.0 - attention_mask[:, None, None, :].to(x.dtype)) * -10000.0
        for layer in self.layers:
            x = layer(x, additive_mask)
        return x, torch.tanh(self.pooler(x[:, 0]))


class Gpt2Block(nn.Module):
    """Pre-LayerNorm decoder block with fused QKV projection, causal mask and tanh-GELU MLP."""

    def __init__(self, cfg: TransformerConfig):
        super().__init__()
        self.heads = cfg.heads
        self.scale = 1.0 / math.sqrt(cfg.hidden // cfg.heads)
        self.ln_1 = nn.LayerNorm(cfg.hidden, eps=cfg.layer_norm_eps)
        self.c_attn = nn.Linear(cfg.hidden, 3 * cfg.hidden)
        self.attn_proj = nn.Linear(cfg.hidden, cfg.hidden)
        self.ln_2 = nn.LayerNorm(cfg.hidden, eps=cfg.layer_norm_eps)
        self.c_fc = nn.Linear(cfg.hidden, cfg.ffn)
        self.mlp_proj = nn.Linear(cfg.ffn, cfg.hidden)

    def forward(self, x, causal):
        q, k, v = self.c_attn(self.ln_1(x)).split(x.shape[-1], dim=2)
        q, k, v = (split_heads(t, self.heads) for t in (q, k, v))
        scores = torch.matmul(q, k.transpose(-1, -2)) * self.scale
        scores = torch.where(causal, scores, torch.tensor(torch.finfo(scores.dtype).min))
        x = x + self.attn_proj(merge_heads(torch.matmul(torch.softmax(scores, -1), v)))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class Gpt2(nn.Module):
    """GPT-2 LM: one full-sequence forward pass, logits for every position (no KV cache).
    The causal mask is sliced from a lower-triangular buffer inside the graph; with static
    shapes the exporter folds it to a constant. The LM head shares the token embedding."""

    def __init__(self, cfg: TransformerConfig):
        super().__init__()
        self.wte = nn.Embedding(cfg.vocab, cfg.hidden)
        self.wpe = nn.Embedding(cfg.max_positions, cfg.hidden)
        self.blocks = nn.ModuleList(Gpt2Block(cfg) for _ in range(cfg.layers))
        self.ln_f = nn.LayerNorm(cfg.hidden, eps=cfg.layer_norm_eps)
        self.register_buffer("lm_head_bias", torch.zeros(cfg.vocab), persistent=False)
        positions = cfg.max_positions
        self.register_buffer("position_ids", torch.arange(positions)[None], persistent=False)
        self.register_buffer("causal", torch.tril(torch.ones(positions, positions, dtype=torch.bool))
                             .view(1, 1, positions, positions), persistent=False)

    def forward(self, input_ids):
        batch, seq = input_ids.shape
        x = self.wte(input_ids) + self.wpe(self.position_ids[:, :seq])
        causal = self.causal[:, :, :seq, :seq]
        for block in self.blocks:
            x = block(x, causal)
        x = self.ln_f(x)
        # F.linear with a bias on a 2-D input exports as Gemm(transB=1) reading wte itself, so
        # the tied weight is stored once (without a bias torch emits MatMul(x, Transpose(wte))
        # and constant folding stores a second, transposed copy: +147 MiB). The bias is zero.
        logits = F.linear(x.reshape(batch * seq, -1), self.wte.weight, self.lm_head_bias)
        return logits.reshape(batch, seq, -1)


# ---- registry -------------------------------------------------------------------------------

@dataclass(frozen=True)
class Workload:
    name: str
    family: str          # weights are shared by all workloads of one family
    description: str
    opset: int
    build: Callable[[torch.Generator], nn.Module]
    make_inputs: Callable[[torch.Generator], Dict[str, torch.Tensor]]
    output_names: Tuple[str, ...]


def image_input(batch: int, size: int):
    return lambda gen: {"image": torch.randn(batch, 3, size, size, generator=gen)}


def cnn_builder(make: Callable[[], nn.Module], calibration_size: int):
    def build(gen: torch.Generator) -> nn.Module:
        model = make()
        randomise_batchnorm(model, torch.randn(2, 3, calibration_size, calibration_size,
                                               generator=gen), gen)
        return model.eval()
    return build


def build_convstack(gen: torch.Generator) -> nn.Module:
    return ConvStack().eval()  # He init draws from torch's global generator, seeded by caller


def bert_builder(cfg: TransformerConfig):
    def build(gen: torch.Generator) -> nn.Module:
        model = Bert(cfg)
        init_transformer_weights(model, gen)
        return model.eval()
    return build


def bert_inputs(batch: int, seq: int, vocab: int):
    """Random tokens, two segments, and per-row padding so the mask actually masks."""
    def make(gen: torch.Generator) -> Dict[str, torch.Tensor]:
        ids = torch.randint(1, vocab, (batch, seq), generator=gen)
        token_type = torch.zeros(batch, seq, dtype=torch.int64)
        token_type[:, seq // 2:] = 1
        mask = torch.ones(batch, seq, dtype=torch.int64)
        for row in range(batch):
            pad = int(torch.randint(0, seq // 4 + 1, (1,), generator=gen))
            if pad:
                mask[row, seq - pad:] = 0
                ids[row, seq - pad:] = 0
        return {"input_ids": ids, "token_type_ids": token_type, "attention_mask": mask}
    return make


def build_gpt2(gen: torch.Generator) -> nn.Module:
    model = Gpt2(GPT2_SMALL)
    init_transformer_weights(model, gen)
    return model.eval()


def gpt2_inputs(batch: int, seq: int):
    return lambda gen: {"input_ids": torch.randint(0, GPT2_SMALL.vocab, (batch, seq), generator=gen)}


def torchvision_model(name: str) -> Callable[[], nn.Module]:
    return lambda: getattr(torchvision.models, name)(weights=None)


def _workloads() -> List[Workload]:
    w = []
    for batch in (1, 8):
        w.append(Workload(f"resnet50_b{batch}", "resnet50", f"torchvision ResNet-50, {batch}x3x224x224",
                          CNN_OPSET, cnn_builder(torchvision_model("resnet50"), 224),
                          image_input(batch, 224), ("logits",)))
    w.append(Workload("vgg16_b1", "vgg16", "torchvision VGG-16 (no BN), 1x3x224x224", CNN_OPSET,
                      cnn_builder(torchvision_model("vgg16"), 224), image_input(1, 224), ("logits",)))
    w.append(Workload("mobilenet_v2_b1", "mobilenet_v2", "torchvision MobileNetV2, 1x3x224x224",
                      CNN_OPSET, cnn_builder(torchvision_model("mobilenet_v2"), 224),
                      image_input(1, 224), ("logits",)))
    w.append(Workload("googlenet_b1", "googlenet", "torchvision GoogLeNet (no aux heads), 1x3x224x224",
                      CNN_OPSET, cnn_builder(lambda: torchvision.models.googlenet(
                          weights=None, aux_logits=False, init_weights=True), 224),
                      image_input(1, 224), ("logits",)))
    w.append(Workload("squeezenet_b1", "squeezenet", "torchvision SqueezeNet 1.1, 1x3x224x224",
                      CNN_OPSET, cnn_builder(torchvision_model("squeezenet1_1"), 224),
                      image_input(1, 224), ("logits",)))
    w.append(Workload("yolov3_416_b1", "yolov3", "YOLOv3 (Darknet-53, 3 heads), 1x3x416x416",
                      CNN_OPSET, cnn_builder(YoloV3, 416), image_input(1, 416),
                      ("detect_stride32", "detect_stride16", "detect_stride8")))
    for name, cfg, batch in (("bert_base_s128_b1", BERT_BASE, 1), ("bert_base_s128_b8", BERT_BASE, 8),
                             ("bert_large_s128_b1", BERT_LARGE, 1)):
        family = name.rsplit("_s", 1)[0]
        w.append(Workload(name, family, f"BERT {cfg.layers}L/{cfg.hidden}H/{cfg.heads}A, seq 128, batch {batch}",
                          TRANSFORMER_OPSET, bert_builder(cfg), bert_inputs(batch, 128, cfg.vocab),
                          ("last_hidden_state", "pooler_output")))
    w.append(Workload("gpt2_s256_b1", "gpt2", "GPT-2 124M, one causal pass over 256 tokens",
                      TRANSFORMER_OPSET, build_gpt2, gpt2_inputs(1, 256), ("logits",)))
    w.append(Workload("convstack", "convstack", "32 x [conv3x3 128->128 + ReLU], 1x128x64x64",
                      CNN_OPSET, build_convstack,
                      lambda gen: {"image": torch.randn(1, 128, 64, 64, generator=gen)}, ("output",)))
    return w


WORKLOADS: Dict[str, Workload] = {w.name: w for w in _workloads()}
