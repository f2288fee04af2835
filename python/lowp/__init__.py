"""lowp: low-precision numerics for large-model work.

The C++ library's bindings. Every result is the library's: conversions run
its SIMD kernels, and the reports are the library's results as dicts with the
fields of the `lowp` commands' JSON (see `lowp CMD --help` and docs/).
Keyword arguments are the options' fields, typed (`compare_formats=True`,
`relative_floor=1e-4`, `seq=8192`, `formats=["bf16", "nf4"]`); each
function's signature (help(), inspect.signature, the lowp/__init__.pyi stub)
gives every keyword with its default and type, and errors name them:
TypeError for the wrong kind of value, ValueError for one the option cannot
take, OSError for files.

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

import inspect as _inspect
from typing import Any  # noqa: F401  (annotations name it)

import numpy as np  # noqa: F401  (annotations name it)
from numpy.typing import ArrayLike, NDArray  # noqa: F401  (annotations name them)

from . import _lowp
from ._types import FilePath, FilePaths, Names, TensorData  # noqa: F401

_KINDS = {
    "positional_or_keyword": _inspect.Parameter.POSITIONAL_OR_KEYWORD,
    "keyword_only": _inspect.Parameter.KEYWORD_ONLY,
}


def _signature(spec):
    """The inspect.Signature of a function the module reports: annotations as
    text (as under `from __future__ import annotations`; typing.get_type_hints
    resolves them here), defaults as the C++ options structs hold them."""
    return _inspect.Signature(
        [_inspect.Parameter(name, _KINDS[kind], annotation=annotation,
                            default=default if has_default else _inspect.Parameter.empty)
         for name, kind, annotation, has_default, default in spec["parameters"]],
        return_annotation=spec["returns"])


def _public(name, spec):
    """The public function `name`: the C++ one (which binds the arguments by
    the same table) with its signature and docstring."""
    call = getattr(_lowp, name)

    def function(*args, **kwargs):
        return call(*args, **kwargs)

    function.__name__ = function.__qualname__ = name
    function.__module__ = __name__
    function.__doc__ = spec["doc"]
    function.__signature__ = _signature(spec)
    function.__annotations__ = {
        **{parameter: annotation for parameter, _, annotation, _, _ in spec["parameters"]},
        "return": spec["returns"]}
    return function


for _name, _spec in _lowp._signatures.items():
    globals()[_name] = _public(_name, _spec)
del _name, _spec

# What `from lowp import *` names, as it always has: not eval, which would
# shadow the builtin, nor the model's functions.
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
