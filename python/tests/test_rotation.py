"""':rotate=hadamard[N]' on a scheme, from Python: the value is Q(x H) H with
H the normalized Sylvester Hadamard matrix built here in NumPy, so products of
rotated weights and rotated activations are the rotated deployment's."""

import numpy as np
import pytest

import lowp


def hadamard(n):
    h = np.ones((1, 1))
    while h.shape[0] < n:
        h = np.block([[h, h], [h, -h]])
    return h / np.sqrt(n)


def rotate_rows(x, n):
    """Each run of n values of each row of x times H_n, in float64."""
    rows, cols = x.shape
    return (x.astype(np.float64).reshape(rows, cols // n, n) @ hadamard(n)).reshape(rows, cols)


@pytest.mark.parametrize("scheme,n", [("int4-g128", 256), ("mxfp4", 32), ("nvfp4", 64)])
def test_value_is_the_rotated_rows_quantization_rotated_back(scheme, n):
    x = np.random.default_rng(1).standard_normal((8, 256)).astype(np.float32)
    spelled = f"{scheme}:rotate=hadamard" + ("" if n == 256 else str(n))
    got = lowp.quantize(x, spelled)
    inner = lowp.quantize(rotate_rows(x, n).astype(np.float32), scheme)
    want = rotate_rows(inner, n)
    # The fast transform's last bits may move a value across a rounding
    # boundary now and then; the rest agree to float32 rounding.
    close = np.isclose(got, want, rtol=1e-5, atol=1e-5)
    assert close.mean() > 0.98, close.mean()


def test_rotated_products_and_reports():
    rng = np.random.default_rng(2)
    w = (rng.standard_normal((16, 512)) * 0.02).astype(np.float32)
    x = rng.standard_normal((4, 512)).astype(np.float32)
    w_q = lowp.quantize(w, "int4-g128:rotate=hadamard")
    x_q = lowp.quantize(x, "int8-channel:rotate=hadamard")
    deployed = (lowp.quantize(rotate_rows(x, 512).astype(np.float32), "int8-channel").astype(np.float64)
                @ lowp.quantize(rotate_rows(w, 512).astype(np.float32), "int4-g128").T.astype(np.float64))
    np.testing.assert_allclose(x_q.astype(np.float64) @ w_q.T.astype(np.float64), deployed,
                               rtol=1e-4, atol=1e-5)
    # quant_error names the block used where it is not the one asked for.
    report = lowp.quant_error({"w": np.zeros((2, 768), np.float32) + 1}, "q4_0:rotate=hadamard")
    assert report["results"][0]["applied"] == "q4_0:rotate=hadamard256"
    with pytest.raises(ValueError, match="power of two"):
        lowp.quantize(w, "int4-g128:rotate=hadamard3")
