# usage: TRAIN_HEAD=FILE STEPS=500 THREADS=1 python3 train.py OUT_DIR    (train, write OUT_DIR/model.safetensors ...)
#        python3 train.py --finish OUT_DIR    (only the steps after training: bf16 held-out loss, config.json, story)
#        python3 train.py --check MODEL_DIR   (lowp.forward against this file's forward, float64)
# Trains a small Qwen3-MoE (Hugging Face's Qwen3MoeForCausalLM layout and formulas: QK-norm before
# rotate-half RoPE, softmax router over 8 experts, top-2 renormalized, SwiGLU experts, Qwen's
# Switch-style load-balancing loss) on TinyStories text with the tok512 vocabulary. Every matrix row
# is 256 elements, so llama.cpp's k-quants apply. CPU, deterministic seed. Same data, split and
# recipe as ../../stories3M-hf/training/train.py.
import sys, json, math, time, struct, os
HERE = os.path.dirname(os.path.abspath(__file__)); DATA = os.path.join(HERE, '..', '..')
sys.path.insert(0, HERE); sys.path.insert(1, os.path.join(DATA, 'stories3M-hf', 'training'))
import numpy as np, torch, torch.nn as nn, torch.nn.functional as F
from tok import Tok  # stories3M-hf's tok.py (llama2.c's encode rule), unchanged
D, L, NH, NKV, HD, V, CTX = 256, 4, 8, 4, 32, 512, 256
E, K, FF, EPS, THETA, AUX = 8, 2, 256, 1e-6, 10000.0, 0.01


class RMS(nn.Module):  # Qwen3MoeRMSNorm: x * rsqrt(mean(x^2) + eps) * w
    def __init__(s, d): super().__init__(); s.weight = nn.Parameter(torch.ones(d))
    def forward(s, x): return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS) * s.weight


def rope(T, dtype):
    inv = 1.0 / (THETA ** (torch.arange(0, HD, 2, dtype=torch.float64) / HD))
    ang = torch.outer(torch.arange(T, dtype=torch.float64), inv)
    return torch.cat([ang.cos()] * 2, -1).to(dtype), torch.cat([ang.sin()] * 2, -1).to(dtype)


def rot(x):
    a, b = x[..., :HD // 2], x[..., HD // 2:]
    return torch.cat([-b, a], -1)


class Expert(nn.Module):
    def __init__(s):
        super().__init__()
        s.gate_proj = nn.Linear(D, FF, bias=False); s.up_proj = nn.Linear(D, FF, bias=False)
        s.down_proj = nn.Linear(FF, D, bias=False)
    def forward(s, x): return s.down_proj(F.silu(s.gate_proj(x)) * s.up_proj(x))


class MoE(nn.Module):  # Qwen3MoeSparseMoeBlock
    def __init__(s):
        super().__init__()
        s.gate = nn.Linear(D, E, bias=False); s.experts = nn.ModuleList([Expert() for _ in range(E)])
    def forward(s, x):
        h = x.reshape(-1, D)
        logits = s.gate(h)                                   # [N, E]
        probs = logits.softmax(-1)
        w, idx = probs.topk(K, -1)                           # top-k of the softmax over all experts
        w = w / w.sum(-1, keepdim=True)                      # norm_topk_prob
        out = torch.zeros_like(h)
        for j in range(E):
            t, slot = (idx == j).nonzero(as_tuple=True)
            if t.numel(): out.index_add_(0, t, s.experts[j](h[t]) * w[t, slot, None])
        return out.view_as(x), logits, idx


class Layer(nn.Module):
    def __init__(s):
        super().__init__()
        s.input_layernorm = RMS(D); s.post_attention_layernorm = RMS(D)
        s.q_proj = nn.Linear(D, NH * HD, bias=False); s.k_proj = nn.Linear(D, NKV * HD, bias=False)
        s.v_proj = nn.Linear(D, NKV * HD, bias=False); s.o_proj = nn.Linear(NH * HD, D, bias=False)
        s.q_norm = RMS(HD); s.k_norm = RMS(HD); s.mlp = MoE()
    def forward(s, x, cos, sin):
        B, T, _ = x.shape
        h = s.input_layernorm(x)
        q = s.q_norm(s.q_proj(h).view(B, T, NH, HD)).transpose(1, 2)   # QK-norm per head, before RoPE
        k = s.k_norm(s.k_proj(h).view(B, T, NKV, HD)).transpose(1, 2)
        v = s.v_proj(h).view(B, T, NKV, HD).transpose(1, 2)
        q = (q * cos + rot(q) * sin) * HD ** -0.5; k = k * cos + rot(k) * sin
        # GQA: query head h reads kv head h // (NH // NKV) (repeat_interleave's order), done as one
        # matmul per kv head over its group's queries [B, NKV, G * T, HD] instead of copying k and v
        att = q.reshape(B, NKV, -1, HD) @ k.transpose(-1, -2)                   # [B, NKV, G * T, T]
        att = (att.view(B, NH, T, T) + torch.full((T, T), float('-inf'), dtype=x.dtype).triu(1)).softmax(-1)
        a = (att.view(B, NKV, -1, T) @ v).view(B, NH, T, HD)
        x = x + s.o_proj(a.transpose(1, 2).reshape(B, T, NH * HD))
        m, logits, idx = s.mlp(s.post_attention_layernorm(x))
        return x + m, logits, idx


class Model(nn.Module):
    def __init__(s):
        super().__init__()
        s.embed_tokens = nn.Embedding(V, D); s.layers = nn.ModuleList([Layer() for _ in range(L)]); s.norm = RMS(D)
        for p in s.parameters():
            if p.dim() == 2: nn.init.normal_(p, 0, 0.02)
        for l in s.layers:
            nn.init.normal_(l.o_proj.weight, 0, 0.02 / math.sqrt(2 * L))
            for e in l.mlp.experts: nn.init.normal_(e.down_proj.weight, 0, 0.02 / math.sqrt(2 * L))
    def forward(s, t):
        """logits [B, T, V] (tied embeddings), the routers' logits and chosen experts per layer."""
        x = s.embed_tokens(t); cos, sin = rope(t.shape[1], x.dtype); logits, routes = [], []
        for l in s.layers:
            x, g, idx = l(x, cos, sin); logits.append(g); routes.append(idx)
        return s.norm(x) @ s.embed_tokens.weight.T, logits, routes


def aux_loss(router_logits):
    """Switch-style load balancing, E * sum_e f_e * P_e with transformers' load_balancing_loss_func's
    terms (f = mean one-hot of the top-k choices [K, E], P = mean router softmax [E]; 2 = K when
    balanced), but per layer, then averaged over the layers (as Switch Transformer applies it):
    transformers concatenates all layers' tokens first, so layers that favour different
    experts cancel out and go unpenalized (a first run, coefficient 0.001 that way, had two experts
    taking 75% of the top-2 slots in layers 2 and 3 by step 200; see ../README.md)."""
    total = 0
    for g in router_logits:
        probs = g.softmax(-1)
        f = F.one_hot(probs.topk(K, -1).indices, E).float().mean(0)
        total = total + E * (f * probs.mean(0)[None]).sum()
    return total / len(router_logits)


def names(m):
    """the Hugging Face name of each tensor (tied: no lm_head.weight)."""
    T = {'model.embed_tokens.weight': m.embed_tokens.weight, 'model.norm.weight': m.norm.weight}
    for i, l in enumerate(m.layers):
        for n, p in l.named_parameters(): T[f'model.layers.{i}.' + ('self_attn.' if n.split('.')[0] in
            ('q_proj', 'k_proj', 'v_proj', 'o_proj', 'q_norm', 'k_norm') else '') + n] = p
    return T


def bf16_bits(a):  # float32 -> bfloat16 bits, rounded to nearest even
    b = np.ascontiguousarray(a, '<f4').view('<u4').astype(np.uint64)
    return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype('<u2')


def save_bf16(T, path):
    hdr = {}; off = 0; blobs = []
    for k in sorted(T):
        b = bf16_bits(T[k].detach().float().numpy()).tobytes()
        hdr[k] = {'dtype': 'BF16', 'shape': list(T[k].shape), 'data_offsets': [off, off + len(b)]}; off += len(b); blobs.append(b)
    hb = json.dumps(hdr).encode(); hb += b' ' * ((8 - len(hb) % 8) % 8)
    with open(path, 'wb') as f:
        f.write(struct.pack('<Q', len(hb))); f.write(hb); [f.write(b) for b in blobs]


def load(path, dtype=torch.float64):
    """a Model with the weights of a BF16 safetensors file this script wrote, in dtype."""
    raw = open(path, 'rb').read(); n, = struct.unpack('<Q', raw[:8]); hdr = json.loads(raw[8:8 + n])
    m = Model().to(dtype); T = names(m)
    with torch.no_grad():
        for k, h in hdr.items():
            a, b = h['data_offsets']; bits = np.frombuffer(raw[8 + n + a:8 + n + b], '<u2').astype('<u4') << 16
            T[k].copy_(torch.from_numpy(bits.view('<f4').reshape(h['shape']).copy()).to(dtype))
    assert set(hdr) == set(T)
    return m


def check(d):
    """lowp.forward against this file's forward (float64) on the saved bf16 weights."""
    import lowp
    torch.set_num_threads(2)
    m = load(os.path.join(d, 'model.safetensors')).eval()
    rng = np.random.default_rng(1); toks = rng.integers(3, V, (2, 61)); toks[:, 0] = 1
    with torch.no_grad(): ref = m(torch.from_numpy(toks))[0].numpy()
    got = lowp.forward(d, toks.astype(np.int32))
    err = np.abs(got.astype(np.float64) - ref).max() / np.abs(ref).max()
    print(f'lowp.forward vs float64 reference on 2 x 61 tokens: max |diff| / max |logit| = {err:.2e} '
          f'(max |logit| {np.abs(ref).max():.3f}, argmax agreement {(got.argmax(-1) == ref.argmax(-1)).mean():.4f})')
    return err


def data():
    """the tokenizer, the training tokens, the held-out tokens and the split's character index."""
    tok = Tok(os.path.join(DATA, 'stories3M-hf', 'tok512.bin'))
    valid = open(os.path.join(DATA, 'text', 'tinystories-valid-head.txt'), encoding='utf-8').read()
    cut = int(len(valid) * 0.85); cut = valid.rfind('\n\n', 0, cut)
    def ids(text):
        out = []
        for s in text.split('\n\n'):
            s = s.strip()
            if s: out += [1] + tok.encode(s)
        return np.array(out, np.int64)
    tr = None
    if 'TRAIN_HEAD' in os.environ:
        train_head = open(os.environ['TRAIN_HEAD'], encoding='utf-8').read()  # see ../README.md
        tr = np.concatenate([ids(train_head), ids(valid[:cut])])
    return tok, tr, ids(valid[cut:]), cut


def val_loss(model, va):
    """held-out loss (nats/token) and each layer's share of the top-k slots per expert."""
    model.eval(); tot = 0; n = 0; shares = np.zeros((L, E))
    starts = np.arange(0, len(va) - CTX - 1, CTX)  # consecutive windows of CTX tokens, 16 at a time
    with torch.no_grad():
        for b in range(0, len(starts), 16):
            x = torch.from_numpy(np.stack([va[i:i + CTX] for i in starts[b:b + 16]]))
            y = torch.from_numpy(np.stack([va[i + 1:i + CTX + 1] for i in starts[b:b + 16]]))
            lg, _, routes = model(x)
            tot += F.cross_entropy(lg.view(-1, V), y.view(-1), reduction='sum').item(); n += y.numel()
            for li, r in enumerate(routes): shares[li] += np.bincount(r.reshape(-1).numpy(), minlength=E)
    model.train(); return tot / n, shares / shares.sum(1, keepdims=True)


def main():
    out = sys.argv[1]
    torch.manual_seed(0); np.random.seed(0); torch.set_num_threads(int(os.environ.get('THREADS', 2)))
    tok, tr, va, cut = data()
    print('train tokens', len(tr), 'valid tokens', len(va), 'split at char', cut, flush=True)
    m = Model()
    nparams = sum(p.numel() for p in m.parameters())
    active = nparams - L * (E - K) * 3 * D * FF
    print('params', nparams, 'active per token', active, flush=True)
    steps, B, lr = int(os.environ.get('STEPS', 500)), 16, 2e-3
    opt = torch.optim.AdamW(m.parameters(), lr=lr, betas=(0.9, 0.95), weight_decay=0.1)
    rng = np.random.default_rng(0)
    def batch(data, n):
        ix = rng.integers(0, len(data) - CTX - 1, n)
        x = np.stack([data[i:i + CTX] for i in ix]); y = np.stack([data[i + 1:i + CTX + 1] for i in ix])
        return torch.from_numpy(x), torch.from_numpy(y)
    t0 = time.time(); log = []
    for step in range(steps):
        cur = lr * min(1, (step + 1) / 50) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * step / steps)))
        for g in opt.param_groups: g['lr'] = cur
        x, y = batch(tr, B)
        lg, rl, _ = m(x)
        ce = F.cross_entropy(lg.view(-1, V), y.view(-1)); aux = aux_loss(rl); loss = ce + AUX * aux
        opt.zero_grad(); loss.backward(); torch.nn.utils.clip_grad_norm_(m.parameters(), 1.0); opt.step()
        if step % 10 == 0: print(f'  step {step} loss {ce.item():.4f} aux {aux.item():.4f} ({time.time()-t0:.0f} s)', flush=True)
        if step % 100 == 0 or step == steps - 1:
            vl, shares = val_loss(m, va); log.append({'step': step, 'loss': round(ce.item(), 4), 'aux': round(aux.item(), 4),
                                                      'val': round(vl, 4), 'seconds': round(time.time() - t0),
                                                      'load': shares.round(3).tolist()})
            print(f'step {step} loss {ce.item():.4f} aux {aux.item():.4f} val {vl:.4f} ({time.time()-t0:.0f} s)', flush=True)
            print('  load per layer (share of top-2 slots):', [' '.join(f'{v:.3f}' for v in r) for r in shares], flush=True)
    os.makedirs(out, exist_ok=True)
    save_bf16(names(m), os.path.join(out, 'model.safetensors'))
    json.dump({'log': log, 'params': nparams, 'active_params': active, 'train_tokens': int(len(tr)),
               'valid_tokens': int(len(va)), 'valid_split_char': cut, 'steps': steps, 'threads': torch.get_num_threads(),
               'router_aux_loss_coef': AUX, 'seconds': round(time.time() - t0)},
              open(os.path.join(out, 'train_log.json'), 'w'), indent=1)
    finish(out)


def finish(out):
    """after training: the held-out loss and expert load of the saved bf16 weights, config.json, and
    a greedy story from BOS."""
    torch.set_num_threads(int(os.environ.get('THREADS', 2)))
    tok, _, va, _ = data()
    mb = load(os.path.join(out, 'model.safetensors'), torch.float32); vl16, load16 = val_loss(mb, va)
    print(f'bf16 weights: val {vl16:.4f} (perplexity {math.exp(vl16):.3f})', flush=True)
    print('  load per layer (share of top-2 slots):', [' '.join(f'{v:.3f}' for v in r) for r in load16], flush=True)
    cfg = {'architectures': ['Qwen3MoeForCausalLM'], 'model_type': 'qwen3_moe', 'hidden_size': D,
           'intermediate_size': 768, 'moe_intermediate_size': FF, 'num_hidden_layers': L,
           'num_attention_heads': NH, 'num_key_value_heads': NKV, 'head_dim': HD, 'vocab_size': V,
           'max_position_embeddings': CTX, 'rms_norm_eps': EPS, 'rope_theta': THETA, 'rope_scaling': None,
           'hidden_act': 'silu', 'attention_bias': False, 'attention_dropout': 0.0,
           'num_experts': E, 'num_experts_per_tok': K, 'norm_topk_prob': True, 'decoder_sparse_step': 1,
           'mlp_only_layers': [], 'output_router_logits': False, 'router_aux_loss_coef': AUX,
           'use_sliding_window': False, 'sliding_window': None, 'max_window_layers': L,
           'tie_word_embeddings': True, 'initializer_range': 0.02, 'use_cache': True,
           'bos_token_id': 1, 'eos_token_id': 2, 'torch_dtype': 'bfloat16'}
    json.dump(cfg, open(os.path.join(out, 'config.json'), 'w'), indent=1)
    p = os.path.join(out, 'train_log.json'); j = json.load(open(p))
    j.update({'bf16_val': round(vl16, 4), 'bf16_perplexity': round(math.exp(vl16), 3), 'bf16_load': load16.round(4).tolist()})
    json.dump(j, open(p, 'w'), indent=1)
    mb.eval(); ids_ = [1]  # greedy story from BOS, bf16 weights
    with torch.no_grad():
        for _ in range(120): ids_.append(int(mb(torch.tensor([ids_]))[0][0, -1].argmax()))
    print(tok.decode(ids_[1:]))


if __name__ == '__main__':
    {'--check': check, '--finish': finish}[sys.argv[1]](sys.argv[2]) if sys.argv[1].startswith('--') else main()
