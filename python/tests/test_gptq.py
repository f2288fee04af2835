"""lowp.gptq against a NumPy GPTQ written here from the paper's algorithm
(Frantar et al. 2022, Algorithm 1, and its reference gptq.py): the same
Hessian, the same column order, the same codes.

The quantizer is lowp's int4-gG rule as README's scheme table states it:
scale = fp16(absmax / 7) over the group's columns as they stand when the
loop reaches the group's first column, code = clamp(rint(w / scale), -7, 7)
in float32, value = code * scale. And lowp.plan with a calibrated format.
"""
import os

import numpy as np
import pytest

import lowp

DATA = os.environ.get("LOWP_TEST_DATA", os.path.join(os.path.dirname(__file__), "../../tests/data"))


def numpy_gptq(w, x, group, damp=0.01, act_order=False):
    w = w.astype(np.float64).copy()
    rows, n = w.shape
    h = x.astype(np.float64).T @ x.astype(np.float64)
    order = np.arange(n)
    if act_order:
        order = np.argsort(-np.diag(h), kind="stable")
    h = h[np.ix_(order, order)]
    w = w[:, order]
    dead = np.diag(h) == 0
    h[dead, dead] = 1
    w[:, dead] = 0
    h += damp * np.mean(np.diag(h)) * np.eye(n)
    u = np.linalg.cholesky(np.linalg.inv(h)).T  # upper: inv(H) = U^T U
    q = np.zeros_like(w, dtype=np.float32)
    scale = None
    for i in range(n):
        if i % group == 0:
            block = w[:, i:i + group].astype(np.float32)
            scale = (np.abs(block).max(axis=1) / np.float32(7)).astype(np.float16).astype(np.float32)
        col = w[:, i].astype(np.float32)
        with np.errstate(divide="ignore", invalid="ignore"):
            code = np.where(scale == 0, 0, np.clip(np.rint(col / scale), -7, 7)).astype(np.float32)
        q[:, i] = code * scale
        err = (w[:, i] - q[:, i]) / u[i, i]
        w[:, i + 1:] -= np.outer(err, u[i, i + 1:])
    out = np.empty_like(q)
    out[:, order] = q
    return out, order


def correlated(rng, tokens, dim):
    mix = rng.normal(size=(dim, dim)) / np.sqrt(dim)
    scale = 1 + 0.1 * (np.arange(dim) % 7)
    return ((rng.normal(size=(tokens, dim)) @ mix) * scale).astype(np.float32)


@pytest.mark.parametrize("seed,rows,cols,group,act_order",
                         [(1, 16, 64, 32, False), (2, 24, 96, 32, False), (3, 8, 128, 128, False),
                          (4, 16, 64, 16, True), (5, 12, 96, 32, True)])
def test_gptq_gives_numpys_codes(seed, rows, cols, group, act_order):
    rng = np.random.default_rng(seed)
    w = rng.normal(0, 0.05, size=(rows, cols)).astype(np.float32)
    x = correlated(rng, 300, cols)
    got = lowp.gptq(w, x, f"int4-g{group}", act_order=act_order)
    want, order = numpy_gptq(w, x, group, act_order=act_order)
    np.testing.assert_array_equal(got["values"], want)
    if act_order:
        np.testing.assert_array_equal(got["order"], order)
    else:
        assert got["order"] is None


def test_gptq_lowers_the_output_error_and_writes_ggml_bytes():
    rng = np.random.default_rng(7)
    w = rng.normal(0, 0.05, size=(16, 256)).astype(np.float32)
    x = correlated(rng, 500, 256)
    def output_error(q):
        return float(np.mean(((x @ (w - q).T).astype(np.float64)) ** 2))
    for scheme in ("int4-g128", "q4_K", "q4_0"):
        got = lowp.gptq(w, x, scheme)
        nearest = lowp.quantize(w, scheme)
        assert output_error(got["values"]) < 0.8 * output_error(nearest), scheme
    got = lowp.gptq(w, x, "q4_K")
    assert len(got["bytes"]) == 16 * 144  # a q4_K block: 144 bytes per 256


def test_gptq_errors_name_the_argument():
    w = np.zeros((4, 32), np.float32)
    x = np.ones((10, 32), np.float32)
    with pytest.raises(ValueError, match="does not choose its codes"):
        lowp.gptq(w, x, "bf16")
    with pytest.raises(ValueError, match="inputs"):
        lowp.gptq(w, np.ones((10, 16), np.float32), "int4-g32")
    with pytest.raises(ValueError, match="act_order"):
        lowp.gptq(np.zeros((4, 256), np.float32), np.ones((10, 256), np.float32), "q4_K",
                  act_order=True)
    with pytest.raises(ValueError, match="damp"):
        lowp.gptq(w, x, "int4-g32", damp=-1)


def test_plan_takes_calibrated_formats_with_eval():
    with pytest.raises(ValueError, match="formats.*int4-g128:gptq.*eval"):
        lowp.plan(model="llama-3.1-8b", mode="inference", formats=["int4-g128:gptq"])
    with pytest.raises(ValueError, match="calib_chunks"):
        lowp.plan(model="llama-3.1-8b", mode="inference", formats=["int4-g128:gptq"],
                  eval=True, calib_chunks=0)
    p = lowp.plan(model="llama-3.1-8b", mode="inference", formats=["int4-g128", "int4-g128:gptq"],
                  eval=True, eval_model=os.path.join(DATA, "stories3M-hf"), eval_sample="2:64",
                  calib_chunks=2, quiet=True)
    rtn, gptq = p["candidates"]
    assert gptq["weight_bytes"] == rtn["weight_bytes"]
    assert gptq["error"] is None and gptq["relative_rmse"] is None
    assert gptq["end_to_end"]["kl_mean"] < rtn["end_to_end"]["kl_mean"]


def test_quantize_model_writes_what_eval_measures(tmp_path):
    model = os.path.join(DATA, "stories3M-hf")
    out = str(tmp_path / "gptq.safetensors")
    written = lowp.quantize_model(model=model, weights="int4-g128:gptq", out=out, calib_chunks=2,
                                  summary=True)
    assert written["aggregates"][0]["scheme"] == "int4-g128:gptq"
    r = lowp.eval(model=model, weights="int4-g128:gptq", weights_file=out, calib_chunks=2,
                  sample="2:64")
    calibrated, read_back = r["candidates"]
    assert read_back["kl_mean"] == calibrated["kl_mean"] > 0
    errors = lowp.model_quant_error(model=model, scheme=["int4-g128", "int4-g128:gptq"],
                                    calib_chunks=2, summary=True)
    rtn, gptq = errors["aggregates"]
    assert gptq["sqnr_db"] < rtn["sqnr_db"]  # GPTQ lowers the outputs' error, not the weights'
    with pytest.raises(ValueError, match="weights.*folds its scales"):
        lowp.quantize_model(model=model, weights="int4-g128:awq", out=str(tmp_path / "x"))
    with pytest.raises(ValueError, match="scheme"):
        lowp.model_quant_error(model=model, scheme="bogus")
    assert not os.path.exists(tmp_path / "x")
