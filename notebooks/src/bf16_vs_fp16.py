"""Builds notebooks/bf16_vs_fp16.ipynb (without outputs).

    cd notebooks && /usr/bin/python3 src/bf16_vs_fp16.py   (see nbbuild.py)
"""
from nbbuild import code, main, md

md(r"""
# bf16 vs fp16 (and fp8): range, precision, and why fp16 needs a loss scale

A 16-bit float spends its bits either on exponent (range) or on mantissa (precision). bf16 keeps
fp32's 8 exponent bits and 7 mantissa bits; fp16 has 5 exponent bits and 10 mantissa bits; the
two fp8 formats have 4 or 5 exponent bits and 3 or 2 mantissa bits. This notebook shows what that
means in numbers: the representable range and the relative spacing of each format on one
picture, where the weights of a real (small) Llama checkpoint fall in those ranges, and what
happens to a gradient-like distribution that spans many decades: fp16 flushes part of it to zero
unless it is multiplied by a power-of-two loss scale first; bf16 keeps it without one. Every
number comes from `lowp` (format catalog, exact conversions, `lowp range`).
""")

code(r"""
%matplotlib inline
%config InlineBackend.figure_format = 'png'
import numpy as np
import matplotlib.pyplot as plt
import lowp

plt.rcParams.update({"figure.dpi": 80, "savefig.dpi": 100, "font.size": 10})
NAMES = ["fp32", "bf16", "fp16", "fp8_e4m3fn", "fp8_e5m2"]
COLOR = {"fp32": "0.35", "bf16": "tab:blue", "fp16": "tab:orange",
         "fp8_e4m3fn": "tab:green", "fp8_e5m2": "tab:red"}
F = {f["name"]: f for f in lowp.formats() if f["name"] in NAMES}

def p2(x):
    # x as 2^k with k to one decimal
    return f"2^{np.log2(x):.1f}".replace(".0", "")

def num(x):
    return f"{x:.0f}" if 1 <= x < 1e6 else f"{x:.3g}"

print(f"{'format':<11}{'exp':>4}{'man':>4}{'min subnormal':>24}{'min normal':>24}{'max finite':>13}{'epsilon':>18}")
for n in NAMES:
    f = F[n]
    print(f"{n:<11}{f['exponent_bits']:>4}{f['mantissa_bits']:>4}"
          f"{f['min_subnormal']:>14.3g} = {p2(f['min_subnormal']):<7}{f['min_normal']:>14.3g} = {p2(f['min_normal']):<7}"
          f"{num(f['max_finite']):>13}{f['epsilon']:>10.3g} = {p2(f['epsilon'])}")
""")

md(r"""
## Range and relative spacing on one picture

Top: the positive values each format represents, on a log axis. The pale part of each bar is the
subnormal range (from the smallest subnormal to the smallest normal, with fewer significant bits
the lower it goes); the solid part is the normal range up to the largest finite value. Anything
below half the smallest subnormal rounds to zero; anything that rounds above the largest finite
value overflows (to inf; e4m3fn has no inf, so to NaN or, under a saturating overflow policy, to
448).

Bottom: the distance from each representable value to the next one up, divided by the value,
computed from every code of the 8- and 16-bit formats (`lowp.decode` of all 2^8 or 2^16 codes)
and from a sample of fp32 codes (each binade's first and last code, and the subnormal powers of
two). In the normal range this is a sawtooth between about epsilon/2 (epsilon/(2 - epsilon) exactly,
at the top of a binade) and epsilon, the `epsilon` column
above; in the subnormal range the spacing stays fixed while the value shrinks, so the relative
spacing rises to 1 at the smallest subnormal.
""")

code(r"""
def positive_values(name):
    # every positive finite value of an 8/16-bit format; a sample of fp32's
    bits = F[name]["bits"]
    if bits == 32:
        e = np.arange(1, 255, dtype=np.uint32) << np.uint32(23)
        codes = np.concatenate([np.uint32(1) << np.arange(23, dtype=np.uint32), e, e | np.uint32(0x7FFFFF)])
        v = codes.view(np.float32)
    else:
        v = lowp.decode(np.arange(2**bits, dtype=np.uint16 if bits == 16 else np.uint8), name)
    return np.unique(v[np.isfinite(v) & (v > 0)])

def relative_spacing(name):
    v = positive_values(name)
    if F[name]["bits"] == 32:
        v = v[v < F[name]["max_finite"]]     # the largest has no finite neighbour above
        return v, np.spacing(v) / v          # exact gap to the next float32 up
    return v[:-1], np.diff(v) / v[:-1]       # gap to the next code up

fig, (ax0, ax1) = plt.subplots(2, 1, figsize=(10, 6.6), sharex=True,
                               gridspec_kw={"height_ratios": [1, 1.6]})
for i, n in enumerate(NAMES):
    f, y, c = F[n], len(NAMES) - 1 - i, COLOR[n]
    ax0.barh(y, f["min_normal"] - f["min_subnormal"], left=f["min_subnormal"], color=c, alpha=0.3, height=0.6)
    ax0.barh(y, f["max_finite"] - f["min_normal"], left=f["min_normal"], color=c, height=0.6)
    ax0.text(f["max_finite"] * 3, y, f"max {num(f['max_finite'])}", va="center", fontsize=8)
    ax0.text(f["min_subnormal"] / 3, y, p2(f["min_subnormal"]), va="center", ha="right", fontsize=8)
    x, r = relative_spacing(n)
    ax1.plot(x, r, color=c, lw=0.9, label=f"{n} (epsilon {p2(f['epsilon'])})")
ax0.set_yticks(range(len(NAMES)), NAMES[::-1])
ax0.set_xscale("log")
ax0.set_xlim(1e-57, 1e46)
ax0.set_xticks([10.0**e for e in range(-50, 41, 10)])
ax0.set_title("Positive finite values: subnormal range (pale) and normal range (solid)")
ax1.set_yscale("log", base=2)
ax1.set_ylim(2.0**-25, 2.0**1)
ax1.set_xlabel("|value| (log scale)")
ax1.set_ylabel("gap to next value / value")
ax1.set_title("Relative spacing: precision at each magnitude (lower is finer)")
ax1.grid(True, which="major", alpha=0.3)
ax1.legend(loc="upper right", fontsize=8)
fig.suptitle("fp32, bf16, fp16, fp8 e4m3fn, fp8 e5m2: range vs precision", y=0.995)
fig.tight_layout()
fig.savefig("figures/bf16_vs_fp16.png", dpi=100, bbox_inches="tight")
plt.show()

for n in NAMES:
    x, r = relative_spacing(n)
    normal = x >= F[n]["min_normal"]
    print(f"{n:<11} binades of normal range {np.log2(F[n]['max_finite'] / F[n]['min_normal']):6.1f}, "
          f"relative spacing in it {r[normal].min():.3g} .. {r[normal].max():.3g}")
""")

md(r"""
What the picture says: bf16's bar has the same ends as fp32's apart from the subnormals, because
the two share the 8-bit exponent (254 binades of normal range); bf16 pays for that with a
relative spacing of up to 2^-7, 8 times coarser than fp16's 2^-10. fp16 has the finer grid but
only 30 binades of normal range (2^-14 to 65504) plus 10 of subnormals. e5m2 has fp16's exponent
(the same smallest normal, 2^-14) with 2 mantissa bits; e4m3fn gives up range (14.8 binades, max
448) for a third mantissa bit.
""")

md(r"""
## A real checkpoint against those ranges

The bundled `stories260K` checkpoint is a 260K-parameter Llama (llama2.c's TinyStories model, see
`tests/data/stories260K/PROVENANCE.md`), stored in fp32. Below: the histogram of log2|w| over all
its tensors, with the thresholds of fp16 and the fp8 formats (bf16's smallest normal, 2^-126, is
far off the left edge), and what `lowp.range_study` (the `lowp range` command) counts when the
values are cast to each format: the fraction flushed to zero, the fraction that lands in the
subnormal range, the fraction that overflows, the RMS relative error over nonzero values, and the
window of power-of-two scales 2^k that would fit the tensor (`min_scale_log2` .. `max_scale_log2`:
k at least the first keeps 99.9% of nonzero values at or above the smallest normal; k at most the
second keeps every value below the largest finite).
""")

code(r"""
PATH = lowp.bundled_checkpoint()  # tests/data/stories260K/stories260K.f32.safetensors
tensors = lowp.read_tensors(PATH)
w = np.concatenate([t.ravel() for t in tensors.values()])
aw = np.abs(w[w != 0])
print(f"{len(tensors)} tensors, {w.size:,} values, {w.size - aw.size} exact zeros; "
      f"|w| from {p2(aw.min())} to {aw.max():.3f} ({p2(aw.max())}), median {p2(np.median(aw))}")

def range_table(rs):
    print(f"{'format':<11}{'flushed':>10}{'subnormal':>11}{'overflow':>10}{'rms rel err':>13}{'scale window k':>16}")
    for r in rs["results"]:
        print(f"{r['format']:<11}{r['flushed_fraction']:>10.3%}{r['subnormal_fraction']:>11.3%}"
              f"{r['overflow_fraction']:>10.3%}{r['rms_relative_error']:>13.2e}"
              f"{r['min_scale_log2']:>8} .. {r['max_scale_log2']}")

range_table(lowp.range_study({"stories260K": w}, formats=NAMES[1:]))

fig, ax = plt.subplots(figsize=(10, 3.6))
ax.hist(np.log2(aw), bins=np.arange(-25, 10.25, 0.25), color="0.5")
ax.set_yscale("log")
for n, ls in [("fp16", "-"), ("fp8_e4m3fn", "--"), ("fp8_e5m2", ":")]:
    f = F[n]
    for key in ["min_subnormal", "min_normal", "max_finite"]:
        ax.axvline(np.log2(f[key]), color=COLOR[n], ls=ls, lw=1.5)
    ax.plot([], [], color=COLOR[n], ls=ls, label=f"{n}: min subnormal, min normal, max")
ax.set_xlim(-25, 17)
ax.set_xlabel("log2 |w|")
ax.set_ylabel("count (log scale)")
ax.set_title(f"stories260K: all {w.size:,} weights, log2 of magnitude, with format thresholds")
ax.legend(fontsize=8, loc="upper left")
fig.tight_layout()
plt.show()
""")

md(r"""
The weights sit a few binades below 1 (median 2^-3.5, largest 4.425), so fp16 holds them all:
nothing is flushed or overflows, and 0.037% land in the subnormal range. bf16 holds them too, at
a larger RMS relative error (1.72e-03 against fp16's 2.66e-04), the cost of its shorter
mantissa. Cast without a scale, e4m3fn puts 9.0% of the values in its subnormal range and
flushes 0.59% to zero, and its scale window is empty (k at least 7 to keep 99.9% normal, at most
6 to avoid overflow): no single power of two fits the whole checkpoint into e4m3fn's normal
range. That is why fp8 weights are stored with per-tensor or finer scales.
""")

md(r"""
## Gradients: many decades of magnitude

Gradients are the values that need range. Below, a seeded synthetic stand-in: 200,000 values with
random signs and log2|g| drawn from a normal distribution with mean -22 and standard deviation 3
(most of the mass between 2^-31 and 2^-13, tails well beyond). Cast to fp16 as they are, the small
ones fall below fp16's smallest subnormal and become zero, and most of the rest become subnormals
with only a few significant bits. The loss-scale fix: multiply the loss, hence every gradient, by
2^k before the cast to fp16 and divide by 2^k after (in fp32; a power of two makes both steps
exact in fp32). `lowp.range_study` gives the window of usable k: `max_scale_log2` is the largest
k with no overflow, `min_scale_log2` the smallest with 99.9% of the nonzero values at or above
fp16's smallest normal. We take k = `min_scale_log2`, which leaves the rest of the window as
headroom against overflow. The round trip is done with `lowp.fake_quant` (convert to the format
and decode back, exactly).
""")

code(r"""
rng = np.random.default_rng(0)
n = 200_000
g = (rng.choice(np.float32([-1, 1]), n) * np.exp2(rng.normal(-22.0, 3.0, n))).astype(np.float32)

rs = lowp.range_study(g, formats=["fp16", "bf16"])
fp16 = rs["results"][0]
k = fp16["min_scale_log2"]
print(f"fp16 scale window: k from {fp16['min_scale_log2']} to {fp16['max_scale_log2']}; chosen loss scale 2^{k}")
scale = np.float32(2.0**k)

def round_trip_error(name, s):
    # cast g x s to the format, decode, divide by s (exact in fp32): RMS relative error against g
    q = lowp.fake_quant(g * s, name) / s
    return np.sqrt(np.mean(((q - g) / g) ** 2))

print(f"\n{'cast':<20}{'flushed':>9}{'subnormal':>11}{'overflow':>10}{'rms rel err':>13}")
for label, name, s in [("fp16, no scale", "fp16", np.float32(1)), (f"fp16, scale 2^{k}", "fp16", scale),
                       ("bf16, no scale", "bf16", np.float32(1))]:
    r = lowp.range_study(g * s, formats=[name])["results"][0]
    print(f"{label:<20}{r['flushed_fraction']:>9.3%}{r['subnormal_fraction']:>11.3%}"
          f"{r['overflow_fraction']:>10.3%}{round_trip_error(name, s):>13.2e}")

# the window: flushed, subnormal and overflow fractions for every scale 2^j
ks = np.arange(-2, fp16["max_scale_log2"] + 7)
sweep = [lowp.range_study(g * np.float32(2.0**j), formats=["fp16"])["results"][0] for j in ks]

fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(11, 3.8), gridspec_kw={"width_ratios": [1.5, 1]})
bins = np.arange(-40, 17, 0.5)
ax0.hist(np.log2(np.abs(g)), bins=bins, color="0.45", alpha=0.8, label="g")
ax0.hist(np.log2(np.abs(g)) + k, bins=bins, color="tab:purple", alpha=0.5, label=f"g x 2^{k}")
f16 = F["fp16"]
ax0.axvspan(-40, np.log2(f16["min_subnormal"]) - 1, color="tab:red", alpha=0.12, label="fp16 flushes to 0")
ax0.axvspan(np.log2(f16["min_subnormal"]) - 1, np.log2(f16["min_normal"]), color="tab:orange", alpha=0.15,
            label="fp16 subnormal")
ax0.axvline(np.log2(f16["max_finite"]), color="tab:red", lw=1.5, label=f"fp16 max ({num(f16['max_finite'])})")
ax0.set_xlim(-40, 17)
ax0.set_xlabel("log2 |value|")
ax0.set_ylabel("count")
ax0.set_title("Gradient-like values, before and after the loss scale")
ax0.legend(fontsize=8, loc="upper left")
for key, label, c in [("flushed_fraction", "flushed to 0", "tab:red"),
                      ("subnormal_fraction", "subnormal", "tab:orange"),
                      ("overflow_fraction", "overflow", "k")]:
    ax1.plot(ks, [100 * r[key] for r in sweep], marker=".", color=c, label=label)
ax1.axvspan(fp16["min_scale_log2"], fp16["max_scale_log2"], color="tab:green", alpha=0.15,
            label="window from lowp range")
ax1.axvline(k, color="tab:purple", lw=1, ls="--", label=f"chosen k = {k}")
ax1.set_xlabel("loss scale exponent k (values x 2^k)")
ax1.set_ylabel("% of values in fp16")
ax1.set_title("fp16 casts of g x 2^k")
ax1.legend(fontsize=8)
fig.tight_layout()
plt.show()
""")

md(r"""
Unscaled, fp16 flushes 15.96% of these gradients to zero and leaves 83.67% subnormal; the RMS
relative error (4.36e-01) is dominated by the flushed ones, each 100% wrong. With the loss scale
2^18 from the window, nothing is flushed or overflows, 0.044% are subnormal, and the error after
dividing the scale back out is 2.08e-04, the level of fp16's 10-bit mantissa. bf16 needs no
scale: its smallest normal is 2^-126, so every value keeps its 8 significant bits, and its error
(1.66e-03) is that of its mantissa alone, larger than scaled fp16's. The right panel shows the
trade a loss scale manages: too small a k flushes, too large a k overflows. Dynamic loss scalers
find k at run time, halving it after an overflow and raising it after a run of clean steps.
""")

md(r"""
When the values span more binades than fp16 has, no scale works. The same test on values
log-uniform between 2^-40 and 2^10 (50 binades):
""")

code(r"""
wide = (rng.choice(np.float32([-1, 1]), n) * np.exp2(rng.uniform(-40.0, 10.0, n))).astype(np.float32)
range_table(lowp.range_study(wide, formats=["fp16", "bf16"]))
r16 = lowp.range_study(wide, formats=["fp16"])["results"][0]
print(f"\nfp16 needs k >= {r16['min_scale_log2']} to keep 99.9% normal and k <= {r16['max_scale_log2']} "
      f"to avoid overflow: {'no' if r16['min_scale_log2'] > r16['max_scale_log2'] else 'a'} single power of two does both")
""")

md(r"""
Here fp16 would need k of at least 26 to keep 99.9% of the values normal but k of at most 5 to
avoid overflow, so every choice flushes or overflows (unscaled: 30.0% flushed, 21.9% subnormal);
bf16 keeps all of them, with the same 1.66e-03 error as before. That is the practical
difference: mixed-precision training in bf16 runs without a loss scaler; in fp16 it needs one,
and one scale per tensor is not enough once a tensor's values span more than fp16's range.
""")


main("bf16_vs_fp16.ipynb")
