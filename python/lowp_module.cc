// lowp._lowp: the C++ library for Python (pybind11). Every result is what
// the library computes, never a reimplementation: conversions run the SIMD
// kernels, and the reports (formats, quant_error, range_study, size, plan)
// are the `lowp` commands' JSON, run in-process through cli/capture.h, so
// they carry the same fields and the same checks of their options.
//
// NumPy inputs are read in place when their dtype and layout allow (float32,
// float16 or float64 and C-contiguous); kernels run with the GIL released.
// Errors raise ValueError (bad input or options) or OSError (files), with
// the library's message.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "cli/capture.h"
#include "cli/commands.h"
#include "formats/format.h"
#include "formats/packing.h"
#include "formats/reference.h"
#include "kernels/convert.h"
#include "nlohmann/json.hpp"
#include "quant/measure.h"
#include "quant/scheme.h"
#include "io/tensor.h"
#include "io/tensor_set.h"
#include "io/bundled.h"
#include "sizing/plan.h"

namespace py = pybind11;

namespace lowp {
namespace {

// InvalidArgument and its kin are the caller's input: ValueError; the rest
// (files not found, unreadable, unwritable) OSError.
[[noreturn]] void Raise(const absl::Status& status) {
  const std::string message(status.message());
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kUnimplemented:
      throw py::value_error(message);
    case absl::StatusCode::kInternal:
    case absl::StatusCode::kUnknown:
      throw std::runtime_error(message);
    default:
      PyErr_SetString(PyExc_OSError, message.c_str());
      throw py::error_already_set();
  }
}

void Check(const absl::Status& status) {
  if (!status.ok()) Raise(status);
}

template <typename T>
T Value(absl::StatusOr<T> value) {
  if (!value.ok()) Raise(value.status());
  return *std::move(value);
}

// JSON to Python through the json module: ints stay exact, null is None;
// text that is not UTF-8 (a file or tensor name) has its bad bytes replaced
// by U+FFFD, as the command's --json does, instead of throwing.
py::object ToPython(const nlohmann::json& j) {
  return py::module_::import("json").attr("loads")(
      j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
}

// A str, bytes or os.PathLike: a file name.
bool IsPath(const py::handle& h) {
  return py::isinstance<py::str>(h) || py::isinstance<py::bytes>(h) || py::hasattr(h, "__fspath__");
}
std::string PathText(const py::handle& h) {
  // The file system's bytes (os.fsencode), so names that are not UTF-8 work.
  std::string path = py::cast<std::string>(py::module_::import("os").attr("fsencode")(h));
  if (path.find('\0') != std::string::npos) {
    // C file names end at a NUL: "a.safetensors\0b" would open a.safetensors.
    throw py::value_error(absl::StrCat("path ", std::string(py::repr(h)),
                                       ": a file name cannot hold a NUL byte"));
  }
  return path;
}

// Keyword arguments as the command line's options: name_with_underscores
// -> --name-with-underscores=VALUE, a list or tuple as comma-separated
// values; True (Python's or NumPy's) -> the flag --name, False or None ->
// nothing. Flags go last, so that one given to an option that takes a value
// is reported as missing its value rather than taking the next option.
std::vector<std::string> Options(const py::kwargs& kwargs) {
  const py::object numpy_bool = py::module_::import("numpy").attr("bool_");
  std::vector<std::string> argv, flags;
  for (const auto& [key, value] : kwargs) {
    const std::string name = "--" + absl::StrReplaceAll(py::cast<std::string>(key), {{"_", "-"}});
    if (value.is_none()) continue;
    if (py::isinstance<py::bool_>(value) || py::isinstance(value, numpy_bool)) {
      if (py::cast<bool>(value)) flags.push_back(name);
      continue;
    }
    std::string text;
    if (py::isinstance<py::list>(value) || py::isinstance<py::tuple>(value)) {
      std::vector<std::string> items;
      for (const py::handle item : value) {
        items.push_back(IsPath(item) ? PathText(item) : std::string(py::str(item)));
      }
      text = absl::StrJoin(items, ",");
    } else {
      text = IsPath(value) ? PathText(value) : std::string(py::str(value));
    }
    argv.push_back(absl::StrCat(name, "=", text));
  }
  argv.insert(argv.end(), flags.begin(), flags.end());
  return argv;
}

nlohmann::json RunCommand(cli::Command command, std::vector<std::string> argv,
                          std::optional<std::vector<TensorView>> tensors = {}) {
  absl::StatusOr<nlohmann::json> j;
  {
    py::gil_scoped_release release;
    j = cli::RunForJson(command, std::move(argv), std::move(tensors));
  }
  return Value(std::move(j));
}

// `object` as a C-contiguous, aligned array in native byte order: itself
// when it is one, else a copy (a list, a scalar, a big-endian or strided
// array). ValueError naming `what` when NumPy cannot make an array of it.
py::array NativeArray(const py::object& object, const std::string& what) {
  py::array array = py::array::ensure(object);
  if (!array) throw py::value_error(absl::StrCat(what, ": not an array of numbers"));
  if (!py::cast<bool>(array.dtype().attr("isnative"))) {
    array = array.attr("astype")(array.dtype().attr("newbyteorder")("="));
  }
  if (!(array.flags() & py::array::c_style) ||
      !(array.flags() & py::detail::npy_api::NPY_ARRAY_ALIGNED_)) {
    // A contiguous, aligned copy; NumPy's own exception (MemoryError for a
    // copy it cannot allocate) when it cannot make one.
    array = py::module_::import("numpy").attr("ascontiguousarray")(array);
  }
  return array;
}

bool IsHalf(const py::array& a) { return a.dtype().kind() == 'f' && a.itemsize() == 2; }

// A floating NumPy array as a tensor, read in place when it is float32,
// float16 or float64, native, C-contiguous and aligned; the array (or its
// copy) is kept alive in `keep`. Other dtypes are a ValueError, as the
// command skips tensors that are not floating.
TensorView ArrayView(const std::string& name, const py::object& object,
                     std::vector<py::array>& keep) {
  py::array array = NativeArray(object, name);
  DType dtype;
  if (py::isinstance<py::array_t<float>>(array)) {
    dtype = DType::kF32;
  } else if (py::isinstance<py::array_t<double>>(array)) {
    dtype = DType::kF64;
  } else if (IsHalf(array)) {
    dtype = DType::kF16;
  } else {
    throw py::value_error(absl::StrCat(name, ": want a float16, float32 or float64 array (got ",
                                       std::string(py::str(array.dtype())), ")"));
  }
  keep.push_back(array);
  TensorView view;
  view.name = name;
  view.dtype = dtype;
  view.shape.assign(array.shape(), array.shape() + array.ndim());
  view.bytes = std::span<const uint8_t>(static_cast<const uint8_t*>(array.data()),
                                        static_cast<size_t>(array.nbytes()));
  view.file = "(array)";
  return view;
}

// The input of quant_error and range_study: a path or a list of paths (on
// the command line), a dict of name -> array, or anything else NumPy makes
// an array of (passed in memory as the tensor "array").
std::optional<std::vector<TensorView>> Inputs(const py::object& data,
                                              std::vector<std::string>& argv,
                                              std::vector<py::array>& keep) {
  if (IsPath(data)) {
    argv.push_back(PathText(data));
    return std::nullopt;
  }
  if ((py::isinstance<py::list>(data) || py::isinstance<py::tuple>(data) ||
       py::isinstance<py::dict>(data)) &&
      py::len(data) == 0) {
    throw py::value_error(
        "no input: give a checkpoint path, a list of paths, an array or a dict of arrays");
  }
  if (py::isinstance<py::list>(data) || py::isinstance<py::tuple>(data)) {
    bool paths = py::len(data) > 0;
    for (const py::handle item : data) paths = paths && IsPath(item);
    if (paths) {
      for (const py::handle item : data) argv.push_back(PathText(item));
      return std::nullopt;
    }
  }
  if (py::isinstance<py::dict>(data)) {
    std::vector<TensorView> views;
    for (const auto& [name, array] : py::cast<py::dict>(data)) {
      views.push_back(ArrayView(py::str(name), py::reinterpret_borrow<py::object>(array), keep));
    }
    return views;
  }
  return std::vector<TensorView>{ArrayView("array", data, keep)};
}

py::object QuantError(const py::object& data, const py::object& scheme, const py::kwargs& kwargs) {
  py::kwargs options = kwargs;
  options["scheme"] = scheme;
  std::vector<std::string> argv = Options(options);
  std::vector<py::array> keep;
  std::optional<std::vector<TensorView>> tensors = Inputs(data, argv, keep);
  return ToPython(RunCommand(cli::QuantErrorCommand, std::move(argv), std::move(tensors)));
}

py::object RangeStudy(const py::object& data, const py::kwargs& kwargs) {
  std::vector<std::string> argv = Options(kwargs);
  std::vector<py::array> keep;
  std::optional<std::vector<TensorView>> tensors = Inputs(data, argv, keep);
  return ToPython(RunCommand(cli::RangeCommand, std::move(argv), std::move(tensors)));
}

ConvertOptions ReadConvertOptions(const std::optional<std::string>& rounding,
                                  const std::optional<std::string>& overflow,
                                  const std::optional<std::string>& subnormals,
                                  const std::optional<std::string>& nan, uint64_t seed) {
  ConvertOptions o;
  if (rounding) o.rounding = Value(ParseRounding(*rounding));
  if (overflow) o.overflow = Value(ParseOverflow(*overflow));
  if (subnormals) o.subnormals = Value(ParseSubnormals(*subnormals));
  if (nan) o.nan = Value(ParseNanPolicy(*nan));
  o.seed = seed;
  return o;
}

// The NumPy dtype that holds one code of `f` unpacked.
py::dtype CodeDtype(const Format& f) {
  if (f.bits <= 8) return py::dtype::of<uint8_t>();
  if (f.bits <= 16) return py::dtype::of<uint16_t>();
  return py::dtype::of<uint32_t>();
}

// float32 or float16 values -> codes of `to`, one per element (uint8,
// uint16 or uint32 by the format's width), or with packed=True (4-bit
// formats) in the storage layout, two codes per byte, low nibble first.
py::array Convert(const py::object& input, const std::string& to,
                  std::optional<std::string> rounding, std::optional<std::string> overflow,
                  std::optional<std::string> subnormals, std::optional<std::string> nan,
                  uint64_t seed, bool packed) {
  const Format format = Value(FindFormat(to));
  const ConvertOptions options = ReadConvertOptions(rounding, overflow, subnormals, nan, seed);
  const bool nibbles = format.storage_bits() == 4;
  if (packed && !nibbles) {
    throw py::value_error(absl::StrCat("packed=True is for 4-bit formats, not ", format.name));
  }
  const py::array values = NativeArray(input, "values");
  const bool half = IsHalf(values);
  if (!half && !py::isinstance<py::array_t<float>>(values)) {
    throw py::value_error(absl::StrCat(
        "convert takes float32 or float16 values (got ", std::string(py::str(values.dtype())),
        "); convert explicitly first, e.g. .astype(np.float32), knowing that "
        "float64 would then be rounded twice"));
  }
  const size_t n = static_cast<size_t>(values.size());
  const size_t storage = StorageBytes(format, n);
  py::array out =
      packed ? py::array(py::dtype::of<uint8_t>(),
                         std::vector<py::ssize_t>{static_cast<py::ssize_t>(storage)})
             : py::array(CodeDtype(format),
                         std::vector<py::ssize_t>(values.shape(), values.shape() + values.ndim()));
  uint8_t* dst = static_cast<uint8_t*>(out.mutable_data());
  absl::Status status;
  {
    py::gil_scoped_release release;
    // Unpacked nibbles are encoded into their storage first, then split.
    std::vector<uint8_t> staging(nibbles && !packed ? storage : 0);
    const std::span<uint8_t> bytes =
        staging.empty() ? std::span<uint8_t>(dst, storage) : std::span<uint8_t>(staging);
    if (half) {
      status =
          EncodeArray16(*FindFormat("fp16"),
                        std::span<const uint16_t>(static_cast<const uint16_t*>(values.data()), n),
                        format, bytes, options);
    } else {
      status =
          EncodeArray(format, std::span<const float>(static_cast<const float*>(values.data()), n),
                      bytes, options);
    }
    for (size_t i = 0; status.ok() && i < staging.size(); ++i) {
      dst[2 * i] = staging[i] & 0xF;
      if (2 * i + 1 < n) dst[2 * i + 1] = staging[i] >> 4;
    }
  }
  Check(status);
  return out;
}

// Codes one per element, `itemsize` bytes each (native order), into the
// storage layout of `format` at `out` (zeroed). InvalidArgument naming the
// first code wider than the format.
template <typename In>
absl::Status ToStorageAs(const Format& format, const In* in, size_t n, uint8_t* out) {
  const uint64_t mask = format.code_mask();
  const int unit = format.storage_bits();
  for (size_t i = 0; i < n; ++i) {
    const uint64_t v = in[i];
    if (v > mask) {
      return absl::InvalidArgumentError(absl::StrCat("code ", v, " at index ", i, " is wider than ",
                                                     format.name, "'s ", format.bits, " bits"));
    }
    switch (unit) {
      case 4:
        out[i / 2] |= static_cast<uint8_t>(v << (4 * (i % 2)));
        break;
      case 8:
        out[i] = static_cast<uint8_t>(v);
        break;
      case 16:
        reinterpret_cast<uint16_t*>(out)[i] = static_cast<uint16_t>(v);
        break;
      default:
        reinterpret_cast<uint32_t*>(out)[i] = static_cast<uint32_t>(v);
    }
  }
  return absl::OkStatus();
}

absl::Status ToStorage(const Format& format, const void* in, size_t itemsize, size_t n,
                       uint8_t* out) {
  switch (itemsize) {
    case 1:
      return ToStorageAs(format, static_cast<const uint8_t*>(in), n, out);
    case 2:
      return ToStorageAs(format, static_cast<const uint16_t*>(in), n, out);
    case 4:
      return ToStorageAs(format, static_cast<const uint32_t*>(in), n, out);
    default:
      return ToStorageAs(format, static_cast<const uint64_t*>(in), n, out);
  }
}

// Codes of `fmt` -> float32 values, exactly. Codes come one per element in
// an unsigned integer array (any width that holds them), or with packed=True
// (4-bit formats) as the storage layout holding `count` codes (default: two
// per byte).
py::array Decode(const py::object& input, const std::string& fmt, bool packed,
                 std::optional<size_t> count) {
  const Format format = Value(FindFormat(fmt));
  const bool nibbles = format.storage_bits() == 4;
  const py::array codes = NativeArray(input, "codes");
  if (codes.dtype().kind() != 'u') {
    throw py::value_error(absl::StrCat("decode takes unsigned integer codes (got ",
                                       std::string(py::str(codes.dtype())), ")"));
  }
  const size_t itemsize = static_cast<size_t>(codes.itemsize());
  const std::span<const uint8_t> input_bytes(static_cast<const uint8_t*>(codes.data()),
                                             static_cast<size_t>(codes.nbytes()));
  size_t n = static_cast<size_t>(codes.size());
  std::vector<py::ssize_t> shape(codes.shape(), codes.shape() + codes.ndim());
  if (packed) {
    if (!nibbles || itemsize != 1) {
      throw py::value_error("packed=True is for 4-bit formats, codes as uint8 storage bytes");
    }
    n = count.value_or(2 * input_bytes.size());
    if (StorageBytes(format, n) != input_bytes.size()) {
      throw py::value_error(
          absl::StrCat(n, " codes do not fill ", input_bytes.size(), " bytes of storage"));
    }
    shape = {static_cast<py::ssize_t>(n)};
  }
  py::array_t<float> out(shape);
  absl::Status status;
  {
    py::gil_scoped_release release;
    // One code per element in a width other than the storage's: checked and
    // moved into the storage layout.
    std::vector<uint8_t> storage;
    std::span<const uint8_t> bytes = input_bytes;
    if (!packed && (nibbles || itemsize * 8 != static_cast<size_t>(format.storage_bits()))) {
      storage.assign(StorageBytes(format, n), 0);
      status = ToStorage(format, codes.data(), itemsize, n, storage.data());
      bytes = storage;
    }
    if (status.ok()) {
      status =
          DecodeArray(format, bytes, std::span<float>(static_cast<float*>(out.mutable_data()), n));
    }
  }
  Check(status);
  return out;
}

// An array quantized by `scheme` and dequantized (what `lowp quantize`
// writes), as float32 of the same shape; rows are the last axis.
py::array Quantize(const py::object& data, const std::string& scheme_name) {
  std::unique_ptr<Scheme> scheme = Value(ParseScheme(scheme_name));
  std::vector<py::array> keep;
  const TensorView view = ArrayView("array", data, keep);
  py::array_t<float> out(std::vector<py::ssize_t>(view.shape.begin(), view.shape.end()));
  float* dst = static_cast<float*>(out.mutable_data());
  absl::Status status;
  {
    py::gil_scoped_release release;
    size_t done = 0;
    QuantReport report;
    status = QuantizeTensor(
        view, *scheme, {},
        [&](std::span<const float> values) {
          std::memcpy(dst + done, values.data(), values.size() * sizeof(float));
          done += values.size();
          return absl::OkStatus();
        },
        &report);
  }
  Check(status);
  return out;
}

// Every floating tensor of a checkpoint as float32 (exact for fp8, fp16,
// bf16, float32), by name; `tensors` takes globs.
py::dict ReadTensors(const py::object& path, const std::string& tensors) {
  const TensorSet set = Value(TensorSet::Open(PathText(path)));
  py::dict out;
  for (const TensorView& t : set.tensors()) {
    if (!IsFloating(t.dtype) || !MatchesPattern(tensors, t.name)) continue;
    py::array_t<float> a;
    try {
      a = py::array_t<float>(std::vector<py::ssize_t>(t.shape.begin(), t.shape.end()));
    } catch (py::error_already_set& e) {
      const std::string numpy = e.what();
      PyErr_SetString(PyExc_MemoryError,
                      absl::StrCat(t.file, ": tensor \"", t.name, "\" of shape [",
                                   absl::StrJoin(t.shape, ", "), "]: cannot allocate its ",
                                   t.elements(), " float32 values (", numpy, ")")
                          .c_str());
      throw py::error_already_set();
    }
    absl::Status status;
    {
      py::gil_scoped_release release;
      status = ReadAsFloat32(
          t, 0,
          std::span<float>(static_cast<float*>(a.mutable_data()), static_cast<size_t>(a.size())));
    }
    if (status.ok()) status = set.CheckIntact();
    Check(status);
    out[py::str(t.name)] = a;
  }
  return out;
}

}  // namespace
}  // namespace lowp

PYBIND11_MODULE(_lowp, m) {
  using namespace lowp;
  m.doc() = "lowp: low-precision numerics for large-model work (the C++ library's bindings)";
  m.def(
      "formats", [] { return ToPython(RunCommand(cli::FormatsCommand, {})); },
      "The format catalog: `lowp formats --json`.");
  m.def(
      "schemes", [] { return ToPython(RunCommand(cli::SchemesCommand, {})); },
      "The quantization schemes: `lowp schemes --json`.");
  m.def(
      "devices", [] { return ToPython(RunCommand(cli::DevicesCommand, {})); },
      "The device catalog: `lowp devices --json`.");
  m.def("convert", &Convert, py::arg("values"), py::arg("to"), py::kw_only(),
        py::arg("rounding") = py::none(), py::arg("overflow") = py::none(),
        py::arg("subnormals") = py::none(), py::arg("nan") = py::none(), py::arg("seed") = 0,
        py::arg("packed") = false,
        "float32 or float16 values -> codes of format `to` (uint8/uint16/uint32, one per "
        "element; packed=True: 4-bit codes two per byte).");
  m.def("decode", &Decode, py::arg("codes"), py::arg("fmt"), py::kw_only(),
        py::arg("packed") = false, py::arg("count") = py::none(),
        "Codes of format `fmt` -> float32 values, exactly.");
  m.def("quant_error", &QuantError, py::arg("data"), py::arg("scheme"),
        "`lowp quant-error --json` on a checkpoint path (or list of paths), an array, or a "
        "dict of arrays; keyword arguments are the command's options (tensors='*.q_proj*', "
        "summary=True, relative_floor=1e-3, histogram=True, threads=0).");
  m.def("range_study", &RangeStudy, py::arg("data"),
        "`lowp range --json` on a checkpoint path, an array or a dict of arrays (formats=[...], "
        "fraction=0.999, tensors=...).");
  m.def("quantize", &Quantize, py::arg("array"), py::arg("scheme"),
        "The array quantized by `scheme` and dequantized, as float32.");
  m.def(
      "size",
      [](const py::kwargs& kwargs) {
        return ToPython(RunCommand(cli::SizeCommand, Options(kwargs)));
      },
      "`lowp size --json` with the command's options as keyword arguments (model=..., "
      "mode=..., device=..., seq=..., compare_formats=True, ...).");
  m.def(
      "plan",
      [](const py::kwargs& kwargs) {
        return ToPython(RunCommand(cli::PlanCommand, Options(kwargs)));
      },
      "`lowp plan --json` with the command's options as keyword arguments (model=..., "
      "mode=..., formats=[...], device=[...], tensors=[paths], html='report.html', ...).");
  m.def(
      "bundled_checkpoint", [] { return Value(BundledCheckpoint()); },
      "Path of the bundled real checkpoint (stories260K in float32; $LOWP_DATA_DIR overrides).");
  m.def("read_tensors", &ReadTensors, py::arg("path"), py::arg("tensors") = "",
        "The floating tensors of a checkpoint as float32 arrays, by name (tensors: globs).");
}
