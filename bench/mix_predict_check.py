"""How well each probe type and law predicts the exact sensitivity table.

usage: PYTHONPATH=build/python python3 bench/mix_predict_check.py EXACT.json [MODEL_DIR]

EXACT.json is `lowp mix --sensitivity exact --random-mixes K --json` on MODEL_DIR (default the
bundled stories3M-hf). For every type of the table as the probe and each exponent p, every cell
is predicted as KL(probe) * (E(t) / E(probe))^p, E the type's squared error on the matrix
(lowp.quant_error's rows, unweighted), and compared with the measured cell (the median and the
largest |log(predicted / measured)|) and over the random mixes (Spearman of their predicted sum
against their measured KL).
"""
import json
import math
import os
import sys

import lowp


def spearman(a, b):
    def ranks(x):
        order = sorted(range(len(x)), key=lambda i: x[i])
        r = [0.0] * len(x)
        for rank, i in enumerate(order):
            r[i] = rank
        return r
    ra, rb = ranks(a), ranks(b)
    n = len(a)
    return 1 - 6 * sum((x - y) ** 2 for x, y in zip(ra, rb)) / (n * (n * n - 1))


def main():
    exact = json.load(open(sys.argv[1]))
    model = sys.argv[2] if len(sys.argv) > 2 else os.path.join(
        os.path.dirname(__file__), "../tests/data/stories3M-hf")
    types = exact["types"]
    q = lowp.quant_error(os.path.join(model, "model.safetensors"), types, quiet=True)
    energy = {(r["tensor"], r["scheme"]): r["mse"] * r["measured"] for r in q["results"]}
    groups = exact["sensitivity"]
    randoms = [r for r in exact["rows"] if r["kind"] == "random"]
    print("probe  p    median |log|  max |log|  Spearman")
    for probe in types:
        for p in (0.9, 1.0, 1.1):
            predicted = {}
            logs = []
            for g in groups:
                for t in types:
                    e = energy[(g["tensor"], t)] / energy[(g["tensor"], probe)]
                    predicted[(g["tensor"], t)] = g["kl_mean"][probe] * e ** p
                    if t != probe and g["kl_mean"][t] > 0:
                        logs.append(abs(math.log(predicted[(g["tensor"], t)] / g["kl_mean"][t])))
            logs.sort()
            sums = [sum(predicted[(g["tensor"], s)] for g, s in zip(groups, r["schemes"]))
                    for r in randoms]
            rho = spearman(sums, [r["kl_mean"] for r in randoms]) if len(randoms) > 2 else math.nan
            print(f"{probe:6s} {p:.1f}  {logs[len(logs) // 2]:12.3f}  {logs[-1]:9.3f}  {rho:8.3f}")


if __name__ == "__main__":
    main()
