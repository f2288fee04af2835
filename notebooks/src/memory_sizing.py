"""Builds notebooks/memory_sizing.ipynb (without outputs).

    cd notebooks && /usr/bin/python3 src/memory_sizing.py   (see nbbuild.py)
"""
from nbbuild import code, main, md

md(r"""
# Memory sizing: what training and serving Llama 3.1 8B, 70B and 405B takes

How much accelerator memory a job needs, by component, and how many 80 GB devices that is, for
Llama 3.1 8B, 70B and 405B under full training in bf16 mixed precision, LoRA, QLoRA and
inference with bf16, fp8 and int4 weights. All numbers are `lowp size` and `lowp plan` (through
the Python bindings): exact byte counts from the models' tensor shapes, with the conventions of
`docs/sizing.md`. GB means 10^9 bytes throughout. The notebook also checks the figures that
circulate in articles (16 bytes per parameter, 6.5 TB and 81 GPUs for 405B, 140 GB for 70B in
fp16) against lowp's exact numbers, and ends with `lowp plan`'s table for one model: bits per
weight against measured error, and memory per device.
""")

code(r"""
%matplotlib inline
%config InlineBackend.figure_format = 'png'
import numpy as np
import matplotlib.pyplot as plt
import lowp

plt.rcParams.update({"figure.dpi": 80, "savefig.dpi": 100, "font.size": 10})
GB = 1e9
DEVICE = "h100-sxm"
dev = next(d for d in lowp.devices() if d["name"] == DEVICE)
print(f"device: {dev['name']}, {dev['description']}, {dev['memory_bytes'] / GB:.0f} GB")
MODELS = ["llama-3.1-8b", "llama-3.1-70b", "llama-3.1-405b"]
""")

md(r"""
## The articles' figures beside lowp's

The claims, quoted from the seed texts, and lowp's numbers for the same question. The training
state is the ZeRO paper's count for mixed-precision AdamW: bf16 weights and gradients (2 + 2
bytes), an fp32 master copy (4) and two fp32 Adam moments (4 + 4). Devices needed is a lower
bound: everything divided evenly over the devices (`devices_for_states` for the model states
alone over the full 80 GB, `devices_needed` for the whole job over what the 2 GB of per-device
buffers leave). The job is the default one: context 4096 tokens, batch 1, no recomputation. The
seed's "Llama 3 405B" is the `llama-3.1-405b` preset here, and "70B" is `llama-3.1-70b`.
""")

code(r"""
t405 = lowp.size(model="llama-3.1-405b", mode="pretrain", device=DEVICE)
n405 = t405["parameters"]["total"]
pd = t405["per_device"]
per_param = {c: pd[c] / n405 for c in ["weights", "gradients", "master", "optimizer"]}
i70 = lowp.size(model="llama-3.1-70b", mode="inference", weights="fp16", device=DEVICE)
q70 = lowp.size(model="llama-3.1-70b", mode="inference", weights="int4-g128", device=DEVICE)
cap = dev["memory_bytes"]

rows = [
    ("training state per parameter", "16 bytes (2+2+4+4+4)",
     f"{pd['model_states'] / n405:.3f} bytes (" + " + ".join(f"{c} {b:g}" for c, b in per_param.items()) + ")"),
    ("Llama 3 405B training state", "~6.5 TB (405e9 x 16)",
     f"{pd['model_states'] / 1e12:.3f} TB ({n405:,} parameters); whole job with activations "
     f"{t405['whole']['total'] / 1e12:.3f} TB"),
    ("80 GB devices for that state", "at least 81 (6500 / 80 = 81.25)",
     f"{t405['devices_for_states_exact']:.2f}, so {t405['devices_for_states']} "
     f"({t405['devices_for_states'] - 1} x 80 GB = {(t405['devices_for_states'] - 1) * cap / GB:,.0f} GB is short); "
     f"whole job: {t405['devices_needed']}"),
    ("70B weights in fp16", "about 140 GB",
     f"{i70['whole']['weights'] / GB:.1f} GB (llama-3.1-70b, {i70['parameters']['total']:,} parameters)"),
    ("70B fp16 inference, 80 GB devices", "at least 2",
     f"{i70['devices_needed']} ({i70['per_device']['total'] / GB:.1f} GB with context 4096 and 2 GB of buffers on one)"),
    ("70B in 4 bits on one 80 GB device", "yes, with limits on context",
     f"int4-g128: {q70['per_device']['total'] / GB:.1f} GB, fits: {q70['fits']}, longest context at batch 1: "
     f"{q70['max_seq']:,} of {q70['model']['max_position_embeddings']:,} tokens"),
]
w0, w1 = max(len(r[0]) for r in rows), max(len(r[1]) for r in rows)
print(f"{'question':<{w0}}  {'seed text':<{w1}}  lowp")
for q, s, l in rows:
    print(f"{q:<{w0}}  {s:<{w1}}  {l}")
""")

md(r"""
The 16 bytes per parameter hold exactly (16.000), and 6.494 TB rounds to the article's 6.5. The device count
is off by one in the article: 6.494 TB over 80 GB is 81.17, and 81 devices hold 6,480 GB, so the
state alone needs 82; with the activations of one 4096-token sequence and 2 GB of buffers per
device it is 87. The 70B figures hold: 141.1 GB of fp16 weights, 2 devices; in int4 with a
per-128 scale (4.125 bits a weight) it fits one 80 GB device at 43.7 GB.
""")

md(r"""
## Memory by component

One bar per job: the memory the whole job takes if one device held it all (data, tensor and
pipeline parallelism 1; 2 GB of buffers), split by component. The number above each bar is the
lower bound of 80 GB devices the job needs. Each panel has its own scale; the dashed line is one
device's 80 GB.
""")

code(r"""
JOBS = [("pretrain\nbf16 mixed", dict(mode="pretrain")),
        ("LoRA\nbf16", dict(mode="lora")),
        ("QLoRA\nnf4", dict(mode="qlora")),
        ("serve\nbf16", dict(mode="inference")),
        ("serve\nfp8", dict(mode="inference", weights="fp8_e4m3fn")),
        ("serve\nint4-g128", dict(mode="inference", weights="int4-g128"))]
COMPONENTS = [("weights", "tab:blue"), ("gradients", "tab:orange"), ("master", "tab:green"),
              ("optimizer", "tab:red"), ("activations", "tab:purple"), ("kv_cache", "tab:brown"),
              ("workspace", "tab:pink"), ("buffers", "0.6")]
sizes = {(m, label): lowp.size(model=m, device=DEVICE, **kw) for m in MODELS for label, kw in JOBS}
o = sizes[(MODELS[0], JOBS[0][0])]["options"]
print(f"job: context {o['seq']} tokens, batch {o['batch']}, recompute {o['recompute']}, optimizer {o['optimizer']}, "
      f"LoRA rank {o['lora_rank']}, buffers {o['buffers_bytes'] / GB:g} GB per device\n")

print("GB per component, total GB, h100-sxm devices needed, trainable share of the parameters")
SHORT = {"gradients": "grads", "optimizer": "optim", "activations": "activ", "kv_cache": "kv", "workspace": "wkspace"}
print(f"{'model':<15}{'job':<19}" + "".join(f"{SHORT.get(c, c):>9}" for c, _ in COMPONENTS) + f"{'total':>9}{'devices':>8}{'trained':>9}")
for (m, label), r in sizes.items():
    p = r["per_device"]
    print(f"{m:<15}{label.replace(chr(10), ' '):<19}" + "".join(f"{p[c] / GB:>9.1f}" for c, _ in COMPONENTS)
          + f"{p['total'] / GB:>9.1f}{r['devices_needed']:>8}{r['trainable_parameters'] / r['parameters']['total']:>9.2%}")

fig, axes = plt.subplots(1, 3, figsize=(14, 4.8))
x = np.arange(len(JOBS))
for ax, m in zip(axes, MODELS):
    bottom = np.zeros(len(JOBS))
    for c, color in COMPONENTS:
        v = np.array([sizes[(m, label)]["per_device"][c] / GB for label, _ in JOBS])
        ax.bar(x, v, bottom=bottom, color=color, width=0.7, label=c.replace("_", " "))
        bottom += v
    for xi, (label, _) in zip(x, JOBS):
        ax.text(xi, bottom[xi], f"{sizes[(m, label)]['devices_needed']}", ha="center", va="bottom", fontsize=9)
    ax.axhline(cap / GB, color="k", ls="--", lw=1)
    ax.set_xticks(x, [label for label, _ in JOBS], fontsize=8)
    ax.set_ylim(0, bottom.max() * 1.1)
    ax.set_title(f"{m} ({sizes[(m, JOBS[0][0])]['parameters']['total'] / 1e9:.1f}B parameters)")
    ax.set_ylabel("GB (10^9 bytes)")
axes[0].legend(fontsize=8, loc="upper right")
fig.suptitle(f"Memory of the whole job by component (context 4096, batch 1); number above a bar: "
             f"{DEVICE} ({cap / GB:.0f} GB) devices needed; dashed line: {cap / GB:.0f} GB", fontsize=11)
fig.tight_layout()
fig.savefig("figures/memory_sizing.png", dpi=100, bbox_inches="tight")
plt.show()
""")

md(r"""
Full training is dominated by the model states: the fp32 master copy and the two fp32 Adam
moments take 12 of the 16 bytes a parameter, and the bf16 weights are the smallest of the four
(for 405B: 811.7 GB of weights next to 3246.8 GB of optimizer states). LoRA freezes the bf16 base
and trains 0.52% (8B) to 0.15% (405B) of the parameters at rank 16, so gradients, master and
optimizer shrink to a few GB (for 405B: 1.2, 2.5 and 5.0 GB); what is left is the weights plus
the activations kept for the backward pass. QLoRA stores the frozen linear layers in nf4 (the embeddings and output head stay
bf16), so the base of 70B takes 43.1 GB instead of 141.5 GB. Serving at a 4096-token context and
batch 1 is almost all weights; the KV cache of one sequence (1.3 GB for 70B) grows linearly with
context and batch. The activations of the training jobs are those of one 4096-token sequence
without recomputation; larger batches raise them and recomputation (`recompute="full"`) lowers
them.
""")

md(r"""
## Devices needed per weight format (inference)

`lowp.size(compare_formats=True)` runs the same inference job once per weight format; the KV cache
stays bf16 in every row, so the rows differ only in the weights. Bits per weight include every
scale (int8-channel: an fp16 scale per output row; int4-g128: an fp16 scale per 128 weights; nf4:
an fp32 absmax per 64; q4_0: an fp16 scale per 32; mxfp4: an 8-bit power-of-two scale per 32;
`lowp.schemes()` has each rule). Embeddings and the output head stay bf16 for the quantized
formats.
""")

code(r"""
cmp = {m: lowp.size(model=m, mode="inference", device=DEVICE, compare_formats=True)["rows"] for m in MODELS}
fmts = [r["format"] for r in cmp[MODELS[0]]]
print(f"{'format':<14}{'bits/w':>8}" + "".join(f"{m + ' GB':>22}{'dev':>5}" for m in MODELS))
for i, f in enumerate(fmts):
    print(f"{f:<14}{cmp[MODELS[0]][i]['linear_bits_per_parameter']:>8.3f}"
          + "".join(f"{cmp[m][i]['per_device_bytes'] / GB:>22.1f}{cmp[m][i]['devices_needed']:>5}" for m in MODELS))

fig, ax = plt.subplots(figsize=(10, 3.6))
width = 0.27
for j, (m, c) in enumerate(zip(MODELS, ["tab:blue", "tab:orange", "tab:red"])):
    d = [r["devices_needed"] for r in cmp[m]]
    bars = ax.bar(np.arange(len(fmts)) + (j - 1) * width, d, width, color=c, label=m)
    ax.bar_label(bars, fontsize=8)
ax.set_xticks(np.arange(len(fmts)), fmts)
ax.set_ylabel(f"{DEVICE} devices needed")
ax.yaxis.set_major_locator(plt.MaxNLocator(integer=True))
ax.set_title(f"Inference, context 4096, batch 1: {cap / GB:.0f} GB devices needed per weight format")
ax.legend(fontsize=9)
fig.tight_layout()
plt.show()
""")

md(r"""
Halving the bits of the linear layers halves the weights and, at this short context, about halves
the devices: 405B goes from 21 devices in fp32 and 11 in bf16 to 6 in 8 bits and 3 in int4-g128
and mxfp4; nf4 and q4_0, at 4.5 bits, need 4. 70B goes from 2 devices in bf16 to 1 in 8 bits or
fewer; 8B fits one in every format. These are lower bounds for an even split; a real
tensor-parallel layout is usually a power of two, and a longer context or more concurrent
sequences add KV cache on top.
""")

md(r"""
## The plan for one model: bits per weight against measured error, and memory

`lowp.plan` puts each candidate format's memory beside the precision it loses, measured by
quantizing real tensors. By default the tensors are the linear layers of the bundled stories260K
checkpoint, which are not Llama 3.1 70B's weights; the result says so in `accuracy.proxy` and
gives the reason. The error is the relative RMSE, ||q - x|| / ||x||, over all measured weights.
A format is Pareto-optimal when no other is both smaller (sizes within 0.1% count as equal) and
more accurate.
""")

code(r"""
plan = lowp.plan(model="llama-3.1-70b", mode="inference", device=["rtx-4090", DEVICE])
acc = plan["accuracy"]
print(f"accuracy measured on {len(acc['tensors'])} tensors, {acc['elements']:,} weights; "
      f"proxy: {acc['proxy']} ({acc['proxy_reason']})\n")
devs = [d["name"] for d in plan["devices"]]
print(f"{'format':<14}{'bits/w':>7}{'rel RMSE':>10}{'SQNR dB':>9}{'clipped':>9}{'Pareto':>7}{'GB/device':>11}"
      + "".join(f"{d + ' fits/devices':>24}" for d in devs))
for c in plan["candidates"]:
    print(f"{c['format']:<14}{c['linear_bits_per_parameter']:>7.3f}{c['relative_rmse']:>10.2%}{c['sqnr_db']:>9.1f}"
          f"{c['clipped_fraction']:>9.2%}{'*' if c['pareto'] else '':>7}{c['devices'][0]['per_device']['total'] / GB:>11.1f}"
          + "".join(f"{('yes' if d['fits'] else 'no') + ' / ' + str(d['devices_needed']):>24}" for d in c["devices"]))
e = next(c["error"] for c in plan["candidates"] if c["format"] == "fp8_e4m3fn")
print(f"\nfp8_e4m3fn (a plain cast, no scale) on the measured weights: {e['subnormal']:,} of {e['elements']:,} "
      f"subnormal ({e['subnormal'] / e['elements']:.1%}), {e['zeroed']:,} zeroed")

def dominates(d, c):  # d no larger (sizes within 0.1% count as equal) and no less accurate, better in one
    bd, bc = d["linear_bits_per_parameter"], c["linear_bits_per_parameter"]
    return (bd <= bc * 1.001 and d["relative_rmse"] <= c["relative_rmse"]
            and (bd < bc * 0.999 or d["relative_rmse"] < c["relative_rmse"]))
print("Pareto front: " + ", ".join(f"{c['format']} {c['relative_rmse']:.2%}" for c in plan["candidates"] if c["pareto"]))
print("dominated: " + "; ".join(
    f"{c['format']} by " + ", ".join(d["format"] for d in plan["candidates"] if dominates(d, c))
    for c in plan["candidates"] if not c["pareto"]))

cands = plan["candidates"]
fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(12, 4.2))
LABEL_AT = {"int4-g128": (-36, -22), "mxfp4": (28, 14), "nf4": (32, -2), "q4_0": (18, -20)}  # points
for c in cands:
    x, y = c["linear_bits_per_parameter"], 100 * c["relative_rmse"]
    if c["pareto"]:
        ax0.scatter(x, y, s=60, color="tab:blue", zorder=3)
    else:  # a larger ring, so that it shows around a Pareto point at the same place
        ax0.scatter(x, y, s=130, color="white", edgecolor="tab:blue", zorder=1)
    dx, dy = LABEL_AT.get(c["format"], (6, 4))
    ax0.annotate(c["format"], (x, y), xytext=(dx, dy), textcoords="offset points", fontsize=8, va="center",
                 arrowprops=dict(arrowstyle="-", lw=0.5, color="0.4"))
front = sorted((c["linear_bits_per_parameter"], 100 * c["relative_rmse"]) for c in cands if c["pareto"])
ax0.plot(*zip(*front), color="tab:blue", lw=1, zorder=2)
ax0.scatter([], [], s=60, color="tab:blue", label="Pareto-optimal")
ax0.scatter([], [], s=130, color="white", edgecolor="tab:blue", label="dominated")
ax0.set_yscale("log")
ax0.set_yticks([0.1, 0.2, 0.5, 1, 2, 5, 10, 20], ["0.1", "0.2", "0.5", "1", "2", "5", "10", "20"])
ax0.yaxis.set_minor_formatter(plt.NullFormatter())
ax0.set_xlim(2, 18)
ax0.set_ylim(0.1, 40)
ax0.set_xlabel("bits per weight of the linear layers (scales included)")
ax0.set_ylabel("relative RMSE, % (log scale)")
ax0.set_title("Error measured on stories260K (a proxy)" if acc["proxy"] else "Measured error")
ax0.legend(fontsize=8)
x = np.arange(len(cands))
bottom = np.zeros(len(cands))
for comp, color in [("weights", "tab:blue"), ("kv_cache", "tab:brown"), ("activations", "tab:purple"),
                    ("buffers", "0.6")]:
    v = np.array([c["devices"][0]["per_device"][comp] / GB for c in cands])
    ax1.bar(x, v, bottom=bottom, color=color, width=0.7, label=comp.replace("_", " "))
    bottom += v
for d, ls in zip(plan["devices"], [":", "--"]):
    ax1.axhline(d["memory_bytes"] / GB, color="k", ls=ls, lw=1, label=f"{d['name']} {d['memory_bytes'] / GB:.0f} GB")
ax1.set_xticks(x, [c["format"] for c in cands], fontsize=8, rotation=20)
ax1.set_ylabel("GB (10^9 bytes) on one device")
ax1.set_title(f"{plan['model']} inference, context {plan['options']['seq']}, batch {plan['options']['batch']}")
ax1.legend(fontsize=8)
fig.tight_layout()
plt.show()
""")

md(r"""
On the left, the Pareto front runs from bf16 (0.18%) through int8 with a per-channel scale (0.60%)
to int4-g128 (10.71% at 4.125 bits) and q4_0 (8.43% at 4.5 bits). fp8 e4m3fn as a plain cast, with
no scale, is dominated: int8-channel costs the same bits and loses less, because without a scale
many of the small stories260K weights fall into e4m3fn's subnormal range, where it has fewer
significant bits (10.2% of them here, and 1,593 become zero; `bf16_vs_fp16.ipynb` shows the
ranges). nf4 is dominated by q4_0 at the same 4.5 bits, and mxfp4 (11.54%) by int4-g128, which
stores fewer bits and loses less. These errors are a proxy: they were measured on a 260K-parameter
model's 64-wide layers, not on Llama 3.1 70B's weights; pass the real checkpoint
(`tensors=[...]`) to measure the model itself. On the right, the memory is exact: bf16 needs two
80 GB devices, every 8-bit and 4-bit format fits one, and none fits a 24 GB RTX 4090.
""")


main("memory_sizing.ipynb")
