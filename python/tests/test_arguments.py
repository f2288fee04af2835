"""Every argument of every function through one checked path, and the
signatures the functions report (help(), inspect.signature, the stub).

The wrong kind of value is a TypeError "NAME: want X, not Y", a value its
field cannot hold a ValueError naming NAME; integers are range-checked into
the C++ field's type, never truncated (threads=2**32 + 1 is not one thread).
"""

import ast
import filecmp
import fractions
import inspect
import os
import pathlib
import pydoc
import py_compile
import shutil
import subprocess
import sys
import typing

import numpy as np
import pytest

import lowp
from lowp import _lowp, _stub

DATA = os.environ.get("LOWP_TEST_DATA", os.path.join(os.path.dirname(__file__), "../../tests/data"))
STORIES = os.path.join(DATA, "stories260K", "stories260K.f32.safetensors")
STORIES3M = os.path.join(DATA, "stories3M-hf")
MODEL = os.path.join(DATA, "stories260K-hf")
SOURCE_STUB = os.path.join(os.path.dirname(__file__), "..", "lowp", "__init__.pyi")
X = np.float32(np.linspace(-3, 3, 256)).reshape(4, 64)
TOKENS = np.array([[1, 20, 30, 40]], np.int32)


def raises(error, text, call):
    """`call` raises `error` whose message holds `text`, never a flag."""
    with pytest.raises(error) as info:
        call()
    assert type(info.value) is error, info.value
    assert text in str(info.value), str(info.value)
    assert "--" not in str(info.value)
    return str(info.value)


# --------------------------------------------------------------- integers

BIG = [
    # (call, keyword): each value is beyond the C++ field's type.
    (lambda v: lowp.convert(X, "bf16", threads=v), "threads"),
    (lambda v: lowp.convert(X, "bf16", rounding="stochastic", seed=v), "seed"),
    (lambda v: lowp.decode(np.uint8([1]), "fp8_e4m3fn", threads=v), "threads"),
    (lambda v: lowp.decode(np.uint8([1]), "fp4_e2m1fn", packed=True, count=v), "count"),
    (lambda v: lowp.round_values(X, "bf16", seed=v), "seed"),
    (lambda v: lowp.fake_quant(X, "bf16", threads=v), "threads"),
    (lambda v: lowp.quantize(X, "q4_0", threads=v), "threads"),
    (lambda v: lowp.quant_error(X, "bf16", threads=v), "threads"),
    (lambda v: lowp.update_error(X, "bf16-rne", steps=v), "steps"),
    (lambda v: lowp.update_error(X, "bf16-rne", seed=v), "seed"),
    (lambda v: lowp.range_study(X, threads=v), "threads"),
    (lambda v: lowp.size(model="llama-3.1-8b", mode="inference", seq=v), "seq"),
    (lambda v: lowp.size(model="llama-3.1-8b", mode="pretrain", zero=v), "zero"),
    (lambda v: lowp.size(model="llama-3.1-8b", mode="inference", buffers=v), "buffers"),
    (lambda v: lowp.plan(model="llama-3.1-8b", mode="inference", eval_seed=v), "eval_seed"),
    (lambda v: lowp.training_plan(model="llama-3.1-8b", mode="pretrain", steps=v), "steps"),
    (lambda v: lowp.eval(text="Once upon a time", ctx=v), "ctx"),
    (lambda v: lowp.eval(seed=v), "seed"),
    (lambda v: lowp.eval(batch_tokens=v), "batch_tokens"),
    (lambda v: lowp.imatrix(chunks=v), "chunks"),
    (lambda v: lowp.mix(bits_per_weight=4, random_mixes=v), "random_mixes"),
    (lambda v: lowp.mix(bits_per_weight=4, tune_seed=v), "tune_seed"),
    (lambda v: lowp.mix(bytes=v), "bytes"),
    (lambda v: lowp.forward(None, TOKENS, threads=v), "threads"),
    (lambda v: lowp.sample(count=v), "count"),
    (lambda v: lowp.sample(seed=v), "seed"),
]


@pytest.mark.parametrize("call, keyword", BIG)
@pytest.mark.parametrize("value", [2**64, 2**70, -2**65, 2**100])
def test_integers_beyond_the_fields_type_name_the_keyword(call, keyword, value):
    message = raises(ValueError, f"{keyword}: ", lambda: call(value))
    assert "is not in" in message


def test_integer_fields_are_never_truncated():
    # int: 2**32 + 1 was one thread and 2**32 every core; a count is 0 (every
    # core) to 1024, as the command line's --threads.
    for v in (2**32 + 1, 2**32, 2**31):
        raises(ValueError, "threads: ", lambda: lowp.convert(X, "bf16", threads=v))
        raises(ValueError, "threads: ", lambda: lowp.quant_error(X, "bf16", threads=v))
        raises(ValueError, "threads: ", lambda: lowp.eval(tokens=TOKENS, threads=v))
    for call in (lambda: lowp.convert(X, "bf16", threads=1025),
                 lambda: lowp.quantize(X, "q4_0", threads=-1),
                 lambda: lowp.forward(None, TOKENS, threads=1025),
                 lambda: lowp.sample(threads=5000),
                 lambda: lowp.range_study(X, threads=1025)):
        message = raises(ValueError, "threads: ", call)
        assert "is not in 0..1024" in message
    # uint64 seeds take their whole range, exactly; negative ones are refused.
    a = lowp.convert(X, "bf16", rounding="stochastic", seed=2**64 - 1)
    b = lowp.convert(X, "bf16", rounding="stochastic", seed=np.uint64(2**64 - 1))
    assert a.tobytes() == b.tobytes()
    raises(ValueError, "seed: -1 is not in 0..18446744073709551615",
           lambda: lowp.convert(X, "bf16", seed=-1))
    # Python prints no integer of more than 4300 digits; the message still does.
    raises(ValueError, "threads: ", lambda: lowp.convert(X, "bf16", threads=10**5000))


def test_numpy_integers_are_integers_and_bool_is_not():
    assert lowp.convert(X, "bf16", threads=np.int64(2)).tobytes() == lowp.convert(X, "bf16").tobytes()
    assert lowp.sample(count=np.int32(2), length=np.uint8(8), seed=np.int16(3)).shape == (2, 8)
    raises(TypeError, "seed: want an integer, not bool", lambda: lowp.convert(X, "bf16", seed=True))
    raises(TypeError, "threads: want an integer, not bool_",
           lambda: lowp.quantize(X, "q4_0", threads=np.bool_(True)))
    raises(TypeError, "count: want an integer, not float", lambda: lowp.sample(count=2.0))
    raises(TypeError, "seq: want an integer, not str",
           lambda: lowp.size(model="llama-3.1-8b", mode="inference", seq="8192"))
    raises(TypeError, "summary: want True or False, not int", lambda: lowp.quant_error(X, "bf16", summary=1))
    raises(TypeError, "lr: want a number, not bool", lambda: lowp.update_error(X, lr=True))
    raises(ValueError, "relative_floor: ", lambda: lowp.quant_error(X, "bf16", relative_floor=10**400))
    raises(ValueError, "lr: Fraction(", lambda: lowp.update_error(X, lr=fractions.Fraction(10**400, 3)))
    # NumPy's floats are numbers.
    assert lowp.quant_error(X, "bf16", relative_floor=np.float32(0.5), summary=True)["aggregates"]


# The arguments each function needs, valid and cheap.
REQUIRED = {
    "convert": {"values": X, "to": "bf16"},
    "decode": {"codes": np.uint8([1, 2]), "fmt": "fp8_e4m3fn"},
    "round_values": {"values": X, "to": "bf16"},
    "fake_quant": {"values": X, "fmt": "bf16"},
    "quantize": {"array": X, "scheme": "q4_0"},
    "gptq": {"weight": np.ones((2, 32), np.float32), "inputs": np.ones((4, 32), np.float32),
             "scheme": "int4-g32"},
    "quant_error": {"data": X},
    "update_error": {"data": X},
    "range_study": {"data": X},
    "tensors": {"files": STORIES},
    "read_tensors": {"path": STORIES},
    "size": {"model": "llama-3.1-8b", "mode": "inference"},
    "plan": {"model": "llama-3.1-8b", "mode": "inference"},
    "training_plan": {"model": "llama-3.1-8b", "mode": "pretrain"},
    "forward": {"model": None, "tokens": TOKENS},
    "quantize_model": {"model": STORIES3M, "weights": "int4-g128", "out": "/nonexistent/x"},
    "model_quant_error": {"model": STORIES3M, "scheme": "int4-g128"},
}
EVERY_PARAMETER = [(name, p) for name in sorted(_lowp._signatures)
                   for p in inspect.signature(getattr(lowp, name)).parameters]


def names_the_argument(message, name):
    return message.startswith(name) and message[len(name):len(name) + 1] in (":", " ", "[")


@pytest.mark.parametrize("function, name", EVERY_PARAMETER)
def test_every_argument_is_checked_and_named(function, name):
    # Whatever the parameter, an object of no kind it takes is refused by its
    # converter, named; an integer parameter refuses one beyond its field.
    f = getattr(lowp, function)
    annotation = inspect.signature(f).parameters[name].annotation
    bad = [object()]
    if "int" in annotation.split(" | "):
        bad.append(2**64)
    for value in bad:
        with pytest.raises((TypeError, ValueError)) as info:
            f(**{**REQUIRED.get(function, {}), name: value})
        assert names_the_argument(str(info.value), name), (function, name, str(info.value))


# ------------------------------------------------------------ text, paths


def test_texts_must_be_text_and_paths_take_the_file_systems_bytes(tmp_path):
    # A str that UTF-8 cannot encode is no text: ValueError naming the keyword.
    raises(ValueError, "text: holds a lone surrogate (U+D800 at index 0)",
           lambda: lowp.tokenize(text="\ud800"))
    raises(ValueError, "scheme: holds a lone surrogate", lambda: lowp.quantize(X, "q4\udc80"))
    raises(ValueError, "to: holds a lone surrogate", lambda: lowp.convert(X, "\ud800"))
    raises(ValueError, "formats[1]: holds a lone surrogate",
           lambda: lowp.range_study(X, formats=["fp16", "\udc80"]))
    raises(ValueError, "mode: holds a lone surrogate",
           lambda: lowp.size(model="llama-3.1-8b", mode="\ud800"))
    raises(TypeError, "text: want a str, not bytes", lambda: lowp.tokenize(text=b"abc"))
    # A path is os.fsencode's bytes: a name that is not UTF-8 (decoded with
    # surrogateescape, as os.listdir gives it) is its bytes.
    raw = os.path.join(os.fsencode(tmp_path), b"w\x80.safetensors")
    shutil.copyfile(STORIES, raw)
    def listing(path):
        return [{k: v for k, v in t.items() if k != "file"} for t in lowp.tensors(path)["tensors"]]

    want = listing(STORIES)
    for path in (os.fsdecode(raw), raw, pathlib.Path(os.fsdecode(raw))):
        assert listing(path) == want
        # The report writes the byte that is not UTF-8 as U+FFFD, as the command does.
        assert lowp.tensors(path)["tensors"][0]["file"].endswith("w\ufffd.safetensors")
    assert lowp.read_tensors(os.fsdecode(raw), "*norm*").keys() == lowp.read_tensors(STORIES, "*norm*").keys()
    # A message naming such a file writes its bytes that are not UTF-8 as \xNN.
    with pytest.raises((ValueError, OSError)) as info:
        lowp.eval(model="/nonexistent/\udc80x")
    assert "/nonexistent/\\x80x" in str(info.value), str(info.value)
    # Not every surrogate is a byte: \ud800 names no file.
    raises(ValueError, "model: '\\ud800x': not a file name", lambda: lowp.eval(model="\ud800x"))
    raises(ValueError, "path: ", lambda: lowp.read_tensors("\ud800"))
    raises(ValueError, "a file name cannot hold a NUL byte", lambda: lowp.tensors([STORIES, "a\0b"]))
    raises(TypeError, "unexpected keyword argument '\\ud800'", lambda: lowp.eval(**{"\ud800": 1}))


class BadPath:
    def __fspath__(self):
        return 5


@pytest.mark.parametrize("call, text", [
    (lambda: lowp.eval(model=5), "model: want a path (str, bytes or os.PathLike), not int"),
    (lambda: lowp.forward(5, TOKENS), "model: want a path (str, bytes or os.PathLike), not int"),
    (lambda: lowp.sample(5), "model: want a path"),
    (lambda: lowp.mix(model=5.0), "model: want a path (str, bytes or os.PathLike), not float"),
    (lambda: lowp.imatrix(model=BadPath()), "model: want a path (str, bytes or os.PathLike), not BadPath"),
    (lambda: lowp.tokenize(model=[MODEL]), "model: want a path"),
    (lambda: lowp.quant_error(None, "bf16"),
     "data: want a checkpoint path, a list of paths, an array or a dict of arrays, not NoneType"),
    (lambda: lowp.update_error(None), "data: want a checkpoint path, a list of paths, an array or a dict"),
    (lambda: lowp.range_study(None), "data: want a checkpoint path, a list of paths, an array or a dict"),
    (lambda: lowp.range_study(object()), "data: want a checkpoint path, a list of paths, an array or a dict"),
    (lambda: lowp.quant_error(["a.safetensors", 3], "bf16"), "data[1]: want a path (str, bytes or os.PathLike), not int"),
    (lambda: lowp.quant_error({5: X}, "bf16"), "data: want a str for each tensor name, not int"),
    (lambda: lowp.quant_error(X, "bf16", reference=[STORIES, None]), "reference[1]: want a path"),
    (lambda: lowp.quant_error(X, "bf16", imatrix=3), "imatrix: want a path"),
    (lambda: lowp.eval(tensors=5), "tensors: want a path or a list of paths, not int"),
    (lambda: lowp.eval(weights=5), "weights: want a str or a list of str, not int"),
    (lambda: lowp.eval(weights=["bf16", 5]), "weights[1]: want a str, not int"),
    (lambda: lowp.eval(sample=5), "sample: want a str 'N:LEN' or a tuple (N, LEN), not int"),
    (lambda: lowp.eval(sample=(2, "16")), "sample[1]: want an integer, not str"),
    (lambda: lowp.eval(text_file=5), "text_file: want a path"),
    (lambda: lowp.plan(model="llama-3.1-8b", mode="inference", html=5), "html: want a path"),
    (lambda: lowp.plan(model=5, mode="inference"), "model: want a str, not int"),
    (lambda: lowp.size(model="llama-3.1-8b", mode="inference", buffers=2.5),
     "buffers: want an integer or a str such as '2GB', not float"),
    (lambda: lowp.tokenize(text="x", add_bos=1), "add_bos: want True or False, not int"),
    # The positional parameters go the same way (they were C++-typed).
    (lambda: lowp.convert(X, 5), "to: want a str, not int"),
    (lambda: lowp.convert(X, "bf16", seed="1"), "seed: want an integer, not str"),
    (lambda: lowp.decode(np.uint8([1]), None), "fmt: want a str, not NoneType"),
    (lambda: lowp.round_values(X, b"bf16"), "to: want a str, not bytes"),
    (lambda: lowp.fake_quant(X, 1.5), "fmt: want a str, not float"),
    (lambda: lowp.quantize(X, 4), "scheme: want a str, not int"),
    (lambda: lowp.tensors(5), "files: want a path or a list of paths, not int"),
    (lambda: lowp.read_tensors(5), "path: want a path (str, bytes or os.PathLike), not int"),
    (lambda: lowp.read_tensors(STORIES, 5), "tensors: want a str or a list of str, not int"),
    (lambda: lowp.forward(None, TOKENS, threads="2"), "threads: want an integer, not str"),
])
def test_wrong_types_are_type_errors_naming_the_argument(call, text):
    raises(TypeError, text, call)


@pytest.mark.parametrize("call, text", [
    (lambda: lowp.eval(tokens=[[1, 2], [3]]), "tokens: not an array of numbers"),
    (lambda: lowp.forward(None, [[1, 2], [3]]), "tokens: not an array of numbers"),
    (lambda: lowp.mix(bits_per_weight=4, tune_tokens=[[1], [2, 3]]), "tune_tokens: not an array of numbers"),
    (lambda: lowp.imatrix(tokens=[[1, 2], [3, 4, 5]]), "tokens: not an array of numbers"),
    (lambda: lowp.eval(tokens=[1, 2**70]), "tokens: want an integer array of token ids, not dtype object"),
    (lambda: lowp.forward(None, np.array([1, 2**63], np.uint64)),
     "tokens: token 9223372036854775808 at sequence 0, position 1 is not a token id"),
    (lambda: lowp.forward(None, [1.0, 2.0]), "tokens: want an integer array of token ids, not dtype float64"),
    (lambda: lowp.quant_error({"w": [[1.0], [1.0, 2.0]]}, "bf16"), "data['w']: not an array of numbers"),
    (lambda: lowp.quant_error([[1.0], [1.0, 2.0]], "bf16"), "data: not an array of numbers"),
    (lambda: lowp.quant_error(np.arange(4), "bf16"), "data: want a float16, float32 or float64 array"),
    (lambda: lowp.convert([[1.0], [2.0, 3.0]], "bf16"), "values: not an array of numbers"),
    (lambda: lowp.convert(np.float64([1]), "bf16"), "values: convert takes float32 or float16 values"),
    (lambda: lowp.decode([[1], [2, 3]], "fp8_e4m3fn"), "codes: not an array of numbers"),
    (lambda: lowp.quantize([[1.0], [2.0, 3.0]], "q8_0"), "array: not an array of numbers"),
    (lambda: lowp.quantize(X, "q4_0", imatrix=[[1.0], [2.0, 3.0]]), "imatrix: not an array of numbers"),
    (lambda: lowp.convert(X, "nosuch"), "to: unknown format 'nosuch'"),
    (lambda: lowp.convert(X, "bf16", rounding="sideways"), "rounding: unknown rounding mode 'sideways'"),
    (lambda: lowp.round_values(X, "bf16", overflow="x"), "overflow: unknown overflow policy 'x'"),
    (lambda: lowp.fake_quant(X, "bf16", subnormals="x"), "subnormals: unknown subnormal policy 'x'"),
    (lambda: lowp.convert(X, "bf16", nan="x"), "nan: unknown NaN policy 'x'"),
    (lambda: lowp.size(model="llama-3.1-8b", mode="x"), "mode: unknown mode 'x'"),
    (lambda: lowp.size(model="llama-3.1-8b", mode="pretrain", optimizer="x"), "optimizer: unknown optimizer 'x'"),
    (lambda: lowp.size(model="llama-3.1-8b", mode="pretrain", offload="x"),
     "offload: 'x': only 'optimizer' can be offloaded"),
    (lambda: lowp.size(model="llama-3.1-8b", mode="inference", buffers="2XB"), "buffers '2XB'"),
    (lambda: lowp.size(model="llama-3.1-8b", mode="inference", weights=""), "weights: is empty"),
    (lambda: lowp.mix(bytes=0), "bytes: want a number > 0"),
    (lambda: lowp.eval(sample=(1, 2, 3)), "sample: want a tuple (N, LEN)"),
    (lambda: lowp.quant_error(X, []), "scheme: an empty list names nothing"),
    (lambda: lowp.quant_error([], "bf16"), "data: no input"),
    (lambda: lowp.decode(np.float32([1]), "fp8_e4m3fn"), "codes: decode takes unsigned integer codes"),
])
def test_wrong_values_are_value_errors_naming_the_argument(call, text):
    raises(ValueError, text, call)


def test_library_errors_name_the_keyword_not_the_field():
    # AdamW's fields are spelt with hyphens (the flags'); the keywords with _.
    raises(ValueError, "weight_decay: ", lambda: lowp.update_error(X, weight_decay=-1.0))
    raises(ValueError, "min_lr_ratio: ", lambda: lowp.update_error(X, min_lr_ratio=2.0))
    raises(ValueError, "grad_signal: ", lambda: lowp.update_error(X, grad_signal=2.0))
    # training_plan's measurement globs are its `select`.
    raises(ValueError, "select 'nomatch*' matches no tensor",
           lambda: lowp.training_plan(model="llama-3.1-8b", mode="pretrain", select="nomatch*",
                                      recipes="fp32-master", steps=1))
    raises(ValueError, "threads: 1025 is not in 0..1024",
           lambda: lowp.quant_error(X, "bf16", threads=1025))


# ---------------------------------------------------------------- binding


def test_arguments_bind_as_a_def_binds_them():
    raises(TypeError, "convert() takes 2 positional arguments but 3 were given",
           lambda: lowp.convert(X, "bf16", "stochastic"))
    raises(TypeError, "convert() missing required argument: 'to'", lambda: lowp.convert(X))
    raises(TypeError, "convert() got multiple values for argument 'values'",
           lambda: lowp.convert(X, "bf16", values=X))
    raises(TypeError, "size() missing required keyword-only argument: 'model'",
           lambda: lowp.size(mode="inference"))
    raises(TypeError, "mode: want a str, not NoneType", lambda: lowp.size(model="llama-3.1-8b", mode=None))
    raises(TypeError, "eval() got an unexpected keyword argument 'bogus'", lambda: lowp.eval(bogus=1))
    raises(TypeError, "plan() takes 0 positional arguments but 1 was given",
           lambda: lowp.plan("llama-3.1-8b"))
    raises(TypeError, "forward() missing required argument: 'model'", lambda: lowp.forward(tokens=TOKENS))
    # Keywords may name positional parameters; None is a default's default.
    want = lowp.convert(X, "bf16").tobytes()
    assert lowp.convert(values=X, to="bf16").tobytes() == want
    assert lowp.convert(X, "bf16", rounding=None, seed=None, packed=None, threads=None).tobytes() == want


# ------------------------------------------------------------- signatures

PUBLIC = sorted(_lowp._signatures)


def test_every_function_has_its_real_signature():
    assert set(PUBLIC) >= set(lowp.__all__) | {"eval", "forward", "sample", "mix", "imatrix", "tokenize"}
    for name in PUBLIC:
        f = getattr(lowp, name)
        assert f.__name__ == name and f.__module__ == "lowp" and f.__doc__
        sig = inspect.signature(f)
        assert sig.return_annotation is not inspect.Signature.empty
        for p in sig.parameters.values():
            assert p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY), (name, p)
            assert isinstance(p.annotation, str) and p.annotation, (name, p)
        # The annotations resolve (the aliases are lowp's).
        hints = typing.get_type_hints(f)
        assert set(hints) == set(sig.parameters) | {"return"}
    eval_sig = inspect.signature(lowp.eval)
    assert str(eval_sig).startswith("(*, model: 'FilePath | None' = None, tensors: 'FilePaths | None' = None,")
    assert eval_sig.parameters["ctx"].default == 512 and eval_sig.parameters["sample"].default == "16:128"
    assert eval_sig.parameters["chunks"].default == -1 and eval_sig.parameters["threads"].annotation == "int | None"
    mix = inspect.signature(lowp.mix).parameters
    assert (mix["tune_sample"].default, mix["tune_seed"].default, mix["sample"].default) == ("8:256", 1, "16:256")
    assert inspect.signature(lowp.update_error).parameters["eps"].default == 1e-8
    assert inspect.signature(lowp.size).parameters["buffers"].default == 2_000_000_000
    assert inspect.signature(lowp.convert).parameters["rounding"].default == "nearest-even"
    assert str(inspect.signature(lowp.forward)) == \
        "(model: 'FilePath | None', tokens: 'ArrayLike', *, threads: 'int | None' = 0) -> 'NDArray[np.float32]'"
    text = pydoc.render_doc(lowp.eval, renderer=pydoc.plaintext)
    assert "eval(*, model: 'FilePath | None' = None" in text and "ctx: 'int' = 512" in text
    assert "llama.cpp's perplexity protocol" in text


def test_the_defaults_shown_are_the_defaults_that_run():
    # Given explicitly, every default gives what leaving it out gives.
    def same(a, b):
        if isinstance(a, np.ndarray):
            return a.dtype == b.dtype and a.tobytes() == b.tobytes()
        if isinstance(a, dict):
            return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
        return a == b

    codes = lowp.convert(X, "fp8_e4m3fn")
    cases = [  # the function, its arguments, the keywords given here
        (lowp.convert, (X, "fp8_e4m3fn"), {}),
        (lowp.round_values, (X, "bf16"), {}),
        (lowp.fake_quant, (X.astype(np.float16), "fp8_e5m2"), {}),
        (lowp.decode, (codes, "fp8_e4m3fn"), {}),
        (lowp.quantize, (X, "q4_0"), {}),
        (lowp.quant_error, (X, "bf16"), {}),
        (lowp.range_study, (X,), {}),
        (lowp.update_error, (X, "bf16-rne"), {}),
        (lowp.tensors, (STORIES,), {}),
        (lowp.read_tensors, (STORIES,), {}),
        (lowp.tokenize, (), {"text": "Once upon a time"}),
        (lowp.sample, (), {}),
        (lowp.size, (), {"model": "llama-3.1-8b", "mode": "inference"}),
        (lowp.plan, (), {"model": "llama-3.1-8b", "mode": "inference"}),
        (lowp.training_plan, (), {"model": "llama-3.1-8b", "mode": "pretrain", "recipes": "bf16-sr",
                                  "select": "*layers.0.mlp.up*"}),
        (lowp.eval, (), {"tokens": TOKENS}),
    ]
    for f, args, given in cases:
        parameters = list(inspect.signature(f).parameters.values())[len(args):]
        defaults = {p.name: p.default for p in parameters
                    if p.default is not inspect.Parameter.empty and p.name not in given}
        assert same(f(*args, **given), f(*args, **given, **defaults)), f.__name__


def stub_functions(tree):
    functions = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            a = node.args
            assert not a.posonlyargs and a.vararg is None and a.kwarg is None, node.name
            params = []
            defaults = [None] * (len(a.args) - len(a.defaults)) + list(a.defaults)
            for arg, default in zip(a.args, defaults):
                params.append((arg.arg, "POSITIONAL_OR_KEYWORD", ast.unparse(arg.annotation),
                               inspect.Parameter.empty if default is None else ast.literal_eval(default)))
            for arg, default in zip(a.kwonlyargs, a.kw_defaults):
                params.append((arg.arg, "KEYWORD_ONLY", ast.unparse(arg.annotation),
                               inspect.Parameter.empty if default is None else ast.literal_eval(default)))
            functions[node.name] = (params, ast.unparse(node.returns), ast.get_docstring(node))
    return functions


def test_the_stub_is_the_signatures_the_module_reports(tmp_path):
    package = os.path.dirname(lowp.__file__)
    stub = os.path.join(package, "__init__.pyi")
    assert os.path.isfile(os.path.join(package, "py.typed"))
    py_compile.compile(stub, cfile=str(tmp_path / "stub.pyc"), doraise=True)
    with open(stub, encoding="utf-8") as f:
        text = f.read()
    # Written from the module by lowp._stub, so it cannot drift from it.
    assert text == _stub.text(), "regenerate: python3 -m lowp._stub > python/lowp/__init__.pyi"
    if os.path.exists(SOURCE_STUB):  # the checkout's, which the build copies
        assert filecmp.cmp(SOURCE_STUB, stub, shallow=False)
    functions = stub_functions(ast.parse(text))
    assert sorted(functions) == PUBLIC
    for name, (params, returns, doc) in functions.items():
        sig = inspect.signature(getattr(lowp, name))
        want = [(p.name, p.kind.name, p.annotation, p.default) for p in sig.parameters.values()]
        assert params == want, name
        assert [type(p[3]) for p in params] == [type(w[3]) for w in want], name
        assert returns == sig.return_annotation, name
        assert " ".join(doc.split()) == " ".join(getattr(lowp, name).__doc__.split()), name
    # The aliases it names are the package's, and the names it exports too.
    tree = ast.parse(text)
    exported = next(ast.literal_eval(n.value) for n in tree.body
                    if isinstance(n, ast.Assign) and n.targets[0].id == "__all__")
    assert exported == lowp.__all__
    for alias in ("FilePath", "FilePaths", "Names", "TensorData"):
        assert getattr(lowp, alias) is getattr(lowp._types, alias)


# --------------------------------------------------------- files per call


def test_an_output_never_replaces_a_file_the_same_call_reads(tmp_path):
    model = tmp_path / "model"
    shutil.copytree(MODEL, model)
    weights = model / "model.safetensors"
    before = weights.read_bytes()
    message = raises(ValueError, "is an input of this run",
                     lambda: lowp.imatrix(model=str(model), sample="1:16", out=str(weights)))
    assert message.startswith("out "), message  # the api's field "output" is imatrix's out
    assert weights.read_bytes() == before
    # Read by an earlier call is no objection: each call is its own scope.
    target = tmp_path / "read-before.gguf"
    lowp.imatrix(model=str(model), sample="1:16", out=str(target))
    assert lowp.tensors(str(target))["tensors"]
    r = lowp.imatrix(model=str(model), sample="1:16", out=str(target))
    assert r["importance"] and lowp.tensors(str(target))["tensors"]
    # And the same after a refused call.
    lowp.read_tensors(str(weights))
    lowp.imatrix(model=str(model), sample="1:16", out=str(tmp_path / "after.gguf"))


@pytest.mark.skipif(shutil.which("mypy") is None, reason="no mypy (Debian's package mypy)")
def test_a_type_checker_reads_the_stub(tmp_path):
    # What the stub says, a checker enforces: calls that run check clean,
    # and each mistake below is found where it is.
    use = tmp_path / "use.py"
    use.write_text(
        "import pathlib\n"
        "import numpy as np\n"
        "import lowp\n"
        "x = np.zeros((2, 64), np.float32)\n"
        "codes = lowp.convert(x, 'fp8_e4m3fn', overflow='saturate', threads=None)\n"
        "v = lowp.decode(codes, 'fp8_e4m3fn')\n"
        "r = lowp.eval(weights=['bf16'], kv='none', sample=(2, 16), model=pathlib.Path('m'))\n"
        "lowp.size(model='llama-3.1-8b', mode='inference', seq=8192)\n"
        "lowp.forward(None, [[1, 2]])\n"
        "lowp.quant_error({'a': x}, ['bf16'], summary=True)['aggregates']\n"
        "lowp.eval(ctx='512')\n"
        "lowp.size(mode='inference')\n"
        "lowp.convert(x)\n"
        "lowp.eval(bogus=1)\n")
    env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}  # no ASan in mypy
    env["MYPYPATH"] = os.path.dirname(os.path.dirname(lowp.__file__))
    out = subprocess.run(
        ["mypy", "--no-incremental", "--cache-dir", str(tmp_path / "cache"),
         "--python-executable", sys.executable, str(use)],
        capture_output=True, text=True, env=env, timeout=300)
    errors = sorted(int(line.split(":")[1]) for line in out.stdout.splitlines() if ": error:" in line)
    assert errors == [11, 12, 13, 14], out.stdout
