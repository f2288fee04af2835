"""Builds notebooks/end_to_end.ipynb (without outputs).

    cd notebooks && /usr/bin/python3 src/end_to_end.py   (see nbbuild.py)
"""
from nbbuild import code, main, md

md(r"""
# End to end: what each format does to a real model's outputs

`quantization_error.ipynb` measures formats on tensors (SQNR). This notebook runs the model:
`lowp.eval` puts the bundled stories260K-hf (a real 5-layer TinyStories Llama, 292,800
parameters, vocab 512) through the float32 reference and through emulated variants on the same
tokens, and compares the next-token distributions position by position: mean KL divergence
(KLD, nats) of the variant from the reference, top-1 agreement, perplexity. The questions:

1. **Weights, every scheme family**: does the tensor proxy (SQNR of the quantized matrices)
   rank the formats the way the model's outputs (KLD, top-1) do?
2. **KV cache** in fp8 and int8 (and int4).
3. **W8A8**: int8 weights with per-token int8 activations, fp8 with fp8, and activations alone.
4. **fp16 compute**: the per-site census of overflow, saturation and flush-to-zero, and what a
   power-of-two scale of the residual stream does to it.
5. **Stories**: text sampled and decoded with the model's tokenizer `tok512.bin` for each
   weight format, and every other format measured on those stories.

Every number below is computed in the notebook from `lowp`'s results; the prose describes what
they show.
""")

code(r"""
%matplotlib inline
%config InlineBackend.figure_format = 'png'
import time
T_START = time.perf_counter()

import json
import os
import shutil
import struct
import tempfile

import numpy as np
import matplotlib.pyplot as plt
import lowp

plt.rcParams.update({"figure.dpi": 80, "savefig.dpi": 100, "font.size": 9})
MODEL = lowp.bundled_model()  # tests/data/stories260K-hf (installed: share/lowp/stories260K-hf)
TOKENS = lowp.sample(MODEL, count=16, length=128, temperature=1.0, seed=0)  # lowp eval's default set
print(f"model: {os.path.basename(MODEL)}; tokens: {TOKENS.shape[0]} sequences of {TOKENS.shape[1]} "
      f"sampled from the float32 model at temperature 1 (seed 0), BOS first")
""")

md(r"""
## 1. Weights: tensor SQNR against the model's KLD and top-1

One scheme or more from every family of `lowp.schemes()`: the casts (fp16, bf16 and both fp8
formats, no scale), symmetric integers with a scale per row or per group of 128, an asymmetric
integer, MSE-clipped groups, fp8 with a scale per row, OCP MX (8, 6 and 4 bits), NVFP4, NF4,
llama.cpp's legacy types (q8_0, q5_1, q5_0, q4_1, q4_0), its k-quants (q2_K to q6_K), iq4_nl and
iq4_xs, ggml's own MXFP4 and NVFP4, and two of `llama-quantize`'s mixes (Q4_K_M, Q8_0). A plain
scheme in `weights` quantizes the decoder layers' 35 linear layers (q, k, v, o, gate, up, down);
the embedding, the norms and `lm_head` stay float32. A mix does what `llama-quantize` does: it
picks a type per tensor and quantizes the embedding and `lm_head` too (37 matrices); the norms
stay float32. `weights_sqnr_db` is the SQNR over the quantized matrices together, the figure a
tensor-level comparison would use; KLD and top-1 come from the 2,048 positions of the token set.
All candidates run in one call.

**The super-block types do not apply to this model as themselves.** q2_K to q6_K and iq4_xs
quantize super-blocks of 256 values along a row; stories260K's rows hold 64 or 172. As in
llama.cpp, such a row gets a fallback type (q2_K, q3_K → q4_0; q4_K → q5_0; q5_K → q5_1;
q6_K → q8_0; iq4_xs → iq4_nl) or f16 where 32 does not divide it either (the 172-column
`down_proj`, 5 of the 35 matrices). The mixes inherit the same fallbacks. The cell prints what
each of these candidates applied (from `lowp.quant_error` on the same file, whose rows carry the
`applied` type); their results are those of the fallback mixture, not of the k-quants, so the
ranking analysis below uses only the candidates that quantize every matrix with their own type,
and the fallbacks and mixes are set beside it afterwards.
""")

code(r"""
CATALOG = {f["family"]: f["examples"] for f in lowp.schemes()}
# The grid i-quants are left out: iq2_xxs, iq2_xs and iq1_s need an importance matrix, and on
# this model's 64-wide rows all seven fall back to iq4_nl (bench/imatrix_gain.sh measures them).
GRID = {"llama.cpp " + t for t in ("iq2_xxs", "iq2_xs", "iq2_s", "iq3_xxs", "iq3_s", "iq1_s", "iq1_m")}
# Every other family the library reports, with its catalog examples, but where the comparison
# takes fewer: the deployed variants of the families with many.
CHOSEN = {
    "cast": ["fp16", "bf16", "fp8_e4m3fn", "fp8_e5m2"],
    "integer, symmetric": ["int8-channel", "int4-g128"],
    "integer, asymmetric": ["uint4-g128-asym"],
    "integer, MSE-optimal clipping (:clip=mse)": ["int4-g128:clip=mse"],
    "scaled float (per tensor, channel, group or 2-D block)": ["fp8_e4m3fn-channel"],
    "MX (OCP Microscaling v1.0)": ["mxfp8", "mxfp6_e2m3", "mxfp4"],
    "NF4 (bitsandbytes)": ["nf4"],
    "llama.cpp mixes": ["Q4_K_M", "Q8_0"],
    "rotation (an option of any scheme)": ["int4-g128:rotate=hadamard"],
}
WEIGHT_SCHEMES = {fam: CHOSEN.get(fam, names) for fam, names in CATALOG.items() if fam not in GRID}
for fam, names in WEIGHT_SCHEMES.items():
    assert all(n in CATALOG[fam] for n in names), (fam, names)
FAMILY = {s: fam for fam, names in WEIGHT_SCHEMES.items() for s in names}
SCHEMES = [s for names in WEIGHT_SCHEMES.values() for s in names]

t = time.perf_counter()
EV = lowp.eval(tokens=TOKENS, weights=SCHEMES)
t_ev = time.perf_counter() - t
assert EV["tokens"] == "array" and EV["positions"] == TOKENS.size
W = {c["label"]: c for c in EV["candidates"]}
MIXES = WEIGHT_SCHEMES["llama.cpp mixes"]
assert list(W) == SCHEMES
assert all(W[s]["weight_matrices"] == (37 if s in MIXES else 35) for s in SCHEMES)  # a mix: + embedding, lm_head

# What each candidate applied to each matrix it quantizes: quant_error on the same file reports it
# per tensor (a plain scheme: the 35 *_proj matrices; a mix: every tensor it does not keep f32)
QE = lowp.quant_error(os.path.join(MODEL, "model.safetensors"), SCHEMES)
APPLIED, MIX_TYPE = {}, {}
for r in QE["results"]:
    if r["scheme"] in MIXES:
        MIX_TYPE[(r["scheme"], r["tensor"])] = r["applied"]
    elif not r["tensor"].endswith("_proj.weight"):
        continue
    t_ = r.get("applied", r["scheme"])
    if t_ != "f32":
        APPLIED.setdefault(r["scheme"], {})
        APPLIED[r["scheme"]][t_] = APPLIED[r["scheme"]].get(t_, 0) + 1
for s in SCHEMES:
    assert sum(APPLIED[s].values()) == W[s]["weight_matrices"], (s, APPLIED[s])  # the same matrices as eval's
# (A rotation's smaller block on rows its size does not divide, 172 = 4 x 43, is still the scheme.)
APPLIED = {s: a for s, a in APPLIED.items() if {t.split(":rotate=")[0] for t in a} != {s.split(":rotate=")[0]}}
SUPER = ["q2_K", "q3_K", "q4_K", "q5_K", "q6_K", "iq4_xs"]
assert sorted(APPLIED) == sorted(SUPER + MIXES), sorted(APPLIED)
NATIVE = [s for s in SCHEMES if s not in APPLIED]  # every matrix in the scheme's own type
applied_text = lambda s: "+".join(f"{t} x{n}" for t, n in sorted(APPLIED[s].items(), key=lambda i: -i[1])) \
    if s in APPLIED else "itself"
print(f"{len(SCHEMES)} candidates on {EV['positions']} positions in {t_ev:.1f} s; float32 reference "
      f"perplexity {EV['reference']['perplexity']:.4f}")
print(f"{len(NATIVE)} apply their own type to all 35 matrices; {len(SUPER)} fall back, {len(MIXES)} are mixes")
print()
print(f"{'scheme':26s}{'family':22s}{'b/w':>7s}{'SQNR dB':>9s}{'KLD mean':>11s}{'KLD p99':>10s}"
      f"{'top-1':>8s}{'PPL ratio':>11s}  applied (matrices)")
for s in sorted(SCHEMES, key=lambda s: -W[s]["weights_sqnr_db"]):
    c = W[s]
    print(f"{s:26s}{FAMILY[s][:21]:22s}{c['weights_bits_per_weight']:7.3f}{c['weights_sqnr_db']:9.2f}"
          f"{c['kl_mean']:11.2e}{c['kl_p99']:10.2e}{c['top1_agreement']:8.2%}{c['perplexity_ratio']:11.4f}"
          f"  {applied_text(s)}")
""")

md(r"""
The table is sorted by SQNR. Does KLD follow that order? The cell below measures it three ways:

* **Spearman's rank correlation** between the SQNR order (best first: highest SQNR) and the KLD
  order (best first: lowest KLD), and the same against top-1 (highest first). 1 means the proxy
  ranks the formats exactly as the model does. Ranks are computed with NumPy (ties share their
  mean rank), ρ is the Pearson correlation of the ranks.
* **The pairs the proxy gets wrong** (discordant pairs: higher SQNR but higher KLD), with their
  SQNR gap. To tell a real swap from noise in a 2,048-position estimate, the same candidates
  are run on a second, independent token set (seed 1), and each swap is marked as holding there
  or not.

All three use the candidates that apply their own type to every matrix (the fallbacks and the
mixes follow in the next cell).
* **A fit of log10 KLD against SQNR.** For small errors KLD is quadratic in the logit error,
  which is linear in the weight error, so KLD should scale like the error power, 10^(−SQNR/10):
  a slope of −0.1 per dB.
""")

code(r"""
def ranks(x):
    # 1-based ranks of x, ascending; ties get the mean of the ranks they span
    x = np.asarray(x, dtype=np.float64)
    order = np.argsort(x, kind="stable")
    r = np.empty(len(x))
    r[order] = np.arange(1, len(x) + 1)
    for v in np.unique(x):
        tie = x == v
        r[tie] = r[tie].mean()
    return r

def spearman(a, b):
    return float(np.corrcoef(ranks(a), ranks(b))[0, 1])

def discordant(names, proxy, target):
    # pairs ordered one way by `proxy` (higher is better) and the other by `target` (lower is better)
    return [(a, b) for i, a in enumerate(names) for b in names[i + 1:]
            if (proxy[a] - proxy[b]) * (target[a] - target[b]) > 0]

t = time.perf_counter()
EV1 = lowp.eval(sample="16:128", seed=1, weights=SCHEMES)
t_ev1 = time.perf_counter() - t
W1 = {c["label"]: c for c in EV1["candidates"]}
print(f"second token set: {EV1['tokens']} ({t_ev1:.1f} s)")

SQNR = {s: W[s]["weights_sqnr_db"] for s in SCHEMES}
RHO = {}
print(f"over the {len(NATIVE)} candidates that apply their own type:")
for name, ev in (("seed 0", W), ("seed 1", W1)):
    kl = [ev[s]["kl_mean"] for s in NATIVE]
    top1 = [ev[s]["top1_agreement"] for s in NATIVE]
    sq = [SQNR[s] for s in NATIVE]
    RHO[name] = (spearman(sq, -np.array(kl)), spearman(sq, top1))
    print(f"tokens {name}: Spearman rho, SQNR order vs KLD order {RHO[name][0]:+.3f}, "
          f"vs top-1 order {RHO[name][1]:+.3f}")
rho_kl_sets = spearman([W[s]["kl_mean"] for s in NATIVE], [W1[s]["kl_mean"] for s in NATIVE])
print(f"KLD order on seed 0 vs seed 1 (the measurement's own repeatability): {rho_kl_sets:+.3f}")

KL0 = {s: W[s]["kl_mean"] for s in SCHEMES}
KL1 = {s: W1[s]["kl_mean"] for s in SCHEMES}
SWAPS = discordant(NATIVE, SQNR, KL0)
npairs = len(NATIVE) * (len(NATIVE) - 1) // 2
print(f"\ndiscordant pairs (higher SQNR, higher KLD) on seed 0: {len(SWAPS)} of {npairs}")
print(f"  {'higher SQNR':20s}{'lower SQNR':20s}{'dSQNR dB':>9s}{'KLD ratio':>11s}  on seed 1")
for a, b in sorted(SWAPS, key=lambda p: SQNR[p[0]] - SQNR[p[1]]):
    if SQNR[a] < SQNR[b]:
        a, b = b, a
    holds = (KL1[a] > KL1[b])
    print(f"  {a:20s}{b:20s}{SQNR[a] - SQNR[b]:9.2f}{KL0[a] / KL0[b]:11.3f}  "
          f"{'holds' if holds else 'reverses'} (ratio {KL1[a] / KL1[b]:.3f})")
STABLE_SWAPS = [(a, b) for a, b in SWAPS if (KL1[a] - KL1[b]) * (SQNR[a] - SQNR[b]) > 0]
gap = max((abs(SQNR[a] - SQNR[b]) for a, b in SWAPS), default=0.0)
print(f"every discordant pair is within {gap:.2f} dB of SQNR; {len(STABLE_SWAPS)} hold on the second token set")

sq = np.array([SQNR[s] for s in NATIVE])
slope, icpt = np.polyfit(sq, np.log10([KL0[s] for s in NATIVE]), 1)
resid = np.log10([KL0[s] for s in NATIVE]) - (icpt + slope * sq)
print(f"\nfit log10 KLD = {icpt:.2f} {slope:+.4f} * SQNR_dB: slope {slope:+.4f} per dB "
      f"(error-power law: -0.1000); residuals within a factor {10 ** np.abs(resid).max():.2f} of the line")
worst = NATIVE[int(np.argmax(np.abs(resid)))]
print(f"farthest from the line: {worst} (KLD {10 ** resid[int(np.argmax(np.abs(resid)))]:.2f}x the fit)")
""")

code(r"""
# The fallbacks and the mixes beside the candidates that apply their own type
fit = lambda q: 10 ** (icpt + slope * q)
print(f"{'candidate':10s}{'applied (matrices)':32s}{'b/w':>7s}{'SQNR dB':>9s}{'KLD mean':>11s}{'top-1':>8s}"
      f"{'KLD / fit':>11s}")
for s in SUPER + MIXES:
    c = W[s]
    print(f"{s:10s}{applied_text(s):32s}{c['weights_bits_per_weight']:7.3f}{SQNR[s]:9.2f}{KL0[s]:11.2e}"
          f"{c['top1_agreement']:8.2%}{KL0[s] / fit(SQNR[s]):11.2f}")
resid_other = np.log10([KL0[s] / fit(SQNR[s]) for s in SUPER + MIXES])
print(f"all {len(SUPER + MIXES)} within a factor {10 ** np.abs(resid_other).max():.2f} of the fit to the "
      f"{len(NATIVE)} others (those: {10 ** np.abs(resid).max():.2f})")
same = W["q2_K"]["kl_mean"] == W["q3_K"]["kl_mean"]
print(f"q2_K and q3_K give the same model (q4_0 and f16 for both): {same}")
more = sorted(n for (m, n), t_ in MIX_TYPE.items() if m == "Q4_K_M" and "v_proj" in n and t_ == "q8_0")
print(f"Q4_K_M's own choices: embedding {MIX_TYPE[('Q4_K_M', 'model.embed_tokens.weight')]}, lm_head "
      f"{MIX_TYPE[('Q4_K_M', 'lm_head.weight')]}, q8_0 for {', '.join(n.split('.')[2] for n in more)}'s v_proj "
      f"(use_more_bits)")
print(f"Q4_K_M vs q4_K (the same default, q4_K, falling back alike): KLD {KL0['Q4_K_M']:.2e} vs {KL0['q4_K']:.2e}, "
      f"{W['Q4_K_M']['weights_bits_per_weight']:.3f} vs {W['q4_K']['weights_bits_per_weight']:.3f} b/w")
print(f"Q8_0 vs q8_0 (the mix also quantizes embedding and lm_head, and stores down_proj in f16): "
      f"KLD {KL0['Q8_0']:.2e} vs {KL0['q8_0']:.2e}")
""")

md(r"""
The fallbacks and the mixes (open markers in the figure below) are other mixtures of the legacy
types and f16, and they fall on the same line as the rest: each within a factor 1.16 of the fit
to the 23 candidates that apply their own type (which lie within a factor 1.30 of it). What they
measure is llama.cpp's fallback on this model, not the k-quants:

* q4_K is q5_0 on 30 matrices and f16 on the 5 `down_proj`, at 8.051 bits per weight (q5_0 alone:
  5.655); q2_K and q3_K give the same model (q4_0 and f16); q6_K (q8_0 and f16) has a lower KLD
  than q8_0 alone (2.36e-04 against 2.98e-04) because its `down_proj` stays f16.
* Q4_K_M is not a 4-bit model here: q5_0 on 29 matrices (the embedding among them), q8_0 on 3
  (lm_head and the v_proj of layers 2 and 4), f16 on the 5 `down_proj`, 7.857 bits per weight in
  all, and a KLD (1.61e-02) close to q4_K's fallback (1.58e-02). Q8_0's KLD (3.46e-04) is above
  q8_0's (2.98e-04) although its `down_proj` is f16, since it quantizes the embedding and lm_head
  as well.

A model whose rows are multiples of 256 gets the k-quants themselves; `quantization_error.ipynb`
measures them on this model's values laid out in rows of 256.
""")

code(r"""
# Colour groups: the llama.cpp families in five, by kind of format
LLAMA_GROUPS = {"llama.cpp legacy (q8_0 q5_x q4_x)": ("q8_0", "q5_0", "q5_1", "q4_0", "q4_1"),
                "llama.cpp k-quants (q2_K..q6_K)*": ("q2_K", "q3_K", "q4_K", "q5_K", "q6_K"),
                "llama.cpp iq4 (iq4_nl, iq4_xs*)": ("iq4_nl", "iq4_xs"),
                "ggml FP4 (ggml-mxfp4 ggml-nvfp4)": ("ggml-mxfp4", "ggml-nvfp4"),
                "llama.cpp mixes (Q4_K_M Q8_0)*": tuple(MIXES)}
def group(s):
    if not FAMILY[s].startswith("llama.cpp"):
        return FAMILY[s]
    return next(g for g, members in LLAMA_GROUPS.items() if s in members)
COLOURS = list(plt.cm.tab10.colors) + [plt.cm.Dark2.colors[5], plt.cm.Dark2.colors[6], (0.0, 0.0, 0.0),
           plt.cm.Dark2.colors[7]]
GROUP_STYLE = {}
for s in SCHEMES:
    g = group(s)
    if g not in GROUP_STYLE:
        k = len(GROUP_STYLE)
        GROUP_STYLE[g] = (COLOURS[k], "o^vDsPX*hp<>dH"[k])

def style(s):
    return GROUP_STYLE[group(s)]

def scatter(ax, s, x, y):
    # open markers: a fallback or a mix (not in the fit)
    c, m = style(s)
    if s in NATIVE:
        ax.scatter(x, y, color=c, marker=m, s=40, zorder=3)
    else:
        ax.scatter(x, y, facecolor="white", edgecolor=c, marker=m, s=40, linewidth=1.3, zorder=3)

LABEL = lambda s: s if s in NATIVE else s + "*"

OFFSETS = [(5, 2), (5, -9), (5, 11), (5, -19), (-5, 2), (-5, -9), (5, 21), (5, -29), (-5, 12), (-5, -19)]

def place_labels(ax, points, renderer):
    # each label right of (or left of) its point, at the first offset that overlaps no other label
    placed = []
    for name, x, y in sorted(points, key=lambda p: -p[2]):
        for dx, dy in OFFSETS:
            lead = None if (dx, dy) == OFFSETS[0] else {"arrowstyle": "-", "color": "0.6", "lw": 0.5}
            t = ax.annotate(name, (x, y), xytext=(dx, dy), textcoords="offset points", fontsize=7,
                            ha="left" if dx > 0 else "right", va="center", arrowprops=lead)
            box = t.get_window_extent(renderer)
            if not any(box.overlaps(b) for b in placed):
                placed.append(box)
                break
            t.remove()
        else:
            placed.append(ax.annotate(name, (x, y), xytext=(5, 2), textcoords="offset points",
                                      fontsize=7).get_window_extent(renderer))

ZOOMS = [(18.0, 23.0), (25.0, 34.0)]  # SQNR ranges where the 4-bit and the 5-8-bit points crowd
fig, axes = plt.subplots(2, 2, figsize=(13, 9.5))
ax0, ax1, zoom4, zoom8 = axes.ravel()
xs = np.linspace(sq.min() - 2, sq.max() + 2, 50)
for ax in (ax0, zoom4, zoom8):
    ax.plot(xs, 10 ** (icpt + slope * xs), color="0.6", lw=1, ls="--",
            label=f"fit: slope {slope:+.3f} per dB (error power: -0.1)")
for s in SCHEMES:
    for ax in (ax0, zoom4, zoom8):
        scatter(ax, s, SQNR[s], KL0[s])
    scatter(ax1, s, SQNR[s], 100 * W[s]["top1_agreement"])
for ax in (ax0, zoom4, zoom8):
    ax.set_yscale("log")
    ax.set_xlabel("SQNR of the quantized matrices (dB)")
    ax.set_ylabel("mean KL divergence from float32 (nats, log scale)")
for ax, (lo, hi) in zip((zoom4, zoom8), ZOOMS):
    inside = [KL0[s] for s in SCHEMES if lo <= SQNR[s] <= hi]
    ax.set_xlim(lo, hi)
    ax.set_ylim(min(inside) / 1.25, max(inside) * 1.25)
    ax0.add_patch(plt.Rectangle((lo, min(inside) / 1.25), hi - lo, max(inside) * 1.25 - min(inside) / 1.25,
                                fill=False, ec="0.4", lw=0.8, ls=":"))
    ax.set_title(f"KLD against SQNR, zoom on {lo:g}-{hi:g} dB", fontsize=9)
ax0.set_title(f"Tensor proxy vs model: Spearman rho (SQNR order, KLD order) {RHO['seed 0'][0]:+.3f}", fontsize=9)
ax1.set_xlabel("SQNR of the quantized matrices (dB)")
ax1.set_ylabel("top-1 agreement with float32 (%)")
ax1.set_title(f"Top-1 agreement: Spearman rho (SQNR order, top-1 order) {RHO['seed 0'][1]:+.3f}", fontsize=9)
handles = [plt.Line2D([], [], color=c, marker=m, ls="", label=g) for g, (c, m) in GROUP_STYLE.items()]
handles.append(plt.Line2D([], [], color="0.4", marker="o", markerfacecolor="white", ls="",
                          label="* open: a fallback or a mix (see the table), not in the fit"))
fig.legend(handles=handles + ax0.get_legend_handles_labels()[0][:1], fontsize=7, ncol=4, loc="upper center",
           bbox_to_anchor=(0.5, 0.0))
for ax in axes.ravel():
    ax.grid(alpha=0.3)
fig.suptitle(f"stories260K-hf, weights quantized, {EV['positions']} positions: SQNR against KLD and top-1", y=1.0)
fig.tight_layout()
renderer = fig.canvas.get_renderer()
outside = lambda s: not any(lo <= SQNR[s] <= hi for lo, hi in ZOOMS)
place_labels(ax0, [(LABEL(s), SQNR[s], KL0[s]) for s in SCHEMES if outside(s)], renderer)
place_labels(ax1, [(LABEL(s), SQNR[s], 100 * W[s]["top1_agreement"]) for s in SCHEMES], renderer)
for ax, (lo, hi) in zip((zoom4, zoom8), ZOOMS):
    place_labels(ax, [(LABEL(s), SQNR[s], KL0[s]) for s in SCHEMES if lo <= SQNR[s] <= hi], renderer)
fig.savefig("figures/end_to_end.png", dpi=100, bbox_inches="tight", pil_kwargs={"optimize": True})
plt.show()
""")

md(r"""
What the measurement says (the numbers are the ones printed above):

* **SQNR is a good proxy for ranking weight formats on this model.** The rank correlations
  are close to 1 on both token sets, and close to the repeatability of the KLD ranking itself
  (the seed 0 against seed 1 line). On a log axis KLD falls on one line over more than five
  decades, with a slope near the −0.1 per dB of the error-power law: every 10 dB of weight SQNR
  buys about a factor of ten in KLD, whatever the family.
* **Where it fails, the formats are close in SQNR.** The discordant pairs are listed with their
  SQNR gap; a swap that reverses on the second token set is within the noise of a 2,048-position
  estimate, one that holds is a real difference that the tensor proxy does not see (for instance how
  the error is spread over rows and layers, which its total does not capture).
* Top-1 agreement ranks the same way but saturates: near the top it only counts the few
  positions whose leading tokens are nearly tied.
""")

md(r"""
## 2. KV cache: fp8 and int8

`kv` quantizes every key (after RoPE) and value vector as the cache stores it, one row per token
and KV head: a row is `head_dim` = 8 values here. So `int8-channel` is one scale per stored
vector, and a group larger than the row falls back to the row: `int4-g128`, `int4-g8` and
`int4-channel` are the same scheme on this cache, which the cell checks. Weights stay float32.
""")

code(r"""
KV = ["none", "fp16", "bf16", "fp8_e4m3fn", "fp8_e5m2", "fp8_e4m3fn-channel", "int8-channel",
      "int4-g128", "int4-g8", "int4-channel", "int4-g2"]
t = time.perf_counter()
EKV = lowp.eval(tokens=TOKENS, kv=KV)
KVR = {c["kv"] or "none": c for c in EKV["candidates"]}
print(f"head_dim {EKV['model_config']['head_dim']}, {EKV['model_config']['num_kv_heads']} KV heads; "
      f"{len(KV)} candidates in {time.perf_counter() - t:.1f} s")
same = all(KVR[s][k] == KVR["int4-g128"][k] for s in ("int4-g8", "int4-channel")
           for k in ("kl_mean", "top1_agreement", "perplexity"))
print(f"int4-g128, int4-g8 and int4-channel identical on 8-value rows: {same}")
assert same
print()
print(f"{'kv cache':20s}{'KLD mean':>11s}{'KLD p99':>10s}{'top-1':>8s}{'PPL':>8s}{'PPL ratio':>11s}")
for s in KV:
    c = KVR[s]
    print(f"{s:20s}{c['kl_mean']:11.2e}{c['kl_p99']:10.2e}{c['top1_agreement']:8.2%}{c['perplexity']:8.4f}"
          f"{c['perplexity_ratio']:11.4f}")
kv8 = min(("fp8_e4m3fn", "fp8_e5m2", "fp8_e4m3fn-channel", "int8-channel"), key=lambda s: KVR[s]["kl_mean"])
print(f"\nbest 8-bit cache: {kv8}; fp8_e4m3fn cast / int8-channel KLD: "
      f"{KVR['fp8_e4m3fn']['kl_mean'] / KVR['int8-channel']['kl_mean']:.1f}x")
print(f"int4 with one scale per 8-value vector: perplexity x{KVR['int4-g128']['perplexity_ratio']:.2f}; "
      f"with a scale per 2 values (int4-g2, 12 bits per value with the fp16 scales): "
      f"x{KVR['int4-g2']['perplexity_ratio']:.2f}")
""")

md(r"""
* **int8 with one scale per stored vector is the best 8-bit cache here**, well ahead of either
  fp8 cast: int8 resolves 1/127 of the vector's largest value everywhere, e4m3 about 1/16 of
  each value (3 mantissa bits), which is coarser for all but the smallest entries of a vector.
  fp8_e5m2 (2 mantissa bits) is several times worse than e4m3; giving e4m3 a scale per vector
  (`fp8_e4m3fn-channel`) helps it, but it stays behind int8.
* **A 4-bit cache is not usable on this model**: the perplexity ratio is printed above, and the
  KLD is several times that of the same int4 scheme on the weights (section 1). Even a scale for
  every pair of values (int4-g2, which stores more bits than int8) stays far behind int8.
* 16 bits are free: fp16 and bf16 caches add a KLD below 1e-4.
""")

md(r"""
## 3. W8A8: weights and activations together

`activations` quantizes the input rows of every linear layer of the decoder layers, one row per
token, so `int8-channel` is dynamic per-token absmax int8 (a scale per token, computed at run
time) and `fp8_e4m3fn-channel` the same with e4m3; `mxfp8` takes blocks of 32 along the reduction
dimension. Plain `int8` and `fp8_e4m3fn-tensor` take one scale per call, here per sequence.
Crossed with the weights as float32, int8 per row and fp8 per row. If the two errors are small
and independent their KLDs add; the last column compares the joint KLD with that sum.
""")

code(r"""
WQ = ["none", "int8-channel", "fp8_e4m3fn-channel"]
AQ = ["none", "int8-channel", "fp8_e4m3fn-channel", "mxfp8", "int8", "fp8_e4m3fn-tensor"]
t = time.perf_counter()
EWA = lowp.eval(tokens=TOKENS, weights=WQ, activations=AQ)
WA = {(c["weights"] or "none", c["activations"] or "none"): c for c in EWA["candidates"]}
assert len(WA) == len(WQ) * len(AQ)
print(f"{len(WA)} candidates in {time.perf_counter() - t:.1f} s")
print()
print(f"{'weights':20s}{'activations':20s}{'KLD mean':>11s}{'top-1':>8s}{'PPL ratio':>11s}{'joint / sum':>13s}")
for w in WQ:
    for a in AQ:
        c = WA[(w, a)]
        add = ""
        if w != "none" and a != "none":
            add = f"{c['kl_mean'] / (WA[(w, 'none')]['kl_mean'] + WA[('none', a)]['kl_mean']):13.2f}"
        print(f"{w:20s}{a:20s}{c['kl_mean']:11.2e}{c['top1_agreement']:8.2%}{c['perplexity_ratio']:11.4f}{add}")
w8a8 = WA[("int8-channel", "int8-channel")]
f8f8 = WA[("fp8_e4m3fn-channel", "fp8_e4m3fn-channel")]
print(f"\nW8A8 int8 (per row, per token): KLD {w8a8['kl_mean']:.2e}, top-1 {w8a8['top1_agreement']:.2%}, "
      f"perplexity x{w8a8['perplexity_ratio']:.4f}")
print(f"W8A8 fp8 e4m3 (per row, per token): KLD {f8f8['kl_mean']:.2e}, top-1 {f8f8['top1_agreement']:.2%}, "
      f"perplexity x{f8f8['perplexity_ratio']:.4f}; {f8f8['kl_mean'] / w8a8['kl_mean']:.1f}x int8's KLD")
print(f"activations alone: int8 per token {WA[('none', 'int8-channel')]['kl_mean']:.2e} vs weights alone "
      f"int8-channel {WA[('int8-channel', 'none')]['kl_mean']:.2e}")
""")

md(r"""
* **Per-token int8 activations cost more than int8 weights** on this model (activations alone vs
  weights alone above), and W8A8 int8 is close to the sum of the two: the errors add, as
  independent small perturbations should (joint / sum near 1).
* **fp8 e4m3 for both is about an order of magnitude worse than int8 for both**, the same 3-mantissa-bit limit
  as for the weights and the cache; with int8 weights the activation format dominates.
* One scale per sequence (`int8`, `fp8_e4m3fn-tensor`) is worse than one per token for int8; e4m3
  cares less where its scale sits, since its relative error hardly depends on the magnitude.
""")

md(r"""
## 4. fp16 compute: the census

`compute` rounds every matrix product's output and every elementwise result (each *site* of the
forward pass: embedding, norms, projections, RoPE, scores, softmax, residual adds, ...) to a
float format, nearest even, with the format's own overflow rule (fp16: to inf). The census
counts, per site, the values produced, those that **overflowed** (finite before rounding, inf
after), **saturated** (stored as the largest finite), were **flushed** (nonzero, rounded to
zero) and the **nonfinite** ones after the site whatever the cause. Weights are float32.
""")

code(r"""
COLUMNS = ("overflow", "saturated", "flushed", "nonfinite")

def census_table(cands, w=11):
    # one row per site with any event in any candidate; the candidates' counts side by side
    sites = list(cands[0]["census"])
    print(f"{'site':13s}{'values':>11s}" + "".join(f" |{'compute=' + c['compute']:^{4 * w}s}" for c in cands))
    print(f"{'':24s}" + "".join(" |" + "".join(f"{k:>{w}s}" for k in COLUMNS) for c in cands))
    quiet = []
    for site in sites:
        rows = [c["census"][site] for c in cands]
        if not any(r[k] for r in rows for k in COLUMNS):
            quiet.append(site)
            continue
        print(f"{site:13s}{rows[0]['values']:>11,}" + "".join(
            " |" + "".join(f"{r[k]:>{w},}" for k in COLUMNS) for r in rows))
    print(f"no event at any of: {', '.join(quiet)}")

t = time.perf_counter()
ECP = lowp.eval(tokens=TOKENS, compute=["fp16", "bf16"])
CP = {c["compute"]: c for c in ECP["candidates"]}
print(f"2 candidates in {time.perf_counter() - t:.1f} s")
census_table([CP["fp16"], CP["bf16"]])
print()
for f, c in CP.items():
    tot = {k: sum(v[k] for v in c["census"].values()) for k in COLUMNS}
    sm = c["census"]["softmax"]
    print(f"{f}: KLD {c['kl_mean']:.2e}, top-1 {c['top1_agreement']:.2%}, perplexity x{c['perplexity_ratio']:.5f}; "
          f"overflow {tot['overflow']}, nonfinite positions {c['nonfinite_positions']}; "
          f"softmax flushed {sm['flushed']:,} of {sm['values']:,} ({sm['flushed'] / sm['values']:.1%}), "
          f"all other sites {tot['flushed'] - sm['flushed']}")
""")

md(r"""
* **Nothing overflows in fp16 on this model**, at any site; neither format produces a nonfinite
  value.
* **Flushes are almost all attention probabilities.** fp16's smallest subnormal is 2^−24, so
  every probability below about 3·10^−8 becomes 0: a large share of the softmax outputs, since a
  query attends to most of its earlier positions with a tiny weight. They contribute nothing a
  sum of fp16 values could keep, and the KLD shows it: fp16 compute is far below bf16 compute,
  whose 8-bit significand costs more than all of fp16's flushes. bf16 flushes only probabilities
  below its (fp32-like) subnormal range.

So the interesting fp16 question, overflow, does not arise on stories260K. It does on real LLMs,
whose residual streams carry values in the thousands. The next cell makes such a model from
this one, exactly.
""")

md(r"""
### What a power-of-two scale fixes

The residual stream is written by three matrices: the embedding, each layer's `o_proj` and each
layer's `down_proj`. Multiplying all three by 2^s multiplies the whole residual stream by 2^s,
**exactly** in float32 (a power of two changes only exponents, so every sum and product rounds
the same way), and every RMSNorm divides it out again: `x / sqrt(mean(x²) + eps)`, where only
`eps` (1e-5) does not scale. Every other site (norm outputs, q/k/v, scores, softmax, the MLP's
inside) is unchanged. So the copies below are the same float32 model with a residual stream
2^s times larger: the first columns check that against the original's logits (`lowp.forward`),
then fp16 and bf16 compute run on each copy against its own float32 reference.

The first s at which a site overflows brackets its largest |value| in the original model:
fp16 rounds to inf from 65520 = 65504 + half a step, so max |x| lies in
[65520 · 2^−s, 65520 · 2^−(s−1)). After the first inf, NaN spreads through the layers, so counts
at larger s show propagation, not range.
""")

code(r"""
def write_safetensors(path, tensors):
    # safetensors: 8-byte LE header length, JSON header padded to 8 bytes, little-endian F32 data
    header, blobs, offset = {"__metadata__": {"format": "pt"}}, [], 0
    for name, array in tensors.items():
        data = np.ascontiguousarray(array, dtype="<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(array.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for data in blobs:
            f.write(data)

def model_copy(name, tensors):
    # a Hugging Face directory beside the bundled one's config.json, under a temporary directory
    d = os.path.join(SCRATCH.name, name)
    os.makedirs(d, exist_ok=True)
    shutil.copy(os.path.join(MODEL, "config.json"), d)
    write_safetensors(os.path.join(d, "model.safetensors"), tensors)
    return d

SCRATCH = tempfile.TemporaryDirectory(prefix="lowp_end_to_end_")
ORIG = lowp.read_tensors(os.path.join(MODEL, "model.safetensors"))
RESIDUAL_WRITERS = [n for n in ORIG if n == "model.embed_tokens.weight" or n.endswith(("o_proj.weight", "down_proj.weight"))]
LOGITS0 = lowp.forward(MODEL, TOKENS)
print(f"{len(RESIDUAL_WRITERS)} matrices scaled: the embedding, 5 o_proj, 5 down_proj")

SCALES = [0, 4, 8, 10, 11, 12, 13, 14, 15, 16, -4, -8]
SWEEP = {}
t = time.perf_counter()
for s in SCALES:
    f = np.float32(2.0 ** s)
    d = model_copy(f"residual_x2^{s}", {n: (a * f if n in RESIDUAL_WRITERS else a) for n, a in ORIG.items()})
    logits = lowp.forward(d, TOKENS)
    ev = lowp.eval(model=d, tokens=TOKENS, compute=["fp16", "bf16"])
    SWEEP[s] = {"logit_diff": float(np.abs(logits - LOGITS0).max()),
                "fp16": ev["candidates"][0], "bf16": ev["candidates"][1]}
print(f"{len(SCALES)} scaled copies, forward + eval each, in {time.perf_counter() - t:.1f} s")

def fmt_kl(c):
    return f"{c['kl_mean']:9.2e}" if c["kl_mean"] is not None else f"{'NaN':>9s}"

print()
print(f"{'s':>4s}{'max |dlogit|':>14s}  | fp16:{'KLD':>6s}{'top-1':>8s}{'NaN pos.':>9s}  {'overflow by site':52s}"
      f" | bf16:{'KLD':>6s}{'overflow':>9s}")
for s in SCALES:
    r = SWEEP[s]
    f16, b16 = r["fp16"], r["bf16"]
    ov = ", ".join(f"{k} {v['overflow']}" for k, v in f16["census"].items() if v["overflow"]) or "none"
    print(f"{s:>4d}{r['logit_diff']:14.2e}  | {fmt_kl(f16):>9s}{f16['top1_agreement']:8.2%}"
          f"{f16['nonfinite_positions']:>9d}  {ov:52s} | {fmt_kl(b16):>9s}"
          f"{sum(v['overflow'] for v in b16['census'].values()):>9d}")
""")

code(r"""
UP = sorted(s for s in SCALES if s >= 0)
first = {}
for s in UP:
    for site, v in SWEEP[s]["fp16"]["census"].items():
        if v["overflow"] and site not in first:
            first[site] = s
clean = [s for s in UP if SWEEP[s]["fp16"]["nonfinite_positions"] == 0
         and not any(v["overflow"] for v in SWEEP[s]["fp16"]["census"].values())]
S_MAX = max(clean)
S_BAD = min(s for s in UP if s > S_MAX)
print(f"fp16 compute is overflow-free up to s = {S_MAX}; at s = {S_BAD} the first sites overflow: "
      + ", ".join(f"{k}" for k, v in first.items() if v == S_BAD))
print("largest |x| per site in the original model, from the first scale at which it overflows:")
for site, s in sorted(first.items(), key=lambda kv: kv[1]):
    # an overflow is a finite value >= 65520 * 2^-s: a lower bound always; the upper bound needs the
    # site fully observed at s - 1 (no NaN upstream): true up to S_MAX, and always for the embedding
    upper = s - 1 if (s - 1 <= S_MAX or site == "embedding") else S_MAX
    note = "" if upper == s - 1 else f"  (NaN had spread at s = {S_MAX + 1}..{s - 1}: upper bound from s = {S_MAX})"
    print(f"  {site:12s} first overflow at s = {s:2d}: max |x| in [{65520 * 2.0 ** -s:.3g}, "
          f"{65520 * 2.0 ** -upper:.3g}){note}")
used = np.unique(TOKENS)
emb = float(np.abs(ORIG["model.embed_tokens.weight"][used]).max())
print(f"check, the embedding rows of the {used.size} token ids in the set: max |x| = {emb:.4f}")
print(f"headroom: the residual stream can grow {2 ** S_MAX}x (2^{S_MAX}) before fp16 overflows")
bad = SWEEP[S_BAD]["fp16"]
print(f"at s = {S_BAD}: fp16 has {bad['nonfinite_positions']} positions with a NaN/inf logit of "
      f"{EV['positions']}, top-1 {bad['top1_agreement']:.2%}; bf16 KLD {SWEEP[S_BAD]['bf16']['kl_mean']:.2e} "
      f"(at s = 0: {CP['bf16']['kl_mean']:.2e})")
fix = S_BAD - S_MAX
print(f"the fix for a model with s = {UP[-1]}: fold 2^-{UP[-1] - S_MAX} (or more) into the three matrix kinds; "
      f"at s = {S_MAX} fp16 KLD is {SWEEP[S_MAX]['fp16']['kl_mean']:.2e}, at s = 0 {CP['fp16']['kl_mean']:.2e}")
print(f"scaling down is not free here: at s = -4 and -8 eps no longer vanishes beside mean(x^2) and the "
      f"float32 logits move by {SWEEP[-4]['logit_diff']:.2g} and {SWEEP[-8]['logit_diff']:.3g}")
""")

md(r"""
* **Which sites overflow**: the residual stream and the projection that writes into it the
  largest values (`residual`, `down_proj`) overflow first; the embedding, whose rows are small,
  only at a larger s (its bracket agrees with the largest embedding value, computed
  directly). The norm outputs, q/k/v, scores, softmax and the MLP's inside do not change with s
  and never overflow.
* **One overflow is enough to ruin the output.** At the first bad scale a fraction of the
  positions get a NaN logit; one step further every position does, while bf16, with fp32's
  exponent range, gives about the same KLD at every s.
* **What the power-of-two scale fixes**: the float32 model is the same at every s ≥ 0 (the
  logit differences above are eps's, a few 1e-3, the same from s = 8 on), so the scale costs
  nothing and moves fp16's window to wherever the values are. A model that overflows at s = 16
  is repaired by dividing the residual writers by 2^(16 − s_max) or more, found from the census;
  inside the window fp16's KLD is essentially unchanged, because fp16's relative precision is the same at
  every normal magnitude.
* **It does not fix the other end**: scaling the residual stream down is bounded by RMSNorm's
  eps (the float32 model itself changes), not by fp16's subnormals. The softmax flushes are not
  a scale problem at all; they are probabilities that contribute nothing.
* The emulation rounds each site's output. A kernel that accumulates x² for the norm in fp16
  would overflow well before the residual itself does; the census does not model that.
""")

md(r"""
## 5. Stories

`lowp.sample` samples the float32 model (incrementally, on a KV cache). A weight format is
sampled by writing a copy of the model whose 35 linear layers are replaced by
`lowp.quantize(matrix, scheme)` (the same matrices `weights=scheme` replaces; the cell checks
that the copy's float32 perplexity equals the candidate's in `lowp.eval`). The draws come from a
generator keyed by (seed, sequence, position), so every format samples with the *same* random
numbers: a story stays the reference's token for token until the format's distribution moves a
draw into a different token, and the first such position is printed.

The tokens are decoded with llama2.c's tokenizer `tok512.bin` (per token a score and a byte
string; after BOS a leading space is dropped, `<0xXX>` is a raw byte; generation stops at the
next BOS, as llama2.c's `run.c` does).
""")

code(r"""
def find_tokenizer():
    # source tree: tests/data/stories260K/tok512.bin beside tests/data/stories260K-hf;
    # installed: share/lowp/tok512.bin beside share/lowp/stories260K-hf
    parent = os.path.dirname(os.path.abspath(MODEL))
    places = [os.path.join(parent, "stories260K", "tok512.bin"), os.path.join(parent, "tok512.bin")]
    if os.environ.get("LOWP_TEST_DATA"):
        places.insert(0, os.path.join(os.environ["LOWP_TEST_DATA"], "stories260K", "tok512.bin"))
    return next(p for p in places if os.path.exists(p))

def load_vocab(path, vocab_size=512):
    # llama2.c: int32 max_token_length, then per token float32 score, int32 length, bytes
    with open(path, "rb") as f:
        data = f.read()
    pos, pieces = 4, []
    for _ in range(vocab_size):
        (n,) = struct.unpack_from("<i", data, pos + 4)
        pieces.append(data[pos + 8:pos + 8 + n])
        pos += 8 + n
    return pieces

def decode(tokens):
    # run.c's decode: tokens[0] is BOS; stop at the next BOS
    out, prev = b"", int(tokens[0])
    for t in tokens[1:]:
        t = int(t)
        if t == 1:
            break
        piece = PIECES[t]
        if prev == 1 and piece.startswith(b" "):
            piece = piece[1:]
        if piece.startswith(b"<0x") and piece.endswith(b">") and len(piece) == 6:
            piece = bytes([int(piece[3:5], 16)])
        out += piece
        prev = t
    return out.decode("utf-8", errors="replace")

TOKENIZER = find_tokenizer()
PIECES = load_vocab(TOKENIZER)
print(f"tokenizer: {os.path.relpath(TOKENIZER, os.path.abspath(MODEL))} (relative to the model directory), "
      f"{len(PIECES)} pieces")

GREEDY = lowp.sample(MODEL, count=1, length=201, temperature=0.0)[0]
text = decode(GREEDY)
assert text.startswith("Once upon a time, there was a little girl named Lily.")  # llama2.c's expected output
print(f"\nfloat32, greedy, 200 tokens:\n{text}")
""")

code(r"""
STORY_SCHEMES = ["bf16", "fp8_e4m3fn", "int8-channel", "q8_0", "mxfp6_e2m3", "q5_0", "q4_0", "nf4",
                 "nvfp4", "int4-g128", "mxfp4"]
STORY_SEED, STORY_COUNT, STORY_LEN = 3, 16, 161  # a third seed: not the evaluation's token sets
COPIES = {}
t = time.perf_counter()
for s in STORY_SCHEMES:
    q = {n: (lowp.quantize(a, s) if n.endswith("_proj.weight") else a) for n, a in ORIG.items()}
    COPIES[s] = model_copy(s, q)
check = lowp.eval(model=COPIES["q4_0"], tokens=TOKENS, weights=["none"])
assert check["perplexity"] == W["q4_0"]["perplexity"], (check["perplexity"], W["q4_0"]["perplexity"])
print(f"{len(COPIES)} quantized copies in {time.perf_counter() - t:.1f} s; the q4_0 copy's float32 perplexity "
      f"{check['perplexity']:.6f} = lowp.eval(weights='q4_0')'s {W['q4_0']['perplexity']:.6f}")

def shared(a, b):
    # generated tokens (after BOS) that b shares with a before the first difference
    d = np.nonzero(a != b)[0]
    return int(d[0]) - 1 if d.size else len(a) - 1

t = time.perf_counter()
STORIES = {"float32": lowp.sample(MODEL, count=STORY_COUNT, length=STORY_LEN, seed=STORY_SEED)}
GREEDIES = {"float32": GREEDY}
for s in STORY_SCHEMES:
    STORIES[s] = lowp.sample(COPIES[s], count=STORY_COUNT, length=STORY_LEN, seed=STORY_SEED)
    GREEDIES[s] = lowp.sample(COPIES[s], count=1, length=201, temperature=0.0)[0]
print(f"{STORY_COUNT} stories of {STORY_LEN - 1} tokens (temperature 1, seed {STORY_SEED}) and the greedy "
      f"story per format in {time.perf_counter() - t:.1f} s; the same draws for every format")
SHARED = {s: np.array([shared(STORIES["float32"][i], STORIES[s][i]) for i in range(STORY_COUNT)])
          for s in STORY_SCHEMES}
print()
print(f"{'':32s}  | generated tokens shared with float32 (of {STORY_LEN - 1})  | greedy")
print(f"{'weights':14s}{'SQNR dB':>8s}{'KLD':>10s}  | {'story 0':>8s}{'median of 16':>14s}{'min':>5s}{'max':>5s}"
      f"{'':12s}  | (of 200)")
for s in STORY_SCHEMES:
    v = SHARED[s]
    print(f"{s:14s}{SQNR[s]:8.2f}{KL0[s]:10.2e}  | {v[0]:>8d}{np.median(v):>14.1f}{v.min():>5d}{v.max():>5d}"
          f"{'':12s}  | {shared(GREEDY, GREEDIES[s]):>8d}")
rho_story = spearman([-KL0[s] for s in STORY_SCHEMES], [np.median(SHARED[s]) for s in STORY_SCHEMES])
print(f"\nSpearman rho, KLD order vs order of the median shared prefix: {rho_story:+.3f}")
med = {s: float(np.median(SHARED[s])) for s in STORY_SCHEMES}
four = [s for s in STORY_SCHEMES if W[s]["weights_bits_per_weight"] < 5]
mid = [s for s in STORY_SCHEMES if 5 <= W[s]["weights_bits_per_weight"] < 9]
print(f"median shared tokens: below 5 bits per weight ({', '.join(four)}) at most {max(med[s] for s in four):.1f}; "
      f"5 to 9 bits ({', '.join(mid)}) at least {min(med[s] for s in mid):.1f}")
""")

code(r"""
for s in ["float32"] + STORY_SCHEMES:
    n = shared(STORIES["float32"][0], STORIES[s][0])
    head = "the reference" if s == "float32" else (
        "identical to float32" if n == STORY_LEN - 1 else f"the first {n} generated tokens are float32's")
    print(f"--- {s} ({head}):")
    print(decode(STORIES[s][0]))
    print()
""")

md(r"""
With shared random numbers a format reproduces the reference story token for token until one
draw lands on a different token; after that it tells a different but equally TinyStories-like
story, so the shared prefix measures how far the distributions moved, not the quality of what
follows. One story is a noisy measure (a single draw near the boundary between two tokens ends
it); the median over 16 stories follows the KLD order (the rank correlation above), the 4-bit
formats keeping fewer of the reference's tokens than any 5- to 8-bit format. At
temperature 1 even bf16, with a KLD of order 1e-5, changes a draw within the first dozens of
tokens in some stories: every draw is a new chance to cross a boundary. The greedy story, with no
randomness, is kept whole by bf16, for a few sentences by the 5- to 8-bit formats and for one or
two by the 4-bit ones.

KV, activation and compute formats cannot be sampled this way (the sampler runs the float32
model), but they can be measured *on* the stories: `lowp.eval` with the greedy story and the 16
float32 stories as the tokens (teacher forcing) gives, for each format, the KLD and the share of
the stories' positions where its top-1 token is the reference's.
""")

code(r"""
STORY_TOKENS = np.concatenate([GREEDY[None, :STORY_LEN], STORIES["float32"]])
OTHER = {
    "kv": ["fp8_e4m3fn", "fp8_e5m2", "int8-channel", "int4-g128"],
    "activations": ["int8-channel", "fp8_e4m3fn-channel", "mxfp8"],
    "compute": ["fp16", "bf16"],
}
t = time.perf_counter()
rows = []
for site, names in OTHER.items():
    rows += lowp.eval(tokens=STORY_TOKENS, **{site: names})["candidates"]
rows += [c for c in lowp.eval(tokens=STORY_TOKENS, weights=["int8-channel", "fp8_e4m3fn-channel"],
                              activations=["int8-channel", "fp8_e4m3fn-channel"])["candidates"]
         if c["weights"] and c["activations"] and c["weights"] == c["activations"]]
rows += lowp.eval(tokens=STORY_TOKENS, weights=STORY_SCHEMES)["candidates"]
print(f"on the greedy story and the 16 sampled float32 stories ({STORY_TOKENS.shape[0]} x {STORY_TOKENS.shape[1]} "
      f"tokens, teacher-forced), {time.perf_counter() - t:.1f} s:")
def on_eval_set(c):
    # the same candidate's result on the evaluation's token set (sections 1 to 4)
    if c["kv"]:
        return KVR[c["kv"]]
    if c["compute"]:
        return CP[c["compute"]]
    if c["activations"]:
        return WA[(c["weights"] or "none", c["activations"])]
    return W[c["weights"]]

print(f"{'format':45s}{'KLD mean':>11s}{'KLD max':>10s}{'top-1':>8s}{'PPL ratio':>11s}{'KLD on eval set':>17s}")
for c in rows:
    print(f"{c['label']:45s}{c['kl_mean']:11.2e}{c['kl_max']:10.2e}{c['top1_agreement']:8.2%}"
          f"{c['perplexity_ratio']:11.4f}{on_eval_set(c)['kl_mean']:17.2e}")
rho_sets = spearman([c["kl_mean"] for c in rows], [on_eval_set(c)["kl_mean"] for c in rows])
print(f"Spearman rho of the {len(rows)} formats' KLD, stories vs evaluation set: {rho_sets:+.3f}")
""")

md(r"""
## Summary

* **Weights**: on stories260K the tensor SQNR ranks the 23 schemes that apply their own type
  (every family but the super-block types and the mixes) nearly as the model's KLD does (rank
  correlations printed in section 1), and KLD follows the error power, about a factor of ten per
  10 dB of SQNR. The few pairs it orders wrongly are close in SQNR (the gap is printed in
  section 1). The k-quants and iq4_xs cannot apply to this model's 64- and 172-value rows; their
  fallbacks (legacy types and f16) and the Q4_K_M and Q8_0 mixes lie on the same line.
* **KV cache**: int8 with a scale per stored vector is the best 8-bit cache, well ahead of the
  fp8 casts; 4-bit caches break the model.
* **W8A8**: the weight and activation KLDs add; per-token int8 activations cost more than int8
  weights, and fp8 for both costs about ten times int8's KLD.
* **fp16 compute**: no site overflows on this model; nearly all flushes are negligible attention
  probabilities, and fp16 compute is far closer to float32 than bf16 compute. A float32-exact
  power-of-two scale of the residual stream shows the headroom (the residual adds and
  down_proj overflow first) and is exactly what moves an overflowing model back into fp16's range.
* **Stories**: with shared random draws, a weight format follows the reference story for a
  stretch that shrinks as its KLD grows (over 16 stories; a single story is noisy); on the
  stories, KV, activation and compute formats rank as on the evaluation's token set.
""")

code(r"""
SCRATCH.cleanup()
print(f"notebook ran in {time.perf_counter() - T_START:.1f} s")
""")


main("end_to_end.ipynb")
