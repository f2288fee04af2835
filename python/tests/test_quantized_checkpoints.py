"""Quantized checkpoints people download, read as --weights-file candidates:
GPTQ (AutoGPTQ/GPTQModel, v1 and v2 zero points, with and without act-order
g_idx), AutoAWQ's GEMM layout and compressed-tensors' pack-quantized, each
written here by a packer that follows the layouts' specifications (not
lowp's code) from the codes and scales of lowp's own int4-g128 and
uint4-g128-asym rules (README's scheme table, reproduced in NumPy). Read
back, each must give the rule's own candidate's KL exactly. And the other
way: the checkpoints lowp writes (quantize_model with format
'compressed-tensors' or 'gptq') hold, tensor for tensor, what that packer
makes from the same rule."""
import json
import os
import struct

import numpy as np
import pytest

import lowp

DATA = os.environ.get("LOWP_TEST_DATA", os.path.join(os.path.dirname(__file__), "../../tests/data"))
MODEL = os.path.join(DATA, "stories3M-hf")
LINEAR = ("self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
          "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack_from("<Q", data, 0)
    header = json.loads(data[8:8 + n])
    out = {}
    kinds = {"F32": np.float32, "F16": np.float16, "I32": np.int32, "I64": np.int64, "U8": np.uint8}
    for name, t in header.items():
        if name == "__metadata__":
            continue
        a, b = t["data_offsets"]
        out[name] = np.frombuffer(data[8 + n + a:8 + n + b], kinds[t["dtype"]]).reshape(t["shape"])
    return out


def write_safetensors(path, tensors):
    names = {np.dtype(np.float32): "F32", np.dtype(np.float16): "F16", np.dtype(np.int32): "I32",
             np.dtype(np.int64): "I64", np.dtype(np.uint8): "U8"}
    header, blobs, at = {}, [], 0
    for name, a in tensors.items():
        a = np.ascontiguousarray(a)
        header[name] = {"dtype": names[a.dtype], "shape": list(a.shape),
                        "data_offsets": [at, at + a.nbytes]}
        blobs.append(a.tobytes())
        at += a.nbytes
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b"".join(blobs))


def int4_g128(w):
    """lowp's int4-g128: per group of 128 along a row, scale = fp16(amax / 7),
    q = clamp(rint(x / scale), -7, 7) (one float32 division)."""
    n, k = w.shape
    g = w.reshape(n, k // 128, 128)
    scale = (np.abs(g).max(axis=2) / np.float32(7)).astype(np.float16)
    s = scale.astype(np.float32)[:, :, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.where(s > 0, np.clip(np.rint(g / s), -7, 7), 0).astype(np.int32)
    return q.reshape(n, k), scale  # [N, K] codes, [N, K/128] scales


def uint4_g128_asym(w):
    """lowp's uint4-g128-asym: [lo, hi] = [min(0, min x), max(0, max x)],
    scale = fp16((hi - lo) / 15), zero = clamp(rne(-lo / scale), 0, 15),
    q = clamp(rne(x / scale) + zero, 0, 15)."""
    n, k = w.shape
    g = w.reshape(n, k // 128, 128)
    lo = np.minimum(g.min(axis=2), 0)
    hi = np.maximum(g.max(axis=2), 0)
    scale = ((hi - lo) / np.float32(15)).astype(np.float16)
    s = scale.astype(np.float32)
    zero = np.clip(np.rint(-lo / s), 0, 15)
    q = np.clip(np.rint(g / s[:, :, None]) + zero[:, :, None], 0, 15).astype(np.int32)
    return q.reshape(n, k), scale, zero.astype(np.int32)


def pack(values, bits, axis):
    """Values (unsigned, < 2^bits) packed into int32 words along `axis`,
    the lowest index in the lowest bits (GPTQ's and compressed-tensors'
    order for bits dividing 32)."""
    v = np.moveaxis(values.astype(np.uint32), axis, 0)
    per = 32 // bits
    v = v.reshape(v.shape[0] // per, per, *v.shape[1:])
    words = np.zeros(v.shape[:1] + v.shape[2:], np.uint32)
    for i in range(per):
        words |= v[:, i] << np.uint32(bits * i)
    return np.moveaxis(words, 0, axis).view(np.int32)


def checkpoint(tmp_path, layout, quant_config, linear):
    """A copy of stories3M-hf's matrices in `layout` beside a config.json
    with `quant_config`; `linear(w)` gives each linear layer's tensors."""
    src = read_safetensors(os.path.join(MODEL, "model.safetensors"))
    out = {}
    for name, w in src.items():
        prefix = name[:-len(".weight")] if name.endswith(".weight") else None
        if prefix is not None and prefix.endswith(LINEAR):
            for suffix, t in linear(w.astype(np.float32)).items():
                out[prefix + "." + suffix] = t
        else:
            out[name] = w
    d = tmp_path / layout
    d.mkdir()
    with open(os.path.join(MODEL, "config.json")) as f:
        config = json.load(f)
    config["quantization_config"] = quant_config
    with open(d / "config.json", "w") as f:
        json.dump(config, f)
    write_safetensors(str(d / "model.safetensors"), out)
    return str(d / "model.safetensors")


def same_kl(weights, path):
    r = lowp.eval(model=MODEL, weights=weights, weights_file=path, sample="2:64")
    rules, read_back = r["candidates"]
    assert rules["kl_mean"] > 0
    assert read_back["kl_mean"] == rules["kl_mean"], read_back["weights_file"]


@pytest.mark.parametrize("version", ["gptq", "gptq_v2"])
@pytest.mark.parametrize("act_order", [False, True])
def test_gptq(tmp_path, version, act_order):
    rng = np.random.default_rng(1)
    expected = []  # each matrix's values, as the packer meant them, in packing order

    def linear(w):
        q, scale = int4_g128(w)  # [N, K], [N, K/128]
        n, k = w.shape
        g_idx = np.arange(k, dtype=np.int32) // 128
        qk = (q + 8).T  # [K, N] unsigned, zero 8
        scales = scale.T.copy()  # [K/G, N]
        if act_order:  # rows keep their order; groups are any columns, by g_idx
            perm = rng.permutation(k)
            g_idx = g_idx[perm]
            # Column k of W belongs to group g_idx[k]: requantize by that grouping.
            cols = [np.flatnonzero(g_idx == g) for g in range(k // 128)]
            scales = np.zeros((k // 128, n), np.float16)
            qk = np.zeros((k, n), np.int64)
            for g, c in enumerate(cols):
                qg, sg = int4_g128(np.ascontiguousarray(w[:, c]))
                scales[g] = sg[:, 0]
                qk[c] = (qg + 8).T
        stored_zero = 8 if version == "gptq_v2" else 7
        zeros = np.full((k // 128, n), stored_zero, np.uint32)
        expected.append((scales.astype(np.float32)[g_idx] * (qk - 8).astype(np.float32)).T)
        return {"qweight": pack(qk, 4, 0), "qzeros": pack(zeros, 4, 1), "scales": scales,
                "g_idx": g_idx}

    config = {"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": act_order,
              "sym": True, "checkpoint_format": version}
    path = checkpoint(tmp_path, "gptq", config, linear)
    src = read_safetensors(os.path.join(MODEL, "model.safetensors"))
    names = [n for n in src if n.endswith(".weight") and n[:-len(".weight")].endswith(LINEAR)]
    read = lowp.read_tensors(path, names)
    assert len(names) == len(expected) == 28
    for name, want in zip(names, expected):
        np.testing.assert_array_equal(read[name], want, err_msg=name)
    if not act_order:
        same_kl("int4-g128", path)
    else:  # other groups than lowp's: the values are the packer's own
        r = lowp.eval(model=MODEL, weights_file=path, sample="2:64")
        assert 0 < r["candidates"][0]["kl_mean"] < 0.05


def test_awq_gemm(tmp_path):
    order = [0, 2, 4, 6, 1, 3, 5, 7]

    def awq_pack(v):  # [rows, N] -> [rows, N/8], nibble i holds column 8c + order[i]
        rows, n = v.shape
        v = v.astype(np.uint32).reshape(rows, n // 8, 8)[:, :, order]
        words = np.zeros((rows, n // 8), np.uint32)
        for i in range(8):
            words |= v[:, :, i] << np.uint32(4 * i)
        return words.view(np.int32)

    def linear(w):
        q, scale, zero = uint4_g128_asym(w)  # [N, K], [N, K/G], [N, K/G]
        return {"qweight": awq_pack(q.T), "qzeros": awq_pack(zero.T), "scales": scale.T.copy()}

    config = {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True,
              "version": "gemm"}
    same_kl("uint4-g128-asym", checkpoint(tmp_path, "awq", config, linear))


def test_compressed_tensors_pack_quantized(tmp_path):
    def linear(w):
        q, scale = int4_g128(w)
        return {"weight_packed": pack(q + 8, 4, 1), "weight_scale": scale,
                "weight_shape": np.array(w.shape, np.int64)}

    weights = {"num_bits": 4, "type": "int", "symmetric": True, "strategy": "group",
               "group_size": 128, "dynamic": False, "actorder": None, "block_structure": None,
               "observer": "minmax", "observer_kwargs": {}}
    config = {"quant_method": "compressed-tensors", "format": "pack-quantized",
              "quantization_status": "compressed", "ignore": ["lm_head"],
              "config_groups": {"group_0": {"targets": ["Linear"], "weights": weights,
                                            "input_activations": None, "format": "pack-quantized"}}}
    same_kl("int4-g128", checkpoint(tmp_path, "ct", config, linear))


def spec_tensors(fmt, weights, w):
    """What the packer above writes for lowp's rule `weights` on w [N, K]."""
    n, k = w.shape
    if weights == "int4-g128":
        q, scale = int4_g128(w)
        if fmt == "gptq":
            return {"qweight": pack((q + 8).T, 4, 0),
                    "qzeros": pack(np.full((k // 128, n), 7, np.uint32), 4, 1),  # z - 1
                    "scales": scale.T, "g_idx": np.arange(k, dtype=np.int32) // 128}
        return {"weight_packed": pack(q + 8, 4, 1), "weight_scale": scale,
                "weight_shape": np.array([n, k], np.int64)}
    q, scale, zero = uint4_g128_asym(w)
    if fmt == "gptq":
        return {"qweight": pack(q.T, 4, 0), "qzeros": pack(zero.T - 1, 4, 1), "scales": scale.T,
                "g_idx": np.arange(k, dtype=np.int32) // 128}
    return {"weight_packed": pack(q, 4, 1), "weight_scale": scale,
            "weight_zero_point": pack(zero, 4, 0), "weight_shape": np.array([n, k], np.int64)}


@pytest.mark.parametrize("fmt", ["compressed-tensors", "gptq"])
@pytest.mark.parametrize("weights", ["int4-g128", "uint4-g128-asym"])
def test_written_checkpoints_hold_the_specifications_packing(tmp_path, fmt, weights):
    out = tmp_path / "model"
    lowp.quantize_model(model=MODEL, weights=weights, out=str(out), format=fmt, summary=True)
    got = read_safetensors(str(out / "model.safetensors"))
    src = read_safetensors(os.path.join(MODEL, "model.safetensors"))
    expected = {}
    for name, w in src.items():
        prefix = name[:-len(".weight")]
        if name.endswith(".weight") and prefix.endswith(LINEAR):
            for suffix, t in spec_tensors(fmt, weights, w.astype(np.float32)).items():
                expected[prefix + "." + suffix] = t
        else:
            expected[name] = w
    assert sorted(got) == sorted(expected)
    for name, want in expected.items():
        assert got[name].dtype == want.dtype, name
        np.testing.assert_array_equal(got[name], want, err_msg=name)
    with open(out / "config.json") as f:
        config = json.load(f)["quantization_config"]
    assert config["quant_method"] == ("gptq" if fmt == "gptq" else "compressed-tensors")
    same_kl(weights, str(out / "model.safetensors"))


def test_written_checkpoint_refusals(tmp_path):
    out = str(tmp_path / "model")
    with pytest.raises(ValueError, match="format"):
        lowp.quantize_model(model=MODEL, weights="int4-g128", out=out, format="awq")
    with pytest.raises(ValueError, match="no GPTQ layout"):
        lowp.quantize_model(model=MODEL, weights="q4_K", out=out, format="gptq")
    assert not os.path.exists(out)
    assert os.listdir(tmp_path) == []
