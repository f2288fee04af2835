"""Builds notebooks/mixed_types.ipynb (without outputs).

    cd notebooks && /usr/bin/python3 src/mixed_types.py   (see nbbuild.py)
"""
from nbbuild import code, main, md

md(r"""
# Mixed types: which format each matrix gets, chosen by measured loss

A llama.cpp recipe such as Q4_K_M is a fixed rule (every matrix q4_K, `attn_v` and `ffn_down` a
step up in some layers). `lowp.mix` measures instead what every matrix of the model costs alone
in every type (the mean KL divergence of the next-token distribution from the float32 model's):
each matrix run end to end in one probe type, the other types' costs scaled from it by their
weight errors on the matrix (`sensitivity="exact"` runs every type), then the assignment of least
predicted KL within a byte budget, exactly, then that
assignment and llama.cpp's recipes evaluated on tokens the choice was not tuned on
([docs/mix.md](../docs/mix.md)). The model is the bundled stories3M-hf: a 4-layer Llama of 3.3 M
parameters whose rows are 256 and 768 wide, so llama.cpp's super-block types (q2_K .. q6_K,
iq4_xs) apply as themselves. The questions:

1. **The prediction**: a mix's KL predicted as the sum of its matrices' measured costs, against
   the KL measured with all of them quantized at once.
2. **The front**: lowp's mix at each recipe's own size against the recipe.
3. **Where the bytes go**: which matrices the budget upgrades, and which it lets go down.

Every number below is computed in the notebook from `lowp.mix`'s result.
""")

code(r"""
%matplotlib inline
%config InlineBackend.figure_format = 'png'
import time
T_START = time.perf_counter()

import numpy as np
import matplotlib.pyplot as plt
import lowp

plt.rcParams.update({"figure.dpi": 80, "savefig.dpi": 100, "font.size": 9})

# Tuning: 8 sequences of 256 sampled from the model (seed 1); verification: 16 x 256 sampled
# with seed 0 (other tokens). Budget: Q4_K_M's bits per weight on this model. Every recipe of
# Q2_K .. Q8_0 and lowp's mix at its size are verified, and 12 random assignments.
t = time.perf_counter()
R = lowp.mix(bits_per_weight=4.87, random_mixes=12, random_seed=0)
print(f"lowp.mix: {len(R['sensitivity'])} matrices x {len(R['types'])} types, "
      f"{R['sensitivity_method']} from {R['candidates_measured']} candidates measured in "
      f"{R['probe']} on {R['tokens']['tune_positions']} positions, "
      f"{len(R['rows'])} mixes verified on {R['tokens']['verify_positions']} other positions, "
      f"in {time.perf_counter() - t:.0f} s")
print("types:", " ".join(R["types"]))
print(f"the mix: {R['bits_per_weight']:.4f} bits per weight, predicted KL {R['predicted']['kl_mean']:.3e}, "
      f"measured {R['measured']['kl_mean']:.3e}, top-1 {R['measured']['top1_agreement']:.2%}; "
      f"allocation exact: {R['allocation']['exact']}")
""")

md(r"""
## 1. Predicted against measured KL

Each row's prediction is the sum, over its matrices, of the KL that matrix costs alone in its
type (on the tuning tokens: measured in the probe type, predicted in the others); the
measurement quantizes all of them at once (on the verification tokens). If the costs add, the points lie on the diagonal. Spearman's rank correlation says
whether the prediction orders mixes as the measurement does, which is what the allocation needs;
the relative error says how far the sum is off.
""")

code(r"""
def ranks(x):
    x = np.asarray(x, float)
    order = np.argsort(x, kind="stable")
    r = np.empty(len(x))
    i = 0
    while i < len(x):
        j = i
        while j + 1 < len(x) and x[order[j + 1]] == x[order[i]]:
            j += 1
        r[order[i:j + 1]] = (i + j) / 2 + 1
        i = j + 1
    return r


def spearman(a, b):
    return float(np.corrcoef(ranks(a), ranks(b))[0, 1])


rows = [r for r in R["rows"] if r["predicted_kl_mean"] is not None]
kinds = {"random": [], "recipe": [], "lowp": [], "mix": []}
for r in rows:
    kinds[r["kind"]].append(r)
for kind, rs in kinds.items():
    if len(rs) < 3:
        continue
    p = np.array([r["predicted_kl_mean"] for r in rs])
    m = np.array([r["kl_mean"] for r in rs])
    rel = np.abs(p - m) / m
    print(f"{kind:7s} {len(rs):2d} mixes: Spearman {spearman(p, m):.3f}, "
          f"median |predicted - measured| / measured {np.median(rel):.1%}, largest {rel.max():.1%}")
allp = np.array([r["predicted_kl_mean"] for r in rows])
allm = np.array([r["kl_mean"] for r in rows])
print(f"all {len(rows)} rows: Spearman {spearman(allp, allm):.3f}; "
      f"lowp's own figures for the random mixes: Spearman {R['prediction']['spearman']:.3f}, "
      f"median error {R['prediction']['median_relative_error']:.1%}")
""")

md(r"""
## 2. The front: lowp's mix at each recipe's size

For each of llama.cpp's recipes, `lowp.mix` also allocates with the recipe's own bytes as the
budget ("lowp @ Q4_K_M"), so each recipe has a mix of no more bits to beat. The table gives the
ratio of their measured KLs; the figure puts both fronts and the random mixes on one plot.
""")

code(r"""
recipes = [r for r in R["rows"] if r["kind"] == "recipe"]
ours = {r["recipe"].removeprefix("lowp @ "): r for r in R["rows"] if r["kind"] == "lowp"}
print(f"{'recipe':8s} {'bits/w':>7s} {'KL':>10s} {'top-1':>7s} | {'lowp bits/w':>11s} {'KL':>10s} {'top-1':>7s} | KL ratio")
ratios = []
for r in recipes:
    o = ours.get(r["recipe"])
    if o is None:
        continue
    ratios.append(o["kl_mean"] / r["kl_mean"])
    print(f"{r['recipe']:8s} {r['bits_per_weight']:7.4f} {r['kl_mean']:10.3e} {r['top1_agreement']:7.2%} | "
          f"{o['bits_per_weight']:11.4f} {o['kl_mean']:10.3e} {o['top1_agreement']:7.2%} | {ratios[-1]:.2f}")
print(f"lowp's mix at the recipes' sizes: {min(ratios):.2f}x to {max(ratios):.2f}x their KL")
""")

code(r"""
fig, (ax1, ax2, ax3) = plt.subplots(1, 3, figsize=(15, 4.4))
style = {"random": ("o", "tab:gray"), "recipe": ("s", "tab:red"), "lowp": ("D", "tab:blue"),
         "mix": ("*", "tab:green")}
for kind, rs in kinds.items():
    if rs:
        mk, c = style[kind]
        ax1.scatter([r["predicted_kl_mean"] for r in rs], [r["kl_mean"] for r in rs], marker=mk,
                    color=c, s=60 if kind == "mix" else 25, label=kind, zorder=3)
lim = [min(allp.min(), allm.min()) / 1.5, max(allp.max(), allm.max()) * 1.5]
ax1.plot(lim, lim, color="k", lw=0.7, ls="--", label="predicted = measured")
ax1.set(xscale="log", yscale="log", xlim=lim, ylim=lim, xlabel="predicted KL (sum of the matrices' costs)",
        ylabel="measured KL (verification tokens)", title="1. the prediction")
ax1.legend(fontsize=8)

for kind, label in [("recipe", "llama.cpp recipes"), ("lowp", "lowp mix at the recipe's size")]:
    rs = sorted((r for r in R["rows"] if r["kind"] == kind), key=lambda r: r["bits_per_weight"])
    mk, c = style[kind]
    ax2.plot([r["bits_per_weight"] for r in rs], [r["kl_mean"] for r in rs], marker=mk, color=c,
             label=label)
for r in recipes:
    ax2.annotate(r["recipe"], (r["bits_per_weight"], r["kl_mean"]), fontsize=7,
                 xytext=(3, 3), textcoords="offset points")
rs = kinds["random"]
ax2.scatter([r["bits_per_weight"] for r in rs], [r["kl_mean"] for r in rs], color="tab:gray", s=15,
            label="random mixes")
ax2.set(yscale="log", xlabel="bits per weight (the matrices)", ylabel="measured KL",
        title="2. the front against the recipes")
ax2.legend(fontsize=8)

# 3. bits per weight of each matrix in the mix, by layer and kind.
kinds_order = ["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]
layers = sorted({int(s["tensor"].split(".")[2]) for s in R["sensitivity"] if ".layers." in s["tensor"]})
grid = np.full((len(layers), len(kinds_order)), np.nan)
names = np.full(grid.shape, "", dtype=object)
embed = None
for rule, s in zip(R["rules"], R["sensitivity"]):
    bits = 8 * s["bytes"][rule["scheme"]] / s["weights"]
    name = s["tensor"]
    if ".layers." in name:
        at = (int(name.split(".")[2]), kinds_order.index(name.split(".")[4]))
        grid[at], names[at] = bits, rule["scheme"]
    else:
        embed = (name, rule["scheme"], bits)
im = ax3.imshow(grid, cmap="viridis", aspect="auto")
for i in range(len(layers)):
    for j in range(len(kinds_order)):
        ax3.text(j, i, names[i, j], ha="center", va="center", fontsize=7,
                 color="white" if grid[i, j] < np.nanmean(grid) else "black")
ax3.set_xticks(range(len(kinds_order)), kinds_order, rotation=30, fontsize=8)
ax3.set_yticks(range(len(layers)), [f"layer {l}" for l in layers])
ax3.set_title(f"3. the mix at {R['bits_per_weight']:.2f} bits/w ({embed[0].split('.')[-2]}: {embed[1]})")
fig.colorbar(im, ax=ax3, label="bits per weight")
fig.tight_layout()
fig.savefig("figures/mixed_types.png", dpi=100, bbox_inches="tight", pil_kwargs={"optimize": True})
plt.show()
""")

md(r"""
## 3. Where the bytes go

The budget's bytes go where the measured cost per byte saved is highest. Below, for each matrix:
its type in the mix, what that type cost alone, and what the next smaller type would have cost
(the saving the allocation declined).
""")

code(r"""
types_by_bytes = lambda s: sorted(R["types"], key=lambda t: s["bytes"][t])
print(f"{'tensor':42s} {'type':7s} {'KL alone':>10s}   {'next smaller':12s} {'its KL':>10s}")
per_layer = {}
for rule, s in zip(R["rules"], R["sensitivity"]):
    ts = types_by_bytes(s)
    i = ts.index(rule["scheme"])
    smaller = ts[i - 1] if i > 0 else None
    kl = s["kl_mean"][rule["scheme"]]
    print(f"{s['tensor']:42s} {rule['scheme']:7s} {kl:10.3e}   {smaller or '-':12s} "
          f"{(s['kl_mean'][smaller] if smaller else float('nan')):10.3e}")
    layer = s["tensor"].split(".")[2] if ".layers." in s["tensor"] else "tables"
    b = per_layer.setdefault(layer, [0, 0])
    b[0] += 8 * s["bytes"][rule["scheme"]]
    b[1] += s["weights"]
print()
for layer, (bits, n) in per_layer.items():
    print(f"{'layer ' + layer if layer != 'tables' else 'embedding':10s} {bits / n:.2f} bits per weight")
""")

md(r"""
## Summary

* **The prediction** (section 1): summing each matrix's cost alone (one probe measured per
  matrix, the other types predicted from their weight errors) orders the random mixes, the
  recipes and lowp's mixes nearly as the end-to-end measurement does (Spearman printed above), to
  within 10% in the median. That is what makes the allocation's choice worth making:
  it optimises a quantity that tracks the real one on tokens it never saw.
* **The front** (section 2): at every recipe's own size lowp's mix has a fraction of the recipe's
  KL (the ratios are printed) and a higher top-1 agreement. The recipe spends its extra bits by a
  fixed rule; the mix spends them where this model measured a cost.
* **Where the bytes go** (section 3): on this model the first layer gets the most bits and each
  layer's `v_proj` more than its `q_proj`; the later layers' MLP matrices (iq4_xs) and some of
  layer 1's attention (q2_K, q3_K) get the fewest. llama.cpp's rule (extra bits for `attn_v` and
  `ffn_down` in fixed layers) matches the `v_proj` part and not the rest.
* The same call on a downloaded model is `lowp.mix(model=DIR, bits_per_weight=B, text_file=...)`;
  `R["weights_option"]` is the rule list `lowp.eval(weights=...)` takes and
  `R["llama_quantize"]["command"]` builds the same mix with llama.cpp.
""")

code(r"""
print(f"notebook ran in {time.perf_counter() - T_START:.1f} s")
""")


main("mixed_types.ipynb")
