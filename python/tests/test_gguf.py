"""GGUF files from lowp.quantize_model and lowp.mix(out=...): llama.cpp's
model file with each matrix the rules' own bytes, read back by lowp.eval as
the same candidate; eval's activations="ggml" (llama.cpp's conversion of each
product's input) and its refusals as Python exceptions."""
import os
import struct

import pytest

import lowp

DATA = os.environ.get("LOWP_TEST_DATA", os.path.join(os.path.dirname(__file__), "../../tests/data"))
MODEL = os.path.join(DATA, "stories3M-hf")


def gguf_keys(path):
    """The metadata keys of a GGUF file, in order (a minimal reader of the
    format's header, for the test)."""
    with open(path, "rb") as f:
        b = f.read(1 << 20)
    magic, version, _, count = struct.unpack_from("<4sIqq", b, 0)
    assert magic == b"GGUF" and version == 3
    at, keys = 24, []
    sizes = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}

    def skip(kind, at):
        if kind == 8:
            (n,) = struct.unpack_from("<Q", b, at)
            return at + 8 + n
        if kind == 9:
            element, n = struct.unpack_from("<IQ", b, at)
            at += 12
            for _ in range(n):
                at = skip(element, at)
            return at
        return at + sizes[kind]

    for _ in range(count):
        (n,) = struct.unpack_from("<Q", b, at)
        keys.append(b[at + 8:at + 8 + n].decode())
        at += 8 + n
        (kind,) = struct.unpack_from("<I", b, at)
        at = skip(kind, at + 4)
    return keys


def test_quantize_model_writes_a_gguf_eval_reads_back(tmp_path):
    out = str(tmp_path / "q4km.gguf")
    written = lowp.quantize_model(model=MODEL, weights="Q4_K_M", out=out, summary=True)
    assert written["aggregates"][0]["scheme"] == "Q4_K_M"
    keys = gguf_keys(out)
    assert keys[:3] == ["general.architecture", "general.type", "general.name"]
    assert "tokenizer.ggml.tokens" in keys and "general.file_type" in keys
    r = lowp.eval(model=MODEL, weights="Q4_K_M", weights_file=out, sample="2:64")
    rules, read_back = r["candidates"]
    assert read_back["kl_mean"] == rules["kl_mean"] > 0
    # llama.cpp's conversion of each product's input changes the numbers.
    a = lowp.eval(model=MODEL, weights_file=out, activations=["none", "ggml"], sample="2:64")
    plain, ggml = a["candidates"]
    assert ggml["activations"] == "ggml"
    assert ggml["kl_mean"] != plain["kl_mean"]


def test_mix_writes_its_choice(tmp_path):
    out = str(tmp_path / "mix.gguf")
    r = lowp.mix(bits_per_weight=4.5, types=["q4_K", "q6_K"], baselines="none", sample="2:64",
                 tune_sample="2:64", out=out)
    assert r["written"] == out
    e = lowp.eval(model=MODEL, weights=r["weights_option"], weights_file=out, sample="2:32")
    rules, read_back = e["candidates"]
    assert read_back["kl_mean"] == rules["kl_mean"]


def test_refusals_name_the_argument(tmp_path):
    out = str(tmp_path / "x.gguf")
    with pytest.raises(ValueError, match="int4-g128.*no llama.cpp type"):
        lowp.quantize_model(model=MODEL, weights="int4-g128", out=out)
    with pytest.raises(ValueError, match="dtype"):
        lowp.quantize_model(model=MODEL, weights="q4_0", out=out, dtype="BF16")
    with pytest.raises(ValueError, match="out"):
        lowp.mix(bits_per_weight=4.5, types=["q4_K"], out=str(tmp_path / "x.bin"))
    assert os.listdir(tmp_path) == []
