"""The Python module's calls whose results check.py keeps (with --python).

Each result is written as canonical JSON: dict keys sorted, NaN and the
infinities by name, arrays as dtype, shape and SHA-256 of their bytes; an
exception as its type and message.
"""
import hashlib, json, math, os


def canonical(v):
    import numpy as np
    if isinstance(v, np.ndarray):
        return {"dtype": str(v.dtype), "shape": list(v.shape),
                "sha256": hashlib.sha256(np.ascontiguousarray(v).tobytes()).hexdigest()}
    if isinstance(v, dict):
        return {str(k): canonical(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [canonical(x) for x in v]
    if isinstance(v, float) and not math.isfinite(v):
        return repr(v)
    return v


def calls(inp, out, root):
    import numpy as np
    import lowp
    stories = os.path.join(root, "tests/data/stories260K/stories260K.f32.safetensors")
    bf16 = os.path.join(root, "tests/data/stories260K/stories260K.bf16.safetensors")
    a = np.load(os.path.join(inp, "a.npy"))
    h = np.load(os.path.join(inp, "h.npy"))
    d = np.load(os.path.join(inp, "d.npy"))
    values = np.fromfile(os.path.join(inp, "values.f32"), dtype=np.float32)
    return [
        ("formats()", lambda: lowp.formats()),
        ("schemes()", lambda: lowp.schemes()),
        ("devices()", lambda: lowp.devices()),
        ("convert fp8 saturate", lambda: lowp.convert(values, "fp8_e4m3fn", overflow="saturate")),
        ("convert bf16 stochastic", lambda: lowp.convert(values, "bf16", rounding="stochastic", seed=7)),
        ("convert fp4 packed", lambda: lowp.convert(values, "fp4_e2m1fn", packed=True)),
        ("convert fp16 in", lambda: lowp.convert(values.astype(np.float16), "fp8_e5m2")),
        ("decode e4m3", lambda: lowp.decode(np.arange(256, dtype=np.uint8), "fp8_e4m3fn")),
        ("decode fp4 packed", lambda: lowp.decode(np.arange(256, dtype=np.uint8), "fp4_e2m1fn", packed=True, count=511)),
        ("fake_quant", lambda: lowp.fake_quant(values, "e3m4", rounding="toward-zero")),
        ("quantize int4-g128", lambda: lowp.quantize(a, "int4-g128")),
        ("quantize nf4 f16", lambda: lowp.quantize(h, "nf4")),
        ("quantize f64", lambda: lowp.quantize(d, "q4_0")),
        ("quant_error path", lambda: lowp.quant_error(stories, ["int4-g128", "nf4"], summary=True)),
        ("update_error", lambda: lowp.update_error(stories, ["bf16-rne", "bf16-sr-8bit"], tensors="*layers.2.self_attn.k_proj*", steps=10)),
        ("training_recipes", lambda: lowp.training_recipes()),
        ("quant_error paths", lambda: lowp.quant_error([stories, bf16], "fp8_e4m3fn", tensors="*q_proj*")),
        ("quant_error array", lambda: lowp.quant_error(a, "mxfp4", histogram=True, relative_floor=1e-2)),
        ("quant_error dict", lambda: lowp.quant_error({"a": a, "h": h, "d": d}, ["bf16", "q8_0"], threads=1)),
        ("quant_error strided", lambda: lowp.quant_error(a[:, ::2], "int8-channel")),
        ("range_study path", lambda: lowp.range_study(stories, formats=["fp16", "bf16"], fraction=0.5)),
        ("range_study dict", lambda: lowp.range_study({"a": a, "h": h})),
        ("size pretrain", lambda: lowp.size(model="llama-3.1-405b", mode="pretrain")),
        ("size inference", lambda: lowp.size(model="llama-3.1-70b", mode="inference", weights="int4-g128", seq=8192, device="h100-sxm")),
        ("size compare", lambda: lowp.size(model="llama-3.1-70b", mode="inference", compare_formats=True, formats=["bf16", "nf4"])),
        ("size finetune", lambda: lowp.size(model="llama-3.1-8b", mode="finetune", zero=3, dp=8, recompute="selective", sequence_parallel=False)),
        ("size lora", lambda: lowp.size(model="llama-3.1-8b", mode="lora", lora_targets=["q", "v"], lora_rank=8, headroom=0.05)),
        ("plan", lambda: lowp.plan(model="llama-3.1-8b", mode="inference", device=["rtx-4090", "h100-sxm"])),
        ("plan tensors", lambda: lowp.plan(model="llama-3.1-8b", mode="qlora", formats=["nf4", "q4_0"], tensors=[bf16], select="*mlp*")),
        # The report itself (paths in it are written $OUT, $ROOT), not its size: the
        # bundled checkpoint's absolute path is in it.
        ("eval", lambda: lowp.eval(tokens=np.load(os.path.join(inp, "tokens.npy")), weights=["bf16", "int4-g128"], kv="none,fp8_e4m3fn")),
        ("eval sample", lambda: lowp.eval(sample=(2, 16), weights="q8_0", compute=["bf16"])),
        ("eval text", lambda: lowp.eval(text="Once upon a time, there was a little girl named Lily. " * 40, ctx=128, weights="q4_0")),
        ("tokenize", lambda: lowp.tokenize(text="Once upon a time, naïve café 日本", pieces=True)),
        ("tokenize llama2", lambda: lowp.tokenize(text="Once upon a time\n\nThe end.", tokenizer=os.path.join(root, "tests/data/llama2-tokenizer/tokenizer.model"), pieces=True)),
        ("error tokenize", lambda: lowp.tokenize(text="x", tokenizer="/nonexistent")),
        ("forward", lambda: np.round(lowp.forward(None, np.load(os.path.join(inp, "tokens.npy")))[:, :3, :4], 3).tolist()),
        ("forward 1-d", lambda: lowp.forward(lowp.bundled_model(), [1, 2, 3]).shape),
        ("sample", lambda: lowp.sample(count=2, length=12, seed=3).tolist()),
        ("sample greedy", lambda: lowp.sample(count=1, length=12, temperature=0).tolist()),
        ("plan eval", lambda: lowp.plan(model="llama-3.1-8b", mode="inference", eval=True, formats=["bf16", "q4_0"])),
        ("error eval weights", lambda: lowp.eval(weights="bogus")),
        ("error eval tokens", lambda: lowp.eval(tokens=[[1, 600]])),
        ("error eval keyword", lambda: lowp.eval(bogus=1)),
        ("error forward tokens", lambda: lowp.forward(None, np.zeros((2, 2, 2), np.int32))),
        ("error plan eval_sample", lambda: lowp.plan(model="llama-3.1-8b", mode="inference", eval=True, eval_sample="x")),
        ("tensors gguf", lambda: lowp.tensors(os.path.join(root, "tests/data/ggml/metadata.gguf"), metadata=True)),
        ("tensors files", lambda: lowp.tensors([os.path.join(root, "tests/data/ggml/stories260K-Q4_K_M.gguf"), stories], tensors="*norm*")),
        ("quant_error reference", lambda: lowp.quant_error(os.path.join(root, "tests/data/ggml/stories260K-Q4_K_M.gguf"), reference=os.path.join(root, "tests/data/stories260K-hf/model.safetensors"), tensors="blk.1.*")),
        ("quant_error recipe", lambda: lowp.quant_error(os.path.join(root, "tests/data/stories260K-hf/model.safetensors"), "Q4_K_M", summary=True)),
        ("read_tensors gguf", lambda: lowp.read_tensors(os.path.join(root, "tests/data/ggml/stories260K-Q4_K_M.gguf"), "blk.0.attn_*")),
        ("quantize k-quant", lambda: lowp.quantize(np.linspace(-1, 1, 512, dtype=np.float32).reshape(2, 256), "q4_K")),
        ("error tensors", lambda: lowp.tensors(os.path.join(root, "tests/data/ggml/none.gguf"))),
        ("error quant_error reference scheme", lambda: lowp.quant_error(os.path.join(root, "tests/data/ggml/stories260K-Q4_K_M.gguf"), "q4_K", reference=stories)),
        ("plan html", lambda: (lowp.plan(model="llama-3.1-8b", mode="inference", html=os.path.join(out, "p.html")), open(os.path.join(out, "p.html")).read())[1]),
        ("read_tensors", lambda: lowp.read_tensors(bf16, "*layers.0.*")),
        ("bundled_checkpoint", lambda: os.path.relpath(lowp.bundled_checkpoint(), root)),
        ("error convert", lambda: lowp.convert(values, "bogus")),
        ("error convert rounding", lambda: lowp.convert(values, "fp16", rounding="sideways")),
        ("error decode", lambda: lowp.decode(values, "fp16")),
        ("error quant_error scheme", lambda: lowp.quant_error(a, "bogus")),
        ("error quant_error floor", lambda: lowp.quant_error(a, "bf16", relative_floor=-1)),
        ("error quant_error pattern", lambda: lowp.quant_error(stories, "bf16", tensors="none*")),
        ("error quant_error empty", lambda: lowp.quant_error([], "bf16")),
        ("error quant_error ints", lambda: lowp.quant_error(np.arange(10), "bf16")),
        ("error quant_error missing", lambda: lowp.quant_error(os.path.join(inp, "missing.safetensors"), "bf16")),
        ("error range fraction", lambda: lowp.range_study(a, fraction=2)),
        ("error size seq", lambda: lowp.size(model="llama-3.1-8b", mode="inference", seq=0)),
        ("error size mode", lambda: lowp.size(model="llama-3.1-8b", mode="training")),
        ("error size model", lambda: lowp.size(model="nosuch", mode="inference")),
        ("error size unknown", lambda: lowp.size(model="llama-3.1-8b", mode="inference", bogus=1)),
        ("error plan formats", lambda: lowp.plan(model="llama-3.1-8b", mode="inference", formats=["bogus"])),
        ("error plan pretrain", lambda: lowp.plan(model="llama-3.1-8b", mode="pretrain", formats=["int4-g128"])),
        ("mix", lambda: lowp.mix(bits_per_weight=5, types=["q4_K", "q8_0"], tune_sample="2:32", sample="2:32", baselines=["Q4_K_M"], random_mixes=3)),
        ("mix device", lambda: lowp.mix(device="toy:2.0045GB", seq=256, types="q4_K,q8_0", tune_sample="2:32", sample="2:32", baselines="none")["device"]),
        ("plan mix", lambda: lowp.plan(model=os.path.join(root, "tests/data/stories3M-hf"), mode="inference", seq=256, device=["toy:2.0045GB"], formats=["q8_0"], mix=True, mix_types=["q4_K", "q8_0"], mix_tune_sample="2:32", eval_sample="2:32")["mix"]),
        ("error plan mix tp", lambda: lowp.plan(model="llama-3.1-8b", mode="inference", tp=2, mix=True)),
        ("error mix budget", lambda: lowp.mix(bits_per_weight=5, bytes=100)),
        ("error mix types", lambda: lowp.mix(bits_per_weight=5, types=["nosuch"])),
        ("error read_tensors", lambda: lowp.read_tensors(os.path.join(inp, "missing.safetensors"))),
    ]


def run(inp, out, root):
    for label, call in calls(inp, out, root):
        for name in os.listdir(out):
            os.unlink(os.path.join(out, name))
        try:
            result = {"result": canonical(call())}
            result = json.loads(json.dumps(result).replace(out, "$OUT").replace(inp, "$IN")
                                .replace(root, "$ROOT"))
        except Exception as e:  # the type and message are part of the API
            result = {"raises": type(e).__name__,
                      "message": str(e).replace(out, "$OUT").replace(inp, "$IN").replace(root + "/", "")}
        yield label, json.dumps(result, indent=1, sort_keys=True) + "\n"
