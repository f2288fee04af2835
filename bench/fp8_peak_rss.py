#!/usr/bin/env python3
"""Peak resident memory of lowp reading FP8 checkpoints (io/scaled_tensors.h)
of Llama 3.1 8B's layer shapes at two depths: DeepSeek-V3's layout (F8_E4M3
weights, F32 weight_scale_inv per 128 x 128 block, config.json's
quantization_config), written under /tmp (deleted on exit), read by
`lowp quant-error FILE --scheme fp8_e4m3fn-b128x128` and by
`lowp tensors FILE` under /usr/bin/time (%M). Memory must not grow with the
number of layers. Prints one JSON array (to OUT if given).

usage: bench/fp8_peak_rss.py BUILD_DIR [OUT.json]
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

# Llama 3.1 8B's linear layers, [out, in].
LAYER = {"q_proj": (4096, 4096), "k_proj": (1024, 4096), "v_proj": (1024, 4096), "o_proj": (4096, 4096),
         "gate_proj": (14336, 4096), "up_proj": (14336, 4096), "down_proj": (4096, 14336)}
MLP = {"gate_proj", "up_proj", "down_proj"}


def write(path, layers):
    """A DeepSeek-layout file: random finite e4m3 codes, scales near 0.02 / 448."""
    rng = np.random.default_rng(0)
    piece = rng.integers(0, 0x7F, 1 << 24, dtype=np.uint8) | (rng.integers(0, 2, 1 << 24, dtype=np.uint8) << 7)
    header, offset, order = {}, 0, []
    for layer in range(layers):
        for name, (rows, cols) in LAYER.items():
            base = f"model.layers.{layer}.{'mlp' if name in MLP else 'self_attn'}.{name}"
            scale_shape = (-(-rows // 128), -(-cols // 128))
            for tensor, dtype, shape, size in ((base + ".weight", "F8_E4M3", (rows, cols), rows * cols),
                                               (base + ".weight_scale_inv", "F32", scale_shape,
                                                4 * scale_shape[0] * scale_shape[1])):
                header[tensor] = {"dtype": dtype, "shape": list(shape), "data_offsets": [offset, offset + size]}
                order.append((dtype, size))
                offset += size
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(len(text).to_bytes(8, "little") + text)
        for dtype, size in order:
            if dtype == "F32":
                f.write(np.full(size // 4, 0.02 / 448, np.float32).tobytes())
                continue
            while size > 0:
                n = min(size, piece.size)
                f.write(piece[:n].tobytes())
                size -= n
    with open(os.path.join(os.path.dirname(path), "config.json"), "w") as f:
        json.dump({"quantization_config": {"quant_method": "fp8", "fmt": "e4m3",
                                           "activation_scheme": "dynamic", "weight_block_size": [128, 128]}}, f)


def timed(lowp, args, path, layers):
    out = subprocess.run(["/usr/bin/time", "-f", "%M %e", lowp, *args], capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"{' '.join(args)}: {out.stderr}")
    kib, seconds = out.stderr.strip().splitlines()[-1].split()
    return {"command": "lowp " + " ".join(a if a != path else "FILE" for a in args), "layers": layers,
            "file_bytes": os.path.getsize(path), "max_rss_bytes": int(kib) * 1024, "seconds": float(seconds)}


def main():
    build = sys.argv[1]
    lowp = os.path.join(build, "cli", "lowp")
    results = []
    for layers in (1, 4):
        d = tempfile.mkdtemp(prefix="lowp-fp8-rss.", dir="/tmp")
        try:
            path = os.path.join(d, "model.safetensors")
            write(path, layers)
            results.append(timed(lowp, ["tensors", path, "--json"], path, layers))
            results.append(timed(lowp, ["quant-error", path, "--scheme", "fp8_e4m3fn-b128x128", "--json"],
                                 path, layers))
        finally:
            shutil.rmtree(d)
    text = json.dumps(results, indent=1)
    if len(sys.argv) > 2:
        with open(sys.argv[2], "w") as f:
            f.write(text + "\n")
    print(text)


if __name__ == "__main__":
    main()
