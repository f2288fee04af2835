"""An independent float64 oracle for `lowp.forward`: a decoder-only forward
pass written with torch ops from the formulas of Hugging Face transformers'
model families (llama, mistral, qwen2, qwen3, gemma, gemma2, gemma3_text, mixtral,
qwen2_moe, qwen3_moe), not from their code. Also a minimal safetensors reader/writer, a random-model
generator, and llama2.c's tokenizer decode (for the greedy-story check).

Everything runs in float64 so that the oracle's own rounding (~1e-16) is far
below the float32 error being measured (~1e-6).

    config, weights = load_model(directory)     # weights: float64 tensors
    logits = forward(config, weights, tokens)   # [n, T, vocab] or [T, vocab]
"""

import json
import math
import os
import re
import struct

import numpy as np
import torch

DTYPE = torch.float64

# ------------------------------------------------------------ safetensors

_READ_DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2"}


def write_safetensors(path, tensors, metadata=None):
    """Write `tensors` (name -> array, stored as little-endian F32 in the
    given order): 8-byte LE header length, a JSON header padded with spaces to
    a multiple of 8 bytes, then the tensors' bytes back to back."""
    header = {"__metadata__": {"format": "pt", **(metadata or {})}}
    blobs, offset = [], 0
    for name, array in tensors.items():
        data = np.ascontiguousarray(array, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(np.shape(array)),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for data in blobs:
            f.write(data)


def read_safetensors(path):
    """name -> float32/float64 numpy array (F64, F32, F16 and BF16 files)."""
    with open(path, "rb") as f:
        data = f.read()
    (length,) = struct.unpack_from("<Q", data, 0)
    header = json.loads(data[8:8 + length])
    base = 8 + length
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, end = info["data_offsets"]
        raw = data[base + start:base + end]
        if info["dtype"] == "BF16":  # bfloat16 is the top half of a float32
            array = (np.frombuffer(raw, "<u2").astype(np.uint32) << 16).view(np.float32)
        else:
            array = np.frombuffer(raw, _READ_DTYPES[info["dtype"]])
        tensors[name] = array.reshape(info["shape"])
    return tensors


def save_model(directory, config, tensors, shards=1):
    """config.json plus model.safetensors, or, with shards > 1, the tensors
    split in order over model-0000k-of-0000n.safetensors with the
    model.safetensors.index.json weight map transformers writes."""
    os.makedirs(directory, exist_ok=True)
    with open(os.path.join(directory, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
    if shards == 1:
        write_safetensors(os.path.join(directory, "model.safetensors"), tensors)
        return
    names = list(tensors)
    weight_map = {}
    for k, part in enumerate(np.array_split(np.arange(len(names)), shards)):
        file = f"model-{k + 1:05d}-of-{shards:05d}.safetensors"
        write_safetensors(os.path.join(directory, file), {names[i]: tensors[names[i]] for i in part})
        weight_map.update({names[i]: file for i in part})
    total = sum(np.asarray(t).size * 4 for t in tensors.values())
    with open(os.path.join(directory, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)


def load_model(directory):
    """(config dict, name -> float64 torch tensor) of a model directory."""
    directory = os.fspath(directory)
    with open(os.path.join(directory, "config.json")) as f:
        config = json.load(f)
    single = os.path.join(directory, "model.safetensors")
    if os.path.exists(single):
        arrays = read_safetensors(single)
    else:
        with open(os.path.join(directory, "model.safetensors.index.json")) as f:
            files = sorted(set(json.load(f)["weight_map"].values()))
        arrays = {}
        for file in files:
            arrays.update(read_safetensors(os.path.join(directory, file)))
    return config, {name: torch.from_numpy(np.array(a, dtype=np.float64)) for name, a in arrays.items()}


# ------------------------------------------------------------ the config

FAMILIES = ("llama", "mistral", "qwen2", "qwen3", "gemma", "gemma2", "gemma3_text", "mixtral",
            "qwen2_moe", "qwen3_moe")


class Spec:
    """The settings of a config.json that the forward pass needs, with the
    defaults of the contract (HF's where the contract names none)."""

    def __init__(self, config):
        c = config
        self.family = c["model_type"]
        if self.family not in FAMILIES:
            raise ValueError(f"model_type {self.family!r} not in {FAMILIES}")
        gemma = self.family in ("gemma", "gemma2", "gemma3_text")
        self.hidden = c["hidden_size"]
        self.layers = c["num_hidden_layers"]
        self.heads = c["num_attention_heads"]
        self.kv_heads = c.get("num_key_value_heads") or self.heads
        self.head_dim = c.get("head_dim") or self.hidden // self.heads
        if gemma and not c.get("head_dim"):
            raise ValueError(f"{self.family} configs need head_dim")
        self.vocab = c["vocab_size"]
        self.eps = c.get("rms_norm_eps", 1e-6)
        gemma3 = self.family == "gemma3_text"
        self.theta = c.get("rope_theta", 1e6 if gemma3 else 10000.0)
        # Gemma 3: the windowed layers' RoPE base, their angles unscaled
        self.local_theta = c.get("rope_local_base_freq", 10000.0) if gemma3 else None
        self.rope_scaling = c.get("rope_scaling")
        self.tied = c.get("tie_word_embeddings", gemma)

        self.gemma_norm = gemma          # x_hat * (1 + w)
        self.embed_scale = gemma         # embedding * sqrt(hidden)
        self.gelu = gemma                # gelu(tanh) instead of silu
        self.sandwich = self.family in ("gemma2", "gemma3_text")   # four norms per layer
        self.qk_norm = self.family in ("qwen3", "qwen3_moe", "gemma3_text")
        self.moe = self.family == "mixtral"
        self.experts = c.get("num_local_experts", 0)
        self.top_k = c.get("num_experts_per_tok", 0)
        self.renormalize = True
        self.expert_inter = c["intermediate_size"]
        self.moe_layers = [self.moe] * self.layers
        self.shared_inter = 0
        if self.family in ("qwen2_moe", "qwen3_moe"):  # Qwen3MoeConfig's names and defaults
            qwen2 = self.family == "qwen2_moe"
            self.experts = c.get("num_experts", 60 if qwen2 else 128)
            self.top_k = c.get("num_experts_per_tok", 4 if qwen2 else 8)
            self.renormalize = c.get("norm_topk_prob", False)
            self.expert_inter = c.get("moe_intermediate_size", 1408 if qwen2 else 768)
            self.shared_inter = c.get("shared_expert_intermediate_size", 5632) if qwen2 else 0
            step, dense = c.get("decoder_sparse_step", 1), c.get("mlp_only_layers", [])
            self.moe_layers = [i not in dense and self.experts > 0 and (i + 1) % step == 0
                               for i in range(self.layers)]

        bias = bool(c.get("attention_bias", False)) and self.family in (
            "llama", "qwen3", "qwen3_moe", "gemma3_text")
        self.qkv_bias = bias or self.family in ("qwen2", "qwen2_moe")
        self.o_bias = bias
        self.mlp_bias = self.family == "llama" and bool(c.get("mlp_bias", False))

        self.scaling = self.head_dim ** -0.5
        self.attn_softcap = self.final_softcap = None
        if self.family == "gemma2":
            self.scaling = c["query_pre_attn_scalar"] ** -0.5
            self.attn_softcap = c.get("attn_logit_softcapping")
            self.final_softcap = c.get("final_logit_softcapping")
        if gemma3:
            self.scaling = c.get("query_pre_attn_scalar", 256) ** -0.5
            self.attn_softcap = c.get("attn_logit_softcapping")
            self.final_softcap = c.get("final_logit_softcapping")
        self.windows = [self._window(c, i) for i in range(self.layers)]

    def _window(self, c, layer):
        """The sliding window of `layer` (None: full causal attention)."""
        if self.family in ("mistral", "mixtral"):
            return c.get("sliding_window")
        if self.family in ("qwen2", "qwen3", "qwen2_moe", "qwen3_moe"):
            use = c.get("use_sliding_window", False) and layer >= c.get("max_window_layers", 0)
            return c.get("sliding_window") if use else None
        if self.family == "gemma2":
            return c.get("sliding_window") if layer % 2 == 0 else None
        if self.family == "gemma3_text":  # layer_types, else every pattern-th layer global
            types = c.get("layer_types")
            if types is not None:
                sliding = types[layer] == "sliding_attention"
            else:
                sliding = (layer + 1) % c.get("sliding_window_pattern", 6) != 0
            return c.get("sliding_window", 4096) if sliding else None
        return None


def tensor_shapes(config):
    """name -> (shape, kind) of every tensor the config implies, in file
    order; kind is one of embed, matrix, bias, norm (for random init)."""
    s = Spec(config)
    H, q_out, kv_out = s.hidden, s.heads * s.head_dim, s.kv_heads * s.head_dim
    inter = config["intermediate_size"]
    shapes = {"model.embed_tokens.weight": ((s.vocab, H), "embed")}

    def linear(name, out, inp, bias):
        shapes[name + ".weight"] = ((out, inp), "matrix")
        if bias:
            shapes[name + ".bias"] = ((out,), "bias")

    for i in range(s.layers):
        p = f"model.layers.{i}."
        shapes[p + "input_layernorm.weight"] = ((H,), "norm")
        linear(p + "self_attn.q_proj", q_out, H, s.qkv_bias)
        linear(p + "self_attn.k_proj", kv_out, H, s.qkv_bias)
        linear(p + "self_attn.v_proj", kv_out, H, s.qkv_bias)
        linear(p + "self_attn.o_proj", H, q_out, s.o_bias)
        if s.qk_norm:
            shapes[p + "self_attn.q_norm.weight"] = ((s.head_dim,), "norm")
            shapes[p + "self_attn.k_norm.weight"] = ((s.head_dim,), "norm")
        shapes[p + "post_attention_layernorm.weight"] = ((H,), "norm")
        if s.sandwich:
            shapes[p + "pre_feedforward_layernorm.weight"] = ((H,), "norm")
            shapes[p + "post_feedforward_layernorm.weight"] = ((H,), "norm")
        if s.moe_layers[i] and s.family in ("qwen2_moe", "qwen3_moe"):
            linear(p + "mlp.gate", s.experts, H, False)
            for j in range(s.experts):
                e = p + f"mlp.experts.{j}."
                linear(e + "gate_proj", s.expert_inter, H, False)
                linear(e + "up_proj", s.expert_inter, H, False)
                linear(e + "down_proj", H, s.expert_inter, False)
            if s.shared_inter:
                e = p + "mlp.shared_expert."
                linear(e + "gate_proj", s.shared_inter, H, False)
                linear(e + "up_proj", s.shared_inter, H, False)
                linear(e + "down_proj", H, s.shared_inter, False)
                linear(p + "mlp.shared_expert_gate", 1, H, False)
        elif s.moe_layers[i]:
            linear(p + "block_sparse_moe.gate", s.experts, H, False)
            for j in range(s.experts):
                e = p + f"block_sparse_moe.experts.{j}."
                linear(e + "w1", inter, H, False)
                linear(e + "w3", inter, H, False)
                linear(e + "w2", H, inter, False)
        else:
            linear(p + "mlp.gate_proj", inter, H, s.mlp_bias)
            linear(p + "mlp.up_proj", inter, H, s.mlp_bias)
            linear(p + "mlp.down_proj", H, inter, s.mlp_bias)
    shapes["model.norm.weight"] = ((H,), "norm")
    if not s.tied:
        shapes["lm_head.weight"] = ((s.vocab, H), "matrix")
    return shapes


def random_model(config, seed):
    """Random float32 tensors for `config`, scaled so that every
    activation is O(1) and the logits O(1-10): matrices N(0, gain/sqrt(fan_in)),
    embeddings N(0, 0.5), biases N(0, 0.2), norm weights 1 + N(0, 0.1)
    (gemma's stored w is the offset from 1, so N(0, 0.1) there)."""
    rng = np.random.default_rng(seed)
    offset = 0.0 if Spec(config).gemma_norm else 1.0
    tensors = {}
    for name, (shape, kind) in tensor_shapes(config).items():
        if kind == "embed":
            a = rng.normal(0, 0.5, shape)
        elif kind == "matrix":
            gain = 3.0 if name == "lm_head.weight" else 1.0
            a = rng.normal(0, gain / math.sqrt(shape[1]), shape)
        elif kind == "bias":
            a = rng.normal(0, 0.2, shape)
        else:
            a = offset + rng.normal(0, 0.1, shape)
        tensors[name] = a.astype(np.float32)
    return tensors


# ------------------------------------------------------------ the forward pass


def rms_norm(x, w, eps, gemma):
    x = x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + eps)
    return x * (1.0 + w) if gemma else x * w


def linear(x, weights, name):
    y = x @ weights[name + ".weight"].T
    bias = weights.get(name + ".bias")
    return y if bias is None else y + bias


def inv_frequencies(s, local=False):
    """RoPE's inverse frequencies, after llama's rope_scaling if any (Gemma
    3's windowed layers: their own base, unscaled)."""
    d = s.head_dim
    if local:
        return s.local_theta ** (-torch.arange(0, d, 2, dtype=DTYPE) / d)
    inv = s.theta ** (-torch.arange(0, d, 2, dtype=DTYPE) / d)
    rs = s.rope_scaling
    if not rs:
        return inv
    kind = rs.get("rope_type", rs.get("type"))
    f = rs["factor"]
    if kind == "linear":
        return inv / f
    if kind != "llama3":
        raise ValueError(f"rope_scaling type {kind!r} not in the oracle")
    lf, hf, L0 = rs["low_freq_factor"], rs["high_freq_factor"], rs["original_max_position_embeddings"]
    wavelen = 2 * math.pi / inv
    smooth = (L0 / wavelen - lf) / (hf - lf)
    medium = (1 - smooth) * inv / f + smooth * inv
    return torch.where(wavelen > L0 / lf, inv / f, torch.where(wavelen < L0 / hf, inv, medium))


def rope_tables(s, length, local=False):
    angle = torch.arange(length, dtype=DTYPE)[:, None] * inv_frequencies(s, local)[None, :]
    angle = torch.cat([angle, angle], dim=-1)  # [T, d]: freqs repeated [f, f]
    return torch.cos(angle), torch.sin(angle)


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat([-x[..., half:], x[..., :half]], dim=-1)


def attention_mask(length, window):
    """allowed[i, j]: query i sees key j (causal, optionally windowed)."""
    i = torch.arange(length)[:, None]
    j = torch.arange(length)[None, :]
    allowed = j <= i
    if window is not None:
        allowed &= (i - j) < window
    return allowed


def attention(s, weights, p, x, cos, sin, window):
    n, T, _ = x.shape
    q = linear(x, weights, p + "q_proj").view(n, T, s.heads, s.head_dim).transpose(1, 2)
    k = linear(x, weights, p + "k_proj").view(n, T, s.kv_heads, s.head_dim).transpose(1, 2)
    v = linear(x, weights, p + "v_proj").view(n, T, s.kv_heads, s.head_dim).transpose(1, 2)
    if s.qk_norm:  # per head, before RoPE (Gemma 3's with 1 + w)
        q = rms_norm(q, weights[p + "q_norm.weight"], s.eps, s.gemma_norm)
        k = rms_norm(k, weights[p + "k_norm.weight"], s.eps, s.gemma_norm)
    q = q * cos + rotate_half(q) * sin
    k = k * cos + rotate_half(k) * sin
    # GQA: query head h reads kv head h // group; repeat_interleave lays the
    # kv heads out as [0]*group + [1]*group + ...
    group = s.heads // s.kv_heads
    k = k.repeat_interleave(group, dim=1)
    v = v.repeat_interleave(group, dim=1)
    scores = (q @ k.transpose(-1, -2)) * s.scaling
    if s.attn_softcap is not None:
        scores = s.attn_softcap * torch.tanh(scores / s.attn_softcap)
    scores = scores.masked_fill(~attention_mask(T, window), float("-inf"))
    out = torch.softmax(scores, dim=-1) @ v  # [n, heads, T, d]
    out = out.transpose(1, 2).reshape(n, T, s.heads * s.head_dim)
    return linear(out, weights, p + "o_proj")


def activation(s, x):
    if s.gelu:  # GELU, tanh approximation
        return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x.pow(3))))
    return x * torch.sigmoid(x)  # silu


def mlp(s, weights, p, x):
    gate = activation(s, linear(x, weights, p + "gate_proj"))
    return linear(gate * linear(x, weights, p + "up_proj"), weights, p + "down_proj")


def moe(s, weights, p, x, routes=None):
    """Mixtral and Qwen3-MoE: softmax router over all experts, the top-k
    (ties to the lower index: a stable descending sort), their weights
    renormalized (Mixtral; Qwen3-MoE when norm_topk_prob) or not."""
    probs = torch.softmax(linear(x, weights, p + "gate"), dim=-1)  # [n, T, E]
    top = torch.sort(probs, dim=-1, descending=True, stable=True).indices[..., :s.top_k]
    if routes is not None:  # the experts each token takes, by descending weight
        routes.append(top)
    chosen = probs.gather(-1, top)
    if s.renormalize:
        chosen = chosen / chosen.sum(-1, keepdim=True)
    dense = torch.zeros_like(probs).scatter(-1, top, chosen)
    names = ("w1", "w3", "w2") if s.family == "mixtral" else ("gate_proj", "up_proj", "down_proj")
    out = torch.zeros_like(x)
    for j in range(s.experts):
        e = p + f"experts.{j}."
        h = activation(s, linear(x, weights, e + names[0])) * linear(x, weights, e + names[1])
        out = out + dense[..., j:j + 1] * linear(h, weights, e + names[2])
    if s.shared_inter:  # Qwen2-MoE: every token's shared expert, gated by a sigmoid
        gate = torch.sigmoid(linear(x, weights, p + "shared_expert_gate"))
        out = out + gate * mlp(s, weights, p + "shared_expert.", x)
    return out


def forward(config, weights, tokens, routes=None):
    """float64 logits [n, T, vocab] of int tokens [n, T] (or [T, vocab] of
    [T]); every sequence starts at position 0. `routes`, a dict, gets each
    layer with experts' top-k experts per token ([n, T, k])."""
    s = Spec(config)
    tokens = torch.as_tensor(np.asarray(tokens), dtype=torch.long)
    single = tokens.dim() == 1
    if single:
        tokens = tokens[None]
    norm = lambda x, name: rms_norm(x, weights[name], s.eps, s.gemma_norm)  # noqa: E731
    embed = weights["model.embed_tokens.weight"]
    x = embed[tokens]
    if s.embed_scale:
        x = x * math.sqrt(s.hidden)
    tables = {False: rope_tables(s, tokens.shape[1])}
    if s.local_theta is not None:
        tables[True] = rope_tables(s, tokens.shape[1], local=True)
    for i in range(s.layers):
        p = f"model.layers.{i}."
        cos, sin = tables[s.local_theta is not None and s.windows[i] is not None]
        a = attention(s, weights, p + "self_attn.", norm(x, p + "input_layernorm.weight"), cos, sin, s.windows[i])
        if s.sandwich:
            a = norm(a, p + "post_attention_layernorm.weight")
        x = x + a
        pre = p + ("pre_feedforward_layernorm.weight" if s.sandwich else "post_attention_layernorm.weight")
        h = norm(x, pre)
        if not s.moe_layers[i]:
            m = mlp(s, weights, p + "mlp.", h)
        else:
            taken = [] if routes is not None else None
            m = moe(s, weights, p + ("block_sparse_moe." if s.family == "mixtral" else "mlp."), h, taken)
            if routes is not None:
                routes[i] = taken[0]
        if s.sandwich:
            m = norm(m, p + "post_feedforward_layernorm.weight")
        x = x + m
    x = norm(x, "model.norm.weight")
    logits = x @ (embed if s.tied else weights["lm_head.weight"]).T
    if s.final_softcap is not None:
        logits = s.final_softcap * torch.tanh(logits / s.final_softcap)
    return logits[0] if single else logits


def greedy(config, weights, length, bos=None):
    """`length` tokens: bos, then each next token the argmax (lowest id on
    ties) of the logits at the last position, recomputed from scratch."""
    tokens = [config.get("bos_token_id", 1) if bos is None else bos]
    while len(tokens) < length:
        last = forward(config, weights, tokens)[-1].numpy()
        tokens.append(int(np.argmax(last)))  # np.argmax: first maximum
    return np.array(tokens, dtype=np.int64)


def relative_error(ours, reference):
    """max over positions of max|ours - ref| / max|ref| at that position."""
    ref = np.asarray(reference, dtype=np.float64)
    ref = ref.reshape(-1, ref.shape[-1])
    diff = np.abs(np.asarray(ours, dtype=np.float64).reshape(ref.shape) - ref)
    return float((diff.max(-1) / np.abs(ref).max(-1)).max())


# ------------------------------------------------------------ llama2.c's tokenizer


def load_llama2c_vocab(path, vocab_size=512):
    """The pieces of a llama2.c tokenizer file: int32 max_token_length, then
    per token a float32 score, an int32 length and the bytes."""
    with open(path, "rb") as f:
        data = f.read()
    pos, pieces = 4, []
    for _ in range(vocab_size):
        (length,) = struct.unpack_from("<i", data, pos + 4)
        pieces.append(data[pos + 8:pos + 8 + length])
        pos += 8 + length
    return pieces


_BYTE_PIECE = re.compile(rb"<0x([0-9A-Fa-f]{1,2})")  # sscanf "<0x%02hhX>"
_C_PRINTABLE = set(range(0x20, 0x7F)) | set(b" \t\n\v\f\r")  # isprint || isspace


def llama2c_decode(pieces, prev, token):
    """run.c's decode(): after BOS a leading space is stripped; <0xXX> is
    that raw byte. Then safe_printf(): a lone non-printable byte prints
    nothing, and printf's %s stops at a NUL."""
    piece = pieces[token]
    if prev == 1 and piece.startswith(b" "):
        piece = piece[1:]
    match = _BYTE_PIECE.match(piece)
    if match:
        piece = bytes([int(match.group(1), 16)])
    piece = piece.split(b"\0")[0]
    if len(piece) == 1 and piece[0] not in _C_PRINTABLE:
        return b""
    return piece


def llama2c_output(pieces, tokens, steps):
    """What run.c's generate() prints for an empty prompt (prompt tokens =
    [BOS]) with `steps`, given the token sequence its sampler would produce
    (tokens[0] = BOS, tokens[pos + 1] sampled at pos): positions 0..steps-1
    are forwarded, each printing the token sampled there (so up to `steps`
    pieces, needing steps + 1 tokens), and a sampled BOS ends the loop
    unprinted. The trailing newline run.c adds afterwards is left out."""
    out, token = b"", tokens[0]
    for pos in range(steps):
        nxt = int(tokens[pos + 1])
        if nxt == 1:
            break
        out += llama2c_decode(pieces, token, nxt)
        token = nxt
    return out
