#!/usr/bin/env python3
"""Writes the fuzzers' seed corpus (tests/fuzz/corpus/<target>/): small valid
files of every kind plus a few malformed ones. Standard library only; rerun
after changing it and commit the output."""
import glob
import json
import os
import shutil
import struct

HERE = os.path.dirname(os.path.abspath(__file__))
CONFIGS = os.path.join(HERE, "..", "data", "configs")
SIZES = {"BOOL": 1, "U8": 1, "I8": 1, "U16": 2, "I16": 2, "U32": 4, "I32": 4, "U64": 8,
         "I64": 8, "F16": 2, "BF16": 2, "F32": 4, "F64": 8, "F8_E4M3": 1, "F8_E5M2": 1}


def write(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def safetensors(tensors, metadata=None, pad=True, raw_header=None):
    """tensors: list of (name, dtype, shape); data = a byte pattern."""
    header, offset = {}, 0
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, dtype, shape in tensors:
        n = SIZES[dtype]
        for d in shape:
            n *= d
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + n]}
        offset += n
    text = raw_header if raw_header is not None else json.dumps(header, separators=(",", ":"))
    if pad:
        text += " " * ((8 - len(text) % 8) % 8)
    data = bytes((i * 37 + 11) & 0xFF for i in range(offset))
    return struct.pack("<Q", len(text.encode())) + text.encode() + data


st = "safetensors"
write(st, "valid_all_dtypes", safetensors([("t." + d, d, [2, 3]) for d in SIZES],
                                          {"format": "pt"}))
write(st, "valid_scalar_and_empty", safetensors([("s", "F32", []), ("e", "F16", [0, 4]),
                                                 ("v", "BF16", [3])]))
write(st, "valid_empty_header", safetensors([]))
write(st, "valid_unpadded_f8", safetensors([("a", "F8_E4M3", [5]), ("b", "F8_E5M2", [3])],
                                           pad=False))
write(st, "valid_4d", safetensors([("w", "F32", [2, 1, 2, 2]), ("i", "I64", [2])],
                                  {"a": "b", "c": ""}))
body = safetensors([("x", "U8", [4]), ("y", "U16", [2])])
# Header order differs from data order.
hdr = '{"y":{"dtype":"U16","shape":[2],"data_offsets":[4,8]},"x":{"dtype":"U8","shape":[4],"data_offsets":[0,4]}}'
write(st, "valid_header_order", struct.pack("<Q", len(hdr)) + hdr.encode() + bytes(range(8)))
write(st, "bad_truncated", safetensors([("w", "F32", [4, 4])])[:-7])
write(st, "bad_header_length", struct.pack("<Q", 1 << 40) + b"{}")
write(st, "bad_not_object", safetensors([], raw_header="[1,2,3]"))
write(st, "bad_json", safetensors([], raw_header='{"a":{"dtype":'))
write(st, "bad_duplicate", struct.pack("<Q", 118) +
      b'{"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"w":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}}          '
      + b"\x01\x02")
write(st, "bad_overlap", struct.pack("<Q", 104) +
      b'{"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},"b":{"dtype":"U8","shape":[2],"data_offsets":[1,3]}}'
      + b"\x01\x02\x03")
write(st, "bad_dtype", safetensors([], raw_header='{"a":{"dtype":"F7","shape":[1],"data_offsets":[0,1]}}') + b"\x00")
write(st, "bad_shape", safetensors([], raw_header='{"a":{"dtype":"F32","shape":[-1,4294967296],"data_offsets":[0,4]}}') + b"\x00" * 4)
write(st, "bad_metadata", safetensors([], raw_header='{"__metadata__":{"a":1}}'))

npy = "npy"


def npy_file(major, dictionary, data, pad=True):
    header = dictionary
    prefix = 10 if major == 1 else 12
    if pad:
        header += " " * ((64 - (prefix + len(header) + 1) % 64) % 64) + "\n"
    h = header.encode()
    length = struct.pack("<H", len(h)) if major == 1 else struct.pack("<I", len(h))
    return b"\x93NUMPY" + bytes([major, 0]) + length + h + data


for major in (1, 2, 3):
    write(npy, f"valid_v{major}_f4", npy_file(
        major, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }",
        struct.pack("<6f", 1, 2, 3, 4, 5, 6)))
for descr, size in (("<f2", 2), ("<f8", 8), ("|i1", 1), ("|u1", 1), ("<i2", 2), ("<u2", 2),
                    ("<i4", 4), ("<u4", 4), ("<i8", 8), ("<u8", 8), ("|b1", 1)):
    write(npy, "valid_" + descr[1:], npy_file(
        1, "{'descr': '%s', 'fortran_order': False, 'shape': (3,), }" % descr,
        bytes(range(3 * size))))
write(npy, "valid_scalar", npy_file(1, '{"descr": "<f8", "fortran_order": False, "shape": ()}',
                                    struct.pack("<d", 0.5), pad=False))
write(npy, "bad_big_endian", npy_file(1, "{'descr': '>f4', 'fortran_order': False, 'shape': (1,), }", b"\0" * 4))
write(npy, "bad_fortran", npy_file(1, "{'descr': '<f4', 'fortran_order': True, 'shape': (1,), }", b"\0" * 4))
write(npy, "bad_truncated", npy_file(2, "{'descr': '<f4', 'fortran_order': False, 'shape': (9,), }", b"\0" * 4))
write(npy, "bad_structured", npy_file(1, "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }", b"\0" * 4))
write(npy, "bad_version", b"\x93NUMPY\x09\x00" + b"\x10\x00" + b"{}" * 8)

ix = "index"
write(ix, "valid", json.dumps({"metadata": {"total_size": 1234}, "weight_map": {
    "model.embed_tokens.weight": "model-00001-of-00002.safetensors",
    "lm_head.weight": "model-00002-of-00002.safetensors",
    "model.norm.weight": "model-00001-of-00002.safetensors"}}, indent=2))
write(ix, "valid_no_metadata", '{"weight_map": {"a": "s.safetensors"}}')
write(ix, "bad_traversal", '{"weight_map": {"a": "../../etc/passwd"}}')
write(ix, "bad_duplicate", '{"weight_map": {"a": "s.safetensors", "a": "t.safetensors"}}')
write(ix, "bad_types", '{"metadata": 3, "weight_map": {"a": 1}}')
write(ix, "bad_json", '{"weight_map": {"a": ')

cf = "config"
# The real config.json files of the sizing tests, as they are.
for path in sorted(glob.glob(os.path.join(CONFIGS, "*.json"))):
    d = os.path.join(HERE, "corpus", cf)
    os.makedirs(d, exist_ok=True)
    shutil.copyfile(path, os.path.join(d, "valid_" + os.path.basename(path)[:-len(".json")]))


def config(**fields):
    return json.dumps(fields, separators=(",", ":"))


TINY = dict(model_type="llama", hidden_size=64, intermediate_size=128, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, vocab_size=100)
write(cf, "valid_tiny_llama", config(**TINY))
write(cf, "valid_llama_no_kv_heads", config(**dict(TINY, num_key_value_heads=None,
                                                   tie_word_embeddings=True)))
write(cf, "valid_float_sizes", config(**dict(TINY, hidden_size=64.0, vocab_size=1e2)))
write(cf, "valid_qwen3", config(**dict(TINY, model_type="qwen3", head_dim=32,
                                       attention_bias=True)))
write(cf, "valid_gemma2", config(**dict(TINY, model_type="gemma2", head_dim=16,
                                        max_position_embeddings=4096)))
write(cf, "valid_mixtral", config(**dict(TINY, model_type="mixtral", num_local_experts=4,
                                         num_experts_per_tok=2)))
write(cf, "valid_text_config", config(model_type="mistral3", text_config=dict(
    TINY, model_type="mistral"), vision_config=dict(hidden_size=8)))
write(cf, "bad_json", config(**TINY)[:40])
write(cf, "bad_not_object", "[1,2,3]")
write(cf, "bad_duplicate", '{"model_type":"llama","hidden_size":64,"hidden_size":64}')
write(cf, "bad_model_type", config(**dict(TINY, model_type="gpt2")))
write(cf, "bad_string_size", config(**dict(TINY, hidden_size="64")))
write(cf, "bad_fraction", config(**dict(TINY, hidden_size=64.5)))
write(cf, "bad_negative", config(**dict(TINY, num_hidden_layers=-2)))
write(cf, "bad_above_2_40", config(**dict(TINY, vocab_size=1 << 41)))
write(cf, "bad_params_above_2_48", config(**dict(TINY, hidden_size=1 << 30,
                                                 intermediate_size=1 << 30)))
write(cf, "bad_kv_heads", config(**dict(TINY, num_key_value_heads=3)))
write(cf, "bad_hidden_not_multiple", config(**dict(TINY, hidden_size=66)))
write(cf, "bad_qwen3_no_head_dim", config(**dict(TINY, model_type="qwen3")))
write(cf, "bad_mixtral_top_k", config(**dict(TINY, model_type="mixtral", num_local_experts=2,
                                             num_experts_per_tok=3)))
write(cf, "bad_text_config", config(**dict(TINY, text_config=[1])))
write(cf, "bad_deep", '{"a":' * 70 + "1" + "}" * 70)

nm = "names"
# Format names (catalog, aliases, user-defined) and scheme names with options;
# valid_* is a format or a scheme, bad_* neither.
for i, name in enumerate([
        "fp32", "tf32", "half", "BFloat16", " FP16 ", "fp8_e4m3fn", "e4m3", "f8E5M2FNUZ",
        "fp8_e4m3b11fnuz", "fp6_e2m3fn", "fp4_e2m1fn", "e8m0fnu", "int8", "uint4", "int3",
        "uint12", "e3m4", "e3m4fn", "e5m2fnuz", "float(e=5,m=10,bias=15,inf=ieee)",
        "float(e=4,m=3,bias=7,inf=fn)", "float(e=3,m=0,inf=fn)", "float(e=2, m=1, inf=none)",
        "float(e=8,m=0,bias=128,inf=fnuz)"]):
    write(nm, "valid_format_%02d" % i, name)
for i, name in enumerate([
        "int8", "int8-channel", "int4-g128", "int4-g128:scale=bf16:clip=mse", "int2-g16",
        "uint4-g64-asym", "uint8-asym", "uint8-channel-asym:scale=fp32", "fp8_e4m3fn-tensor",
        "fp8_e5m2-channel:scale=bf16", "mxfp8", "mxfp8_e5m2", "mxfp6_e2m3", "mxfp6_e3m2",
        "mxfp4:scale=round-up", "mxint8", "nvfp4", "nf4", "nf4:double-quant", "q8_0", "q4_0",
        "q4_1", "q5_0", "bf16:rounding=stochastic:seed=7", "fp8_e4m3fn:overflow=saturate",
        "e3m2fn:rounding=toward-zero"]):
    write(nm, "valid_scheme_%02d" % i, name)
for name, text in [
        ("empty", ""), ("unknown", "fp7"), ("wide_exponent", "e9m2"), ("no_exponent", "e0m3"),
        ("float_no_m", "float(e=5)"), ("float_bias", "float(e=5,m=10,bias=400)"),
        ("float_inf", "float(e=5,m=10,inf=x)"), ("float_key", "float(e=5,m=10,x=1)"),
        ("int1", "int1"), ("int17", "int17"), ("int9_scheme", "int9-g128"),
        ("group_1", "int4-g1"), ("clip", "int4-g128:clip=max"), ("scale", "int4-g128:scale=fp8"),
        ("double_quant_value", "nf4:double-quant=yes"), ("nvfp4_option", "nvfp4:scale=floor"),
        ("tensor_clip", "int8:clip=mse"), ("mx_scale", "mxfp4:scale=ceil"),
        ("empty_option", "int4-g128::"), ("option_twice", "int4-g128:scale=bf16:scale=fp16"),
        ("empty_base", ":scale=bf16"), ("seed", "bf16:rounding=stochastic:seed=x"),
        ("unsigned_scaled", "e8m0fnu-tensor")]:
    write(nm, "bad_" + name, text)

ar = "args"
# A command's index in args_fuzzer.cc's kCommands, then its words, NUL-separated.
COMMANDS = ["formats", "convert", "schemes", "quant-error", "quantize", "range", "size",
            "devices", "plan"]


def args(command, *words):
    return bytes([COMMANDS.index(command)]) + b"\0".join(w.encode() for w in words)


VALID = [
    ("formats", []), ("formats", ["--json"]),
    ("convert", ["--from", "fp8_e4m3fn", "--to", "fp16", "codes.bin", "out.bin"]),
    ("convert", ["--from=int8", "--to=fp4_e2m1fn", "--rounding", "stochastic", "--seed", "3",
                 "--overflow", "saturate", "codes.bin", "o"]),
    ("convert", ["--from", "uint4", "--to", "e5m2", "--subnormals", "ftz-daz", "--nan",
                 "keep-payload", "codes.bin", "c.bin"]),
    ("schemes", []), ("schemes", ["--json"]),
    ("quant-error", ["a.safetensors", "--scheme", "int4-g128,nf4:double-quant"]),
    ("quant-error", ["b.npy", "--scheme=mxfp4", "--json", "--histogram"]),
    ("quant-error", ["c.safetensors.index.json", "--scheme", "q4_0,int8-channel", "--csv",
                     "--summary", "--tensors", "layers.*", "--relative-floor", "0.01",
                     "--threads", "2", "--quiet"]),
    ("quantize", ["a.safetensors", "--scheme", "int8-channel", "--out", "q.safetensors"]),
    ("quantize", ["b.npy", "--scheme", "nvfp4", "--out", "q.safetensors", "--dtype", "BF16",
                  "--json"]),
    ("quantize", ["a.safetensors", "--scheme", "fp8_e4m3fn-tensor", "--out", "q.safetensors",
                  "--dtype", "same", "--tensors", "*weight", "--csv", "--summary"]),
    ("range", ["a.safetensors"]),
    ("range", ["a.safetensors", "b.npy", "--json", "--fraction", "0.9", "--formats",
               "fp16,e4m3,e3m2fn"]),
    ("size", ["--model", "llama-3.1-8b", "--mode", "inference"]),
    ("size", ["--model", "config.json", "--mode", "qlora", "--weights", "nf4", "--json",
              "--lora-rank", "16", "--lora-targets", "q,v"]),
    ("size", ["--model", "llama-3.1-70b", "--mode", "inference", "--compare-formats",
              "--formats", "bf16,int4-g128,mxfp4", "--device", "mygpu:96GB:4TB/s", "--csv"]),
    ("size", ["--model", "mixtral-8x7b", "--mode", "finetune", "--optimizer", "adamw8bit",
              "--zero", "3", "--dp", "8", "--tp", "2", "--pp", "2", "--recompute", "full",
              "--seq", "8192", "--batch", "4", "--sequence-parallel", "--no-flash-attention",
              "--offload", "optimizer", "--buffers", "2GiB", "--headroom", "0.1"]),
    ("devices", []), ("devices", ["--json"]),
    ("plan", ["--model", "llama-3.1-8b", "--mode", "inference"]),
    ("plan", ["--model", "config.json", "--mode", "inference", "--tensors", "a.safetensors",
              "--formats", "bf16,int4-g128,nf4", "--json"]),
    ("plan", ["--model", "llama-3.1-8b", "--mode", "lora", "--device", "h100,a100",
              "--select", "*wq*", "--html", "r.html"]),
    ("plan", ["--model", "qwen2.5-7b", "--mode", "pretrain", "--formats", "bf16,fp8_e4m3fn",
              "--tensors", "b.npy", "c.safetensors.index.json", "--csv", "--threads", "1"]),
]
BAD = [
    ("formats_positional", "formats", ["x"]),
    ("formats_option", "formats", ["--csv"]),
    ("convert_format", "convert", ["--from", "fp99", "--to", "fp16", "codes.bin", "o"]),
    ("convert_one_file", "convert", ["--from", "fp16", "--to", "bf16", "codes.bin"]),
    ("convert_missing", "convert", ["--from", "fp16", "--to", "bf16", "missing.bin", "o"]),
    ("convert_escape", "convert", ["--from", "fp16", "--to", "bf16", "../../etc/passwd",
                                   "/tmp/x"]),
    ("convert_rounding", "convert", ["--from", "fp16", "--to", "bf16", "--rounding", "up",
                                     "codes.bin", "o"]),
    ("convert_no_value", "convert", ["codes.bin", "o", "--from"]),
    ("convert_in_place", "convert", ["--from", "uint4", "--to", "e5m2", "codes.bin",
                                     "codes.bin"]),
    ("schemes_positional", "schemes", ["x"]),
    ("quant_error_no_scheme", "quant-error", ["a.safetensors"]),
    ("quant_error_scheme", "quant-error", ["a.safetensors", "--scheme", "int4-g1"]),
    ("quant_error_no_files", "quant-error", ["--scheme", "int8"]),
    ("quant_error_tensors", "quant-error", ["a.safetensors", "--scheme", "int8", "--tensors",
                                            "nomatch"]),
    ("quant_error_json_csv", "quant-error", ["a.safetensors", "--scheme", "int8", "--json",
                                             "--csv"]),
    ("quant_error_threads", "quant-error", ["a.safetensors", "--scheme", "int8", "--threads",
                                            "-1"]),
    ("quant_error_floor", "quant-error", ["a.safetensors", "--scheme", "int8",
                                          "--relative-floor", "nan"]),
    ("quant_error_kind", "quant-error", ["config.json", "--scheme", "int8"]),
    ("quantize_two_schemes", "quantize", ["a.safetensors", "--scheme", "int8,nf4", "--out",
                                          "q.safetensors"]),
    ("quantize_no_out", "quantize", ["a.safetensors", "--scheme", "int8"]),
    ("quantize_in_place", "quantize", ["a.safetensors", "--scheme", "int8", "--out",
                                       "a.safetensors"]),
    ("quantize_dtype", "quantize", ["a.safetensors", "--scheme", "int8", "--out", "q",
                                    "--dtype", "F8_E4M3"]),
    ("range_fraction", "range", ["a.safetensors", "--fraction", "2"]),
    ("range_format", "range", ["a.safetensors", "--formats", "fp16,nope"]),
    ("size_no_model", "size", ["--mode", "inference"]),
    ("size_model", "size", ["--model", "gpt-5", "--mode", "inference"]),
    ("size_no_mode", "size", ["--model", "llama-3.1-8b"]),
    ("size_device", "size", ["--model", "llama-3.1-8b", "--mode", "inference", "--device",
                             "tpu"]),
    ("size_seq", "size", ["--model", "llama-3.1-8b", "--mode", "inference", "--seq", "-5"]),
    ("size_formats_alone", "size", ["--model", "llama-3.1-8b", "--mode", "inference",
                                    "--formats", "bf16"]),
    ("devices_positional", "devices", ["x"]),
    ("plan_format", "plan", ["--model", "llama-3.1-8b", "--mode", "inference", "--formats",
                             "int99"]),
    ("plan_training_int", "plan", ["--model", "llama-3.1-8b", "--mode", "pretrain",
                                   "--formats", "int4-g128"]),
    ("plan_positional", "plan", ["--model", "llama-3.1-8b", "--mode", "inference",
                                 "a.safetensors"]),
    ("plan_html_empty", "plan", ["--model", "llama-3.1-8b", "--mode", "inference", "--html",
                                 ""]),
    ("plan_weights", "plan", ["--model", "llama-3.1-8b", "--mode", "inference", "--weights",
                              "nf4"]),
]
for i, (command, words) in enumerate(VALID):
    write(ar, "valid_%02d_%s" % (i, command.replace("-", "_")), args(command, *words))
for name, command, words in BAD:
    write(ar, "bad_" + name, args(command, *words))

# The model target: a 4-byte little-endian config length, config.json, then a
# safetensors file with every tensor the config implies (data: the byte
# pattern, so some float32 values are huge, NaN or inf).
md = "model"
SMALL = dict(model_type="llama", hidden_size=4, intermediate_size=3, num_hidden_layers=2,
             num_attention_heads=2, num_key_value_heads=1, head_dim=2, vocab_size=5)


def model_tensors(c):
    h, i, v, d = c["hidden_size"], c["intermediate_size"], c["vocab_size"], c["head_dim"]
    q, kv = c["num_attention_heads"] * d, c["num_key_value_heads"] * d
    out = [("model.embed_tokens.weight", [v, h]), ("model.norm.weight", [h])]
    if not c.get("tie_word_embeddings", c["model_type"].startswith("gemma")):
        out.append(("lm_head.weight", [v, h]))
    for layer in range(c["num_hidden_layers"]):
        p = "model.layers.%d." % layer
        norms = ["input_layernorm", "post_attention_layernorm"]
        if c["model_type"] == "gemma2":
            norms += ["pre_feedforward_layernorm", "post_feedforward_layernorm"]
        out += [(p + n + ".weight", [h]) for n in norms]
        for name, rows, cols in (("q", q, h), ("k", kv, h), ("v", kv, h), ("o", h, q)):
            out.append((p + "self_attn.%s_proj.weight" % name, [rows, cols]))
            if c["model_type"] == "qwen2" and name != "o":
                out.append((p + "self_attn.%s_proj.bias" % name, [rows]))
        if c["model_type"] == "qwen3":
            out += [(p + "self_attn.q_norm.weight", [d]), (p + "self_attn.k_norm.weight", [d])]
        if c["model_type"] == "mixtral":
            out.append((p + "block_sparse_moe.gate.weight", [c["num_local_experts"], h]))
            for e in range(c["num_local_experts"]):
                x = p + "block_sparse_moe.experts.%d." % e
                out += [(x + "w1.weight", [i, h]), (x + "w3.weight", [i, h]),
                        (x + "w2.weight", [h, i])]
        else:
            out += [(p + "mlp.gate_proj.weight", [i, h]), (p + "mlp.up_proj.weight", [i, h]),
                    (p + "mlp.down_proj.weight", [h, i])]
    return out


def model_seed(c, tensors=None):
    text = config(**c).encode()
    body = safetensors([(n, "F32", s) for n, s in (tensors or model_tensors(c))])
    return struct.pack("<I", len(text)) + text + body


write(md, "valid_llama", model_seed(SMALL))
write(md, "valid_qwen2_window", model_seed(dict(SMALL, model_type="qwen2", use_sliding_window=True,
                                                sliding_window=2, max_window_layers=1)))
write(md, "valid_qwen3", model_seed(dict(SMALL, model_type="qwen3")))
write(md, "valid_gemma2", model_seed(dict(SMALL, model_type="gemma2", sliding_window=2,
                                          attn_logit_softcapping=5.0,
                                          final_logit_softcapping=3.0)))
write(md, "valid_mixtral", model_seed(dict(SMALL, model_type="mixtral", num_local_experts=3,
                                           num_experts_per_tok=2)))
write(md, "valid_llama3_rope", model_seed(dict(SMALL, rope_scaling=dict(
    rope_type="llama3", factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
    original_max_position_embeddings=2))))
write(md, "bad_missing_lm_head", model_seed(SMALL, model_tensors(SMALL)[:2]))
write(md, "bad_kv_shape", model_seed(dict(SMALL, num_key_value_heads=2),
                                     model_tensors(SMALL)))

gg = "gguf"
GGML_DATA = os.path.join(HERE, "..", "data", "ggml")
# ggml type id: (block elements, block bytes), as codecs/ggml_types.cc lists them.
GGML_TYPES = {0: (1, 4), 1: (1, 2), 2: (32, 18), 3: (32, 20), 6: (32, 22), 7: (32, 24),
              8: (32, 34), 9: (32, 36), 10: (256, 84), 11: (256, 110), 12: (256, 144),
              13: (256, 176), 14: (256, 210), 15: (256, 292), 16: (256, 66), 17: (256, 74),
              18: (256, 98), 19: (256, 50), 20: (32, 18), 21: (256, 110), 22: (256, 82),
              23: (256, 136), 24: (1, 1), 25: (1, 2), 26: (1, 4), 27: (1, 8), 28: (1, 8),
              29: (256, 56), 30: (1, 2), 34: (256, 54), 35: (256, 66), 39: (32, 17),
              40: (64, 36), 41: (128, 18), 42: (64, 18)}
U8, I8, U16, I16, U32, I32, F32, BOOL, STR, ARR, U64, I64, F64 = range(13)
SCALAR = {U8: "<B", I8: "<b", U16: "<H", I16: "<h", U32: "<I", I32: "<i", F32: "<f",
          BOOL: "<B", U64: "<Q", I64: "<q", F64: "<d"}


def gstr(s):
    b = s if isinstance(s, bytes) else s.encode()
    return struct.pack("<Q", len(b)) + b


def gvalue(t, v):
    """v for ARR: (element type, [elements])."""
    if t == STR:
        return gstr(v)
    if t == ARR:
        et, items = v
        return struct.pack("<IQ", et, len(items)) + b"".join(gvalue(et, x) for x in items)
    return struct.pack(SCALAR[t], v)


def gguf(kvs=(), tensors=(), version=3, alignment=32, pad_end=False):
    """kvs: (key, type, value); tensors: (name, ne, type id, data bytes or None for
    a byte pattern of the right size[, data offset]); data laid out in order, each
    aligned (at the given offset if there is one)."""
    head = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(kvs))
    head += b"".join(gstr(k) + struct.pack("<I", t) + gvalue(t, v) for k, t, v in kvs)
    data = b""
    for name, ne, tid, payload, *offset in tensors:
        if payload is None:
            n = 1
            for d in ne:
                n *= d
            block, size = GGML_TYPES[tid]
            payload = bytes((i * 29 + 7) & 0xFF for i in range(n // block * size))
        data += b"\0" * (-len(data) % alignment)
        head += gstr(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", d) for d in ne)
        head += struct.pack("<IQ", tid, offset[0] if offset else len(data))
        data += payload
    if tensors or pad_end:
        head += b"\0" * (-len(head) % alignment)
    return head + data


def read_gguf(path):
    """The tensors of a ggml-written file: {name: (ne, type id, bytes)}."""
    with open(path, "rb") as f:
        b = f.read()
    pos = 8
    n_tensors, n_kv = struct.unpack_from("<QQ", b, pos)
    pos += 16

    def skip(t):
        nonlocal pos
        if t == STR:
            (n,) = struct.unpack_from("<Q", b, pos)
            pos += 8 + n
        elif t == ARR:
            et, n = struct.unpack_from("<IQ", b, pos)
            pos += 12
            for _ in range(n):
                skip(et)
        else:
            pos += struct.calcsize(SCALAR[t])

    for _ in range(n_kv):
        skip(STR)
        (t,) = struct.unpack_from("<I", b, pos)
        pos += 4
        skip(t)
    infos = []
    for _ in range(n_tensors):
        (n,) = struct.unpack_from("<Q", b, pos)
        name = b[pos + 8:pos + 8 + n].decode()
        pos += 8 + n
        (dims,) = struct.unpack_from("<I", b, pos)
        ne = list(struct.unpack_from("<%dQ" % dims, b, pos + 4))
        pos += 4 + 8 * dims
        tid, offset = struct.unpack_from("<IQ", b, pos)
        pos += 12
        infos.append((name, ne, tid, offset))
    data = pos + (-pos % 32)
    out = {}
    for name, ne, tid, offset in infos:
        n = 1
        for d in ne:
            n *= d
        block, size = GGML_TYPES[tid]
        out[name] = (ne, tid, b[data + offset:data + offset + n // block * size])
    return out


# The ggml-written files: metadata.gguf as it is; of known-answers.gguf (290 KB)
# the first row of each T.q (ggml's bytes; the corpus stays under -max_len).
with open(os.path.join(GGML_DATA, "metadata.gguf"), "rb") as f:
    write(gg, "valid_ggml_metadata", f.read())
known = read_gguf(os.path.join(GGML_DATA, "known-answers.gguf"))
rows = []
for name in sorted(known):
    ne, tid, payload = known[name]
    if name.endswith(".q"):
        rows.append((name, [ne[0]], tid, payload[:len(payload) // ne[1]]))
write(gg, "valid_ggml_known_answer_rows", gguf([("general.architecture", STR, "llama")], rows))

ALL_KINDS = [("k.u8", U8, 200), ("k.i8", I8, -100), ("k.u16", U16, 60000), ("k.i16", I16, -30000),
             ("k.u32", U32, 4000000000), ("k.i32", I32, -2000000000), ("k.f32", F32, 0.5),
             ("k.bool", BOOL, 1), ("k.str", STR, "h\xe9llo \"q\" \\ \x01"), ("k.empty", STR, ""),
             ("k.u64", U64, (1 << 64) - 1), ("k.i64", I64, -(1 << 63)), ("k.f64", F64, -2.5),
             ("k.arr.u8", ARR, (U8, [1, 2, 255])), ("k.arr.bool", ARR, (BOOL, [1, 0])),
             ("k.arr.str", ARR, (STR, ["a", "", "bc"])), ("k.arr.f64", ARR, (F64, [0.1, 1e300])),
             ("k.arr.empty", ARR, (I32, []))]
write(gg, "valid_every_value_type", gguf(ALL_KINDS))
write(gg, "valid_empty", gguf())
write(gg, "valid_v2", gguf([("general.name", STR, "v2")], [("w", [4, 2], 0, None)], version=2))
write(gg, "valid_no_tensors_unpadded", gguf([("a", U8, 1)]))
write(gg, "valid_no_tensors_padded", gguf([("a", U8, 1)], pad_end=True))
write(gg, "valid_alignment_64", gguf([("general.alignment", U32, 64)],
                                     [("a", [3], 0, None), ("b", [5], 1, None),
                                      ("c", [32], 8, None)], alignment=64))
write(gg, "valid_alignment_1", gguf([("general.alignment", U32, 1)],
                                    [("a", [3], 24, None), ("b", [1], 0, None)], alignment=1))
nested = (ARR, [(ARR, [(U8, [1, 2]), (U8, [])]), (ARR, [(STR, ["x"])])])
write(gg, "valid_nested_arrays", gguf([("n", ARR, nested)]))
deep = (U8, [7])
for _ in range(7):
    deep = (ARR, [deep])
write(gg, "valid_nested_8_deep", gguf([("n", ARR, deep)]))
write(gg, "valid_zero_dim", gguf([], [("z", [0, 4], 0, b""), ("q", [32, 0], 2, b""),
                                      ("s", [], 0, None)]))
write(gg, "valid_4d_plain_types", gguf([], [("f64", [2, 1, 1, 2], 28, None), ("i8", [3], 24, None),
                                            ("i16", [3], 25, None), ("i32", [3], 26, None),
                                            ("i64", [3], 27, None), ("bf16", [4, 2], 30, None),
                                            ("f16", [4], 1, None)]))
# One block of every ggml type (random bytes; those lowp does not decode too).
write(gg, "valid_one_block_each_type",
      gguf([], [("t%d" % tid, [block], tid, None) for tid, (block, _) in sorted(GGML_TYPES.items())]))
write(gg, "valid_q_rows", gguf([], [("q4k", [256, 2], 12, None), ("q80", [64, 3], 8, None),
                                    ("nv", [64], 40, None), ("mx", [32, 1, 2], 39, None)]))

good = gguf([("general.architecture", STR, "llama"), ("a", ARR, (U8, [1, 2]))],
            [("w", [4], 0, None)])
write(gg, "bad_magic", b"GGUS" + good[4:])
write(gg, "bad_version_1", good[:4] + struct.pack("<I", 1) + good[8:])
write(gg, "bad_version_big_endian", good[:4] + struct.pack(">I", 3) + good[8:])
write(gg, "bad_truncated", good[:-3])
write(gg, "bad_n_kv_huge", b"GGUF" + struct.pack("<IQQ", 3, 0, 1 << 63))
write(gg, "bad_string_length", b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + gstr("k") +
      struct.pack("<IQ", STR, (1 << 64) - 1))
write(gg, "bad_array_count", b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + gstr("k") +
      struct.pack("<IIQ", ARR, ARR, (1 << 64) - 1))
write(gg, "bad_value_type", b"GGUF" + struct.pack("<IQQ", 3, 0, 1) + gstr("k") +
      struct.pack("<IB", 13, 0))
write(gg, "bad_bool", gguf([("b", BOOL, 2)]))
write(gg, "bad_duplicate_key", gguf([("k", U8, 1), ("k", U8, 2)]))
write(gg, "bad_duplicate_tensor", gguf([], [("w", [4], 0, None), ("w", [4], 0, None)]))
write(gg, "bad_alignment_48", gguf([("general.alignment", U32, 48)]))
write(gg, "bad_alignment_u64", gguf([("general.alignment", U64, 32)]))
write(gg, "bad_removed_type", gguf([], [("w", [32], 4, b"\0" * 20)]))
write(gg, "bad_q4_k_row", gguf([], [("w", [128, 2], 12, b"\0" * 288)]))
write(gg, "bad_overlap", gguf([], [("a", [16], 0, None), ("b", [8], 0, None, 32)]))
write(gg, "bad_offset_unaligned", gguf([], [("a", [16], 0, None, 16)]))
write(gg, "bad_offset_overflow", gguf([], [("a", [8], 0, None, (1 << 64) - 32)]))
write(gg, "bad_dims_wrap_to_zero", gguf([], [("w", [1 << 32, 1 << 32], 0, b"")]))
write(gg, "bad_deep", gguf([("n", ARR, (ARR, [deep]))]))

# llama.cpp importance matrices (io/imatrix.h). GGUF as save_imatrix writes
# it (ggml_n_dims drops trailing 1s; ggml pads the last tensor too), legacy
# .dat as save_imatrix_legacy writes it.
im = "imatrix"


def f32s(values):
    return struct.pack("<%df" % len(values), *values)


def imatrix_gguf(entries, datasets=("calibration.txt",), chunks=3, chunk_size=512, kvs=None,
                 extra=()):
    """entries: (name, columns, matrices, sum2, counts, sum or None)."""
    tensors = []
    for name, columns, matrices, sum2, counts, sums in entries:
        shape = [columns] if matrices == 1 else [columns, matrices]
        tensors.append((name + ".in_sum2", shape, 0, f32s(sum2)))
        tensors.append((name + ".counts", [1] if len(counts) == 1 else [1, len(counts)], 0,
                        f32s(counts)))
        if sums is not None:
            tensors.append((name + ".in_sum", shape, 0, f32s(sums)))
    if kvs is None:
        kvs = [("general.type", STR, "imatrix"), ("imatrix.datasets", ARR, (STR, list(datasets))),
               ("imatrix.chunk_count", U32, chunks), ("imatrix.chunk_size", U32, chunk_size)]
    b = gguf(kvs, tensors + list(extra))
    return b + b"\0" * (-len(b) % 32)


def dat_entry(name, ncall, values):
    n = name.encode()
    return struct.pack("<i", len(n)) + n + struct.pack("<ii", ncall, len(values)) + f32s(values)


def dat(entries, tail=None, count=None):
    """entries: (name, ncall, values); tail: (chunks, dataset) or None."""
    b = struct.pack("<i", len(entries) if count is None else count)
    b += b"".join(dat_entry(*e) for e in entries)
    if tail is not None:
        d = tail[1].encode()
        b += struct.pack("<ii", tail[0], len(d)) + d
    return b


DENSE = ("blk.0.attn_q.weight", 4, 1, [4.0, 8.0, 1.0, 0.0], [3.0], [1.0, -2.0, 0.5, 0.0])
MOE = ("blk.1.ffn_up_exps.weight", 2, 3, [10.0, 20.0, 0.0, 0.0, 3.0, 1.0], [10.0, 0.0, 4.0], None)
OUT = ("output.weight", 3, 1, [1.0, 2.0, 3.0], [600.0], None)
write(im, "valid_gguf_dense", imatrix_gguf([DENSE]))
write(im, "valid_gguf_moe", imatrix_gguf([DENSE, MOE, OUT], datasets=("a.txt", "b.txt")))
write(im, "valid_gguf_no_datasets", imatrix_gguf([OUT], datasets=()))
write(im, "valid_gguf_other_tensor", imatrix_gguf([OUT], extra=[("something.else", [2], 0, None)]))
write(im, "valid_gguf_all_zero_counts",
      imatrix_gguf([("blk.2.ffn_down_exps.weight", 1, 2, [0.0, 0.0], [0.0, 0.0], None)]))
ATTN = ("blk.0.attn_q.weight", 3, [3.0, 1.0, 0.25, 9.0])
write(im, "valid_dat_tail", dat([ATTN, ("output.weight", 1, [0.5])], (17, "wiki.train.raw")))
write(im, "valid_dat_no_tail", dat([ATTN]))
write(im, "valid_dat_empty_dataset", dat([ATTN], (0, "")))
write(im, "valid_dat_ncall_zero", dat([("blk.0.ffn_down_exps.weight", 0, [2.0, 4.0, 6.0, 8.0])],
                                      (1, "d")))
write(im, "bad_empty", b"")
write(im, "bad_gguf_no_type", imatrix_gguf([DENSE], kvs=[
    ("imatrix.datasets", ARR, (STR, [])), ("imatrix.chunk_count", U32, 1),
    ("imatrix.chunk_size", U32, 512)]))
write(im, "bad_gguf_model_type", imatrix_gguf([DENSE], kvs=[
    ("general.type", STR, "model"), ("imatrix.datasets", ARR, (STR, [])),
    ("imatrix.chunk_count", U32, 1), ("imatrix.chunk_size", U32, 512)]))
write(im, "bad_gguf_missing_chunk_size", imatrix_gguf([DENSE], kvs=[
    ("general.type", STR, "imatrix"), ("imatrix.datasets", ARR, (STR, [])),
    ("imatrix.chunk_count", U32, 1)]))
write(im, "bad_gguf_chunk_size_zero", imatrix_gguf([DENSE], chunk_size=0))
write(im, "bad_gguf_sum2_alone", imatrix_gguf([], extra=[("w.in_sum2", [2], 0, f32s([1, 2]))]))
write(im, "bad_gguf_counts_length", imatrix_gguf([("w", 2, 1, [1.0, 2.0], [1.0, 1.0], None)]))
write(im, "bad_gguf_f16", imatrix_gguf([], extra=[("w.in_sum2", [2], 1, None),
                                                  ("w.counts", [1], 0, f32s([1]))]))
write(im, "bad_gguf_nan", imatrix_gguf([("w", 2, 1, [1.0, float("nan")], [1.0], None)]))
write(im, "bad_gguf_negative_count", imatrix_gguf([("w", 1, 1, [1.0], [-1.0], None)]))
write(im, "bad_gguf_fractional_count", imatrix_gguf([("w", 1, 1, [1.0], [1.5], None)]))
write(im, "bad_gguf_3d", imatrix_gguf([], extra=[("w.in_sum2", [1, 2, 2], 0, f32s([1, 2, 3, 4])),
                                                 ("w.counts", [1, 4], 0, f32s([1, 1, 1, 1]))]))
write(im, "bad_dat_zero_entries", dat([ATTN], count=0))
write(im, "bad_dat_huge_entries", dat([ATTN], count=0x7FFFFFFF))
write(im, "bad_dat_negative_name", struct.pack("<ii", 1, -1) + b"\0" * 20)
write(im, "bad_dat_nval_huge", struct.pack("<i", 1) + dat_entry("w", 1, [])[:-4] +
      struct.pack("<i", 0x7FFFFFFF) + b"\0" * 8)
write(im, "bad_dat_truncated", dat([ATTN])[:-6])
write(im, "bad_dat_trailing", dat([ATTN], (1, "d")) + b"\0")
write(im, "bad_dat_partial_tail", dat([ATTN]) + b"\1\0")
write(im, "bad_dat_duplicate", dat([ATTN, ATTN]))
write(im, "bad_dat_nan", dat([("w", 1, [float("nan")])]))
write(im, "bad_dat_negative_ncall", dat([("w", -3, [1.0])]))


# lowp mix --tables' shard files (mix/table_file.h), for mix_table_fuzzer's
# fixed table: 3 groups, 2 types, tuning tokens 1 2 3 4.
def fnv(data, h=1469598103934665603):
    for b in data:
        h = ((h ^ b) * 1099511628211) % (1 << 64)
    return h


def mix_shard(index, count, entries, method="exact", **changes):
    ids = struct.pack("<4i", 1, 2, 3, 4) + struct.pack("<qq", 4, -1)
    identity = {"groups": [["g0", 8, 32, 1], ["g1", 16, 32, 1], ["g2", 8, 64, 4]],
                "types": ["q4_0", "q8_0"], "sensitivity": method,
                "tokens": {"description": "fuzz tokens", "fingerprint": "%016x" % fnv(ids)},
                "imatrix": "none", "calibration": "none"}
    identity.update(changes)
    return json.dumps({"format": "lowp-mix-table", "version": 2, "model": "m",
                       "identity": identity, "shard": {"index": index, "count": count},
                       "positions": 3, "kl_mean": entries}, indent=1)


mt = "mix_table"
# [group, type, KL, measured, weight error (null when exact)]
everything = [[g, t, 0.001 * (g * 2 + t + 1), True, None] for g in range(3) for t in range(2)]
write(mt, "whole.json", mix_shard(1, 1, everything))
odd = [e for e in everything if (e[0] * 2 + e[1]) % 2 == 0]
even = [e for e in everything if (e[0] * 2 + e[1]) % 2 == 1]
write(mt, "two-shards", mix_shard(1, 2, odd) + "\0" + mix_shard(2, 2, even))
write(mt, "nan-inf", mix_shard(1, 1, [[g, t, "nan" if g == 0 else "inf", True, None]
                                      for g in range(3) for t in range(2)]))
write(mt, "missing-shard", mix_shard(1, 2, odd))
write(mt, "other-types", mix_shard(1, 1, everything, types=["q4_0", "q6_K"]))
write(mt, "entry-of-another-shard", mix_shard(1, 2, everything) + "\0" + mix_shard(2, 2, even))
# Predicted: a shard per group, the probe (q4_0) measured, q8_0 scaled.
predicted = [[g, t, 0.001 * (g + 1) * (0.1 if t else 1), t == 0, 0.01 * (0.1 if t else 1)]
             for g in range(3) for t in range(2)]
write(mt, "predicted.json", mix_shard(1, 1, predicted, method="predicted"))
write(mt, "predicted-two-shards",
      mix_shard(1, 2, [e for e in predicted if e[0] % 2 == 0], method="predicted") + "\0" +
      mix_shard(2, 2, [e for e in predicted if e[0] % 2 == 1], method="predicted"))
write(mt, "not-json", "{\"format\": \"lowp-mix-table\", ")
