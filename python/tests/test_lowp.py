"""The Python bindings against the `lowp` command's JSON (the same fields, the
same numbers) and against NumPy where NumPy has the format (float16).

Run by ctest (python.pytest) with PYTHONPATH at the built package, LOWP_CLI
at the command and LOWP_TEST_DATA at tests/data.
"""

import json
import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import lowp

CLI = os.environ.get("LOWP_CLI", "lowp")
DATA = os.environ.get("LOWP_TEST_DATA", os.path.join(os.path.dirname(__file__), "../../tests/data"))
STORIES = os.path.join(DATA, "stories260K", "stories260K.f32.safetensors")
STORIES_BF16 = os.path.join(DATA, "stories260K", "stories260K.bf16.safetensors")


def cli_json(*args):
    out = subprocess.run([CLI, *map(str, args), "--json"], check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def bits16(a):
    return np.asarray(a).view(np.uint16)


# ------------------------------------------------------------ the catalogs


def test_catalogs_are_the_commands_json():
    assert lowp.formats() == cli_json("formats")
    assert lowp.schemes() == cli_json("schemes")
    assert lowp.devices() == cli_json("devices")


# ------------------------------------------------------------ conversions


def fp16_inputs():
    """Every float16 boundary: each float16 value and the float32 values next
    to each midpoint between neighbours, plus random float32 bits."""
    halves = np.arange(1 << 16, dtype=np.uint16).view(np.float16)
    finite = np.sort(halves[np.isfinite(halves)].astype(np.float32))
    mid = ((finite[1:].astype(np.float64) + finite[:-1]) / 2).astype(np.float32)
    near = np.concatenate([mid, np.nextafter(mid, np.float32(np.inf)), np.nextafter(mid, np.float32(-np.inf))])
    rng = np.random.default_rng(1)
    noise = rng.integers(0, 1 << 32, size=1 << 20, dtype=np.uint64).astype(np.uint32).view(np.float32)
    specials = np.float32([0.0, -0.0, np.inf, -np.inf, 65504, 65520, -65520, 65519.996, 1e-8, 2.0**-25, 2.0**-24])
    return np.concatenate([finite, near, noise, specials])


def test_convert_to_fp16_is_numpys_cast_bit_for_bit():
    x = fp16_inputs()
    ours = lowp.convert(x, "fp16")
    assert ours.dtype == np.uint16 and ours.shape == x.shape
    with np.errstate(over="ignore"):
        theirs = bits16(x.astype(np.float16))
    nan = np.isnan(x)
    np.testing.assert_array_equal(ours[~nan], theirs[~nan])
    assert np.all(np.isnan(ours[nan].view(np.float16)))


def test_decode_fp16_is_numpys_widening_for_every_code():
    codes = np.arange(1 << 16, dtype=np.uint16)
    ours = lowp.decode(codes, "fp16")
    theirs = codes.view(np.float16).astype(np.float32)
    assert ours.dtype == np.float32
    np.testing.assert_array_equal(ours.view(np.uint32), theirs.view(np.uint32))


def test_fp16_inputs_give_the_codes_of_their_float32_values():
    h = np.arange(1 << 16, dtype=np.uint16).view(np.float16)
    for fmt in ("bf16", "fp8_e4m3fn", "fp8_e5m2", "fp4_e2m1fn", "int8"):
        np.testing.assert_array_equal(lowp.convert(h, fmt, overflow="saturate"),
                                      lowp.convert(h.astype(np.float32), fmt, overflow="saturate"))


@pytest.mark.parametrize("fmt", ["fp32", "tf32", "bf16", "fp16", "fp8_e4m3fn", "fp8_e5m2", "fp6_e2m3fn",
                                 "fp6_e3m2fn", "fp4_e2m1fn", "int8", "uint4", "int4", "e8m0"])
def test_convert_and_decode_are_the_commands(tmp_path, fmt):
    rng = np.random.default_rng(4)
    x = np.concatenate([rng.standard_normal(4097).astype(np.float32) * 4,
                        np.float32([0.0, -0.0, np.inf, -np.inf, np.nan, 1e30, -1e-30])])
    (tmp_path / "x.f32").write_bytes(x.tobytes())
    for options in ([], ["--overflow", "saturate"], ["--rounding", "stochastic", "--seed", "5"]):
        args = [CLI, "convert", "--from", "fp32", "--to", fmt, *options, str(tmp_path / "x.f32"), str(tmp_path / "y")]
        if subprocess.run(args, capture_output=True).returncode != 0:
            with pytest.raises(ValueError):  # the options do not suit the format
                lowp.convert(x, fmt, **dict(zip([o[2:] for o in options[::2]], options[1::2])))
            continue
        kwargs = dict(zip([o[2:] for o in options[::2]], options[1::2]))
        if "seed" in kwargs:
            kwargs["seed"] = int(kwargs["seed"])
        storage = (tmp_path / "y").read_bytes()
        packed = fmt in ("fp4_e2m1fn", "uint4", "int4")
        codes = lowp.convert(x, fmt, packed=packed, **kwargs)
        assert codes.tobytes() == storage, (fmt, options)
        # And back: the command's decode of those codes.
        args = [CLI, "convert", "--from", fmt, "--to", "fp32", str(tmp_path / "y"), str(tmp_path / "z")]
        subprocess.run(args, check=True, capture_output=True)
        decoded = np.frombuffer((tmp_path / "z").read_bytes(), np.float32)[: x.size]
        ours = lowp.decode(codes, fmt, packed=packed, count=x.size if packed else None)
        np.testing.assert_array_equal(ours.view(np.uint32), decoded.view(np.uint32))
        if packed:  # unpacked codes decode the same
            np.testing.assert_array_equal(lowp.decode(lowp.convert(x, fmt, **kwargs), fmt).view(np.uint32),
                                          decoded.view(np.uint32))


def test_any_byte_order_layout_and_shape():
    x = np.float16([0.1, 1.5, -2.0, 300.0])
    native = lowp.fake_quant(x, "fp32")
    np.testing.assert_array_equal(lowp.fake_quant(x.astype(">f2"), "fp32"), native)
    np.testing.assert_array_equal(lowp.fake_quant(x.astype(np.float32).astype(">f4"), "fp32"), native)
    assert lowp.decode(np.uint16([0x3C00]).astype(">u2"), "fp16")[0] == 1.0
    assert lowp.decode(np.uint32([0x38]), "fp8_e4m3fn")[0] == 1.0  # wider codes are fine
    big = lowp.quant_error(x.astype(">f2"), "bf16")["aggregates"][0]
    assert big == lowp.quant_error(x, "bf16")["aggregates"][0]
    assert lowp.convert(np.float32(1.0), "bf16").shape == ()
    assert lowp.convert(np.zeros((0, 3), np.float32), "fp4_e2m1fn").shape == (0, 3)
    with pytest.raises(ValueError, match="float64"):  # a list is float64 to NumPy
        lowp.convert([1.0, 2.0], "bf16")
    np.testing.assert_array_equal(lowp.convert(np.float32([1, 2]), "bf16"), np.uint16([0x3F80, 0x4000]))
    fortran = np.asfortranarray(np.arange(12, dtype=np.float32).reshape(3, 4))
    np.testing.assert_array_equal(lowp.fake_quant(fortran, "fp32"), fortran)


def test_fake_quant_rounds_in_one_pass_to_the_bits_of_decode_convert():
    # float32 input takes round_values (one pass); it must give decode(convert)
    # bit for bit, NaN payloads and signed zeros included, in every mode and
    # for any thread count.
    rng = np.random.default_rng(5)
    x = (rng.standard_normal(300_000) * 4).astype(np.float32)
    x[:8] = [np.nan, -np.nan, np.inf, -np.inf, 1e30, -0.0, 1e-42, -1e-45]
    for fmt in ["fp8_e4m3fn", "fp8_e5m2", "bf16", "fp16", "fp6_e3m2fn", "fp4_e2m1fn", "tf32"]:
        for rounding in ["nearest-even", "stochastic", "toward-negative"]:
            want = lowp.decode(lowp.convert(x, fmt, rounding=rounding, seed=9), fmt)
            for threads in (1, 2):
                got = lowp.fake_quant(x, fmt, rounding=rounding, seed=9, threads=threads)
                assert got.dtype == np.float32
                assert got.tobytes() == want.tobytes(), (fmt, rounding, threads)
    half = x[1000:2000].astype(np.float16)
    np.testing.assert_array_equal(lowp.fake_quant(half, "fp8_e4m3fn", threads=1),
                                  lowp.decode(lowp.convert(half, "fp8_e4m3fn"), "fp8_e4m3fn"))


def test_threads_keyword_on_every_computing_function():
    x = np.float32(np.linspace(-3, 3, 70_000)).reshape(700, 100)
    codes = lowp.convert(x, "fp8_e4m3fn", threads=1)
    assert codes.tobytes() == lowp.convert(x, "fp8_e4m3fn", threads=2).tobytes()
    assert lowp.decode(codes, "fp8_e4m3fn", threads=1).tobytes() == \
        lowp.decode(codes, "fp8_e4m3fn", threads=2).tobytes()
    assert lowp.quantize(x, "q4_0", threads=1).tobytes() == lowp.quantize(x, "q4_0", threads=2).tobytes()
    assert lowp.round_values(x, "bf16", threads=1).tobytes() == lowp.round_values(x, "bf16").tobytes()
    for bad in (-1, 5000):
        with pytest.raises(ValueError, match="threads"):
            lowp.convert(x, "bf16", threads=bad)
    with pytest.raises(ValueError, match="float32"):
        lowp.round_values(x.astype(np.float64), "bf16")


def test_fake_quant_is_decode_of_convert_and_options_apply():
    x = np.float32([0.1, 300.0, 1e6, -2.5, 1e-9])
    np.testing.assert_array_equal(lowp.fake_quant(x, "bf16"), lowp.decode(lowp.convert(x, "bf16"), "bf16"))
    e4m3 = lowp.fake_quant(x, "fp8_e4m3fn")
    assert np.isnan(e4m3[2])  # fn default: overflow to NaN
    assert lowp.fake_quant(x, "fp8_e4m3fn", overflow="saturate")[2] == 448
    a = lowp.fake_quant(np.full(4096, 0.1, np.float32), "bf16", rounding="stochastic", seed=7)
    b = lowp.fake_quant(np.full(4096, 0.1, np.float32), "bf16", rounding="stochastic", seed=7)
    np.testing.assert_array_equal(a, b)
    assert len(np.unique(a)) == 2  # both neighbours of 0.1 drawn
    assert abs(float(a.astype(np.float64).mean()) - 0.1) < 1e-4


def test_packed_nibbles_round_trip_and_shapes():
    x = np.linspace(-6, 6, 25, dtype=np.float32).reshape(5, 5)
    codes = lowp.convert(x, "fp4_e2m1fn")
    assert codes.dtype == np.uint8 and codes.shape == (5, 5) and codes.max() <= 15
    packed = lowp.convert(x, "fp4_e2m1fn", packed=True)
    assert packed.shape == (13,)
    np.testing.assert_array_equal(packed[0] & 0xF, codes.flat[0])
    np.testing.assert_array_equal(packed[0] >> 4, codes.flat[1])
    back = lowp.decode(packed, "fp4_e2m1fn", packed=True, count=25)
    np.testing.assert_array_equal(back, lowp.decode(codes, "fp4_e2m1fn").ravel())


def test_noncontiguous_inputs_and_wide_codes():
    x = np.arange(64, dtype=np.float32).reshape(8, 8)[:, ::2]
    np.testing.assert_array_equal(lowp.fake_quant(x, "fp32"), x)
    codes = lowp.convert(np.float32([1.0]), "fp32")
    assert codes.dtype == np.uint32 and codes[0] == 0x3F800000


# ------------------------------------------------------------ reports = the CLI's JSON


def test_quant_error_on_a_file_is_the_commands_json():
    ours = lowp.quant_error(STORIES, ["int4-g128", "nf4"], tensors="*q_proj*")
    assert ours == cli_json("quant-error", STORIES, "--scheme", "int4-g128,nf4", "--tensors", "*q_proj*")
    assert len(ours["results"]) == 10 and len(ours["aggregates"]) == 2


def test_quant_error_of_a_tensor_that_overflows_whole_is_never_perfect():
    # Every element beyond fp8's range and q8_0's fp16 scale: each one counts
    # as an overflow, nothing is measured, and no metric reads as exact (the
    # infinite errors and the unknown cosine are None, as in the JSON).
    x = np.full((4, 64), 3e38, dtype=np.float32)
    x[:, ::2] *= -1
    for row in lowp.quant_error(x, ["fp8_e4m3fn", "q8_0"])["results"]:
        assert row["overflow"] == x.size and row["measured"] == 0
        for metric in ("rmse", "sqnr_db", "cosine", "max_abs_error", "mean_abs_error"):
            assert row[metric] is None, (row["scheme"], metric)


def test_quant_error_and_range_on_arrays_are_the_commands_on_npy(tmp_path):
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((96, 160)) * 0.02).astype(np.float32)
    path = tmp_path / "w.npy"
    np.save(path, w)
    q = lowp.quant_error({"w": w}, "int4-g128", histogram=True)
    cli = cli_json("quant-error", path, "--scheme", "int4-g128", "--histogram")
    for row in q["results"]:
        row.pop("dtype")
    for row in cli["results"]:
        row.pop("dtype")
    assert q == cli
    r = lowp.range_study({"w": w}, formats=["fp16", "fp8_e4m3fn"])
    assert r == cli_json("range", path, "--formats", "fp16,fp8_e4m3fn")
    # An array alone is the tensor "array"; float64 and float16 are read as they are.
    assert lowp.quant_error(w, "bf16")["results"][0]["tensor"] == "array"
    assert lowp.quant_error(w.astype(np.float64), "bf16")["results"][0]["dtype"] == "F64"
    assert lowp.quant_error(w.astype(np.float16), "bf16")["results"][0]["dtype"] == "F16"


def test_quantize_is_what_the_command_writes(tmp_path):
    rng = np.random.default_rng(2)
    w = (rng.standard_normal((64, 256)) * 0.05).astype(np.float32)
    np.save(tmp_path / "w.npy", w)
    out = tmp_path / "q.safetensors"
    subprocess.run([CLI, "quantize", str(tmp_path / "w.npy"), "--scheme", "nf4", "--out", str(out)],
                   check=True, capture_output=True)
    ours = lowp.quantize(w, "nf4")
    assert ours.shape == w.shape and ours.dtype == np.float32
    np.testing.assert_array_equal(ours, lowp.read_tensors(out)["w"])
    sqnr = lowp.quant_error(w, "nf4")["aggregates"][0]["sqnr_db"]
    # Within the bound of kernels/error_stats.h: the sums in float over runs
    # of 16 terms err by up to 21 * 2^-24 relative, SQNR by 10 log10(1 + 2B).
    bound = 10 * np.log10(1 + 2 * (21 * 2.0**-24 + w.size * 2.0**-52))
    assert abs(10 * np.log10((w.astype(np.float64) ** 2).sum() / ((ours - w).astype(np.float64) ** 2).sum()) - sqnr) < bound


def test_read_tensors_reads_the_checkpoints():
    f32 = lowp.read_tensors(STORIES)
    bf16 = lowp.read_tensors(STORIES_BF16, "*")
    assert len(f32) == 48 and sum(a.size for a in f32.values()) == 292_800
    # The bf16 file is the f32 file rounded to nearest even.
    for name, a in f32.items():
        np.testing.assert_array_equal(lowp.fake_quant(a, "bf16"), bf16[name])


def test_read_tensors_empty_tensors_of_any_shape(tmp_path):
    # Zero elements: an empty array of the file's shape, or, where NumPy cannot
    # represent the shape (its nonzero dimensions multiply past its limit), a
    # ValueError naming the tensor; never MemoryError.
    def write(shape):
        header = json.dumps({"t": {"dtype": "F32", "shape": shape, "data_offsets": [0, 0]}}).encode()
        path = tmp_path / f"z{len(shape)}.safetensors"
        path.write_bytes(len(header).to_bytes(8, "little") + header)
        return str(path)

    assert lowp.read_tensors(write([0, 1 << 40]))["t"].shape == (0, 1 << 40)
    with pytest.raises(ValueError, match='tensor "t" of shape .*has no elements'):
        lowp.read_tensors(write([0, 1 << 62, 1 << 62]))


def test_size_and_plan_are_the_commands_json():
    assert lowp.size(model="llama-3.1-70b", mode="inference", weights="int4-g128", seq=8192) == cli_json(
        "size", "--model", "llama-3.1-70b", "--mode", "inference", "--weights", "int4-g128", "--seq", "8192")
    assert lowp.size(model="llama-3.1-8b", mode="inference", compare_formats=True) == cli_json(
        "size", "--model", "llama-3.1-8b", "--mode", "inference", "--compare-formats")
    ours = lowp.plan(model="llama-3.1-8b", mode="inference", device=["rtx-4090", "h100-sxm"], formats=("bf16", "nf4"))
    theirs = cli_json("plan", "--model", "llama-3.1-8b", "--mode", "inference", "--device", "rtx-4090,h100-sxm",
                      "--formats", "bf16,nf4")
    assert ours == theirs
    assert ours["accuracy"]["proxy"] is True
    # 405B pre-training: the seeds' 16 bytes per parameter.
    r = lowp.size(model="llama-3.1-405b", mode="pretrain")
    assert r["whole"]["model_states"] == 16 * r["parameters"]["total"]


def test_plan_html(tmp_path):
    page = tmp_path / "plan.html"
    lowp.plan(model="llama-3.1-8b", mode="inference", html=str(page))
    text = page.read_text()
    assert text.count('class="bar"') == 7 and "<script" not in text


# ------------------------------------------------------------ errors


@pytest.mark.parametrize("call, error, message", [
    (lambda: lowp.size(model="nosuch", mode="inference"), ValueError, "model: "),
    (lambda: lowp.size(model="llama-3.1-8b"), TypeError,
     "size() missing required keyword-only argument: 'mode'"),
    (lambda: lowp.size(model="llama-3.1-8b", mode="inference", tp=3), ValueError, "tp: 3 does not divide"),
    (lambda: lowp.plan(model="llama-3.1-8b", mode="inference", formats=["nosuch"]), ValueError, "formats nosuch: "),
    (lambda: lowp.plan(model="llama-3.1-8b", mode="inference", formats=[]), ValueError,
     "formats: an empty list"),
    (lambda: lowp.plan(model="llama-3.1-8b", mode="inference", device=()), ValueError, "device: an empty list"),
    (lambda: lowp.quant_error(np.zeros(8, np.float32), []), ValueError, "scheme: an empty list"),
    (lambda: lowp.quant_error("/nonexistent/w.safetensors", "nf4"), OSError, "/nonexistent/w.safetensors"),
    (lambda: lowp.quant_error(np.zeros(8, np.float32), "nosuch"), ValueError, "nosuch"),
    (lambda: lowp.convert(np.float64([1.0]), "bf16"), ValueError, "float64"),
    (lambda: lowp.convert(np.float32([1.0]), "nosuch"), ValueError, "nosuch"),
    (lambda: lowp.convert(np.float32([1.0]), "int8", overflow="inf"), ValueError, "int8"),
    (lambda: lowp.decode(np.uint8([16]), "fp4_e2m1fn"), ValueError, "wider"),
    (lambda: lowp.decode(np.int8([1]), "fp8_e4m3fn"), ValueError, "unsigned"),
    (lambda: lowp.size(model="llama-3.1-8b", mode="inference", nosuch=1), TypeError,
     "unexpected keyword argument 'nosuch'"),
    (lambda: lowp.size(model="llama-3.1-8b", mode="inference", seq="8192"), TypeError,
     "seq: want an integer, not str"),
    (lambda: lowp.quant_error(np.zeros(8, np.float32), "bf16", relative_floor=-1), ValueError,
     "relative_floor -1: want a number >= 0"),
    (lambda: lowp.quant_error({"w": [[1], [1, 2]]}, "nf4"), ValueError, "w"),
    (lambda: lowp.quant_error(np.arange(8), "nf4"), ValueError, "float16, float32 or float64"),
    (lambda: lowp.quant_error(np.zeros(8, np.float32), "nf4", threads=True), TypeError,
     "threads: want an integer, not bool"),
    (lambda: lowp.plan(model="llama-3.1-8b", mode="inference", html="/nonexistent-dir/p.html"), OSError,
     "/nonexistent-dir/p.html"),
    (lambda: lowp.convert(np.float32([1.0]), "bf16", packed=True), ValueError, "4-bit"),
])
def test_errors_raise_with_the_librarys_message(call, error, message):
    with pytest.raises(error, match=None) as info:
        call()
    assert message in str(info.value)
    # Options are named as the keyword arguments, never as the command's flags.
    assert "--" not in str(info.value)


def test_numpy_bools_are_flags():
    w = np.zeros((4, 32), np.float32) + 0.5
    assert len(lowp.quant_error(w, "nf4", summary=np.False_)["results"]) == 1
    assert len(lowp.quant_error(w, "nf4", summary=np.True_)["results"]) == 0


def test_the_gil_is_released_while_kernels_run():
    # A worker thread converts a large array on one kernel thread while this
    # thread stamps the clock in a Python loop. Held through the kernel, the GIL
    # would stop the loop for the whole call: some gap between stamps would be at
    # least the kernel's time, whatever the scheduler does. Released, the loop
    # runs beside the kernel and its gaps stay short, unless the machine is so
    # loaded that the scheduler leaves this thread off the CPU for half the call;
    # one round of eight without such a pause is enough.
    x = np.random.default_rng(5).standard_normal(1 << 24).astype(np.float32)

    def one_round():
        done = threading.Event()
        took = []

        def work():
            t0 = time.perf_counter()
            lowp.convert(x, "fp8_e4m3fn", overflow="saturate", threads=1)
            took.append(time.perf_counter() - t0)
            done.set()

        worker = threading.Thread(target=work)
        stamps = [time.perf_counter()]
        worker.start()
        while not done.is_set():
            stamps.append(time.perf_counter())
        worker.join()
        stamps.append(time.perf_counter())
        return max(b - a for a, b in zip(stamps, stamps[1:])), took[0]

    rounds = [one_round() for _ in range(8)]
    assert any(gap < 0.5 * took for gap, took in rounds), rounds


def test_concurrent_calls_give_the_same_results():
    # Kernels run with the GIL released and each call's capture of the
    # command's JSON is its own thread's.
    x = np.random.default_rng(3).standard_normal(1 << 22).astype(np.float32)
    expected = (lowp.convert(x, "fp8_e4m3fn", overflow="saturate"), lowp.quant_error(x[:4096], "nf4"))
    results = [None] * 4

    def work(i):
        results[i] = (lowp.convert(x, "fp8_e4m3fn", overflow="saturate"), lowp.quant_error(x[:4096], "nf4"))

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for codes, report in results:
        np.testing.assert_array_equal(codes, expected[0])
        assert report == expected[1]


def test_bundled_checkpoint():
    assert lowp.bundled_checkpoint().endswith("stories260K.f32.safetensors")
    assert len(lowp.read_tensors(lowp.bundled_checkpoint())) == 48


# ------------------------------------------------------------ hostile input

HUGE = (2**40,)


@pytest.mark.parametrize("call", [
    lambda: lowp.convert(np.broadcast_to(np.float32(1), HUGE), "bf16"),
    lambda: lowp.fake_quant(np.broadcast_to(np.float32(1), HUGE), "bf16"),
    lambda: lowp.decode(np.broadcast_to(np.uint8(1), HUGE), "fp8_e4m3fn"),
    lambda: lowp.quantize(np.broadcast_to(np.float32(1), HUGE), "int8-channel"),
    lambda: lowp.quant_error(np.broadcast_to(np.float32(1), HUGE), "bf16"),
    lambda: lowp.range_study({"w": np.broadcast_to(np.float32(1), HUGE)}),
])
def test_a_copy_numpy_cannot_make_raises_memory_error(call):
    # A broadcast (stride 0) array must be copied to be read contiguously;
    # 4 TiB cannot be: NumPy's MemoryError, never a crash.
    with pytest.raises(MemoryError):
        call()


def test_no_input_and_nul_bytes_are_refused(tmp_path):
    for empty in ([], (), {}):
        with pytest.raises(ValueError, match="no input"):
            lowp.quant_error(empty, "bf16")
        with pytest.raises(ValueError, match="no input"):
            lowp.range_study(empty)
    good = str(tmp_path / "a.safetensors")
    lowp.quantize(np.zeros((2, 32), np.float32), "bf16")  # the module works
    for call in (lambda p: lowp.read_tensors(p), lambda p: lowp.quant_error(p, "bf16"),
                 lambda p: lowp.quant_error([p], "bf16")):
        with pytest.raises(ValueError, match="NUL"):
            call(good + "\0b")


@pytest.mark.skipif("asan" in os.environ.get("LD_PRELOAD", ""),
                    reason="AddressSanitizer's shadow memory does not fit an address-space limit")
def test_a_tensor_numpy_cannot_allocate_is_named(tmp_path):
    # 600 x 2^20 float32 (2.4 GiB, sparse on disk) read under a 4 GiB address
    # space limit: the file maps, its float32 copy cannot be allocated.
    path = tmp_path / "big.safetensors"
    n = 600 * 2**20
    header = json.dumps({"big.weight": {"dtype": "F32", "shape": [600, 2**20],
                                        "data_offsets": [0, 4 * n]}}).encode()
    with open(path, "wb") as f:
        f.write(len(header).to_bytes(8, "little") + header)
        f.truncate(8 + len(header) + 4 * n)
    code = ("import resource, sys, lowp\n"
            "resource.setrlimit(resource.RLIMIT_AS, (4 << 30, 4 << 30))\n"
            "try:\n"
            "    lowp.read_tensors(sys.argv[1])\n"
            "except MemoryError as e:\n"
            "    print('MemoryError:', e)\n")
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True,
                         env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"))
    assert "MemoryError:" in out.stdout, out.stdout + out.stderr
    assert "big.weight" in out.stdout and "[600, 1048576]" in out.stdout


def test_names_that_are_not_utf8_do_not_abort(tmp_path):
    path = os.path.join(os.fsencode(tmp_path), b"t\xff.npy")
    with open(path, "wb") as f:
        np.save(f, np.zeros((2, 32), np.float32))
    rows = lowp.quant_error(path, "bf16")["results"]
    assert rows[0]["tensor"] == "t\ufffd"


def test_seven_schemes_read_a_checkpoint_from_storage_once(tmp_path):
    # quant-error hands each chunk to every scheme: with the file evicted from
    # the page cache first, the bytes this process reads from storage
    # (/proc/self/io read_bytes) for seven schemes are about the file's size,
    # and the released batches leave the page cache.
    import struct

    rng = np.random.default_rng(0)
    path = tmp_path / "two.safetensors"
    arrays = [(rng.standard_normal((2048, 4096)) * 0.02).astype(np.float32) for _ in range(2)]
    header, offset = {}, 0
    for i, a in enumerate(arrays):
        header[f"layers.{i}.weight"] = {"dtype": "F32", "shape": list(a.shape),
                                        "data_offsets": [offset, offset + a.nbytes]}
        offset += a.nbytes
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text)
        for a in arrays:
            f.write(a.tobytes())
        f.flush()
        os.fsync(f.fileno())
    fd = os.open(path, os.O_RDONLY)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    os.close(fd)

    def read_bytes():
        with open("/proc/self/io") as io:
            return next(int(line.split()[1]) for line in io if line.startswith("read_bytes:"))

    before = read_bytes()
    lowp.quant_error(str(path), ["bf16", "fp8_e4m3fn", "int8-channel", "int4-g128", "nf4",
                                 "mxfp4", "q4_0"])
    read = read_bytes() - before
    if read == 0:
        pytest.skip("no storage reads accounted here (tmpfs, or no block-I/O accounting)")
    assert read <= 1.1 * os.path.getsize(path), read


# ------------------------------------------------------------ eval


def test_eval_with_a_gguf_file_is_the_commands_json(tmp_path):
    gguf = os.path.join(DATA, "ggml", "stories260K-Q4_K_M.gguf")
    tokens = lowp.sample(count=2, length=24, seed=4)
    ours = lowp.eval(tokens=tokens, weights="Q4_K_M", weights_file=[gguf], batch_tokens=24)
    assert [c["label"] for c in ours["candidates"]] == ["Q4_K_M", gguf]
    recipe, stored = ours["candidates"]
    assert stored["weights_file"] is True and recipe["weights_file"] is False
    # llama.cpp's file holds lowp's Q4_K_M values: the same outputs
    for key in ("kl_mean", "kl_max", "perplexity", "top1_agreement", "layer_relative_rmse"):
        assert recipe[key] == stored[key], key
    assert ours["batches"] == 2
    np.save(tmp_path / "tokens.npy", tokens)
    theirs = cli_json("eval", "--tokens", tmp_path / "tokens.npy", "--weights", "Q4_K_M",
                      "--weights-file", gguf, "--batch-tokens", "24")
    theirs["tokens"] = ours["tokens"]
    assert ours == theirs


def test_eval_refuses_what_the_model_cannot_take():
    with pytest.raises(ValueError, match="weights_file"):
        lowp.eval(weights_file=[""])
    with pytest.raises(ValueError, match="batch_tokens"):
        lowp.eval(batch_tokens=-1)
    with pytest.raises(ValueError, match="longer than .*max_position_embeddings"):
        lowp.eval(tokens=np.ones((1, 600), np.int32))
