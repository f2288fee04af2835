"""Builds notebooks/training_state.ipynb (without outputs).

    cd notebooks && /usr/bin/python3 src/training_state.py   (see nbbuild.py)
"""
from nbbuild import code, main, md

md(r"""
# The numerics behind the 16 bytes: what each training-state recipe does to AdamW's updates

Mixed-precision AdamW keeps 16 bytes a parameter: bf16 weights and gradients (2 + 2), an fp32
master copy (4) "to prevent rounding errors" and two fp32 moments (4 + 4). The cheaper recipes
drop the master copy (with stochastic rounding or Kahan summation to make up for it), keep the
moments in bf16 or in bitsandbytes' 8-bit blockwise format, or the gradients in fp8. `lowp size`
prices them; this notebook measures what they cost in numbers, with `lowp.update_error` and
`lowp.training_plan` (`lowp update-error`, `lowp plan --recipes`): N AdamW steps on the bundled
models' real weights, once in float64 and once per recipe, with a seeded gradient model
(`optim/update_error.h` gives the model and every definition).

* **updates lost**: the share of element-steps at which the float64 reference moved a weight and
  the recipe's stored weight (its master copy when it has one) did not move at all;
* **update ratio**: sum(applied x intended) / sum(intended^2): 1 when updates arrive on average,
  0 when they are lost;
* **weight error**: ||(w - w0) - (p - p0)|| / ||p - p0|| after the last step: 0 when the recipe
  moved the weights as float64 did, 1 as if it had not trained at all.
""")

code(r"""
%matplotlib inline
%config InlineBackend.figure_format = 'png'
import os
import numpy as np
import matplotlib.pyplot as plt
import lowp

plt.rcParams.update({"figure.dpi": 80, "savefig.dpi": 100, "font.size": 10})
DATA = os.environ.get("LOWP_TEST_DATA", os.path.join("..", "tests", "data"))
STORIES3M = os.path.join(DATA, "stories3M-hf", "model.safetensors")
STORIES260K = os.path.join(DATA, "stories260K", "stories260K.f32.safetensors")
for r in lowp.training_recipes():
    print(f"{r['recipe']:26s}{r['bytes_per_parameter']:7.3f} B  {r['description']}")
""")

md(r"""
## The ladder on stories3M's weights, priced for Llama 3.1 405B

Each recipe's bytes per parameter set the model states of a 405B pretraining job (`lowp size`'s
memory model, H100 80 GB); beside them, what the recipe did to 50 AdamW steps at lr 1e-4 on the
last decoder layer of the bundled stories3M-hf model (0.79 M weights; betas 0.9 / 0.95, weight
decay 0.1). `lowp update-error tests/data/stories3M-hf/model.safetensors` runs the whole
model for 100 steps (the README's table).
""")

code(r"""
LADDER = ["fp32-master", "fp8-grads", "bf16-kahan", "bf16-rne", "bf16-sr", "fp32-master-8bit",
          "fp32-master-fp8-moments", "bf16-sr-bf16-moments", "bf16-sr-8bit"]
plan = lowp.training_plan(model="llama-3.1-405b", mode="pretrain", recipes=LADDER,
                          tensors=[STORIES3M], select="*layers.3.*", steps=50,
                          lr=1e-4)
ROWS = {r["recipe"]: r for r in plan["rows"]}
print(f"{'recipe':24s}{'B/param':>8s}{'states TB':>11s}{'devices':>9s}{'lost':>9s}{'ratio':>8s}"
      f"{'w err':>9s}{'m err':>9s}{'v err':>9s}")
for name in LADDER:
    r = ROWS[name]
    mem = r["memory"]
    print(f"{name:24s}{r['bytes_per_parameter']:8.3f}{mem['whole']['model_states'] / 1e12:11.2f}"
          f"{mem['devices_for_states']:9d}{r['updates_lost']:9.2%}{r['update_ratio']:8.3f}"
          f"{r['weight_relative_error']:9.4f}{r['m_relative_error']:9.4f}{r['v_relative_error']:9.4f}")
# The literature's direction: bf16 rounded to nearest without a master copy loses updates; SR
# keeps them on average; Kahan summation recovers them; 8-bit moments track fp32.
assert ROWS["bf16-rne"]["update_ratio"] < 0.9 < ROWS["bf16-sr"]["update_ratio"]
assert ROWS["bf16-kahan"]["weight_relative_error"] < ROWS["bf16-sr"]["weight_relative_error"] \
    < ROWS["bf16-rne"]["weight_relative_error"]
assert ROWS["fp32-master-8bit"]["weight_relative_error"] < 0.05
""")

md(r"""
## Where bf16 without a master copy stops learning

An AdamW step moves a weight by about lr; a bf16 weight of 0.02 has an ulp of 2^-13 = 1.2e-4
(2^-14 below 0.0156). Below half an ulp, rounding to nearest gives the weight back unchanged.
The sweep runs 40 steps on stories260K's weights (rms about 0.1: ulps of 2^-10..2^-11 are
common there) at each lr.
""")

code(r"""
LRS = [1e-6, 3e-6, 1e-5, 3e-5, 1e-4, 3e-4, 1e-3]
SWEEP = ["fp32-master", "bf16-rne", "bf16-sr", "bf16-kahan"]
by_lr = {}
for lr in LRS:
    res = lowp.update_error(STORIES260K, SWEEP, steps=40, lr=lr, weight_decay=0.0)
    by_lr[lr] = {r["recipe"]: r for r in res["recipes"]}
print(f"{'lr':>8s}" + "".join(f"{n + ' lost':>18s}" for n in SWEEP[1:])
      + "".join(f"{n + ' ratio':>18s}" for n in SWEEP[1:]) + f"{'sr w err':>10s}{'kahan w err':>13s}")
for lr in LRS:
    print(f"{lr:8.0e}" + "".join(f"{by_lr[lr][n]['updates_lost']:18.2%}" for n in SWEEP[1:])
          + "".join(f"{by_lr[lr][n]['update_ratio']:18.3f}" for n in SWEEP[1:])
          + f"{by_lr[lr]['bf16-sr']['weight_relative_error']:10.3f}"
          + f"{by_lr[lr]['bf16-kahan']['weight_relative_error']:13.3f}")

fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 3.8))
for name, style in zip(SWEEP, ["k-", "C3o-", "C0s-", "C2^-"]):
    ax1.semilogx(LRS, [by_lr[lr][name]["update_ratio"] for lr in LRS], style, label=name)
    ax2.loglog(LRS, [max(by_lr[lr][name]["weight_relative_error"], 1e-6) for lr in LRS], style,
               label=name)
ax1.set_xlabel("learning rate")
ax1.set_ylabel("update ratio (1: updates arrive)")
ax1.axhline(1, color="0.7", lw=0.8)
ax2.set_xlabel("learning rate")
ax2.set_ylabel("weight relative error after 40 steps")
ax1.legend(fontsize=8)
fig.suptitle("stories260K, 40 AdamW steps, no weight decay", fontsize=10)
fig.tight_layout()
os.makedirs("figures", exist_ok=True)
fig.savefig(os.path.join("figures", "training_state.png"))
plt.show()
rne_small, rne_large = by_lr[1e-6]["bf16-rne"], by_lr[1e-3]["bf16-rne"]
assert rne_small["update_ratio"] < 0.1 < 0.9 < rne_large["update_ratio"]
assert all(abs(by_lr[lr]["bf16-sr"]["update_ratio"] - 1) < 0.05 for lr in LRS)
""")

md(r"""
## 8-bit and bf16 moments against fp32

With the fp32 master copy kept, only the moments change: bitsandbytes' blockwise dynamic map
(256 values, one float32 absmax per 256), e4m3 with a scale per 256 (torchao's AdamWFp8), or bf16
moments (without a master copy, with stochastic rounding). The moments' relative errors in the
ladder's run above, and what they leave in the weights:
""")

code(r"""
STATES = ["fp32-master", "fp32-master-8bit", "fp32-master-fp8-moments", "bf16-sr-bf16-moments",
          "bf16-sr"]
S = ROWS
print(f"{'recipe':26s}{'B/param':>8s}{'m err':>9s}{'v err':>9s}{'w err':>9s}{'moments to 0':>14s}")
for name in STATES:
    r = S[name]
    print(f"{name:26s}{r['bytes_per_parameter']:8.3f}{r['m_relative_error']:9.4f}"
          f"{r['v_relative_error']:9.4f}{r['weight_relative_error']:9.4f}"
          f"{r['census']['moment_underflow']:14,d}")
assert S["fp32-master-8bit"]["m_relative_error"] < 0.05
assert S["bf16-sr-bf16-moments"]["weight_relative_error"] < 1.1 * S["bf16-sr"]["weight_relative_error"]
""")

md(r"""
## Summary

* **The ladder** (stories3M's last layer, 50 steps at lr 1e-4): the fp32 master copy keeps every
  update (0% lost, weight error 4e-4, the bf16 gradients' doing). Dropping it with bf16 rounded
  to nearest saves 4 bytes a parameter (6.49 -> 4.87 TB for Llama 3.1 405B's states, 82 -> 61
  H100s) and loses 59% of the updates: the update ratio is 0.71 and the weights end 59% of their
  movement away from float64 AdamW's. Stochastic rounding delivers the updates on average (ratio
  1.000) with noise (error 0.19); Kahan summation (a bf16 buffer, 14 bytes) recovers them (ratio
  0.995, error 0.026). 8-bit blockwise moments (10 bytes with a master copy) leave an error of
  0.013, e4m3 moments 0.032, bf16 moments no more than SR itself: at 6 bytes, bf16 + SR + 8-bit
  moments (2.45 TB, 31 devices) costs no more than SR alone.
* **Against the learning rate** (stories260K, 40 steps): bf16 rounded to nearest stops learning
  as lr falls: its update ratio drops from 0.91 at lr 1e-3 to 0.20 at 1e-4 and 0.002 at 1e-6, the
  learning rates of a cosine schedule's tail. Stochastic rounding keeps the ratio at 1.00 at every
  lr, but below about 3e-5 its noise exceeds the movement (weight error 1.15 at 3e-5, 6.3 at
  1e-6). Kahan summation has the lowest error of the bf16 recipes at every lr (0.018 at 1e-3, 0.18
  at 1e-4); at the smallest rates its weights have hardly moved yet (ratio 0.06 at 1e-6): the
  updates wait in the compensation buffer until they add up to an ulp.
* This reproduces the literature's direction: bf16 without a master copy loses small updates,
  SR and Kahan summation recover them (Zamirai et al., arXiv 2010.06192), and 8-bit states track
  fp32 (Dettmers et al., arXiv 2110.02861). These are numbers of the update arithmetic on real
  weights with a synthetic gradient, not of a training run's loss: the gradient model is
  documented in docs/training-state.md.
""")

main("training_state.ipynb")
