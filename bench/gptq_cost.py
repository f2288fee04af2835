"""GPTQ's cost on one matrix of a given shape beside rounding to nearest with
the same scheme (lowp.quantize), random weights and calibration rows:

    PYTHONPATH=build/python python3 bench/gptq_cost.py ROWS COLS TOKENS SCHEME [--rtn]

Prints the wall time and the process's peak RSS (run one shape per process).
"""
import resource
import sys
import time

import numpy as np

import lowp

rows, cols, tokens, scheme = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
rng = np.random.default_rng(0)
w = rng.standard_normal((rows, cols), dtype=np.float32) * 0.02
x = rng.standard_normal((tokens, cols), dtype=np.float32)
start = time.perf_counter()
if "--rtn" in sys.argv:
    lowp.quantize(w, scheme)
    what = "nearest"
else:
    lowp.gptq(w, x, scheme)
    what = "gptq"
seconds = time.perf_counter() - start
rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6
print(f"{what} {rows}x{cols} {scheme} tokens {tokens}: {seconds:.2f} s, peak RSS {rss:.2f} GB")
