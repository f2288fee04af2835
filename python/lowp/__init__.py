"""lowp: low-precision numerics for large-model work.

The C++ library's bindings. Every result is the library's: conversions run
its SIMD kernels, and the reports are the library's results as dicts with the
fields of the `lowp` commands' JSON (see `lowp CMD --help` and docs/).
Keyword arguments of `quant_error`, `range_study`, `size` and `plan` are the
options' fields, typed (`compare_formats=True`, `relative_floor=1e-4`,
`seq=8192`, `formats=["bf16", "nf4"]`); errors name them.

    import numpy as np, lowp
    codes = lowp.convert(np.float32([0.1, 300.0]), "fp8_e4m3fn")  # uint8 codes
    lowp.decode(codes, "fp8_e4m3fn")                               # float32 values
    lowp.quant_error(weights, "int4-g128")["aggregates"][0]["sqnr_db"]
    lowp.size(model="llama-3.1-70b", mode="inference", weights="int4-g128")
    lowp.eval(weights=["bf16", "int4-g128"], kv="fp8_e4m3fn")["candidates"][0]["kl_mean"]
    lowp.forward(lowp.bundled_model(), tokens)                     # float32 logits
    lowp.eval(text_file="wiki.txt", model="Llama-3.2-1B/", weights=["q4_0"])  # llama.cpp protocol
    lowp.tokenize(text="Once upon a time")["ids"]                # the model's tokenizer
    lowp.mix(bits_per_weight=4.5)["rules"]                         # per-tensor types in a budget
    lowp.imatrix(text_file="calib.txt", out="imatrix.gguf")        # llama.cpp's importance matrix
    lowp.quantize(w, "iq2_xxs", imatrix=importance)                # ggml's weighted quantizers
"""

from ._lowp import (  # noqa: F401
    bundled_checkpoint,
    bundled_model,
    convert,
    decode,
    devices,
    eval,
    formats,
    forward,
    imatrix,
    mix,
    plan,
    quant_error,
    quantize,
    range_study,
    read_tensors,
    round_values,
    sample,
    schemes,
    size,
    tensors,
    tokenize,
    training_plan,
    training_recipes,
    update_error,
)


def fake_quant(values, fmt, **options):
    """The values rounded to format `fmt` and read back, as float32:
    decode(convert(values, fmt, **options), fmt), bit for bit. float32 input
    takes one pass (round_values); other input goes through the codes.
    Options: rounding, overflow, subnormals, nan, seed, threads."""
    import numpy as np

    array = np.asarray(values)
    if array.dtype == np.float32:
        return round_values(array, fmt, **options)
    threads = options.pop("threads", None)
    return decode(convert(array, fmt, threads=threads, **options), fmt, threads=threads)


__all__ = [
    "bundled_checkpoint",
    "convert",
    "decode",
    "devices",
    "fake_quant",
    "formats",
    "plan",
    "quant_error",
    "quantize",
    "range_study",
    "read_tensors",
    "round_values",
    "schemes",
    "size",
    "tensors",
    "training_plan",
    "training_recipes",
    "update_error",
]
