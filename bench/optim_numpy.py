"""NumPy's float32 AdamW step on a 4096 x 4096 tensor (what a user would write
instead of a fused optimizer), best of 5, beside `optim_bench`'s figures.
Usage: /usr/bin/python3 bench/optim_numpy.py"""
import time

import numpy as np

n = 4096 * 4096
rng = np.random.default_rng(1)
p = (rng.standard_normal(n) * 0.02).astype(np.float32)
g = (rng.standard_normal(n) * 2e-5).astype(np.float32)
m = np.zeros(n, np.float32)
v = np.zeros(n, np.float32)
b1, b2, lr, eps, wd = np.float32(0.9), np.float32(0.95), 1e-4, np.float32(1e-8), 0.1
best = float("inf")
for t in range(1, 6):
    start = time.perf_counter()
    p *= np.float32(1 - lr * wd)
    m *= b1
    m += (1 - b1) * g
    v *= b2
    v += (1 - b2) * g * g
    denom = np.sqrt(v) / np.float32(np.sqrt(1 - 0.95 ** t)) + eps
    p += np.float32(-lr / (1 - 0.9 ** t)) * (m / denom)
    best = min(best, time.perf_counter() - start)
print(f"numpy float32 AdamW step, 4096 x 4096: {best * 1e3:.1f} ms ({n / best / 1e6:.0f} M params/s)")
