"""The PyTorch models of the model-test zoo, with random weights.

Plain torch modules (no downloads), built by functions that take the torch module so that
importing this file does not import torch. Sizes are small on purpose: grove's reference
executor is naive and single-threaded.
"""


def _randomize_norm_stats(model, torch, seed):
    """Default BatchNorm/LayerNorm parameters are identity-like; perturb them so folding or
    normalization bugs show up in the outputs instead of hiding behind mean 0 / var 1."""
    gen = torch.Generator().manual_seed(seed)
    for module in model.modules():
        if isinstance(module, torch.nn.BatchNorm2d):
            n = module.num_features
            module.running_mean.copy_(torch.randn(n, generator=gen) * 0.1)
            module.running_var.copy_(torch.rand(n, generator=gen) + 0.5)
            module.weight.data.copy_(torch.rand(n, generator=gen) + 0.5)
            module.bias.data.copy_(torch.randn(n, generator=gen) * 0.1)
        elif isinstance(module, torch.nn.LayerNorm):
            shape = module.normalized_shape
            module.weight.data.copy_(torch.rand(shape, generator=gen) + 0.5)
            module.bias.data.copy_(torch.randn(shape, generator=gen) * 0.1)


def build_resnet18(torch):
    import torchvision
    model = torchvision.models.resnet18(weights=None)
    _randomize_norm_stats(model, torch, seed=1)
    return model


def build_mobilenet_v2(torch):
    import torchvision
    model = torchvision.models.mobilenet_v2(weights=None)
    _randomize_norm_stats(model, torch, seed=2)
    return model


def build_regnet_x_400mf(torch):
    """torchvision's RegNetX-400MF: grouped 3x3 convs of 2, 4, 10 and 25 groups (16 channels a
    group), the first three split into one conv per group by grove at load, the last kept."""
    import torchvision
    model = torchvision.models.regnet_x_400mf(weights=None)
    _randomize_norm_stats(model, torch, seed=3)
    return model


def build_bert2(torch):
    nn = torch.nn
    F = torch.nn.functional

    class SelfAttention(nn.Module):
        def __init__(self, hidden, heads):
            super().__init__()
            self.heads = heads
            self.head_dim = hidden // heads
            self.query = nn.Linear(hidden, hidden)
            self.key = nn.Linear(hidden, hidden)
            self.value = nn.Linear(hidden, hidden)
            self.out = nn.Linear(hidden, hidden)

        def split_heads(self, x):
            # x.size() in the export becomes Shape->Gather->Unsqueeze->Concat->Reshape.
            batch, seq = x.size(0), x.size(1)
            return x.view(batch, seq, self.heads, self.head_dim).permute(0, 2, 1, 3)

        def forward(self, x, additive_mask):
            q = self.split_heads(self.query(x))
            k = self.split_heads(self.key(x))
            v = self.split_heads(self.value(x))
            scores = torch.matmul(q, k.transpose(-1, -2)) / (self.head_dim ** 0.5)
            probs = F.softmax(scores + additive_mask, dim=-1)
            context = torch.matmul(probs, v).permute(0, 2, 1, 3).contiguous()
            batch, seq = context.size(0), context.size(1)
            return self.out(context.view(batch, seq, self.heads * self.head_dim))

    class EncoderLayer(nn.Module):
        def __init__(self, hidden, heads, ffn):
            super().__init__()
            self.attention = SelfAttention(hidden, heads)
            self.attention_norm = nn.LayerNorm(hidden, eps=1e-12)
            self.ffn_in = nn.Linear(hidden, ffn)
            self.ffn_out = nn.Linear(ffn, hidden)
            self.ffn_norm = nn.LayerNorm(hidden, eps=1e-12)

        def forward(self, x, additive_mask):
            x = self.attention_norm(x + self.attention(x, additive_mask))
            return self.ffn_norm(x + self.ffn_out(F.gelu(self.ffn_in(x))))  # erf GELU

    class Bert2(nn.Module):
        def __init__(self, vocab=1000, hidden=128, heads=4, layers=2, ffn=512, max_pos=128):
            super().__init__()
            self.word_embeddings = nn.Embedding(vocab, hidden)
            self.position_embeddings = nn.Embedding(max_pos, hidden)
            self.embedding_norm = nn.LayerNorm(hidden, eps=1e-12)
            self.layers = nn.ModuleList(EncoderLayer(hidden, heads, ffn) for _ in range(layers))
            self.register_buffer("position_ids", torch.arange(max_pos).unsqueeze(0))

        def forward(self, input_ids, attention_mask):
            seq = input_ids.size(1)
            positions = self.position_ids[:, :seq]
            x = self.word_embeddings(input_ids) + self.position_embeddings(positions)
            x = self.embedding_norm(x)
            # [batch, seq] of 1/0 -> additive [batch, 1, 1, seq], as BERT does.
            additive_mask = (1.0 - attention_mask[:, None, None, :].to(x.dtype)) * -10000.0
            for layer in self.layers:
                x = layer(x, additive_mask)
            return x

    model = Bert2()
    _randomize_norm_stats(model, torch, seed=3)
    return model


def build_gpt2(torch):
    nn = torch.nn
    F = torch.nn.functional

    class CausalSelfAttention(nn.Module):
        def __init__(self, hidden, heads, max_pos):
            super().__init__()
            self.heads = heads
            self.head_dim = hidden // heads
            self.qkv = nn.Linear(hidden, 3 * hidden)
            self.proj = nn.Linear(hidden, hidden)
            causal = torch.tril(torch.ones(max_pos, max_pos, dtype=torch.bool))
            self.register_buffer("causal", causal.view(1, 1, max_pos, max_pos))

        def forward(self, x):
            batch, seq, hidden = x.size()
            q, k, v = self.qkv(x).split(hidden, dim=2)
            q = q.view(batch, seq, self.heads, self.head_dim).transpose(1, 2)
            k = k.view(batch, seq, self.heads, self.head_dim).transpose(1, 2)
            v = v.view(batch, seq, self.heads, self.head_dim).transpose(1, 2)
            scores = (q @ k.transpose(-2, -1)) * (1.0 / (self.head_dim ** 0.5))
            allowed = self.causal[:, :, :seq, :seq]
            scores = scores.masked_fill(~allowed, float("-inf"))
            context = F.softmax(scores, dim=-1) @ v
            context = context.transpose(1, 2).contiguous().view(batch, seq, hidden)
            return self.proj(context)

    class Block(nn.Module):
        def __init__(self, hidden, heads, max_pos):
            super().__init__()
            self.ln_1 = nn.LayerNorm(hidden)
            self.attn = CausalSelfAttention(hidden, heads, max_pos)
            self.ln_2 = nn.LayerNorm(hidden)
            self.fc = nn.Linear(hidden, 4 * hidden)
            self.fc_proj = nn.Linear(4 * hidden, hidden)

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.fc_proj(F.gelu(self.fc(self.ln_2(x)), approximate="tanh"))

    class Gpt2(nn.Module):
        def __init__(self, vocab=1000, hidden=128, heads=4, layers=2, max_pos=128):
            super().__init__()
            self.wte = nn.Embedding(vocab, hidden)
            self.wpe = nn.Embedding(max_pos, hidden)
            self.blocks = nn.ModuleList(Block(hidden, heads, max_pos) for _ in range(layers))
            self.ln_f = nn.LayerNorm(hidden)
            self.lm_head = nn.Linear(hidden, vocab, bias=False)
            self.lm_head.weight = self.wte.weight  # tied, as in GPT-2

        def forward(self, input_ids):
            seq = input_ids.size(1)
            positions = torch.arange(seq, dtype=torch.long, device=input_ids.device)
            x = self.wte(input_ids) + self.wpe(positions).unsqueeze(0)
            for block in self.blocks:
                x = block(x)
            return self.lm_head(self.ln_f(x))

    model = Gpt2()
    with torch.no_grad():
        model.wte.weight.normal_(0.0, 0.02)  # GPT-2's init keeps tied logits moderate
        model.wpe.weight.normal_(0.0, 0.01)
    _randomize_norm_stats(model, torch, seed=4)
    return model


def build_yolo_head(torch):
    nn = torch.nn

    def conv(cin, cout, k, stride=1):
        return nn.Sequential(nn.Conv2d(cin, cout, k, stride, k // 2, bias=False),
                             nn.BatchNorm2d(cout), nn.LeakyReLU(0.1))

    class YoloHead(nn.Module):
        """Two-scale YOLOv3-style neck: the deep feature is upsampled (nearest, x2) and
        concatenated with the shallower one, then each scale gets a 1x1 prediction conv."""

        def __init__(self, anchors=3, classes=4):
            super().__init__()
            out = anchors * (5 + classes)
            self.stem = nn.Sequential(conv(3, 16, 3, 2), conv(16, 32, 3, 2))
            self.down = nn.Sequential(conv(32, 64, 3, 2), conv(64, 32, 1))
            self.predict_coarse = nn.Conv2d(32, out, 1)
            self.lateral = conv(32, 16, 1)
            self.upsample = nn.Upsample(scale_factor=2, mode="nearest")
            self.fuse = conv(16 + 32, 32, 3)
            self.predict_fine = nn.Conv2d(32, out, 1)

        def forward(self, x):
            shallow = self.stem(x)
            deep = self.down(shallow)
            coarse = self.predict_coarse(deep)
            merged = torch.cat([self.upsample(self.lateral(deep)), shallow], dim=1)
            fine = self.predict_fine(self.fuse(merged))
            return coarse, fine

    model = YoloHead()
    _randomize_norm_stats(model, torch, seed=5)
    return model


def build_fpn_seg(torch):
    nn = torch.nn
    F = torch.nn.functional

    class FpnSeg(nn.Module):
        """Tiny FPN segmentation head: a strided encoder, a learned x2 upsampling
        (ConvTranspose2d) merged with a skip, and a bilinear resize back to input size."""

        def __init__(self, classes=5):
            super().__init__()
            self.enc1 = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1), nn.BatchNorm2d(16), nn.ReLU())
            self.enc2 = nn.Sequential(nn.Conv2d(16, 32, 3, 2, 1), nn.BatchNorm2d(32), nn.ReLU())
            self.up = nn.ConvTranspose2d(32, 16, kernel_size=4, stride=2, padding=1)
            self.up_odd = nn.ConvTranspose2d(16, 8, kernel_size=3, stride=2, padding=1,
                                             output_padding=1)
            self.skip = nn.Conv2d(16, 16, 1)
            self.classify = nn.Conv2d(8, classes, 1)

        def forward(self, x):
            f1 = self.enc1(x)
            f2 = self.enc2(f1)
            merged = F.relu(self.up(f2) + self.skip(f1))
            logits = self.classify(self.up_odd(merged))
            # Non-integer ratio on purpose: 64 -> 48 -> 80 exercises bilinear weights.
            logits = F.interpolate(logits, size=(48, 48), mode="bilinear", align_corners=False)
            return F.interpolate(logits, scale_factor=5.0 / 3.0, mode="bilinear",
                                 align_corners=False)

    model = FpnSeg()
    _randomize_norm_stats(model, torch, seed=6)
    return model
