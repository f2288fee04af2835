"""Issue 29's Python figures beside NumPy in one process: the plan's seven-
format sweep (lowp.quant_error on two threads) against x.astype(np.float16),
and stochastic fake_quant (one thread, allocating its output) against
x.copy(), on one 4096 x 4096 float32 tensor of N(0, 0.02^2). Best of 7
wall-clock runs each, interleaved in two rounds.

    python3 bench/issue29_numpy.py DIR_WITH_THE_lowp_PACKAGE
"""
import sys
import time

import numpy as np

sys.path.insert(0, sys.argv[1])
import lowp  # noqa: E402

FORMATS = ["bf16", "fp8_e4m3fn", "int8-channel", "int4-g128", "nf4", "mxfp4", "q4_0"]


def best(f, n=7):
    times = []
    for _ in range(n):
        start = time.perf_counter()
        f()
        times.append(time.perf_counter() - start)
    return min(times)


x = (np.random.default_rng(0).standard_normal((4096, 4096)) * 0.02).astype(np.float32)
for _ in range(2):
    astype = best(lambda: x.astype(np.float16))
    sweep = best(lambda: lowp.quant_error(x, FORMATS, threads=2))
    copy = best(lambda: x.copy())
    sto = {f: best(lambda: lowp.fake_quant(x, f, rounding="stochastic", seed=1)) for f in ("bf16", "fp16")}
    print(f"sweep {sweep * 1e3:.1f} ms, astype(float16) {astype * 1e3:.1f} ms: {astype / sweep:.2f}x; "
          f"copy {copy * 1e3:.1f} ms, stochastic fake_quant bf16 {sto['bf16'] * 1e3:.1f} ms "
          f"({copy / sto['bf16']:.2f}x), fp16 {sto['fp16'] * 1e3:.1f} ms ({copy / sto['fp16']:.2f}x)")
