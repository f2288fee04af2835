# lowp's types (PEP 561), written by `python3 -m lowp._stub` from the
# signatures the module reports; python/tests/test_arguments.py checks that
# this file is what it writes. Edit python/lowp_module.cc, not this.
from typing import Any

import numpy as np
from numpy.typing import ArrayLike, NDArray

from ._types import FilePath as FilePath
from ._types import FilePaths as FilePaths
from ._types import Names as Names
from ._types import TensorData as TensorData

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


def bundled_checkpoint() -> str:
    """Path of the bundled real checkpoint (stories260K in float32; $LOWP_DATA_DIR overrides)."""
    ...


def bundled_model() -> str:
    """Directory of the bundled model in Hugging Face layout (stories260K-hf)."""
    ...


def convert(
    values: ArrayLike,
    to: str,
    *,
    rounding: str = 'nearest-even',
    overflow: str = 'default',
    subnormals: str = 'keep',
    nan: str = 'canonical',
    seed: int = 0,
    packed: bool = False,
    threads: int | None = 0,
) -> NDArray[Any]:
    """float32 or float16 values -> codes of format `to`: uint8, uint16 or uint32 by the format's
    width, one per element; packed=True (4-bit formats): two codes per byte, low nibble first.
    rounding, overflow, subnormals and nan as `lowp convert`'s (`lowp convert --help`); seed:
    stochastic rounding's. threads: None or 0 (every CPU the process may run on) or a count; the
    codes never depend on it.
    """
    ...


def decode(
    codes: ArrayLike,
    fmt: str,
    *,
    packed: bool = False,
    count: int | None = None,
    threads: int | None = 0,
) -> NDArray[np.float32]:
    """Codes of format `fmt` (unsigned integers, one per element) -> float32 values, exactly;
    packed=True: 4-bit codes as their uint8 storage bytes, `count` of them (None: two per byte).
    """
    ...


def devices() -> dict[str, Any]:
    """The device catalog: `lowp devices --json`."""
    ...


def eval(
    *,
    model: FilePath | None = None,
    tensors: FilePaths | None = None,
    tokens: ArrayLike | FilePath | None = None,
    sample: str | tuple[int, int] = '16:128',
    seed: int = 0,
    text: str | None = None,
    text_file: FilePath | None = None,
    tokenizer: FilePath | None = None,
    ctx: int = 512,
    chunks: int = -1,
    weights: Names | None = None,
    activations: Names | None = None,
    kv: Names | None = None,
    compute: Names | None = None,
    weights_file: FilePaths | None = None,
    batch_tokens: int = 0,
    matrices: str = 'auto',
    imatrix: FilePath | None = None,
    calib_tokens: ArrayLike | FilePath | None = None,
    calib_sample: str | tuple[int, int] = '',
    calib_seed: int = 0,
    calib_text: str | None = None,
    calib_text_file: FilePath | None = None,
    calib_tokenizer: FilePath | None = None,
    calib_ctx: int = 256,
    calib_chunks: int = 64,
    threads: int | None = 0,
) -> dict[str, Any]:
    """`lowp eval --json`: a model (a Hugging Face directory, or `tensors` files; None: the bundled
    stories260K-hf) with each combination of the schemes on its sites (weights, activations, kv,
    compute; a str 'a,b' or a list; weights_file: GGUF or safetensors files of the model's
    quantized matrices) against float32: KL divergence, top-1 agreement, perplexity. Tokens: an
    array or .npy path, or sampled 'N:LEN' with seed, or text / text_file (llama.cpp's perplexity
    protocol: ctx, chunks -1 for all, tokenizer over the model's own). A weights scheme with
    ':gptq' (GPTQ), ':awq' (AWQ) or ':smooth' (SmoothQuant) is calibrated on the calib_ tokens (the
    same options with calib_ before each; default the bundled calibration text, calib_ctx 256,
    calib_chunks 64).
    """
    ...


def fake_quant(
    values: ArrayLike,
    fmt: str,
    *,
    rounding: str = 'nearest-even',
    overflow: str = 'default',
    subnormals: str = 'keep',
    nan: str = 'canonical',
    seed: int = 0,
    threads: int | None = 0,
) -> NDArray[np.float32]:
    """The values rounded to format `fmt` and read back, as float32: decode(convert(values, fmt, ...),
    fmt), bit for bit. float32 input takes one pass (round_values); float16 goes through the codes.
    """
    ...


def formats() -> dict[str, Any]:
    """The format catalog: `lowp formats --json`."""
    ...


def forward(
    model: FilePath | None,
    tokens: ArrayLike,
    *,
    threads: int | None = 0,
) -> NDArray[np.float32]:
    """float32 logits of a model (a Hugging Face directory; None: the bundled stories260K-hf) for
    integer tokens [sequences, length] -> [sequences, length, vocab] ([length] -> [length, vocab]).
    """
    ...


def gptq(
    weight: ArrayLike,
    inputs: ArrayLike,
    scheme: str,
    *,
    damp: float = 0.01,
    act_order: bool = False,
    threads: int | None = 0,
) -> dict[str, Any]:
    """GPTQ (calib/gptq.h) on one matrix: `weight` [rows, cols] quantized by `scheme` column by column
    with each column's rounding error fed forward, from `inputs` [tokens, cols], the rows the layer
    multiplies (H = sum x x^T in float64). Returns values (float32, the weight's shape), bytes
    (llama.cpp's blocks for its types, else None) and order (the columns' order with act_order,
    else None). damp: of diag(H)'s mean.
    """
    ...


def imatrix(
    *,
    model: FilePath | None = None,
    tensors: FilePaths | None = None,
    tokens: ArrayLike | FilePath | None = None,
    sample: str | tuple[int, int] = '16:128',
    seed: int = 0,
    text: str | None = None,
    text_file: FilePath | None = None,
    tokenizer: FilePath | None = None,
    ctx: int = 512,
    chunks: int = -1,
    process_output: bool = False,
    out: FilePath | None = None,
    format: str | None = None,
    min_expert_tokens: int = 1,
    batch_tokens: int = 0,
    threads: int | None = 0,
) -> dict[str, Any]:
    """`lowp imatrix --json` as a dict plus 'importance' (name -> float32 [matrices, columns]):
    llama-imatrix's importance matrix of a model (None: the bundled stories260K-hf) on tokens as
    eval takes them; process_output: also lm_head's input; out: also write it there (format 'gguf'
    or 'dat'; None: by the name, else gguf).
    """
    ...


def mix(
    *,
    model: FilePath | None = None,
    tensors: FilePaths | None = None,
    bits_per_weight: float | None = None,
    bytes: int | str | None = None,
    device: str | None = None,
    kv: str | None = None,
    seq: int = 4096,
    batch: int = 1,
    prefill_tokens: int = 0,
    buffers: int | str = 2000000000,
    headroom: float = 0.0,
    types: Names | None = None,
    sensitivity: str = 'predicted',
    baselines: Names | None = None,
    random_mixes: int = 0,
    expert_groups: str = 'layer',
    random_seed: int = 0,
    tokens: ArrayLike | FilePath | None = None,
    sample: str | tuple[int, int] = '16:256',
    seed: int = 0,
    text: str | None = None,
    text_file: FilePath | None = None,
    tokenizer: FilePath | None = None,
    ctx: int = 512,
    chunks: int = -1,
    tune_tokens: ArrayLike | FilePath | None = None,
    tune_sample: str | tuple[int, int] = '8:256',
    tune_seed: int = 1,
    tune_text: str | None = None,
    tune_text_file: FilePath | None = None,
    tune_tokenizer: FilePath | None = None,
    tune_ctx: int = 512,
    tune_chunks: int = -1,
    imatrix: FilePath | None = None,
    calib_tokens: ArrayLike | FilePath | None = None,
    calib_sample: str | tuple[int, int] = '',
    calib_seed: int = 0,
    calib_text: str | None = None,
    calib_text_file: FilePath | None = None,
    calib_tokenizer: FilePath | None = None,
    calib_ctx: int = 256,
    calib_chunks: int = 64,
    out: FilePath | None = None,
    shard: str | None = None,
    table_out: FilePath | None = None,
    tables: FilePaths | None = None,
    threads: int | None = 0,
) -> dict[str, Any]:
    """`lowp mix --json`: the type of each matrix of a model (None: the bundled stories3M-hf) of least
    predicted KL within a budget, one of bits_per_weight, bytes (or '4.2GB') or device (with the
    serving job beside the weights: seq, batch, kv (None: fp16), prefill_tokens, buffers,
    headroom), verified beside llama.cpp's recipes (baselines, or 'none') and random_mixes. The
    verification's tokens as eval takes them, the tuning's with tune_ before each. With `out`, the
    mix is written there as quantize_model writes rules (.gguf, with the vocabulary of `tokenizer`
    or the model's, or .safetensors). sensitivity: 'predicted' (one probe type per matrix end to
    end, the other types scaled by their weight errors) or 'exact' (every matrix in every type).
    shard='I/N' with table_out: only that shard of the sensitivity sweep, written there; tables:
    the N shard files, read instead of measuring.
    """
    ...


def model_quant_error(
    *,
    model: FilePath,
    scheme: Names,
    imatrix: FilePath | None = None,
    calib_tokens: ArrayLike | FilePath | None = None,
    calib_sample: str | tuple[int, int] = '',
    calib_seed: int = 0,
    calib_text: str | None = None,
    calib_text_file: FilePath | None = None,
    calib_tokenizer: FilePath | None = None,
    calib_ctx: int = 256,
    calib_chunks: int = 64,
    summary: bool = False,
    threads: int | None = 0,
    quiet: bool = False,
) -> dict[str, Any]:
    """`lowp quant-error --model DIR --scheme S --json`: each matrix of the Hugging Face model as
    eval's weights makes it from each scheme (a name or a list; ':gptq' calibrated on the calib_
    tokens), against the model's.
    """
    ...


def plan(
    *,
    model: str,
    mode: str,
    formats: Names | None = None,
    device: Names | None = None,
    weights: str | None = None,
    embed: str | None = None,
    grads: str | None = None,
    master: str | None = None,
    opt_state: str | None = None,
    optimizer: str = 'adamw',
    activation_bytes: int = 2,
    kv: str | None = None,
    seq: int = 4096,
    batch: int = 1,
    prefill_tokens: int = 0,
    buffers: int | str = 2000000000,
    headroom: float = 0.0,
    dp: int = 1,
    tp: int = 1,
    pp: int = 1,
    zero: int = 0,
    sequence_parallel: bool = False,
    recompute: str = 'none',
    flash_attention: bool = True,
    no_flash_attention: bool = False,
    offload: str | None = None,
    lora_rank: int = 16,
    lora_targets: Names | None = None,
    tensors: FilePaths | None = None,
    select: Names | None = None,
    threads: int | None = 0,
    eval: bool = False,
    eval_model: FilePath | None = None,
    eval_sample: str = '16:128',
    eval_seed: int = 0,
    eval_text: FilePath | None = None,
    eval_ctx: int = 512,
    eval_chunks: int = -1,
    eval_imatrix: FilePath | None = None,
    calib_tokens: ArrayLike | FilePath | None = None,
    calib_sample: str | tuple[int, int] = '',
    calib_seed: int = 0,
    calib_text: str | None = None,
    calib_text_file: FilePath | None = None,
    calib_tokenizer: FilePath | None = None,
    calib_ctx: int = 256,
    calib_chunks: int = 64,
    mix: bool = False,
    mix_types: Names | None = None,
    mix_tune_sample: str = '8:256',
    mix_tune_seed: int = 1,
    mix_sensitivity: str = 'predicted',
    kv_sample: str | None = None,
    html: FilePath | None = None,
    quiet: bool = False,
) -> dict[str, Any]:
    """`lowp plan --json`: for each candidate weight format (None: the mode's defaults) the memory on
    each device (None: h100-sxm) beside the precision it loses on the checkpoint `tensors` (None:
    the bundled one; `select`: globs on its names), and the Pareto front. eval=True: also each
    format on a real model's linear layers (eval_model, None: the bundled stories260K-hf), on
    sampled tokens (eval_sample, eval_seed) or a text file (eval_text, eval_ctx, eval_chunks).
    mix=True: per device the lowp.mix for what it leaves beside the job (mix_sensitivity as mix's
    sensitivity). kv='A,B,...' (several KV cache formats): each format with each, sized per device
    and its KL measured (implies eval; kv_sample 'N:LEN', None: 4 sequences of the evaluated
    model's context): 'kv_study'. html: also write the report there. And size()'s options.
    """
    ...


def quant_error(
    data: TensorData,
    scheme: Names | None = None,
    *,
    reference: FilePaths | None = None,
    tensors: Names | None = None,
    summary: bool = False,
    histogram: bool = False,
    relative_floor: float = 0.001,
    imatrix: FilePath | None = None,
    threads: int | None = 0,
    quiet: bool = False,
) -> dict[str, Any]:
    """`lowp quant-error --json` on a checkpoint path (or a list of paths), an array or a dict of
    arrays: each floating tensor quantized by each scheme (a name or a list) and read back.
    tensors: globs on names; summary: only the rows over all tensors; relative_floor: relative
    errors over |x| >= it; histogram: |e| by binade. reference: the original checkpoint's files
    instead of a scheme, each tensor of data (a GGUF file) measured as stored against its original
    there. imatrix: an importance matrix the llama.cpp types quantize with.
    """
    ...


def quantize(
    array: ArrayLike,
    scheme: str,
    *,
    threads: int | None = 0,
    imatrix: ArrayLike | None = None,
) -> NDArray[np.float32]:
    """The array quantized by `scheme` and dequantized, as float32 of its shape; rows are the last
    axis. imatrix: one importance per column, as ggml_quantize_chunk's imatrix argument, for the
    llama.cpp types (iq2_xxs, iq2_xs and iq1_s need it).
    """
    ...


def quantize_model(
    *,
    model: FilePath,
    weights: Names,
    out: FilePath,
    dtype: str = 'F32',
    tokenizer: FilePath | None = None,
    format: str | None = None,
    imatrix: FilePath | None = None,
    calib_tokens: ArrayLike | FilePath | None = None,
    calib_sample: str | tuple[int, int] = '',
    calib_seed: int = 0,
    calib_text: str | None = None,
    calib_text_file: FilePath | None = None,
    calib_tokenizer: FilePath | None = None,
    calib_ctx: int = 256,
    calib_chunks: int = 64,
    summary: bool = False,
    threads: int | None = 0,
    quiet: bool = False,
) -> dict[str, Any]:
    """`lowp quantize --model DIR --weights RULES --out OUT --json`: the Hugging Face model written to
    `out` (whole or not at all) with its matrices as eval's weights rules make them (':gptq'
    calibrated on the calib_ tokens, as eval's): a .safetensors file dequantized to dtype (F32,
    F16, BF16), the norms and biases as stored, or a .gguf file llama.cpp runs, each matrix in its
    llama.cpp type as the rules' own bytes, with the vocabulary of the model's tokenizer (or
    `tokenizer`); with format 'compressed-tensors' or 'gptq', a new model directory vLLM and
    transformers load, each matrix as the rules' own codes and scales. Returns each changed
    matrix's error.
    """
    ...


def range_study(
    data: TensorData,
    *,
    formats: Names | None = None,
    fraction: float = 0.999,
    tensors: Names | None = None,
    threads: int | None = 0,
    quiet: bool = False,
) -> dict[str, Any]:
    """`lowp range --json` on a checkpoint path, an array or a dict of arrays: where each tensor's
    values fall against each format's range (formats None: fp16, bf16, fp8_e4m3fn, fp8_e5m2), and
    the power-of-two scale that fits `fraction` of them.
    """
    ...


def read_tensors(path: FilePath, tensors: Names | None = None) -> dict[str, NDArray[np.float32]]:
    """The floating tensors of a checkpoint as float32 arrays, by name (tensors: globs on names; None:
    all).
    """
    ...


def round_values(
    values: ArrayLike,
    to: str,
    *,
    rounding: str = 'nearest-even',
    overflow: str = 'default',
    subnormals: str = 'keep',
    nan: str = 'canonical',
    seed: int = 0,
    threads: int | None = 0,
) -> NDArray[np.float32]:
    """float32 values rounded to format `to` and read back as float32, in one pass:
    decode(convert(values, to, ...), to) bit for bit.
    """
    ...


def sample(
    model: FilePath | None = None,
    *,
    count: int = 1,
    length: int = 64,
    temperature: float = 1.0,
    seed: int = 0,
    threads: int | None = 0,
) -> NDArray[np.int32]:
    """Token sequences [count, length] sampled from the float32 model (None: the bundled
    stories260K-hf), BOS first (temperature 0: greedy).
    """
    ...


def schemes() -> dict[str, Any]:
    """The quantization schemes: `lowp schemes --json`."""
    ...


def size(
    *,
    model: str,
    mode: str,
    device: str = 'h100-sxm',
    weights: str | None = None,
    embed: str | None = None,
    grads: str | None = None,
    master: str | None = None,
    opt_state: str | None = None,
    optimizer: str = 'adamw',
    activation_bytes: int = 2,
    kv: str | None = None,
    seq: int = 4096,
    batch: int = 1,
    prefill_tokens: int = 0,
    buffers: int | str = 2000000000,
    headroom: float = 0.0,
    dp: int = 1,
    tp: int = 1,
    pp: int = 1,
    zero: int = 0,
    sequence_parallel: bool = False,
    recompute: str = 'none',
    flash_attention: bool = True,
    no_flash_attention: bool = False,
    offload: str | None = None,
    lora_rank: int = 16,
    lora_targets: Names | None = None,
    compare_formats: bool = False,
    formats: Names | None = None,
) -> dict[str, Any]:
    """`lowp size --json`: the memory a job takes on a device, by component (docs/sizing.md). model: a
    preset (llama-3.1-8b, ...) or a config.json; mode: pretrain, finetune, lora, qlora or
    inference; the formats of weights, embed, grads, master, opt_state and kv (None: the mode's
    default); compare_formats=True: a row per weight format (formats, None: the defaults).
    """
    ...


def tensors(
    files: FilePaths,
    *,
    tensors: Names | None = None,
    metadata: bool = False,
) -> dict[str, Any]:
    """`lowp tensors --json`: each tensor of the files (safetensors, GGUF, .npy) with its type, shape,
    bytes and bits per weight; tensors: globs on names; metadata=True adds GGUF's typed key/value
    pairs or safetensors' __metadata__.
    """
    ...


def tokenize(
    *,
    text: str | None = None,
    text_file: FilePath | None = None,
    model: FilePath | None = None,
    tokenizer: FilePath | None = None,
    parse_special: bool = False,
    add_bos: bool | None = None,
    pieces: bool = False,
) -> dict[str, Any]:
    """`lowp tokenize --json`: the ids (and counts) of `text` or `text_file` by the tokenizer of
    `model` (None: the bundled stories260K-hf) or the file `tokenizer`; parse_special: special
    tokens written in the text become theirs; add_bos None: as the tokenizer says; pieces: also
    each id's string.
    """
    ...


def training_plan(
    *,
    model: str,
    mode: str,
    device: str = 'h100-sxm',
    weights: str | None = None,
    embed: str | None = None,
    grads: str | None = None,
    master: str | None = None,
    opt_state: str | None = None,
    optimizer: str = 'adamw',
    activation_bytes: int = 2,
    kv: str | None = None,
    seq: int = 4096,
    batch: int = 1,
    prefill_tokens: int = 0,
    buffers: int | str = 2000000000,
    headroom: float = 0.0,
    dp: int = 1,
    tp: int = 1,
    pp: int = 1,
    zero: int = 0,
    sequence_parallel: bool = False,
    recompute: str = 'none',
    flash_attention: bool = True,
    no_flash_attention: bool = False,
    offload: str | None = None,
    lora_rank: int = 16,
    lora_targets: Names | None = None,
    recipes: Names | None = None,
    tensors: FilePaths | None = None,
    select: Names | None = None,
    steps: int = 100,
    lr: float = 0.0001,
    seed: int = 0,
    threads: int | None = 0,
    quiet: bool = False,
) -> dict[str, Any]:
    """`lowp plan --mode pretrain|finetune --recipes ... --json`: per training-state recipe (None: the
    16-to-6-byte ladder), the job's memory (size()'s options) beside what the recipe does to
    AdamW's updates on the checkpoint `tensors` (None: the bundled stories260K), `select` globs on
    its names.
    """
    ...


def training_recipes() -> dict[str, Any]:
    """`lowp update-error --list --json`: each named training-state recipe, its spelling and bytes per
    parameter.
    """
    ...


def update_error(
    data: TensorData,
    recipes: Names | None = None,
    *,
    tensors: Names | None = None,
    steps: int = 100,
    lr: float = 0.0001,
    schedule: str = 'constant',
    warmup: int = 0,
    min_lr_ratio: float = 0.1,
    beta1: float = 0.9,
    beta2: float = 0.95,
    eps: float = 1e-08,
    weight_decay: float = 0.1,
    grad_scale: float = 0.001,
    grad_signal: float = 0.5,
    seed: int = 0,
    threads: int | None = 0,
    quiet: bool = False,
) -> dict[str, Any]:
    """`lowp update-error --json` on a checkpoint path (or paths), an array or a dict of arrays: AdamW
    steps in float64 and per training-state recipe (a name of training_recipes() or a spelling
    'weights=bf16+update=sr+...'; None: the 16-to-6-byte ladder), with a seeded gradient model
    (grad_scale, grad_signal); tensors: globs on names. schedule: 'constant' or 'cosine' (warmup,
    min_lr_ratio).
    """
    ...
