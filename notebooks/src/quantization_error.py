"""Builds notebooks/quantization_error.ipynb (without outputs).

    cd notebooks && /usr/bin/python3 src/quantization_error.py
    PYTHONPATH=<lowp python package> jupyter nbconvert --to notebook --execute --inplace quantization_error.ipynb
"""
from nbbuild import code, main, md

md(r"""
# Quantization error of every scheme family: SQNR against bits per weight

How much precision does each weight quantization scheme lose, and what does each bit of storage
buy? This notebook quantizes two data sets with a representative set of `lowp`'s schemes (at
least one of every family in `lowp.schemes()`: plain casts, symmetric and asymmetric integers per
tensor, row and group, MSE-clipped integers, scaled FP8, OCP MX, NVFP4, bitsandbytes NF4,
llama.cpp's legacy types q8_0/q5_1/q5_0/q4_1/q4_0, its k-quants q2_K to q6_K, iq4_nl and iq4_xs, ggml's
own MXFP4 and NVFP4, and llama-quantize's per-tensor mixes such as Q4_K_M) and measures the error of each with `lowp.quant_error`: the
bundled stories260K checkpoint (a real, small Llama) and a seeded Gaussian matrix of the shape and
scale of an LLM weight. It plots signal-to-quantization-noise ratio (SQNR) against bits per weight
with the Pareto front, checks the Gaussian results against the textbook noise model, shows which
tensors of the real model are hard for which scheme, looks at the error distribution of a few
schemes on one tensor, and sets the ranking beside the end-to-end figures that llama.cpp and the
QLoRA paper published for their formats.
""")

code(r"""
%matplotlib inline
%config InlineBackend.figure_format = 'png'
import time
T_START = time.perf_counter()

import numpy as np
import matplotlib.pyplot as plt
from matplotlib.lines import Line2D
import lowp

plt.rcParams.update({"figure.dpi": 80, "savefig.dpi": 100, "font.size": 9})
CKPT = lowp.bundled_checkpoint()  # tests/data/stories260K/stories260K.f32.safetensors
""")

md(r"""
## The schemes

`lowp.schemes()` lists the scheme families with example names and the exact rule of each (the
same text as `lowp schemes`). The set below takes every family and, within it, the variants people
deploy: for the integer families several group sizes and widths down to 2 bits, for MX every
element type. The cell checks that the set covers every family the library reports.

Bits per weight count everything the format stores: codes, block scales, zero points, second-level
scales and tensor-wide scales. They depend on the tensor's shape (on a 64-wide row a group of 128
is one short group with a scale of its own, a block format pads a short last block, a per-row
scale costs more on a short row), so each data set below reports its own.
""")

code(r"""
CATALOG = {f["family"]: f["examples"] for f in lowp.schemes()}
# The grid i-quants are left out: iq2_xxs, iq2_xs and iq1_s need an importance matrix (one per
# column, which these synthetic tensors do not have); bench/imatrix_gain.sh measures them.
GRID = {"llama.cpp " + t for t in ("iq2_xxs", "iq2_xs", "iq2_s", "iq3_xxs", "iq3_s", "iq1_s", "iq1_m")}
FAMILIES = [fam for fam in CATALOG if fam not in GRID]
# Every family with its catalog examples, but where the set takes other variants: the integer
# widths down to 2 bits, the scaled floats people ship, three of llama.cpp's mixes.
CHOSEN = {
    "cast": ["fp16", "bf16", "fp8_e4m3fn", "fp8_e5m2", "fp6_e2m3fn", "fp4_e2m1fn"],
    "integer, symmetric": ["int8", "int8-channel", "int4-channel", "int4-g32", "int4-g64", "int4-g128",
                           "int3-g64", "int3-g128", "int2-g32", "int2-g64"],
    "integer, asymmetric": ["uint8-asym", "uint4-g64-asym", "uint4-g128-asym"],
    "scaled float (per tensor, channel, group or 2-D block)": ["fp8_e4m3fn-tensor", "fp8_e4m3fn-channel",
                                                "fp8_e5m2-channel:scale=bf16"],
    "llama.cpp mixes": ["Q4_K_M", "Q6_K", "Q8_0"],
    "rotation (an option of any scheme)": ["int4-g128:rotate=hadamard", "mxfp4:rotate=hadamard32"],
}
SCHEMES = {fam: CHOSEN.get(fam, CATALOG[fam]) for fam in FAMILIES}
FAMILY = {s: fam for fam, names in SCHEMES.items() for s in names}
# A mix picks a type per tensor from the tensor's name and the model's layout, so it is measured
# on the checkpoint only (its own section); ALL are the schemes that apply one rule to any tensor.
MIXES = SCHEMES["llama.cpp mixes"]
ALL = [s for fam in FAMILIES for s in SCHEMES[fam] if fam != "llama.cpp mixes"]

# Colour groups for the plots: the llama.cpp families share four, by kind of format.
LLAMA_GROUPS = {"llama.cpp legacy (q8_0 q5_x q4_x)": ("q8_0", "q5_0", "q5_1", "q4_0", "q4_1"),
                "llama.cpp k-quants (q2_K..q6_K)": ("q2_K", "q3_K", "q4_K", "q5_K", "q6_K"),
                "llama.cpp iq4 (iq4_nl iq4_xs)": ("iq4_nl", "iq4_xs"),
                "ggml FP4 (ggml-mxfp4 ggml-nvfp4)": ("ggml-mxfp4", "ggml-nvfp4")}
def group(s):
    if not FAMILY[s].startswith("llama.cpp"):
        return FAMILY[s]
    return next(g for g, members in LLAMA_GROUPS.items() if s in members)
GROUPS = list(dict.fromkeys(group(s) for s in ALL))
COLOURS = list(plt.cm.tab10.colors) + [plt.cm.Dark2.colors[5], plt.cm.Dark2.colors[6],
                                     plt.cm.Dark2.colors[7]]
STYLE = {g: (c, m) for g, c, m in zip(GROUPS, COLOURS, "o^vDsPX*hp<>d")}
assert len(STYLE) == len(GROUPS)

print(f"{len(ALL)} schemes from {len(FAMILIES) - 1} families, and {len(MIXES)} of llama.cpp's mixes:")
for fam in FAMILIES:
    print(f"  {fam:43s} {', '.join(SCHEMES[fam])}")
""")

md(r"""
## The two data sets

**The real checkpoint.** stories260K is a 5-layer Llama (dim 64, hidden 172) trained on
TinyStories (see `tests/data/stories260K/PROVENANCE.md`). We measure the tensors a weight
quantizer changes: the token embedding and the 35 linear projections (`*_proj.weight`). The
RMSNorm vectors stay in high precision in every deployment format considered here, and
`lm_head.weight` is a copy of the embedding (tied in the source), so counting it would count the
embedding twice.

**The Gaussian.** A 4096 × 4096 float32 matrix drawn from N(0, 0.02²) with a fixed seed: the
shape of a 7B-class projection and the standard deviation of a typical initialization. It has no
outliers, so it shows each scheme's error in its cleanest form, and it is the case the textbook
noise formulas describe.
""")

code(r"""
W = lowp.read_tensors(CKPT)
assert np.array_equal(W["model.embed_tokens.weight"], W["lm_head.weight"])  # tied: measured once
TENSORS = [n for n in W if n == "model.embed_tokens.weight" or n.endswith("_proj.weight")]
SELECT = "model.embed_tokens.weight,*_proj.weight"
x_all = np.concatenate([W[n].ravel() for n in TENSORS])
print(f"checkpoint: {len(W)} tensors, {sum(v.size for v in W.values()):,} values; measured: {len(TENSORS)} "
      f"matrices, {x_all.size:,} values, std {x_all.std():.3f}, max |x| {np.abs(x_all).max():.3f}")
print("shapes:", sorted({W[n].shape for n in TENSORS}))
kurt = np.array([np.mean((W[n] - W[n].mean()) ** 4) / W[n].var() ** 2 for n in TENSORS])
print(f"kurtosis per matrix (3 for a Gaussian): median {np.median(kurt):.1f}, range {kurt.min():.1f} to {kurt.max():.1f}")
kinds = {}
for n in TENSORS:
    kinds.setdefault("embed" if "embed" in n else n.split(".")[-2], []).append(float(W[n].std()))
print("std by kind:", ", ".join(f"{k} {min(v):.3f}-{max(v):.3f}" for k, v in kinds.items()))

rng = np.random.default_rng(2024)
GAUSS = rng.standard_normal((4096, 4096), dtype=np.float32) * np.float32(0.02)
print(f"gaussian: {GAUSS.shape}, std {GAUSS.std():.5f}, max |x| {np.abs(GAUSS).max():.4f} "
      f"({np.abs(GAUSS).max() / 0.02:.2f} sigma)")
""")

md(r"""
## Measuring

One call per data set measures every scheme. `quant_error` returns a row per tensor and scheme
(`results`) and one per scheme over all tensors (`aggregates`, tensor `(all)`), with the same
fields as `lowp quant-error --json`. SQNR is `10 log10(Σx² / Σ(q − x)²)` in dB: every 6 dB is a
factor of two in RMS error. The aggregate sums signal and error over all tensors, so it is
weighted by each tensor's energy: the embedding and the q/k projections (std 0.15 to 0.31,
printed above) weigh more than the v/o projections (std 0.05 to 0.12).

**llama.cpp's super-block types do not apply to stories260K.** q2_K to q6_K and iq4_xs quantize
super-blocks of 256 values along a row, and stories260K's rows hold 64 or 172. On such rows
`lowp` does what llama.cpp's `llama-quantize` does and substitutes a fallback type
(q2_K, q3_K → q4_0; q4_K → q5_0; q5_K → q5_1; q6_K → q8_0; iq4_xs → iq4_nl), or f16 where 32 does
not divide the row either (the 172-column `down_proj`); each result row says which type it
*applied*. Their stories260K figures are therefore the fallback's, not the k-quant's: the table
shows the applied types in their place, and the stories260K front, plots and rank correlation
leave them out. The Gaussian's 4096-wide rows take every type as itself, and a later section
measures the k-quants on stories260K's own values laid out in rows of 256.
""")

code(r"""
t = time.perf_counter()
CK = lowp.quant_error(CKPT, ALL, tensors=SELECT)
t_ck = time.perf_counter() - t
t = time.perf_counter()
GA = lowp.quant_error({"gaussian": GAUSS}, ALL, summary=True)
t_ga = time.perf_counter() - t
print(f"checkpoint: {len(CK['results'])} tensor x scheme rows in {t_ck:.1f} s; "
      f"gaussian: {len(ALL)} schemes x {GAUSS.size:,} values in {t_ga:.1f} s")
assert len(CK["results"]) == len(TENSORS) * len(ALL) and not CK["skipped"]

# The type each scheme applied to each shape of stories260K, where it is not the scheme itself
# (A rotation's smaller block on rows its size does not divide, 172 = 4 x 43, is still the
# scheme: only the type matters here.)
def base(name):
    return name.split(":rotate=")[0]
APPLIED = {}
for r in CK["results"]:
    if base(r.get("applied", r["scheme"])) != base(r["scheme"]):
        APPLIED.setdefault(r["scheme"], {})[f"{r['shape'][1]} cols"] = r["applied"]
SUPER = ["q2_K", "q3_K", "q4_K", "q5_K", "q6_K", "iq4_xs"]
assert sorted(APPLIED) == sorted(SUPER), APPLIED  # exactly the super-block types fall back here
assert GAUSS.shape[1] % 256 == 0  # the Gaussian's rows take every type as itself
NATIVE = [s for s in ALL if s not in APPLIED]  # the schemes stories260K measures as themselves
applied_text = lambda s: " / ".join(f"{t} ({c})" for c, t in sorted(APPLIED[s].items(), key=lambda i: int(i[0].split()[0])))
print("applied on stories260K instead of the super-block type:")
for s in SUPER:
    print(f"  {s:7s} -> {applied_text(s)}")

AGG = {"stories260K": {r["scheme"]: r for r in CK["aggregates"]},
       "Gaussian": {r["scheme"]: r for r in GA["aggregates"]}}
ORDER = sorted(ALL, key=lambda s: (-AGG["Gaussian"][s]["bits_per_weight"], -AGG["Gaussian"][s]["sqnr_db"]))
print()
print(f"{'scheme':28s}{'family':17s}|{'stories260K':>28s}  |{'Gaussian 4096x4096':>28s}")
print(f"{'':45s}|{'b/w':>9s}{'SQNR dB':>9s}{'clipped':>10s}  |{'b/w':>9s}{'SQNR dB':>9s}{'clipped':>10s}")
for s in ORDER:
    line = f"{s:28s}{FAMILY[s][:16]:17s}|"
    for d in AGG:
        r = AGG[d][s]
        if d == "stories260K" and s in APPLIED:
            line += f"{'fallback: ' + applied_text(s).replace(' cols', ''):>28s}  |"
            continue
        line += f"{r['bits_per_weight']:9.3f}{r['sqnr_db']:9.2f}{r['clipped'] / r['measured']:9.3%}  |"
    print(line)
""")

md(r"""
Reading the table:

* **Bits per weight depend on the shape.** stories260K's rows are 64 or 172 values long, so a
  per-row scale is shared by few values and a block format pads a short last block: int4-g128
  costs 4.236 bits per weight there against 4.125 on the 4096-wide Gaussian, q4_0 4.611 against
  4.500, fp8_e4m3fn-channel (an fp32 scale per row) 8.433 against 8.008. Everything below uses each
  data set's own figures.
* **A cast without a scale depends on where the values sit.** The stories260K weights (std 0.169)
  suit fp8_e4m3fn's range: the plain cast gives 31.97 dB, no worse than with a per-tensor scale.
  The Gaussian (std 0.02) does not: half of it lands on e4m3 subnormals (printed in the anchor
  section) and the plain cast gives 29.62 dB against 31.54 dB for fp8_e4m3fn-tensor. fp6 and fp4
  casts without a scale flush almost all of the Gaussian to zero; they are in the set because
  they are the element types of MX and NVFP4, which always carry a scale.
* **`clipped` counts every element a scheme clamped to its largest code, whatever the cost.** For
  the per-channel fp8 schemes it is mostly a row maximum pushed just past the largest code by a
  scale that rounded down, which costs almost nothing. q4_0 and q5_0 map the block's
  largest-magnitude value to code −8 (−16) and have one code fewer on the other side, so values of
  the opposite sign in the top sixteenth (thirty-second) of the range clamp, with up to one step
  of error instead of half a step (see `lowp schemes`). The OCP MX rule takes the block scale as a
  power of two at or below the block maximum, so an mxfp8 block's values between 448·X and 512·X
  clamp to 448·X; MSE clipping shrinks the range on purpose. `max_abs_error` and the histograms
  below show what it costs.
""")

md(r"""
## The Pareto front

A scheme is on the front when no other scheme stores fewer or equal bits per weight with an equal
or higher SQNR, and is strictly better in one of the two. Every scheme off the front is beaten by
one on it: as accurate for fewer bits, or more accurate for the same bits.
""")

code(r"""
def pareto(points, tol=1e-3):
    # points: {name: (bits, sqnr)} -> names on the front, by bits. Sizes within tol (relative)
    # count as equal, as in `lowp plan`.
    def no_larger(b2, b):
        return b2 <= b * (1 + tol)
    def smaller(b2, b):
        return b2 < b * (1 - tol)
    front = [n for n, (b, s) in points.items()
             if not any(no_larger(b2, b) and s2 >= s and (smaller(b2, b) or s2 > s)
                        for m, (b2, s2) in points.items() if m != n)]
    return sorted(front, key=lambda n: points[n][0])

POINTS = {d: {s: (AGG[d][s]["bits_per_weight"], AGG[d][s]["sqnr_db"])
             for s in (NATIVE if d == "stories260K" else ALL)} for d in AGG}
FRONT = {d: pareto(POINTS[d]) for d in AGG}
for d in AGG:
    print(f"{d} front ({len(FRONT[d])} of {len(POINTS[d])}):")
    for s in FRONT[d]:
        b, q = POINTS[d][s]
        print(f"  {b:7.3f} b/w {q:7.2f} dB  {s}")
scaled = [s for s in NATIVE if s not in ("fp6_e2m3fn", "fp4_e2m1fn")]
rank = {d: np.argsort(np.argsort([AGG[d][s]["sqnr_db"] for s in scaled])) for d in AGG}
print(f"rank correlation of SQNR between the data sets over the {len(scaled)} schemes with a scale "
      f"or a wide enough range: {np.corrcoef(rank['stories260K'], rank['Gaussian'])[0, 1]:.3f}")
print("on both fronts:", ", ".join(s for s in FRONT["Gaussian"] if s in FRONT["stories260K"]))
print("on the Gaussian front, not measurable as themselves on stories260K:",
      ", ".join(s for s in FRONT["Gaussian"] if s in APPLIED))
""")

md(r"""
The two data sets rank the schemes almost identically (rank correlation 0.991 over the 40 schemes
that stories260K measures as themselves and that carry a scale or have the range for the data),
and nine schemes are on both fronts: int2 and int3 with groups, nf4 with double quantization,
mxfp6_e2m3, int8-channel with MSE clipping, q8_0 and fp16. On the Gaussian, which takes every type,
llama.cpp's super-block types are on the front at every size they come in (q2_K 10.57 dB at
2.625 bits per weight, q3_K 16.43 at 3.438, iq4_xs 22.30 at 4.25, q4_K 22.93 at 4.5, q5_K 28.85 at
5.5, q6_K 35.01 at 6.562) and push q4_0, q4_1, q5_0, uint4-g64-asym and int4-channel off it; on
stories260K, where they fall back, iq4_nl (22.24 dB at 4.611) takes q4_0's and q4_1's place on
the front and q5_1 joins it. The other members that differ are mostly a matter of shape. On stories260K's
64-wide rows a per-row scale is nearly a per-block scale, so int8-channel beats mxint8 there
(44.46 against 42.42 dB), while on the 4096-wide Gaussian mxint8's blocks of 32 win (42.42 against
41.23 dB); and a per-row scale costs more bits on short rows (int4-channel: 4.217 bits per weight
against 4.004).

What is *not* on either front:

* **No FP8 scheme.** At 8 bits an integer code with one scale per row or per block is about 10 dB
  more accurate on weights than any FP8 variant (Gaussian: int8-channel 41.23 dB,
  fp8_e4m3fn-channel 31.55 dB). FP8 spends its bits on exponent range that a scaled block of
  weights does not need, and its SQNR is set by its 3 mantissa bits (next section). FP8's case
  is matrix multiplication in hardware and activations, which this weight-only measurement does
  not cover.
* **bf16.** On SQNR fp16 dominates it (73.66 against 55.60 dB on the Gaussian, same 16 bits);
  bf16's advantage is range, which these weights do not need.
* **The FP4 formats.** On the Gaussian nvfp4 (4.5 bits per weight, 20.43 dB) is below q4_0
  (4.5, 21.32 dB) and nf4 (4.5, 20.72 dB); mxfp4 (4.25, 18.85 dB) is below int4-g64 (4.25,
  19.36 dB). On stories260K both are below nf4:double-quant, which stores fewer bits (4.137) at
  20.51 dB. ggml's versions do no better: ggml-mxfp4 rounds ties differently but gives mxfp4's
  SQNR to the printed digits (18.85 dB on the Gaussian, 18.75 on stories260K, where it stores
  4.355 bits per weight against 4.256), and ggml-nvfp4, without a tensor scale, 19.73 dB against
  nvfp4's 20.43 on the Gaussian (19.96 against 19.99 on stories260K).
""")

md(r"""
## An anchor for the Gaussian: the uniform-noise model

For a quantizer whose rounding error is uniform over one step Δ and independent of the signal, the
noise power is Δ²/12. Two cases cover most schemes here (both are approximations; they assume no
clipping and enough levels that the error looks uniform):

* **Integer codes with a block scale** (intN, intN-gG, q8_0): Δ = amax / qmax with
  qmax = 2^(N−1) − 1 and amax the block's largest |x|. With k = amax / σ (the *loading factor*)
  this gives SQNR ≈ 10 log10(12 qmax² / k²), which for large N is the textbook
  **6.02 N + 4.77 − 20 log10 k dB** (the familiar 6.02 N + 1.76 dB is the same formula for a full-scale
  sine wave, k = √2). Small blocks have a small k: the largest of 32 Gaussian values is about 2.4 σ
  (rms over the blocks), the largest of all 16.7 million 5.4 σ (both printed below); that is the
  whole gain of per-group over per-tensor scaling here.
* **Floating-point elements with m mantissa bits** (casts, scaled FP8, MX): the step is one ulp,
  2^(e − m) for x in [2^e, 2^(e+1)), so the error is relative and SQNR ≈ 6.02 m + 13.5 dB whatever
  σ is, as long as no value is subnormal or clipped.

The cell computes both predictions from the Gaussian itself (the block maxima and the ulp of each
element) and sets them beside the measured SQNR; it also prints the loading factor of stories260K's
rows in groups of 32, for comparison.
""")

code(r"""
X64 = GAUSS.astype(np.float64)
SIGNAL = float((X64 ** 2).sum())

def int_model(n_bits, group):  # group: None = per tensor, "row", or a group size
    qmax = 2 ** (n_bits - 1) - 1
    blocks = GAUSS.reshape(1, -1) if group is None else GAUSS if group == "row" else GAUSS.reshape(-1, group)
    amax = np.abs(blocks).max(axis=1).astype(np.float64)
    return 10 * np.log10(SIGNAL / (blocks.shape[1] * ((amax / qmax) ** 2).sum() / 12))

def float_model(m):
    _, e = np.frexp(GAUSS)                      # |x| in [2^(e-1), 2^e)
    ulp = np.ldexp(1.0, (e - 1 - m).astype(np.int64))
    return 10 * np.log10(SIGNAL / ((ulp ** 2).sum() / 12))

MODEL = {
    "int8": int_model(8, None), "int8-channel": int_model(8, "row"), "q8_0": int_model(8, 32),
    "int4-channel": int_model(4, "row"), "int4-g32": int_model(4, 32), "int4-g64": int_model(4, 64),
    "int4-g128": int_model(4, 128), "int3-g64": int_model(3, 64), "int3-g128": int_model(3, 128),
    "int2-g32": int_model(2, 32), "int2-g64": int_model(2, 64),
    "fp16": float_model(10), "bf16": float_model(7), "fp8_e4m3fn-tensor": float_model(3),
    "fp8_e5m2": float_model(2),
}
print(f"{'scheme':20s}{'measured dB':>12s}{'model dB':>10s}{'diff':>7s}")
for s, pred in MODEL.items():
    got = AGG["Gaussian"][s]["sqnr_db"]
    print(f"{s:20s}{got:12.2f}{pred:10.2f}{got - pred:7.2f}")

K = {g: float(np.sqrt((np.abs(GAUSS.reshape(-1, g)).max(axis=1).astype(np.float64) ** 2).mean()) / 0.02)
     for g in (32, 64, 128)}
K["tensor"] = float(np.abs(GAUSS).max() / 0.02)
print("loading factor k = rms block max / sigma:", {g: round(v, 2) for g, v in K.items()})

def rows_k(g):
    # the same measure on stories260K's matrices: groups of g along each row (a short last one),
    # sqrt(sum of group size x block max^2 / sum of x^2), so weighted by energy like the aggregate
    num = den = 0.0
    for n in TENSORS:
        x = W[n].astype(np.float64)
        for j in range(0, x.shape[1], g):
            b = x[:, j:j + g]
            num += b.shape[1] * (np.abs(b).max(axis=1) ** 2).sum()
        den += (x ** 2).sum()
    return float(np.sqrt(num / den))
print(f"stories260K, groups of 32 along each row: k = rms block max / rms = {rows_k(32):.2f}")
print(f"20 log10(k_tensor / k_32) = {20 * np.log10(K['tensor'] / K[32]):.2f} dB; measured q8_0 - int8 = "
      f"{AGG['Gaussian']['q8_0']['sqnr_db'] - AGG['Gaussian']['int8']['sqnr_db']:.2f} dB")
print("closed form 6.02 m + 13.5 dB:", {f"m={m}": round(6.02 * m + 13.5, 1) for m in (10, 7, 3, 2)})
for s in ("fp8_e4m3fn", "fp6_e2m3fn", "fp4_e2m1fn"):
    r = AGG["Gaussian"][s]
    print(f"{s} cast, no scale: {r['sqnr_db']:.2f} dB, {r['zeroed'] / r['measured']:.1%} of values flushed to 0, "
          f"{r['subnormal'] / r['measured']:.1%} stored as subnormals")
""")

md(r"""
The model matches the measurement to within 0.15 dB for every integer scheme from 3 to 8 bits and
to within 0.06 dB for the floating formats. At 2 bits it is 0.4 to 0.5 dB pessimistic: with
qmax = 1 there are three levels, the error is far from uniform over a step, and the Δ²/12 rule no
longer describes it. Two consequences are worth knowing:

* **Per-tensor against per-block scaling is the loading factor and nothing else.** k grows from
  2.39 for blocks of 32 to 5.41 for the whole tensor; 20·log10(5.41 / 2.39) = 7.09 dB, and q8_0
  beats int8 by 7.23 dB.
* **A floating format's SQNR does not depend on the scale, only on its mantissa width**, as long
  as no value is subnormal or clipped: 6.02·m + 13.5 dB gives 31.6 dB for e4m3 (m = 3) and
  25.5 dB for e5m2 (m = 2). The 13.5 dB assumes the significands are spread log-uniformly over
  [1, 2), which a Gaussian spanning several binades nearly satisfies. A scale only moves values
  out of the subnormal range: the plain fp8_e4m3fn cast stores half of the Gaussian as subnormals
  and loses 1.9 dB.
""")

md(r"""
## SQNR against bits per weight

Left: each marker is one scheme, colour and shape give the family, and the black steps join the
Pareto front; the front's members outside the two crowded regions are named. On the Gaussian panel
the dashed line is the uniform-noise model for symmetric N-bit integer codes with one fp16 scale
per 64 values, drawn at x = N + 16/64 bits with k from the data: an approximation, for
orientation. Right: the crowded region around 4 bits per weight (the left dotted box; the one
around 8 bits follows in the next figure) as one row per scheme, ordered by bits per weight, with
both data sets on the row (filled: stories260K, open: Gaussian) and the bits per weight of each
after the name (Gaussian|stories260K); a black outline marks a scheme on that data set's Pareto
front.
""")

code(r"""
def place_labels(ax, names, pts, fontsize=7):
    # Greedy, deterministic placement: for each point (left to right) the first of a few offsets
    # (right, left, then above or below with a leader line) whose text box stays inside the axes
    # and overlaps no marker and no label placed before; else the offset with the least overlap.
    fig = ax.figure
    to_pt = lambda xy: ax.transData.transform(xy) * 72.0 / fig.dpi
    marks = [(x - 4, y - 4, x + 4, y + 4) for x, y in (to_pt(pts[n]) for n in pts)]
    frame = ax.get_window_extent().extents * 72.0 / fig.dpi
    labels = []
    overlap = lambda a, b: (max(0, min(a[2], b[2]) - max(a[0], b[0])) *
                            max(0, min(a[3], b[3]) - max(a[1], b[1])))
    for n in sorted(names, key=lambda n: (pts[n][0], -pts[n][1])):
        x, y = to_pt(pts[n])
        w, h = 0.6 * fontsize * len(n), fontsize
        best = None
        for dx, dy in [(6, 0), (-6, 0), (6, 10), (6, -10), (-6, 10), (-6, -10), (6, 18), (6, -18)]:
            x0 = x + dx if dx > 0 else x + dx - w
            box = (x0, y + dy - h / 2, x0 + w, y + dy + h / 2)
            cost = (sum(overlap(box, b) for b in labels + marks) + 5 * (w * h - overlap(box, frame)))
            if best is None or cost < best[0]:
                best = (cost, dx, dy, box)
            if cost == 0:
                break
        _, dx, dy, box = best
        labels.append(box)
        ax.annotate(n, pts[n], xytext=(dx, dy), textcoords="offset points", fontsize=fontsize,
                    ha="left" if dx > 0 else "right", va="center",
                    arrowprops=dict(arrowstyle="-", lw=0.5, color="0.45", shrinkA=0, shrinkB=3) if dy else None)

REGIONS = [(3.95, 5.6), (7.95, 8.8)]   # bits per weight (Gaussian) of the two enlarged regions
in_region = lambda b: any(lo <= b <= hi for lo, hi in REGIONS)

def full_panel(ax, d):
    pts = POINTS[d]
    for s in pts:
        c, mk = STYLE[group(s)]
        ax.scatter(*pts[s], color=c, marker=mk, s=40, edgecolor="none", zorder=3)
    ax.step([pts[s][0] for s in FRONT[d]], [pts[s][1] for s in FRONT[d]], where="post",
            color="k", lw=1.1, zorder=2)
    for lo, hi in REGIONS:
        inside = [pts[s] for s in pts if lo <= POINTS["Gaussian"][s][0] <= hi and POINTS["Gaussian"][s][1] > 10]
        y0 = min(q for _, q in inside) - 2
        y1 = max(q for _, q in inside) + 2
        x0 = min(b for b, _ in inside) - 0.12
        x1 = max(b for b, _ in inside) + 0.12
        ax.add_patch(plt.Rectangle((x0, y0), x1 - x0, y1 - y0, fill=False, lw=0.8, ls=":", color="0.3"))
    if d == "Gaussian":
        n = np.arange(2, 9)
        ax.plot(n + 0.25, 10 * np.log10(12 * (2.0 ** (n - 1) - 1) ** 2 / K[64] ** 2), "k--", lw=0.9,
                label=f"N-bit int, group 64, uniform noise (approx.):\n10·log10(12·qmax²/k²), k = {K[64]:.2f}")
        ax.legend(loc="lower right", fontsize=7.5)
    ax.set_xlim(1.8, 17.2)
    ax.set_ylim(-2, 80)
    ax.set_xticks(range(2, 18, 2))
    ax.grid(color="0.9", lw=0.6)
    ax.set_axisbelow(True)
    ax.set_xlabel("bits per weight")
    ax.set_ylabel("SQNR (dB), higher is better")
    ax.set_title(f"stories260K, {x_all.size:,} values" if d == "stories260K"
                 else "Gaussian N(0, 0.02²), 4096 × 4096")

def region_panel(ax, lo, hi):
    rows = sorted([s for s in ALL if lo <= POINTS["Gaussian"][s][0] <= hi and POINTS["Gaussian"][s][1] > 10],
                  key=lambda s: (POINTS["Gaussian"][s][0], POINTS["Gaussian"][s][1]))
    for i, s in enumerate(rows):
        c, mk = STYLE[group(s)]
        qg = POINTS["Gaussian"][s][1]
        if s in POINTS["stories260K"]:  # the super-block types are not measurable on stories260K
            qc = POINTS["stories260K"][s][1]
            ax.plot([qc, qg], [i, i], color="0.75", lw=1, zorder=1)
            ax.scatter(qc, i, color=c, marker=mk, s=56, zorder=3,
                       edgecolor="k" if s in FRONT["stories260K"] else "none", linewidth=1.2)
        ax.scatter(qg, i, facecolor="white", marker=mk, s=56, zorder=3,
                   edgecolor="k" if s in FRONT["Gaussian"] else c, linewidth=1.2 if s in FRONT["Gaussian"] else 1.5)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([f"{s} {POINTS['Gaussian'][s][0]:.2f}|" + (f"{POINTS['stories260K'][s][0]:.2f}"
                        if s in POINTS["stories260K"] else "n/a") for s in rows], fontsize=7.5)
    ax.set_ylim(-0.7, len(rows) - 0.3)
    ax.grid(axis="x", color="0.9", lw=0.6)
    ax.set_axisbelow(True)
    ax.set_xlabel("SQNR (dB)")
    ax.set_title(f"{lo:g} to {hi:g} b/w (labels: b/w Gaussian|stories260K; n/a: a fallback there)", fontsize=9)

SHORT = {"cast": "cast", "integer, symmetric": "int, symmetric", "integer, asymmetric": "int, asymmetric",
         "integer, MSE-optimal clipping (:clip=mse)": "int, :clip=mse",
         "scaled float (per tensor, channel, group or 2-D block)": "scaled fp8", "MX (OCP Microscaling v1.0)": "OCP MX",
         "NVFP4": "NVFP4", "NF4 (bitsandbytes)": "NF4", "llama.cpp legacy (q8_0 q5_x q4_x)": "llama.cpp legacy",
         "llama.cpp k-quants (q2_K..q6_K)": "llama.cpp k-quants", "llama.cpp iq4 (iq4_nl iq4_xs)": "llama.cpp iq4",
         "ggml FP4 (ggml-mxfp4 ggml-nvfp4)": "ggml FP4",
         "rotation (an option of any scheme)": "Hadamard-rotated"}
legend_handles = [Line2D([], [], color=STYLE[g][0], marker=STYLE[g][1], ls="", markeredgewidth=0,
                         label=SHORT.get(g, g)) for g in GROUPS]
legend_handles += [Line2D([], [], color="k", lw=1.1, label="Pareto front"),
                   Line2D([], [], color="0.5", marker="o", ls="", markeredgewidth=0,
                          label="right: filled = stories260K"),
                   Line2D([], [], color="0.5", marker="o", ls="", markerfacecolor="white", markeredgewidth=1.2,
                          label="right: open = Gaussian"),
                   Line2D([], [], color="0.5", marker="o", ls="", markeredgecolor="k", markeredgewidth=1.2,
                          label="right: outline = on front")]

fig = plt.figure(figsize=(11, 8.4))
gs = fig.add_gridspec(2, 2, width_ratios=[1.25, 1])
ax_ck, ax_ga, ax_r4 = fig.add_subplot(gs[0, 0]), fig.add_subplot(gs[1, 0]), fig.add_subplot(gs[:, 1])
full_panel(ax_ck, "stories260K")
full_panel(ax_ga, "Gaussian")
region_panel(ax_r4, *REGIONS[0])
ax_ck.legend(handles=legend_handles, loc="lower right", fontsize=7)
fig.suptitle("SQNR against bits per weight, every scheme family (lowp.quant_error)")
fig.tight_layout()
for d, ax in (("stories260K", ax_ck), ("Gaussian", ax_ga)):
    place_labels(ax, [s for s in FRONT[d] if not in_region(POINTS["Gaussian"][s][0])], POINTS[d])
fig.savefig("figures/quantization_error.png", dpi=100, bbox_inches="tight", pil_kwargs={"optimize": True})
plt.show()
""")

md(r"""
The region around 8 bits per weight, drawn the same way as the right panel above:
""")

code(r"""
fig, ax = plt.subplots(figsize=(7, 4.6))
region_panel(ax, *REGIONS[1])
fig.tight_layout()
plt.show()
""")

md(r"""
What the figures show:

* **The two data sets give the same picture.** At 4 bits with blocks of 16 to 64 values the real
  weights come within half a dB of the Gaussian, on either side (q4_0 21.39 against 21.32 dB,
  nf4 20.52 against 20.72 dB, nvfp4 19.99 against 20.43 dB). Their matrices have heavier tails
  than a Gaussian (kurtosis up to 8.6 against 3, printed with the data sets above), but a block
  of 32 of a row has the Gaussian's loading factor (2.40 against 2.39, printed in the anchor
  section): the heavy tails come mostly from blocks of different scale, which a block scale follows.
  Where stories260K is ahead by more it is the shape: a group never spans two rows, so on its
  rows of 64 or 172 values a group of 128 holds 64 values (or 128 and then 44) and a per-row scale
  covers at most 172, for more bits per weight (int4-g128 19.37 against 18.61 dB at 4.236 bits,
  int4-channel 19.28 against 16.06 dB at 4.217).
* **Above 3 bits the group-64 integers sit on the dashed uniform-noise line**; below it the line
  is off by the 2-bit error shown in the previous section.
* **Between 4.0 and 4.5 bits per weight the result ranges from 16 to 23 dB.** On the Gaussian
  int4-channel (4.0 bits) gives 16.06 dB, int4-g128 18.61, int4-g32 20.27, q4_0 21.32, iq4_nl
  22.37 and q4_K 22.93. The block scale is the main lever;
  the code table and the zero point come second: at 4.5 bits per weight nf4's normal-quantile
  levels give 20.72 dB against 20.27 for int4-g32, q4_0 uses all 16 codes (−8 to 7) and gets
  21.32, and the zero point of the asymmetric codes gives uint4-g64-asym 20.82 against 19.36 for
  int4-g64 for 1/16 more bits per weight (a 4-bit zero point per group of 64). NF4's double
  quantization keeps nf4's SQNR (20.72 dB to the printed digits) at 4.127 instead of 4.5 bits per
  weight. llama.cpp's newer 4-bit types gain most: iq4_nl's non-uniform grid with a searched scale
  gives 22.37 dB at 4.5 bits, and the k-quants' second level of scales (6-bit scales per 32
  against one fp16 scale per 256) gives q4_K 22.93 dB at 4.5 and iq4_xs 22.30 dB at 4.25.
* **The FP4 schemes sit in the middle or below.** nvfp4 (blocks of 16, an e4m3 scale and a tensor
  scale) reaches 20.43 dB on the Gaussian; mxfp4 (blocks of 32, a power-of-two scale) 18.85 dB,
  with ggml-mxfp4 the lowest of the block schemes at 4.25 bits, because its scale rounds down to a
  power of two and clamps part of each block (1.884% of the Gaussian's values, 2.709% of
  stories260K's).
* **Around 8 bits**, every integer scheme with a row or block scale lies between 41 and 45.5 dB,
  every FP8 variant between 25 and 32.5 dB, grouped by mantissa width (e4m3 about 31 dB,
  e5m2 about 25 dB) whatever the scale.
""")

md(r"""
## llama.cpp's super-block types on real weights: stories260K in rows of 256

The k-quants (q2_K to q6_K) and iq4_xs cannot be measured on stories260K as it is stored: no row
is a multiple of 256 long, so llama.cpp (and `lowp`, above) quantize it with a fallback type.
To see what the super-block types themselves do to *real* weight values, the cell below lays
each of the 36 measured matrices out as rows of 256 consecutive values (`W[n].reshape(-1, 256)`:
every matrix holds a multiple of 256 values, and row-major order keeps each original row's
values together, so a super-block holds four 64-value rows, or a 172-value row and part of the
next) and measures every llama.cpp type on that. This is a change of layout for the measurement
only; no llama.cpp model of this shape would store it so. The 32-block types are measured on the
same layout for comparison (their blocks of 32 then straddle the 172-value rows, where the stored
layout pads a short last block); the second column is the stored layout (with the fallbacks),
the third the Gaussian.
""")

code(r"""
LLAMA = [s for s in ALL if FAMILY[s].startswith("llama.cpp")]
assert all(W[n].size % 256 == 0 for n in TENSORS)
R256 = {n: W[n].reshape(-1, 256) for n in TENSORS}
t = time.perf_counter()
RW = lowp.quant_error(R256, LLAMA)
print(f"{len(LLAMA)} llama.cpp types on the {len(R256)} matrices in rows of 256 in {time.perf_counter() - t:.1f} s")
assert not any(r.get("applied", r["scheme"]) != r["scheme"] for r in RW["results"])  # every type as itself
A256 = {r["scheme"]: r for r in RW["aggregates"]}
ORDER_LL = sorted(LLAMA, key=lambda s: (-A256[s]["bits_per_weight"], -A256[s]["sqnr_db"]))
print(f"{'scheme':12s}| {'rows of 256':>17s} | {'as stored (rows of 64 / 172)':>44s} | {'Gaussian':>17s}")
print(f"{'':12s}|{'b/w':>8s}{'SQNR dB':>10s} |{'b/w':>8s}{'SQNR dB':>10s}{'applied':>26s} |{'b/w':>8s}{'SQNR dB':>10s}")
for s in ORDER_LL:
    a, c, g = A256[s], AGG["stories260K"][s], AGG["Gaussian"][s]
    print(f"{s:12s}|{a['bits_per_weight']:8.3f}{a['sqnr_db']:10.2f} |{c['bits_per_weight']:8.3f}{c['sqnr_db']:10.2f}"
          f"{applied_text(s).replace(' cols', '') if s in APPLIED else s:>26s} |{g['bits_per_weight']:8.3f}{g['sqnr_db']:10.2f}")
P256 = {s: (A256[s]["bits_per_weight"], A256[s]["sqnr_db"]) for s in LLAMA}
print("\nfront among the llama.cpp types, rows of 256:", ", ".join(pareto(P256)))
print("front among the llama.cpp types, Gaussian:   ",
      ", ".join(pareto({s: POINTS["Gaussian"][s] for s in LLAMA})))
move = max(abs(A256[s]["sqnr_db"] - AGG["stories260K"][s]["sqnr_db"]) for s in LLAMA if s not in APPLIED)
print(f"32-block types, rows of 256 against the stored layout: at most {move:.3f} dB apart")
print("SQNR of the first type minus the second (rows of 256 | Gaussian):")
for k, b in (("q4_K", "q4_0"), ("q4_K", "iq4_nl"), ("iq4_nl", "q4_0"), ("q5_K", "q5_0"), ("iq4_xs", "ggml-mxfp4"),
             ("q6_K", "q8_0"), ("ggml-mxfp4", "mxfp4"), ("ggml-nvfp4", "nvfp4")):
    if b not in A256:  # not a llama.cpp type: the stored layout, the same blocks as rows of 256 here
        print(f"  {k:10s} - {b:10s}: {AGG['stories260K'][k]['sqnr_db'] - AGG['stories260K'][b]['sqnr_db']:+6.3f} dB "
              f"(stored layout) | {AGG['Gaussian'][k]['sqnr_db'] - AGG['Gaussian'][b]['sqnr_db']:+6.3f} dB")
        continue
    print(f"  {k:10s} - {b:10s} ({A256[k]['bits_per_weight']:.3f} - {A256[b]['bits_per_weight']:.3f} b/w): "
          f"{A256[k]['sqnr_db'] - A256[b]['sqnr_db']:+6.2f} dB | {AGG['Gaussian'][k]['sqnr_db'] - AGG['Gaussian'][b]['sqnr_db']:+6.2f} dB")
""")

md(r"""
* **Laid out in rows of 256, the real weights give the super-block types within about half a dB
  of the Gaussian** (q2_K 10.06 against 10.57 dB, q3_K 16.44 against 16.43, iq4_xs 22.13 against
  22.30, q4_K 22.66 against 22.93, q5_K 28.74 against 28.85, q6_K 35.16 against 35.01), as the
  32-block types did on the stored layout. The change of layout itself moves the 32-block types by at
  most 0.02 dB (first column against second).
* **Among llama.cpp's types the front is the same on both**: q2_K, q3_K, iq4_xs, q4_K, q5_K, q6_K
  and q8_0. At equal size the k-quant wins: q4_K over q4_0 by 1.29 dB (Gaussian 1.61) and over
  iq4_nl by 0.44 (0.57), q5_K over q5_0 by 1.43 (1.45), iq4_xs over ggml-mxfp4 at 4.25 bits by
  3.38 (3.45). q6_K is 10.23 dB below q8_0 for 1.94 fewer bits per weight.
* **As stored, the super-block names measure their fallbacks**, at more bits than the k-quant
  would take, because the 172-column `down_proj` is stored in f16: q4_K's 27.90 dB at 7.729 bits
  per weight is q5_0 and f16, and q2_K and q3_K give the same 21.97 dB at 6.941 bits (q4_0 and f16).
  These figures say nothing about the k-quants.
""")

md(r"""
## llama.cpp's mixes on the checkpoint

A mix (`Q4_K_M`, `Q6_K`, `Q8_0`, ... as `llama-quantize` names them) chooses a type per tensor
from the tensor's name, its layer and its shape, so it is measured on the checkpoint as it is
stored, with each result row's `applied` type and `applied_reason`. Over the same 36 matrices as
above (`lm_head`, a copy of the embedding, is measured on its own: a mix gives the output matrix
its own type):
""")

code(r"""
t = time.perf_counter()
MX = lowp.quant_error(CKPT, MIXES, tensors=SELECT + ",lm_head.weight")
print(f"{len(MIXES)} mixes on {len(TENSORS) + 1} matrices in {time.perf_counter() - t:.2f} s")
MIXAGG = {}
for m in MIXES:
    rows_m = [r for r in MX["results"] if r["scheme"] == m and r["tensor"] in TENSORS]
    counts = {}
    for r in rows_m:
        counts[r["applied"]] = counts.get(r["applied"], 0) + 1
    sig = sum(float((W[r["tensor"]].astype(np.float64) ** 2).sum()) for r in rows_m)
    err = sum(r["mse"] * r["measured"] for r in rows_m)
    bits = sum(r["bits_per_weight"] * r["measured"] for r in rows_m) / sum(r["measured"] for r in rows_m)
    MIXAGG[m] = (bits, 10 * np.log10(sig / err))
    head = next(r for r in MX["results"] if r["scheme"] == m and r["tensor"] == "lm_head.weight")
    print(f"{m:7s} {MIXAGG[m][0]:.3f} b/w, {MIXAGG[m][1]:.2f} dB over the 36 matrices; applied: "
          + ", ".join(f"{t} x{n}" for t, n in sorted(counts.items())) + f"; lm_head: {head['applied']}")
    for reason in sorted({r["applied_reason"] for r in rows_m}):
        print(f"    {reason}")
print(f"for comparison, q5_0 alone: {AGG['stories260K']['q5_0']['bits_per_weight']:.3f} b/w, "
      f"{AGG['stories260K']['q5_0']['sqnr_db']:.2f} dB; q8_0 alone: {AGG['stories260K']['q8_0']['bits_per_weight']:.3f} b/w, "
      f"{AGG['stories260K']['q8_0']['sqnr_db']:.2f} dB")
same = all(a["sqnr_db"] == b["sqnr_db"] and a["applied"] == b["applied"] for a, b in zip(
    [r for r in MX["results"] if r["scheme"] == "Q6_K"], [r for r in MX["results"] if r["scheme"] == "Q8_0"]))
print(f"Q6_K and Q8_0 apply the same type to every matrix here: {same}")
""")

md(r"""
On this checkpoint no mix stores a single k-quant block. Q4_K_M's default q4_K falls back to q5_0
on the 64-column matrices; `llama-quantize`'s `use_more_bits` rule gives the v_proj of layers 2
and 4 (of 5) q6_K, which falls back to q8_0, and lm_head q6_K, also q8_0; every `down_proj` is
f16. The result, 7.776 bits per weight and 27.92 dB over the 36 matrices, is q5_0's accuracy
(27.34 dB at 5.636 bits alone) at a larger size. Q6_K and Q8_0 store the same types here (q8_0,
and f16 for `down_proj`, which llama.cpp itself refuses to quantize as q8_0), so they give the same
10.092 bits per weight and 45.98 dB.
""")

md(r"""
## Per-tensor error on the real checkpoint

The heat map takes the per-tensor rows of the same run: one row per weight matrix (layer and
projection), one column per scheme, ordered by bits per weight. Left: SQNR in dB (colours clipped
to 0–50 dB; fp16 and bf16 lie above). Right: each tensor's SQNR minus the median over the tensors
for the same scheme, which removes the scheme's overall level and leaves what makes a tensor
easier or harder than the others.
""")

code(r"""
HM_SCHEMES = [s for s in ORDER if s not in ("fp6_e2m3fn", "fp4_e2m1fn")  # unscaled: see the anchor section
              and s not in APPLIED]                                     # fallbacks: not the scheme here
short = lambda n: ("embed" if "embed" in n else
                   f"L{n.split('.')[2]} {n.split('.')[-2]}")
ROWS = [short(n) for n in TENSORS]
SQ = np.full((len(TENSORS), len(HM_SCHEMES)), np.nan)
ti = {n: i for i, n in enumerate(TENSORS)}
si = {s: j for j, s in enumerate(HM_SCHEMES)}
for r in CK["results"]:
    if r["scheme"] in si:
        SQ[ti[r["tensor"]], si[r["scheme"]]] = r["sqnr_db"]
DEV = SQ - np.median(SQ, axis=0)

fig, axes = plt.subplots(1, 2, figsize=(15, 9.5), sharey=True)
im0 = axes[0].imshow(SQ, aspect="auto", cmap="viridis", vmin=0, vmax=50)
im1 = axes[1].imshow(DEV, aspect="auto", cmap="RdBu", vmin=-5, vmax=5)
for ax, im, lab in ((axes[0], im0, "SQNR (dB)"), (axes[1], im1, "SQNR − median over tensors (dB)")):
    ax.set_xticks(range(len(HM_SCHEMES)))
    ax.set_xticklabels(HM_SCHEMES, rotation=90, fontsize=8)
    ax.set_yticks(range(len(ROWS)))
    ax.set_yticklabels(ROWS, fontsize=8)
    fig.colorbar(im, ax=ax, shrink=0.6, pad=0.01, label=lab, extend="both")
axes[0].set_title("SQNR per tensor and scheme (stories260K)")
axes[1].set_title("relative to the scheme's median tensor")
fig.tight_layout()
plt.show()

kind = {}
for i, n in enumerate(TENSORS):
    kind.setdefault(ROWS[i].split()[-1], []).append(i)
cols = [si[s] for s in HM_SCHEMES if s not in ("fp16", "bf16")]
print("mean SQNR deviation from the median tensor, by projection (over all schemes but fp16/bf16):")
for k_, idx in kind.items():
    print(f"  {k_:10s} {np.mean(DEV[np.ix_(idx, cols)]):+6.2f} dB")
crest = np.array([np.abs(W[n]).max() / W[n].std() for n in TENSORS])
worst = int(np.argmin(DEV[:, si["int8"]]))
print(f"int8 (one scale per tensor): worst tensor {ROWS[worst]}, {DEV[worst, si['int8']]:+.2f} dB, crest factor "
      f"{crest[worst]:.1f} (median crest factor {np.median(crest):.1f})")
print("spread of SQNR over the tensors (std, dB):",
      ", ".join(f"{s} {np.std(SQ[:, si[s]]):.2f}" for s in ("int8", "int8-channel", "int4-g32", "q4_0", "nf4",
                                                           "bf16", "fp8_e4m3fn-tensor", "mxfp8")))
for s in ("int8", "int4-channel", "int4-g32", "q4_0", "nf4", "mxfp4", "fp8_e4m3fn-channel"):
    c = np.corrcoef(crest, DEV[:, si[s]])[0, 1]
    print(f"  correlation of deviation with crest factor (max|x|/std), {s:20s}: {c:+.2f}")
""")

md(r"""
* **Which scheme matters far more than which tensor.** Within a column the spread over the 36
  tensors is 1.62 dB (std) for int8 with one scale per tensor, 0.87 dB for int8-channel, 0.61 and
  0.56 dB for int4-g32 and q4_0, 0.29 dB for nf4 and 0.14 dB for fp8_e4m3fn-tensor, while the
  schemes' overall SQNR on this checkpoint ranges from 3.21 to 73.89 dB.
* **With one scale per tensor the rows follow the tensor's crest factor** (max |x| / std;
  correlation −0.99 for int8): the worst tensor for int8 is layer 0's o_proj, 4.89 dB below the
  median tensor, with a crest factor of 9.3 against a median of 5.3. With a scale per row or per
  block the tensor's crest factor says little: the correlation is weak and of the other sign
  (+0.12 for int4-channel, +0.20 for int4-g32, +0.13 for q4_0, +0.35 for nf4, +0.22 for mxfp4),
  since the scale follows each row or block, and −0.23 for fp8_e4m3fn-channel.
* **By projection** the differences are small: on average over the schemes o_proj and v_proj
  are the hardest (−0.34 and −0.32 dB against the median tensor), k_proj the easiest
  (+0.62 dB); the others lie within 0.3 dB of the median.
""")

md(r"""
## Error distributions on one tensor

`lowp.quantize(array, scheme)` returns the array quantized and dequantized; the difference from
the input is the error each element carries. The tensor is layer 3's q_proj (64 × 64), the
tensor with the largest crest factor among the q/k projections. The counts are on a log axis, so
the tails (large errors from clipping or from coarse steps at the top of a block) are visible
next to the bulk. The table under the plot checks the histograms against `quant_error`'s
row for the same tensor.
""")

code(r"""
HIST_TENSOR = "model.layers.3.self_attn.q_proj.weight"
x = W[HIST_TENSOR]
HIST = {"4-bit schemes": ["int4-g128", "q4_0", "nf4", "mxfp4", "nvfp4"],
        "8-bit schemes": ["int8", "int8-channel", "q8_0", "fp8_e4m3fn-channel", "mxfp8"]}
rows = {(r["tensor"], r["scheme"]): r for r in CK["results"]}
fig, axes = plt.subplots(1, 2, figsize=(14, 4.6))
qk = [n for n in TENSORS if n.endswith(("q_proj.weight", "k_proj.weight"))]
print(f"{HIST_TENSOR}: shape {x.shape}, std {x.std():.4f}, max |x| {np.abs(x).max():.4f}, crest factor "
      f"{np.abs(x).max() / x.std():.1f} (largest of the q/k projections: "
      f"{max(np.abs(W[n]).max() / W[n].std() for n in qk):.1f})")
print(f"{'scheme':20s}{'rms error':>11s}{'quant_error rmse':>18s}{'max |error|':>13s}{'error = 0':>11s}")
for ax, (title, names) in zip(axes, HIST.items()):
    errs = {s: (lowp.quantize(x, s) - x).ravel() for s in names}
    lim = max(np.abs(e).max() for e in errs.values())
    bins = np.linspace(-lim, lim, 121)
    for s, e in errs.items():
        ax.hist(e, bins=bins, histtype="step", lw=1.3, label=s)
        print(f"{s:20s}{np.sqrt(np.mean(e.astype(np.float64) ** 2)):11.5f}{rows[(HIST_TENSOR, s)]['rmse']:18.5f}"
              f"{np.abs(e).max():13.5f}{np.mean(e == 0):11.1%}")
    ax.set_yscale("log")
    ax.set_xlabel("error q − x (weight units)")
    ax.set_ylabel("elements per bin")
    ax.set_title(f"{title}: {HIST_TENSOR.replace('model.', '')}")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
fig.tight_layout()
plt.show()
""")

md(r"""
* **8 bits.** int8 with one scale per tensor has the error of a fixed step: a flat-topped
  histogram cut off at half a step (max |error| 0.00729). One scale per row or per block of 32
  narrows it (rms 0.00125 for int8-channel, 0.00114 for q8_0, against 0.00425). The FP8 errors
  are relative: peaked at zero, with long tails from the largest weights; fp8_e4m3fn-channel
  reaches 0.05539 and mxfp8 0.11134, where the power-of-two scale clamps the top of some blocks.
* **4 bits.** On this tensor q4_0 has the smallest rms error (0.01850), then nf4 (0.01967), nvfp4
  with its blocks of 16 (0.02164) and int4-g128 (0.02272). nf4's tail is longer than the integer
  codes' (max |error| 0.22737 against 0.13144 for int4-g128): its levels are densest near zero and
  sparse near the block maximum. mxfp4 has the largest rms error (0.02641) and the longest tail
  (max |error| 0.35156): the largest values of a block clamp at the largest E2M1 code.

The rms errors from `lowp.quantize` match `quant_error`'s rmse for the tensor to every printed digit.
""")

md(r"""
## Beside published end-to-end figures

llama.cpp and bitsandbytes users judge formats by what they do to a whole model, not by SQNR. The
figures below are **end-to-end changes in perplexity or accuracy of other, larger models**
(LLaMA-7B, Llama 3 8B, models of 125M to 13B parameters, LLaMA 7B to 65B after fine-tuning),
measured by others. They depend on every tensor, on the activations, on which tensors stay in
higher precision and on the evaluation text, and they are not in dB. Only the **ranking** of the
formats can be set beside the SQNR ranking above; the values cannot be converted into each other.

| source | model and measure | figures quoted |
|---|---|---|
| llama.cpp README, "Quantization" table [1] | LLaMA-7B, wikitext-2 perplexity | F16 5.9066, Q8_0 5.9070, Q5_0 5.9862, Q4_1 6.0912, Q4_0 6.1565 |
| llama.cpp perplexity README, "LLaMA 3 8b Scoreboard" [2] | Llama 3 8B, wikitext-2, perplexity increase over FP16 | q8_0 0.002650, q5_0 0.131591, q4_1 0.451103, q4_0 0.468514 |
| QLoRA paper, Table 2 [3] | mean Pile Common Crawl perplexity of OPT, BLOOM, LLaMA and Pythia models, 125M to 13B | Int4 34.34, Float4 (E2M1) 31.07, Float4 (E3M0) 29.48, NFloat4 + DQ 27.41 |
| QLoRA paper, Table 4 [3] | mean 5-shot MMLU accuracy after adapter fine-tuning of LLaMA 7B to 65B | BFloat16 53.0, Float4 52.2, NFloat4 + DQ 53.1 |
| QLoRA paper, Section 3 [3] | storage of NF4's block constants (blocks of 64) | 0.5 bits per parameter, 0.127 with double quantization |

[1] https://github.com/ggerganov/llama.cpp#quantization, the table of the README in mid-2023
(k-quants PR https://github.com/ggml-org/llama.cpp/pull/1684 refers to it as "the corresponding
table on the main page" and repeats its F16 figure, 5.9066); the table later moved to
`examples/quantize/README.md`, marked outdated, and is no longer in the current README.
[2] https://github.com/ggml-org/llama.cpp/blob/master/tools/perplexity/README.md, added with
https://github.com/ggml-org/llama.cpp/pull/6936.
[3] Dettmers, Pagnoni, Holtzman, Zettlemoyer, "QLoRA: Efficient Finetuning of Quantized LLMs",
https://arxiv.org/abs/2305.14314.

The cell below prints the perplexity increases from [1] and [2] beside the SQNR of lowp's
implementation of the same llama.cpp types, and QLoRA's two 4-bit types that lowp implements or
approximates.

""")

code(r"""
# Figures quoted from the sources cited above (not computed here).
LLAMA7B_PPL = {"F16": 5.9066, "Q8_0": 5.9070, "Q5_0": 5.9862, "Q4_1": 6.0912, "Q4_0": 6.1565}
LLAMA3_8B_DPPL = {"q8_0": 0.002650, "q5_0": 0.131591, "q4_1": 0.451103, "q4_0": 0.468514}
QLORA_PPL = {"Int4": 34.34, "NFloat4 + DQ": 27.41}

print(f"{'llama.cpp type':15s}{'LLaMA-7B dPPL':>14s}{'Llama-3-8B dPPL':>16s}  |  lowp scheme"
      f"{'SQNR stories260K':>18s}{'SQNR Gaussian':>15s}")
for t in ("Q8_0", "Q5_0", "Q4_1", "Q4_0"):
    s = t.lower()
    print(f"{t:15s}{LLAMA7B_PPL[t] - LLAMA7B_PPL['F16']:+14.4f}{LLAMA3_8B_DPPL[s]:+16.4f}  |  {s:11s}"
          f"{AGG['stories260K'][s]['sqnr_db']:18.2f}{AGG['Gaussian'][s]['sqnr_db']:15.2f}")
print()
for t, s in (("Int4", "int4-g64"), ("NFloat4 + DQ", "nf4:double-quant")):
    print(f"QLoRA {t:13s} mean PPL {QLORA_PPL[t]:6.2f}  |  {s:17s}"
          f"{AGG['stories260K'][s]['sqnr_db']:7.2f} dB (stories260K) {AGG['Gaussian'][s]['sqnr_db']:7.2f} dB (Gaussian), "
          f"{AGG['Gaussian'][s]['bits_per_weight']:.3f} b/w at 4096 x 4096")
""")

md(r"""
* **llama.cpp's legacy types rank the same in every column**: q8_0, then q5_0, then q4_1, then
  q4_0, on both scoreboards and in SQNR on both data sets. The step from q4_0 to q4_1 is small
  in SQNR (21.32 to 22.14 dB on the Gaussian, for 0.5 more bits per weight) and small on
  Llama 3 8B (perplexity +0.4685 for q4_0, +0.4511 for q4_1); on LLaMA 2, a llama.cpp contributor
  noted that q4_1 and q5_1 even had higher perplexity than q4_0 and q5_0
  (https://github.com/ggml-org/llama.cpp/pull/2707).
* **NF4 beats blockwise Int4 in both**: QLoRA's mean perplexity 27.41 (NF4 + DQ) against 34.34
  (Int4); lowp's nf4:double-quant 20.72 dB against 19.36 dB for int4-g64 (absmax scale per block
  of 64, the block size of bitsandbytes' 4-bit types) on the Gaussian, 20.51 against 19.46 dB on
  stories260K. The paper's exact Int4 setup may differ in detail from int4-g64.
* **Double quantization's cost agrees exactly**: the paper's 0.127 bits per parameter for the
  constants is lowp's 4.127 bits per weight for nf4:double-quant on a 4096 × 4096 matrix.
* QLoRA's Float4 is bitsandbytes' own FP4 code table with an absmax scale per block of 64, which
  lowp does not implement; lowp's E2M1 schemes (mxfp4, nvfp4) scale differently, so they are not
  set beside it.

What no such comparison can say is how many dB of weight SQNR a given model can lose for a given
perplexity increase: that depends on the model and on the tensors, and needs an end-to-end run.
""")

md(r"""
## Summary

* On both data sets the Pareto front runs through int2 and int3 with groups, nf4 with double
  quantization, mxfp6_e2m3, 8-bit integers with per-row or per-block scales, q8_0 and fp16. On
  the Gaussian llama.cpp's super-block types (q2_K to q6_K, iq4_xs) join it at every size they
  come in; on stories260K, whose rows they cannot take, iq4_nl, q5_0 and q5_1 do. No FP8 variant,
  no FP4 variant and bf16 are on it for weights.
* Between 4.0 and 4.5 bits per weight the Gaussian's SQNR ranges from 16.06 dB (int4-channel,
  4.0 bits) to 22.93 dB (q4_K, 4.5 bits): the size of the scale block is the main lever; the code
  table (NF4, E2M1) and a zero point move the result by tenths of a dB to about 1.5 dB, iq4_nl's
  searched non-uniform grid 1.05 dB over q4_0, and q4_K's second level of scales 0.57 dB more.
* stories260K's rows (64 and 172 values) cannot hold a 256-value super-block, so q2_K to q6_K,
  iq4_xs and the mixes built on them (Q4_K_M, Q6_K) store llama.cpp's fallbacks (q4_0, q5_0, q5_1,
  q8_0, iq4_nl, and f16 for `down_proj`) there. On the same real values laid out in rows of 256 the
  k-quants come within about half a dB of the Gaussian.
* The Gaussian results follow the uniform-noise model to within 0.15 dB from 3 to 8 bits. The
  real checkpoint ranks the schemes the same way (rank correlation 0.991) and comes within half a
  dB of the Gaussian at 4 bits with blocks of 16 to 64; within it, tensors with a large crest
  factor are the hardest for one scale per tensor, while with a scale per row or block the
  tensors differ by little (0.29 to 0.87 dB std over the tensors).
* The ranking agrees with the perplexity figures llama.cpp and the QLoRA paper published for the
  formats they share (q8_0 > q5_0 > q4_1 > q4_0; NF4 > Int4), which are end-to-end results on
  larger models and not comparable in value.
""")

code(r"""
print(f"notebook ran in {time.perf_counter() - T_START:.1f} s")
""")


main("quantization_error.ipynb")
