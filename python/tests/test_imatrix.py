"""lowp.quantize with importance weights against ggml's own known answers,
and lowp.imatrix's matrix feeding the commands."""

import os

import numpy as np
import pytest

import lowp

DATA = os.environ.get("LOWP_TEST_DATA", os.path.join(os.path.dirname(__file__), "../../tests/data"))
KNOWN = os.path.join(DATA, "ggml", "known-answers-imatrix.gguf")
TYPES = ["q4_0", "q4_1", "q5_0", "q5_1", "q2_K", "q3_K", "q4_K", "q5_K", "q6_K", "iq4_nl",
         "iq4_xs", "iq2_xxs", "iq2_xs", "iq2_s", "iq3_xxs", "iq3_s", "iq1_s", "iq1_m"]


@pytest.fixture(scope="module")
def known():
    return lowp.read_tensors(KNOWN)


@pytest.mark.parametrize("t", TYPES)
def test_quantize_with_imatrix_is_ggmls_to_float(known, t):
    # T.x [10, 256] quantized by ggml_quantize_chunk with imatrix T.w, then
    # its to_float (T.y); T.q read back decodes to the same values.
    x, w, y = known[f"{t}.x"], known[f"{t}.w"], known[f"{t}.y"]
    got = lowp.quantize(x, t, imatrix=w)
    assert got.dtype == np.float32 and got.shape == x.shape
    assert np.array_equal(got.view(np.uint32), y.view(np.uint32)), t
    assert np.array_equal(known[f"{t}.q"].view(np.uint32), y.view(np.uint32)), t


def test_types_that_need_importance_refuse_without(known):
    x = known["iq2_xxs.x"]
    for t in ("iq2_xxs", "iq2_xs", "iq1_s"):
        with pytest.raises(ValueError, match="importance"):
            lowp.quantize(x, t)
    with pytest.raises(ValueError, match="imatrix"):
        lowp.quantize(x, "q4_K", imatrix=np.ones(5, np.float32))
    with pytest.raises(ValueError, match="imatrix"):
        lowp.quantize(x, "q4_K", imatrix=np.full(256, np.nan, np.float32))


def test_imatrix_call_and_file(tmp_path):
    out = tmp_path / "m.dat"
    r = lowp.imatrix(sample="2:32", out=str(out), process_output=True, threads=2)
    assert r["format"] == "dat" and out.exists()
    names = {e["name"] for e in r["entries"]}
    assert "output.weight" in names and "blk.0.attn_q.weight" in names
    q = r["importance"]["blk.0.attn_q.weight"]
    assert q.dtype == np.float32 and q.shape == (1, 64) and (q > 0).all()
    # The same importance as a file drives quant_error.
    e = lowp.quant_error(os.path.join(DATA, "stories260K-hf", "model.safetensors"), "q4_0",
                         tensors="*q_proj*", summary=True, imatrix=str(out))
    assert e["imatrix"] == str(out)
    assert 0 < e["aggregates"][0]["weighted_relative_rmse"] < 1
