"""lowp.update_error against a plain NumPy AdamW: the float64 reference and the
bf16 recipe without a master copy (float32 step, rounded once to bf16 nearest-
even) written here from optim/update_error.h's rules, with the same seeded
gradient model; lost updates, update ratio and weight error must agree."""

import numpy as np
import pytest

import lowp

M64 = np.uint64(0xFFFFFFFFFFFFFFFF)


def splitmix(x):
    x = (x + np.uint64(0x9E3779B97F4A7C15)) & M64
    x = ((x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)) & M64
    x = ((x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)) & M64
    return x ^ (x >> np.uint64(31))


def draw(seed, tensor, i, t):
    """optim/update_error.cc GradientDraw for element indices i (uint64 array) at step t."""
    with np.errstate(over="ignore"):
        base = splitmix(splitmix(np.uint64(seed) ^ np.uint64(0x6C6F7770)) + np.uint64(tensor))
        h = splitmix(base ^ splitmix(i * np.uint64(2) + np.uint64(1))
                     ^ ((np.uint64(t) * np.uint64(0xD1B54A32D192ED03)) & M64))
    parts = [(h >> np.uint64(s)) & np.uint64(0xFFFF) for s in (0, 16, 32, 48)]
    total = sum(p.astype(np.float64) for p in parts)
    return (total / 65536.0 - 2.0) * np.sqrt(3.0)


def to_bf16(x):
    bits = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    bits = (bits + np.uint64(0x7FFF) + ((bits >> np.uint64(16)) & np.uint64(1))) & np.uint64(0xFFFF0000)
    return bits.astype(np.uint32).view(np.float32)


def test_reference_and_bf16_nearest_match_numpy():
    rng = np.random.default_rng(4)
    w = (rng.standard_normal((32, 64)) * 0.02).astype(np.float32)
    steps, lr, b1, b2, eps, wd, scale, rho = 12, 3e-5, 0.9, 0.95, 1e-8, 0.1, 1e-3, 0.5
    n = w.size
    idx = np.arange(n, dtype=np.uint64)
    sigma = scale * np.sqrt(np.mean(w.astype(np.float64) ** 2))
    d = draw(0, 0, idx, 0)
    # float64 reference (PyTorch's AdamW order)
    p = w.ravel().astype(np.float64)
    p0 = p.copy()
    m = np.zeros(n)
    v = np.zeros(n)
    # bf16, no master: float32 step, one rounding to bf16
    x = to_bf16(w.ravel())
    x0 = x.copy()
    mf = np.zeros(n, np.float32)
    vf = np.zeros(n, np.float32)
    f = np.float32
    lost = moves = 0
    dot = sq = 0.0
    for t in range(1, steps + 1):
        g = sigma * (rho * d + np.sqrt(1 - rho * rho) * draw(0, 0, idx, t))
        before = p.copy()
        p -= lr * wd * p
        m = b1 * m + (1 - b1) * g
        v = b2 * v + (1 - b2) * g * g
        c1, c2 = 1 - b1 ** t, 1 - b2 ** t
        p -= lr * (m / c1) / (np.sqrt(v / c2) + eps)
        moved = p != before
        gq = to_bf16(g.astype(np.float32))
        mf = f(b1) * mf + f(1 - b1) * gq
        vf = f(b2) * vf + f(1 - b2) * (gq * gq)
        u = f(-lr / c1) * (mf / (np.sqrt(vf) / f(np.sqrt(c2)) + f(eps)))
        decay = f(1 - lr * wd)
        xn = x * decay + u
        new = to_bf16(xn)
        intended = (x * decay).astype(np.float64) - x + u.astype(np.float64)
        applied = new.astype(np.float64) - x
        dot += float(np.sum(applied * intended))
        sq += float(np.sum(intended * intended))
        moves += int(np.sum(moved))
        lost += int(np.sum(moved & (new == x)))
        x = new
    err = np.sqrt(np.sum(((x - x0).astype(np.float64) - (p - p0)) ** 2) / np.sum((p - p0) ** 2))
    r = lowp.update_error({"w": w}, ["bf16-rne"], steps=steps, lr=lr, threads=1)
    got = r["recipes"][0]
    assert got["recipe"] == "bf16-rne" and got["elements"] == n
    assert got["updates_lost"] == pytest.approx(lost / moves, abs=2 / n)
    assert got["update_ratio"] == pytest.approx(dot / sq, rel=1e-6)
    assert got["weight_relative_error"] == pytest.approx(err, rel=1e-6)


def test_bad_input_names_the_field():
    w = np.zeros((4, 4), np.float32) + 0.1
    for kwargs, field in [({"lr": -1.0}, "lr"), ({"beta1": 1.0}, "beta1"), ({"steps": 10**9}, "steps"),
                          ({"schedule": "linear"}, "schedule"), ({"grad_scale": 0.0}, "grad_scale")]:
        with pytest.raises(ValueError, match=field):
            lowp.update_error(w, **kwargs)
    with pytest.raises(ValueError, match="names no weights format"):
        lowp.update_error(w, ["grads=bf16"])
    with pytest.raises(ValueError, match="non-finite"):
        lowp.update_error(np.array([[0.1, np.nan]], np.float32))
    recipes = {r["recipe"]: r["bytes_per_parameter"] for r in lowp.training_recipes()}
    assert recipes["fp32-master"] == 16 and recipes["bf16-rne"] == 12 and recipes["bf16-sr-bf16-moments"] == 8


def test_training_plan_prices_each_recipe_beside_its_figures():
    plan = lowp.training_plan(model="llama-3.1-8b", mode="pretrain",
                              recipes=["fp32-master", "bf16-sr-8bit"], select="*layers.0.mlp*", steps=4)
    rows = {r["recipe"]: r for r in plan["rows"]}
    total = rows["fp32-master"]["memory"]["parameters"]["total"]
    assert rows["fp32-master"]["memory"]["whole"]["model_states"] / total == pytest.approx(16, rel=5e-3)
    assert rows["bf16-sr-8bit"]["memory"]["whole"]["model_states"] / total == pytest.approx(6.03, rel=5e-3)
    assert rows["bf16-sr-8bit"]["update_ratio"] == pytest.approx(1, abs=0.1)
    with pytest.raises(ValueError, match="mode"):
        lowp.training_plan(model="llama-3.1-8b", mode="inference", recipes=["fp32-master"])
