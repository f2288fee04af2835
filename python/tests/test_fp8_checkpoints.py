"""FP8 checkpoints in DeepSeek-V3's layout (F8_E4M3 weight, F32
weight_scale_inv per 128 x 128 block), made here by DeepSeek's rule with an
independent e4m3 encoder (the nearest of the 127 positive values, ties to the
even code: brute force in NumPy; Debian 12's PyTorch has no float8), read by
lowp as the values they stand for; lowp's fp8_e4m3fn-b128x128 scheme gives the
same values; quant_error(reference=original) measures the pair.
"""

import json

import numpy as np
import pytest

import lowp
from safetensors_writer import write_safetensors

# e4m3fn's positive finite values by code 0..126: exponent field e, mantissa
# m: subnormal (e = 0) m/8 * 2^-6, else (1 + m/8) * 2^(e - 7).
E4M3 = np.array([(m / 8) * 2.0**-6 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7)
                 for e in range(16) for m in range(8)][:127])


def e4m3_encode(y):
    """Codes of float32 values y (|y| <= 448): nearest value, ties to the even code."""
    mag = np.abs(y.astype(np.float64))
    dist = np.abs(E4M3[None, :] - mag.reshape(-1, 1))
    best = dist.min(axis=1, keepdims=True)
    ties = dist == best
    candidates = np.where(ties, np.arange(127)[None, :], 1000)
    even = np.where(ties & (np.arange(127)[None, :] % 2 == 0), np.arange(127)[None, :], 1000)
    code = np.where(even.min(axis=1) < 1000, even.min(axis=1), candidates.min(axis=1))
    return (code | np.where(np.signbit(y.reshape(-1)), 0x80, 0)).astype(np.uint8).reshape(y.shape)


def block_quantize(x, block=128):
    """DeepSeek-V3's rule: per 128 x 128 block, s = amax / 448 in float32,
    codes = e4m3(x / s), the edge blocks short; also the dequantized values,
    code value * s in float32."""
    rows, cols = x.shape
    br, bc = -(-rows // block), -(-cols // block)
    scales = np.empty((br, bc), np.float32)
    codes = np.empty((rows, cols), np.uint8)
    values = np.empty((rows, cols), np.float32)
    for i in range(br):
        for j in range(bc):
            at = np.s_[i * block:(i + 1) * block, j * block:(j + 1) * block]
            amax = np.abs(x[at]).max()
            s = amax / np.float32(448) if amax > 0 else np.float32(1)
            scales[i, j] = s
            codes[at] = e4m3_encode(x[at] / s)
            decoded = E4M3[codes[at] & 0x7F] * np.where(codes[at] & 0x80, -1.0, 1.0)
            values[at] = decoded.astype(np.float32) * s
    return codes, scales, values


def test_deepseek_layout_reads_as_its_dequantization(tmp_path):
    x = (np.random.default_rng(30).standard_normal((300, 260)) * 0.02).astype(np.float32)
    codes, scales, dequantized = block_quantize(x)
    path = tmp_path / "model.safetensors"
    write_safetensors(path, {
        "w.weight": ("F8_E4M3", (300, 260), codes.tobytes()),
        "w.weight_scale_inv": ("F32", (3, 3), scales.tobytes()),
    })
    (tmp_path / "config.json").write_text(json.dumps({"quantization_config": {
        "quant_method": "fp8", "fmt": "e4m3", "activation_scheme": "dynamic", "weight_block_size": [128, 128]}}))
    got = lowp.read_tensors(str(path))
    assert list(got) == ["w.weight"]  # the scales are part of the weight
    np.testing.assert_array_equal(got["w.weight"], dequantized)
    listed = lowp.tensors(str(path))["tensors"][0]
    assert listed["type"] == "F8_E4M3*F32[b128x128]"
    assert listed["bytes"] == 300 * 260 + 9 * 4
    # lowp's own scheme is the same rule: the same values, bit for bit.
    np.testing.assert_array_equal(lowp.quantize(x, "fp8_e4m3fn-b128x128"), dequantized)

    # Measured against the original: e4m3's error (~5e-4 on N(0, 0.02^2)),
    # not the codes read as values (rmse ~100).
    original = tmp_path / "original.safetensors"
    write_safetensors(original, {"w.weight": ("F32", (300, 260), x.tobytes())})
    report = lowp.quant_error(str(path), reference=str(original))
    (row,) = [t for t in report["results"] if t["tensor"] == "w.weight"]
    assert row["scheme"] == "F8_E4M3*F32[b128x128]"
    rmse = float(np.sqrt(np.mean((dequantized.astype(np.float64) - x) ** 2)))
    assert row["rmse"] == pytest.approx(rmse, rel=1e-5)
    assert 3e-4 < row["rmse"] < 7e-4


def test_mismatched_scale_tensor_names_both(tmp_path):
    path = tmp_path / "bad.safetensors"
    write_safetensors(path, {
        "w.weight": ("F8_E4M3", (4, 4), bytes(16)),
        "w.weight_scale_inv": ("F32", (2, 2), np.ones(4, np.float32).tobytes()),
    })
    with pytest.raises(ValueError, match=r'"w.weight_scale_inv".*"w.weight"'):
        lowp.read_tensors(str(path))
