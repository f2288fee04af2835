// lowp._lowp: the C++ library for Python (pybind11), a thin shell over
// api/: each function is one table of parameters (signature.h) whose
// converters (arguments.h) fill the same options struct the command line
// fills; the same api function runs with the GIL released, and its result
// comes back as the dict of its ToJson (the command's --json), built from
// the JSON value directly. Conversions run the SIMD kernels.
//
// Defaults are written here once, read from the default-constructed options
// structs where there is one; the module reports every signature as
// _signatures, which lowp/__init__.py gives the public functions and
// lowp/_stub.py the .pyi stub.
//
// NumPy inputs are read in place when their dtype and layout allow (float32,
// float16 or float64 and C-contiguous). Errors raise TypeError or ValueError
// naming the argument, or OSError (files), with the library's message.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
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
#include "api/api.h"
#include "eval/sample.h"
#include "formats/format.h"
#include "formats/packing.h"
#include "formats/reference.h"
#include "io/bundled.h"
#include "io/tensor.h"
#include "io/tensor_set.h"
#include "nlohmann/json.hpp"
#include "python/arguments.h"
#include "python/signature.h"

namespace lowp::python {
namespace {

constexpr Kind kPositional = Kind::kPositional;
constexpr Kind kKeyword = Kind::kKeyword;

// The annotations (lowp/__init__.py and the stub define the aliases).
constexpr char kDict[] = "dict[str, Any]";
constexpr char kFloatArray[] = "NDArray[np.float32]";
constexpr char kThreadsType[] = "int | None";
// sample()'s defaults: one short sequence (the command's are 8 of 128).
constexpr int64_t kSampleCount = 1, kSampleLength = 64;
// threads: 0 (or None) is every CPU the process may run on.
const py::object EveryCpu() { return py::int_(0); }

// A JSON value as Python objects, directly (no text in between): integers
// stay exact, null is None, and so is a non-finite double (JSON has none;
// the command prints null); text that is not UTF-8 (a file or tensor name)
// has its bad bytes replaced by U+FFFD, as the command's --json does.
py::object ToPython(const nlohmann::json& j) {
  switch (j.type()) {
    case nlohmann::json::value_t::null:
    case nlohmann::json::value_t::discarded:
      return py::none();
    case nlohmann::json::value_t::boolean:
      return py::bool_(j.get<bool>());
    case nlohmann::json::value_t::number_integer:
      return py::int_(j.get<int64_t>());
    case nlohmann::json::value_t::number_unsigned:
      return py::int_(j.get<uint64_t>());
    case nlohmann::json::value_t::number_float: {
      const double v = j.get<double>();
      return std::isfinite(v) ? py::object(py::float_(v)) : py::none();
    }
    case nlohmann::json::value_t::string: {
      const std::string& text = j.get_ref<const std::string&>();
      return py::reinterpret_steal<py::object>(
          PyUnicode_DecodeUTF8(text.data(), static_cast<py::ssize_t>(text.size()), "replace"));
    }
    case nlohmann::json::value_t::array: {
      py::list list;
      for (const nlohmann::json& item : j) list.append(ToPython(item));
      return list;
    }
    case nlohmann::json::value_t::object: {
      py::dict dict;
      for (const auto& [key, value] : j.items()) {
        dict[py::reinterpret_steal<py::object>(PyUnicode_DecodeUTF8(
            key.data(), static_cast<py::ssize_t>(key.size()), "replace"))] = ToPython(value);
      }
      return dict;
    }
    case nlohmann::json::value_t::binary:
      break;
  }
  throw std::runtime_error("a JSON value lowp does not write");
}

// Runs `call` with the GIL released; its result as the dict of its JSON.
template <typename Result>
py::object Run(const std::function<absl::StatusOr<Result>()>& call) {
  absl::StatusOr<Result> result;
  {
    py::gil_scoped_release release;
    result = call();
  }
  return ToPython(api::ToJson(Value(std::move(result))));
}

// ------------------------------------------------- shared argument groups

// The input of quant_error, update_error and range_study: a path or a list
// of paths, a dict of name -> array, or anything else NumPy makes a
// floating array of (the tensor "array"). Arrays are viewed in place, kept
// alive in `keep`.
api::TensorInputs TensorData(const Arg& a, std::vector<py::array>& keep) {
  constexpr const char* kWant = "a checkpoint path, a list of paths, an array or a dict of arrays";
  api::TensorInputs inputs;
  if (IsPath(a.value)) {
    inputs.files.push_back(Path(a));
    return inputs;
  }
  const bool sequence = py::isinstance<py::list>(a.value) || py::isinstance<py::tuple>(a.value);
  if ((sequence || py::isinstance<py::dict>(a.value)) && py::len(a.value) == 0) {
    WrongValue(a, absl::StrCat("no input: give ", kWant));
  }
  if (sequence) {
    bool paths = false;
    for (const py::handle item : a.value) paths = paths || IsPath(item);
    if (paths) {  // then every item is one
      size_t i = 0;
      for (const py::handle item : a.value) inputs.files.push_back(Path(a.Item(i++, item)));
      return inputs;
    }
  }
  if (py::isinstance<py::dict>(a.value)) {
    for (const auto& [key, array] : py::reinterpret_borrow<py::dict>(a.value)) {
      if (!py::isinstance<py::str>(key)) WrongType({a.name, key}, "a str for each tensor name");
      const std::string name = Text({absl::StrCat(a.name, " key"), key});
      inputs.arrays.push_back(FloatTensor(
          {absl::StrCat(a.name, "[", std::string(py::repr(key)), "]"), array}, name, keep));
    }
    return inputs;
  }
  const py::array array = NativeArray(a);
  if (array.dtype().kind() == 'O') WrongType(a, kWant);  // None, or objects NumPy cannot read
  inputs.arrays.push_back(FloatTensor({a.name, array}, "array", keep));
  return inputs;
}

// The serving job beside the weights (`lowp mix --device`'s, and size's).
template <class State, class Get>
void JobParams(Function<State>& f, Get get) {
  const SizingOptions d;
  f.Optional(kKeyword, "kv", "str | None", py::none(), [get](State& s, const Arg& a) {
    get(s).kv = Text(a);
    if (get(s).kv.empty()) WrongValue(a, "is empty");
  });
  f.Optional(kKeyword, "seq", "int", py::int_(d.seq),
             [get](State& s, const Arg& a) { IntInto(get(s).seq, a); });
  f.Optional(kKeyword, "batch", "int", py::int_(d.batch),
             [get](State& s, const Arg& a) { IntInto(get(s).batch, a); });
  f.Optional(kKeyword, "prefill_tokens", "int", py::int_(d.prefill_tokens),
             [get](State& s, const Arg& a) { IntInto(get(s).prefill_tokens, a); });
  f.Optional(kKeyword, "buffers", "int | str", py::int_(d.buffers_bytes),
             [get](State& s, const Arg& a) { get(s).buffers_bytes = ByteCount(a); });
  f.Optional(kKeyword, "headroom", "float", py::float_(d.headroom),
             [get](State& s, const Arg& a) { get(s).headroom = Real(a); });
}

// The memory model's options, as `lowp size`'s (docs/sizing.md); the job's
// model and mode come before them.
template <class State, class Get>
void SizingParams(Function<State>& f, Get get) {
  const SizingOptions d;
  // Empty: the mode's default (docs/sizing.md).
  for (const auto& slot : {std::pair{"weights", &SizingOptions::weights},
                           {"embed", &SizingOptions::embed},
                           {"grads", &SizingOptions::grads},
                           {"master", &SizingOptions::master},
                           {"opt_state", &SizingOptions::opt_state}}) {
    std::string SizingOptions::*field = slot.second;
    f.Optional(kKeyword, slot.first, "str | None", py::none(),
               [get, field](State& s, const Arg& a) {
                 get(s).*field = Text(a);
                 if ((get(s).*field).empty()) WrongValue(a, "is empty");
               });
  }
  f.Optional(kKeyword, "optimizer", "str", py::str(std::string(OptimizerName(d.optimizer))),
             [get](State& s, const Arg& a) { get(s).optimizer = Choice(a, ParseOptimizer); });
  f.Optional(kKeyword, "activation_bytes", "int", py::int_(d.activation_bytes),
             [get](State& s, const Arg& a) { IntInto(get(s).activation_bytes, a); });
  JobParams(f, get);
  f.Optional(kKeyword, "dp", "int", py::int_(d.dp),
             [get](State& s, const Arg& a) { IntInto(get(s).dp, a); });
  f.Optional(kKeyword, "tp", "int", py::int_(d.tp),
             [get](State& s, const Arg& a) { IntInto(get(s).tp, a); });
  f.Optional(kKeyword, "pp", "int", py::int_(d.pp),
             [get](State& s, const Arg& a) { IntInto(get(s).pp, a); });
  f.Optional(kKeyword, "zero", "int", py::int_(d.zero),
             [get](State& s, const Arg& a) { IntInto(get(s).zero, a); });
  f.Optional(kKeyword, "sequence_parallel", "bool", py::bool_(d.sequence_parallel),
             [get](State& s, const Arg& a) { get(s).sequence_parallel = Bool(a); });
  f.Optional(kKeyword, "recompute", "str", py::str(std::string(RecomputeName(d.recompute))),
             [get](State& s, const Arg& a) { get(s).recompute = Choice(a, ParseRecompute); });
  f.Optional(kKeyword, "flash_attention", "bool", py::bool_(d.flash_attention),
             [get](State& s, const Arg& a) { get(s).flash_attention = Bool(a); });
  // The command line's --no-flash-attention.
  f.Optional(kKeyword, "no_flash_attention", "bool", py::bool_(!d.flash_attention),
             [get](State& s, const Arg& a) { get(s).flash_attention = !Bool(a); });
  f.Optional(kKeyword, "offload", "str | None", py::none(), [get](State& s, const Arg& a) {
    const std::string what = Text(a);
    if (what != "optimizer") {
      WrongValue(a, absl::StrCat("'", what, "': only 'optimizer' can be offloaded"));
    }
    get(s).offload_optimizer = true;
  });
  f.Optional(kKeyword, "lora_rank", "int", py::int_(d.lora_rank),
             [get](State& s, const Arg& a) { IntInto(get(s).lora_rank, a); });
  f.Optional(kKeyword, "lora_targets", "Names | None", py::none(),
             [get](State& s, const Arg& a) { get(s).lora_targets = Names(a); });
}

// The tokens of eval, imatrix and mix (each of mix's two sets with its
// `prefix`): tokens, sample, seed, text, text_file, tokenizer, ctx, chunks;
// defaults those of `d`.
template <class State, class Get>
void TokenParams(Function<State>& f, const std::string& prefix, Get get,
                 const api::TokenOptions& d) {
  f.Optional(kKeyword, prefix + "tokens", "ArrayLike | FilePath | None", py::none(),
             [get](State& s, const Arg& a) {
               if (IsPath(a.value)) {
                 get(s).tokens_file = Path(a);
               } else {
                 bool one_d = false;
                 get(s).token_array = Tokens(a, &one_d);
               }
             });
  f.Optional(kKeyword, prefix + "sample", "str | tuple[int, int]", py::str(d.sample),
             [get](State& s, const Arg& a) {
               if (py::isinstance<py::tuple>(a.value)) {
                 if (py::len(a.value) != 2) WrongValue(a, "want a tuple (N, LEN)");
                 const py::tuple t = py::reinterpret_borrow<py::tuple>(a.value);
                 get(s).sample = absl::StrCat(Int<int64_t>(a.Item(0, t[0])), ":",
                                              Int<int64_t>(a.Item(1, t[1])));
               } else if (py::isinstance<py::str>(a.value)) {
                 get(s).sample = Text(a);
               } else {
                 WrongType(a, "a str 'N:LEN' or a tuple (N, LEN)");
               }
             });
  f.Optional(kKeyword, prefix + "seed", "int", py::int_(d.seed),
             [get](State& s, const Arg& a) { IntInto(get(s).seed, a); });
  f.Optional(kKeyword, prefix + "text", "str | None", py::none(),
             [get](State& s, const Arg& a) { get(s).text = Text(a); });
  f.Optional(kKeyword, prefix + "text_file", "FilePath | None", py::none(),
             [get](State& s, const Arg& a) { get(s).text_file = Path(a); });
  f.Optional(kKeyword, prefix + "tokenizer", "FilePath | None", py::none(),
             [get](State& s, const Arg& a) { get(s).tokenizer = Path(a); });
  f.Optional(kKeyword, prefix + "ctx", "int", py::int_(d.ctx),
             [get](State& s, const Arg& a) { IntInto(get(s).ctx, a); });
  f.Optional(kKeyword, prefix + "chunks", "int", py::int_(d.chunks),
             [get](State& s, const Arg& a) { IntInto(get(s).chunks, a); });
}

// Accepted and ignored, as the command line's --quiet (Python prints no
// progress).
template <class State>
void QuietParam(Function<State>& f) {
  f.Optional(kKeyword, "quiet", "bool", py::bool_(false),
             [](State&, const Arg& a) { (void)Bool(a); });
}

// A model (a Hugging Face directory or config.json; None: the bundled one)
// and the tensor files that override its own.
template <class State, class GetModel, class GetTensors>
void ModelParams(Function<State>& f, GetModel model, GetTensors tensors) {
  f.Optional(kKeyword, "model", "FilePath | None", py::none(),
             [model](State& s, const Arg& a) { model(s) = ModelPath(a); });
  f.Optional(kKeyword, "tensors", "FilePaths | None", py::none(),
             [tensors](State& s, const Arg& a) { tensors(s) = Paths(a); });
}

template <class State, class Get>
void ThreadsParam(Function<State>& f, Get get) {
  f.Optional(kKeyword, "threads", kThreadsType, EveryCpu(),
             [get](State& s, const Arg& a) { get(s) = Threads(a); });
}

// What quantize_model and model_quant_error share: imatrix, the calib_
// tokens, summary, threads, quiet.
template <class Options>
void ModelRunParams(Function<Options>& f, const Options& d) {
  f.Optional(kKeyword, "imatrix", "FilePath | None", py::none(),
             [](Options& o, const Arg& a) { o.imatrix = Path(a); });
  TokenParams(
      f, "calib_", [](Options& o) -> api::TokenOptions& { return o.calibration; }, d.calibration);
  f.Optional(kKeyword, "summary", "bool", py::bool_(d.summary),
             [](Options& o, const Arg& a) { o.summary = Bool(a); });
  ThreadsParam(f, [](Options& o) -> int& { return o.threads; });
  QuietParam(f);
}

// ------------------------------------------------------- values and codes

// The options of a conversion: `to` (or `fmt`), rounding, overflow,
// subnormals, nan, seed, threads.
struct Conversion {
  py::array values;
  std::optional<Format> format;
  ConvertOptions options;
  bool packed = false;
  int threads = 0;
};

void ConversionParams(Function<Conversion>& f, const char* values_type, const char* format_name,
                      bool packed) {
  const ConvertOptions d;
  f.Required(kPositional, "values", values_type,
             [](Conversion& c, const Arg& a) { c.values = NativeArray(a); });
  f.Required(kPositional, format_name, "str",
             [](Conversion& c, const Arg& a) { c.format = ValueFor(a, FindFormat(Text(a))); });
  f.Optional(kKeyword, "rounding", "str", py::str(std::string(RoundingName(d.rounding))),
             [](Conversion& c, const Arg& a) { c.options.rounding = Choice(a, ParseRounding); });
  f.Optional(kKeyword, "overflow", "str", py::str(std::string(OverflowName(d.overflow))),
             [](Conversion& c, const Arg& a) { c.options.overflow = Choice(a, ParseOverflow); });
  f.Optional(
      kKeyword, "subnormals", "str", py::str(std::string(SubnormalsName(d.subnormals))),
      [](Conversion& c, const Arg& a) { c.options.subnormals = Choice(a, ParseSubnormals); });
  f.Optional(kKeyword, "nan", "str", py::str(std::string(NanPolicyName(d.nan))),
             [](Conversion& c, const Arg& a) { c.options.nan = Choice(a, ParseNanPolicy); });
  f.Optional(kKeyword, "seed", "int", py::int_(d.seed),
             [](Conversion& c, const Arg& a) { IntInto(c.options.seed, a); });
  if (packed) {
    f.Optional(kKeyword, "packed", "bool", py::bool_(false),
               [](Conversion& c, const Arg& a) { c.packed = Bool(a); });
  }
  ThreadsParam(f, [](Conversion& c) -> int& { return c.threads; });
}

py::dtype CodeDtype(const Format& f) {
  switch (CodeBytes(f)) {
    case 1:
      return py::dtype::of<uint8_t>();
    case 2:
      return py::dtype::of<uint16_t>();
    default:
      return py::dtype::of<uint32_t>();
  }
}

// float32 or float16 values -> codes, one per element (uint8, uint16 or
// uint32 by the format's width), or packed (4-bit formats) in the storage
// layout, two codes per byte, low nibble first.
py::array Encode(const Conversion& c) {
  const Format& format = *c.format;
  if (c.packed && format.storage_bits() != 4) {
    throw py::value_error(absl::StrCat("packed=True is for 4-bit formats, not ", format.name));
  }
  const bool half = IsHalf(c.values);
  if (!half && !py::isinstance<py::array_t<float>>(c.values)) {
    throw py::value_error(
        absl::StrCat("values: convert takes float32 or float16 values (got ",
                     std::string(py::str(c.values.dtype())),
                     "); convert explicitly first, e.g. .astype(np.float32), knowing that "
                     "float64 would then be rounded twice"));
  }
  const size_t n = static_cast<size_t>(c.values.size());
  py::array out =
      c.packed
          ? py::array(py::dtype::of<uint8_t>(),
                      std::vector<py::ssize_t>{static_cast<py::ssize_t>(StorageBytes(format, n))})
          : py::array(CodeDtype(format), std::vector<py::ssize_t>(
                                             c.values.shape(), c.values.shape() + c.values.ndim()));
  const std::span<uint8_t> bytes(static_cast<uint8_t*>(out.mutable_data()),
                                 static_cast<size_t>(out.nbytes()));
  absl::Status status;
  {
    py::gil_scoped_release release;
    status =
        half ? api::EncodeHalfValues(
                   std::span<const uint16_t>(static_cast<const uint16_t*>(c.values.data()), n),
                   format, c.options, c.packed, bytes, c.threads)
             : api::EncodeValues(
                   format, std::span<const float>(static_cast<const float*>(c.values.data()), n),
                   c.options, c.packed, bytes, c.threads);
  }
  Check(status);
  return out;
}

// Codes of `format` (unsigned integers, one per element; or with `packed`
// the storage bytes holding `count` codes, default two per byte) -> float32
// values, exactly.
py::array DecodeCodes(const py::array& codes, const Format& format, bool packed,
                      std::optional<size_t> count, int threads) {
  if (codes.dtype().kind() != 'u') {
    throw py::value_error(absl::StrCat("codes: decode takes unsigned integer codes (got ",
                                       std::string(py::str(codes.dtype())), ")"));
  }
  const size_t itemsize = static_cast<size_t>(codes.itemsize());
  size_t n = static_cast<size_t>(codes.size());
  std::vector<py::ssize_t> shape(codes.shape(), codes.shape() + codes.ndim());
  if (packed) {
    if (format.storage_bits() != 4 || itemsize != 1) {
      throw py::value_error("packed=True is for 4-bit formats, codes as uint8 storage bytes");
    }
    const size_t bytes = static_cast<size_t>(codes.nbytes());
    n = count.value_or(2 * bytes);
    if (StorageBytes(format, n) != bytes) {
      throw py::value_error(
          absl::StrCat("count: ", n, " codes do not fill ", bytes, " bytes of storage"));
    }
    shape = {static_cast<py::ssize_t>(n)};
  }
  py::array_t<float> out(shape);
  absl::Status status;
  {
    py::gil_scoped_release release;
    status =
        api::DecodeCodes(format, codes.data(), itemsize, n, packed,
                         std::span<float>(static_cast<float*>(out.mutable_data()), n), threads);
  }
  Check(status);
  return out;
}

// float32 values rounded to the format and read back in one pass.
py::array Round(const Conversion& c, const char* function) {
  if (!py::isinstance<py::array_t<float>>(c.values)) {
    throw py::value_error(absl::StrCat("values: ", function, " takes float32 values (got ",
                                       std::string(py::str(c.values.dtype())), ")"));
  }
  const size_t n = static_cast<size_t>(c.values.size());
  py::array_t<float> out(
      std::vector<py::ssize_t>(c.values.shape(), c.values.shape() + c.values.ndim()));
  absl::Status status;
  {
    py::gil_scoped_release release;
    status = api::RoundValues(
        *c.format, std::span<const float>(static_cast<const float*>(c.values.data()), n), c.options,
        std::span<float>(static_cast<float*>(out.mutable_data()), n), c.threads);
  }
  Check(status);
  return out;
}

void DefineConversions(py::module_& m, py::dict& sig) {
  {
    Function<Conversion> f(
        "convert", "NDArray[Any]",
        "float32 or float16 values -> codes of format `to`: uint8, uint16 or uint32 by the "
        "format's width, one per element; packed=True (4-bit formats): two codes per byte, low "
        "nibble first. rounding, overflow, subnormals and nan as `lowp convert`'s (`lowp "
        "convert --help`); seed: stochastic rounding's. threads: None or 0 (every CPU the "
        "process may run on) or a count; the codes never depend on it.");
    ConversionParams(f, "ArrayLike", "to", true);
    f.Define(m, sig, [](Conversion& c, const Call&) { return py::object(Encode(c)); });
  }
  {
    struct Decode {
      py::array codes;
      std::optional<Format> format;
      bool packed = false;
      std::optional<size_t> count;
      int threads = 0;
    };
    Function<Decode> f("decode", kFloatArray,
                       "Codes of format `fmt` (unsigned integers, one per element) -> float32 "
                       "values, exactly; packed=True: 4-bit codes as their uint8 storage bytes, "
                       "`count` of them (None: two per byte).");
    f.Required(kPositional, "codes", "ArrayLike",
               [](Decode& d, const Arg& a) { d.codes = NativeArray(a); });
    f.Required(kPositional, "fmt", "str",
               [](Decode& d, const Arg& a) { d.format = ValueFor(a, FindFormat(Text(a))); });
    f.Optional(kKeyword, "packed", "bool", py::bool_(false),
               [](Decode& d, const Arg& a) { d.packed = Bool(a); });
    f.Optional(kKeyword, "count", "int | None", py::none(),
               [](Decode& d, const Arg& a) { d.count = Int<size_t>(a); });
    ThreadsParam(f, [](Decode& d) -> int& { return d.threads; });
    f.Define(m, sig, [](Decode& d, const Call&) {
      return py::object(DecodeCodes(d.codes, *d.format, d.packed, d.count, d.threads));
    });
  }
  {
    Function<Conversion> f("round_values", kFloatArray,
                           "float32 values rounded to format `to` and read back as float32, in "
                           "one pass: decode(convert(values, to, ...), to) bit for bit.");
    ConversionParams(f, "ArrayLike", "to", false);
    f.Define(m, sig,
             [](Conversion& c, const Call&) { return py::object(Round(c, "round_values")); });
  }
  {
    Function<Conversion> f("fake_quant", kFloatArray,
                           "The values rounded to format `fmt` and read back, as float32: "
                           "decode(convert(values, fmt, ...), fmt), bit for bit. float32 input "
                           "takes one pass (round_values); float16 goes through the codes.");
    ConversionParams(f, "ArrayLike", "fmt", false);
    f.Define(m, sig, [](Conversion& c, const Call&) {
      if (py::isinstance<py::array_t<float>>(c.values)) return py::object(Round(c, "fake_quant"));
      return py::object(DecodeCodes(Encode(c), *c.format, false, std::nullopt, c.threads));
    });
  }
}

// --------------------------------------------------------- tensors, files

// Every floating tensor of a checkpoint as float32 (exact for fp8, fp16,
// bf16, float32), by name; `pattern` takes globs.
py::dict ReadTensors(const std::string& path, const std::string& pattern) {
  const TensorSet set = Value(TensorSet::Open(path));
  py::dict out;
  for (const TensorView& t : set.tensors()) {
    if (!IsFloating(t.dtype) || !MatchesPattern(pattern, t.name)) continue;
    py::array_t<float> a;
    try {
      // pybind11 computes the C strides (products of the trailing
      // dimensions and the item size) without checking for overflow, which
      // is undefined; a shape whose strides overflow is refused first.
      py::ssize_t stride = sizeof(float);
      for (size_t i = t.shape.size(); i-- > 1;) {
        if (__builtin_mul_overflow(stride, static_cast<py::ssize_t>(t.shape[i]), &stride)) {
          throw py::value_error("the strides of the shape overflow");
        }
      }
      a = py::array_t<float>(std::vector<py::ssize_t>(t.shape.begin(), t.shape.end()));
    } catch (std::exception& e) {
      // NumPy refuses a shape whose nonzero dimensions multiply past its
      // limit even when another is 0: an empty tensor it cannot represent.
      const std::string numpy = e.what();
      const std::string what = absl::StrCat(t.file, ": tensor \"", t.name, "\" of shape [",
                                            absl::StrJoin(t.shape, ", "), "]: ");
      if (t.elements() == 0) {
        RaiseError(PyExc_ValueError,
                   absl::StrCat(what, "has no elements, but NumPy cannot represent the shape (",
                                numpy, ")"));
      }
      RaiseError(PyExc_MemoryError, absl::StrCat(what, "cannot allocate its ", t.elements(),
                                                 " float32 values (", numpy, ")"));
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

void DefineTensorFunctions(py::module_& m, py::dict& sig) {
  {
    struct Quantize {
      std::vector<py::array> keep;
      TensorView array;
      std::string scheme;
      int threads = 0;
      std::vector<float> importance;
    };
    Function<Quantize> f(
        "quantize", kFloatArray,
        "The array quantized by `scheme` and dequantized, as float32 of its shape; rows are the "
        "last axis. imatrix: one importance per column, as ggml_quantize_chunk's imatrix "
        "argument, for the llama.cpp types (iq2_xxs, iq2_xs and iq1_s need it).");
    f.Required(kPositional, "array", "ArrayLike",
               [](Quantize& q, const Arg& a) { q.array = FloatTensor(a, "array", q.keep); });
    f.Required(kPositional, "scheme", "str", [](Quantize& q, const Arg& a) { q.scheme = Text(a); });
    ThreadsParam(f, [](Quantize& q) -> int& { return q.threads; });
    f.Optional(kKeyword, "imatrix", "ArrayLike | None", py::none(), [](Quantize& q, const Arg& a) {
      const py::array w = NativeArray(a);
      if (w.ndim() != 1 ||
          (w.dtype().kind() != 'f' && w.dtype().kind() != 'i' && w.dtype().kind() != 'u')) {
        WrongValue(a, "want a 1-D array of one weight per column");
      }
      const py::array_t<float, py::array::c_style | py::array::forcecast> weights(w);
      q.importance.assign(weights.data(), weights.data() + weights.size());
    });
    f.Define(m, sig, [](Quantize& q, const Call&) {
      py::array_t<float> out(std::vector<py::ssize_t>(q.array.shape.begin(), q.array.shape.end()));
      absl::Status status;
      {
        py::gil_scoped_release release;
        status = api::QuantizeArray(q.array, q.scheme,
                                    std::span<float>(static_cast<float*>(out.mutable_data()),
                                                     static_cast<size_t>(out.size())),
                                    q.threads, q.importance);
      }
      Check(status);
      return py::object(out);
    });
  }
  {
    struct Gptq {
      std::vector<py::array> keep;
      TensorView weight, inputs;
      std::string scheme;
      api::GptqArrayOptions o;
    };
    const api::GptqArrayOptions d;
    Function<Gptq> f(
        "gptq", kDict,
        "GPTQ (calib/gptq.h) on one matrix: `weight` [rows, cols] quantized by `scheme` column "
        "by column with each column's rounding error fed forward, from `inputs` [tokens, cols], "
        "the rows the layer multiplies (H = sum x x^T in float64). Returns values (float32, "
        "the weight's shape), bytes (llama.cpp's blocks for its types, else None) and order "
        "(the columns' order with act_order, else None). damp: of diag(H)'s mean.");
    f.Required(kPositional, "weight", "ArrayLike",
               [](Gptq& g, const Arg& a) { g.weight = FloatTensor(a, "weight", g.keep); });
    f.Required(kPositional, "inputs", "ArrayLike",
               [](Gptq& g, const Arg& a) { g.inputs = FloatTensor(a, "inputs", g.keep); });
    f.Required(kPositional, "scheme", "str", [](Gptq& g, const Arg& a) { g.scheme = Text(a); });
    f.Optional(kKeyword, "damp", "float", py::float_(d.damp),
               [](Gptq& g, const Arg& a) { g.o.damp = Real(a); });
    f.Optional(kKeyword, "act_order", "bool", py::bool_(d.act_order),
               [](Gptq& g, const Arg& a) { g.o.act_order = Bool(a); });
    ThreadsParam(f, [](Gptq& g) -> int& { return g.o.threads; });
    f.Define(m, sig, [](Gptq& g, const Call&) {
      absl::StatusOr<api::GptqArrayResult> r;
      {
        py::gil_scoped_release release;
        r = api::GptqArray(g.weight, g.inputs, g.scheme, g.o);
      }
      Check(r.status());
      py::array_t<float> values(
          std::vector<py::ssize_t>(g.weight.shape.begin(), g.weight.shape.end()));
      std::copy(r->values.begin(), r->values.end(), values.mutable_data());
      py::dict out;
      out["values"] = values;
      out["bytes"] = r->bytes.empty() ? py::object(py::none())
                                      : py::object(py::bytes(
                                            reinterpret_cast<const char*>(r->bytes.data()),
                                            r->bytes.size()));
      if (r->order.empty()) {
        out["order"] = py::none();
      } else {
        py::array_t<int32_t> order(static_cast<py::ssize_t>(r->order.size()));
        std::copy(r->order.begin(), r->order.end(), order.mutable_data());
        out["order"] = order;
      }
      return py::object(out);
    });
  }
  {
    struct QuantError {
      api::QuantErrorOptions o;
      std::vector<py::array> keep;
    };
    const api::QuantErrorOptions d;
    Function<QuantError> f(
        "quant_error", kDict,
        "`lowp quant-error --json` on a checkpoint path (or a list of paths), an array or a "
        "dict of arrays: each floating tensor quantized by each scheme (a name or a list) and "
        "read back. tensors: globs on names; summary: only the rows over all tensors; "
        "relative_floor: relative errors over |x| >= it; histogram: |e| by binade. reference: "
        "the original checkpoint's files instead of a scheme, each tensor of data (a GGUF file) "
        "measured as stored against its original there. imatrix: an importance matrix the "
        "llama.cpp types quantize with.");
    f.Required(kPositional, "data", "TensorData",
               [](QuantError& q, const Arg& a) { q.o.inputs = TensorData(a, q.keep); });
    f.Optional(kPositional, "scheme", "Names | None", py::none(),
               [](QuantError& q, const Arg& a) { q.o.schemes = Names(a); });
    f.Optional(kKeyword, "reference", "FilePaths | None", py::none(),
               [](QuantError& q, const Arg& a) { q.o.reference = Paths(a); });
    f.Optional(kKeyword, "tensors", "Names | None", py::none(),
               [](QuantError& q, const Arg& a) { q.o.tensors = NameList(a); });
    f.Optional(kKeyword, "summary", "bool", py::bool_(d.summary),
               [](QuantError& q, const Arg& a) { q.o.summary = Bool(a); });
    f.Optional(kKeyword, "histogram", "bool", py::bool_(d.histogram),
               [](QuantError& q, const Arg& a) { q.o.histogram = Bool(a); });
    f.Optional(kKeyword, "relative_floor", "float", py::float_(d.relative_floor),
               [](QuantError& q, const Arg& a) { q.o.relative_floor = Real(a); });
    f.Optional(kKeyword, "imatrix", "FilePath | None", py::none(),
               [](QuantError& q, const Arg& a) { q.o.imatrix = Path(a); });
    ThreadsParam(f, [](QuantError& q) -> int& { return q.o.threads; });
    QuietParam(f);
    f.Define(m, sig, [](QuantError& q, const Call&) {
      return Run<api::QuantErrorResult>([&] { return api::QuantError(q.o); });
    });
  }
  {
    struct UpdateError {
      api::UpdateErrorApiOptions o;
      std::vector<py::array> keep;
    };
    const UpdateErrorOptions d;
    Function<UpdateError> f(
        "update_error", kDict,
        "`lowp update-error --json` on a checkpoint path (or paths), an array or a dict of "
        "arrays: AdamW steps in float64 and per training-state recipe (a name of "
        "training_recipes() or a spelling 'weights=bf16+update=sr+...'; None: the 16-to-6-byte "
        "ladder), with a seeded gradient model (grad_scale, grad_signal); tensors: globs on "
        "names. schedule: 'constant' or 'cosine' (warmup, min_lr_ratio).");
    f.Required(kPositional, "data", "TensorData",
               [](UpdateError& u, const Arg& a) { u.o.inputs = TensorData(a, u.keep); });
    f.Optional(kPositional, "recipes", "Names | None", py::none(),
               [](UpdateError& u, const Arg& a) { u.o.recipes = Names(a); });
    f.Optional(kKeyword, "tensors", "Names | None", py::none(),
               [](UpdateError& u, const Arg& a) { u.o.tensors = NameList(a); });
    f.Optional(kKeyword, "steps", "int", py::int_(d.adamw.steps),
               [](UpdateError& u, const Arg& a) { IntInto(u.o.update.adamw.steps, a); });
    f.Optional(kKeyword, "lr", "float", py::float_(d.adamw.lr),
               [](UpdateError& u, const Arg& a) { u.o.update.adamw.lr = Real(a); });
    f.Optional(kKeyword, "schedule", "str", py::str(d.adamw.schedule),
               [](UpdateError& u, const Arg& a) { u.o.update.adamw.schedule = Text(a); });
    f.Optional(kKeyword, "warmup", "int", py::int_(d.adamw.warmup),
               [](UpdateError& u, const Arg& a) { IntInto(u.o.update.adamw.warmup, a); });
    f.Optional(kKeyword, "min_lr_ratio", "float", py::float_(d.adamw.min_lr_ratio),
               [](UpdateError& u, const Arg& a) { u.o.update.adamw.min_lr_ratio = Real(a); });
    f.Optional(kKeyword, "beta1", "float", py::float_(d.adamw.beta1),
               [](UpdateError& u, const Arg& a) { u.o.update.adamw.beta1 = Real(a); });
    f.Optional(kKeyword, "beta2", "float", py::float_(d.adamw.beta2),
               [](UpdateError& u, const Arg& a) { u.o.update.adamw.beta2 = Real(a); });
    f.Optional(kKeyword, "eps", "float", py::float_(d.adamw.eps),
               [](UpdateError& u, const Arg& a) { u.o.update.adamw.eps = Real(a); });
    f.Optional(kKeyword, "weight_decay", "float", py::float_(d.adamw.weight_decay),
               [](UpdateError& u, const Arg& a) { u.o.update.adamw.weight_decay = Real(a); });
    f.Optional(kKeyword, "grad_scale", "float", py::float_(d.grad_scale),
               [](UpdateError& u, const Arg& a) { u.o.update.grad_scale = Real(a); });
    f.Optional(kKeyword, "grad_signal", "float", py::float_(d.grad_signal),
               [](UpdateError& u, const Arg& a) { u.o.update.grad_signal = Real(a); });
    f.Optional(kKeyword, "seed", "int", py::int_(d.seed),
               [](UpdateError& u, const Arg& a) { IntInto(u.o.update.seed, a); });
    ThreadsParam(f, [](UpdateError& u) -> int& { return u.o.update.threads; });
    QuietParam(f);
    f.Define(m, sig, [](UpdateError& u, const Call&) {
      return Run<api::UpdateErrorResult>([&] { return api::UpdateError(u.o); });
    });
  }
  {
    struct RangeStudy {
      api::RangeStudyOptions o;
      std::vector<py::array> keep;
    };
    const api::RangeStudyOptions d;
    Function<RangeStudy> f(
        "range_study", kDict,
        "`lowp range --json` on a checkpoint path, an array or a dict of arrays: where each "
        "tensor's values fall against each format's range (formats None: fp16, bf16, "
        "fp8_e4m3fn, fp8_e5m2), and the power-of-two scale that fits `fraction` of them.");
    f.Required(kPositional, "data", "TensorData",
               [](RangeStudy& r, const Arg& a) { r.o.inputs = TensorData(a, r.keep); });
    f.Optional(kKeyword, "formats", "Names | None", py::none(),
               [](RangeStudy& r, const Arg& a) { r.o.formats = Names(a); });
    f.Optional(kKeyword, "fraction", "float", py::float_(d.fraction),
               [](RangeStudy& r, const Arg& a) { r.o.fraction = Real(a); });
    f.Optional(kKeyword, "tensors", "Names | None", py::none(),
               [](RangeStudy& r, const Arg& a) { r.o.tensors = NameList(a); });
    ThreadsParam(f, [](RangeStudy& r) -> int& { return r.o.threads; });
    QuietParam(f);
    f.Define(m, sig, [](RangeStudy& r, const Call&) {
      return Run<api::RangeStudyResult>([&] { return api::RangeStudy(r.o); });
    });
  }
  {
    Function<api::TensorsOptions> f(
        "tensors", kDict,
        "`lowp tensors --json`: each tensor of the files (safetensors, GGUF, .npy) with its "
        "type, shape, bytes and bits per weight; tensors: globs on names; metadata=True adds "
        "GGUF's typed key/value pairs or safetensors' __metadata__.");
    f.Required(kPositional, "files", "FilePaths",
               [](api::TensorsOptions& o, const Arg& a) { o.files = Paths(a); });
    f.Optional(kKeyword, "tensors", "Names | None", py::none(),
               [](api::TensorsOptions& o, const Arg& a) { o.tensors = NameList(a); });
    f.Optional(kKeyword, "metadata", "bool", py::bool_(api::TensorsOptions().metadata),
               [](api::TensorsOptions& o, const Arg& a) { o.metadata = Bool(a); });
    f.Define(m, sig, [](api::TensorsOptions& o, const Call&) {
      return Run<api::TensorsResult>([&] { return api::Tensors(o); });
    });
  }
  {
    struct Read {
      std::string path, tensors;
    };
    Function<Read> f("read_tensors", "dict[str, NDArray[np.float32]]",
                     "The floating tensors of a checkpoint as float32 arrays, by name "
                     "(tensors: globs on names; None: all).");
    f.Required(kPositional, "path", "FilePath", [](Read& r, const Arg& a) { r.path = Path(a); });
    f.Optional(kPositional, "tensors", "Names | None", py::none(),
               [](Read& r, const Arg& a) { r.tensors = NameList(a); });
    f.Define(m, sig,
             [](Read& r, const Call&) { return py::object(ReadTensors(r.path, r.tensors)); });
  }
}

// ------------------------------------------------------------ memory model

void DefineSizing(py::module_& m, py::dict& sig) {
  {
    struct Size {
      api::SizeOptions o;
      bool compare = false;
      std::optional<std::vector<std::string>> formats;
    };
    Function<Size> f(
        "size", kDict,
        "`lowp size --json`: the memory a job takes on a device, by component (docs/sizing.md). "
        "model: a preset (llama-3.1-8b, ...) or a config.json; mode: pretrain, finetune, lora, "
        "qlora or inference; the formats of weights, embed, grads, master, opt_state and kv "
        "(None: the mode's default); compare_formats=True: a row per weight format (formats, "
        "None: the defaults).");
    f.Required(kKeyword, "model", "str", [](Size& s, const Arg& a) { s.o.model = Text(a); });
    f.Required(kKeyword, "mode", "str",
               [](Size& s, const Arg& a) { s.o.sizing.mode = Choice(a, ParseMode); });
    f.Optional(kKeyword, "device", "str", py::str(api::SizeOptions().device),
               [](Size& s, const Arg& a) { s.o.device = Text(a); });
    SizingParams(f, [](Size& s) -> SizingOptions& { return s.o.sizing; });
    f.Optional(kKeyword, "compare_formats", "bool", py::bool_(false),
               [](Size& s, const Arg& a) { s.compare = Bool(a); });
    f.Optional(kKeyword, "formats", "Names | None", py::none(),
               [](Size& s, const Arg& a) { s.formats = Names(a); });
    f.Define(m, sig, [](Size& s, const Call&) {
      if (s.formats && !s.compare) throw py::value_error("formats goes with compare_formats=True");
      if (s.compare) {
        const api::CompareFormatsOptions c{s.o, s.formats.value_or(std::vector<std::string>{})};
        return Run<api::FormatComparison>([&] { return api::CompareFormats(c); });
      }
      return Run<SizingReport>([&] { return api::Size(s.o); });
    });
  }
  {
    const api::TrainingPlanOptions d;
    Function<api::TrainingPlanOptions> f(
        "training_plan", kDict,
        "`lowp plan --mode pretrain|finetune --recipes ... --json`: per training-state recipe "
        "(None: the 16-to-6-byte ladder), the job's memory (size()'s options) beside what the "
        "recipe does to AdamW's updates on the checkpoint `tensors` (None: the bundled "
        "stories260K), `select` globs on its names.");
    using O = api::TrainingPlanOptions;
    f.Required(kKeyword, "model", "str", [](O& o, const Arg& a) { o.size.model = Text(a); });
    f.Required(kKeyword, "mode", "str",
               [](O& o, const Arg& a) { o.size.sizing.mode = Choice(a, ParseMode); });
    f.Optional(kKeyword, "device", "str", py::str(d.size.device),
               [](O& o, const Arg& a) { o.size.device = Text(a); });
    SizingParams(f, [](O& o) -> SizingOptions& { return o.size.sizing; });
    f.Optional(kKeyword, "recipes", "Names | None", py::none(),
               [](O& o, const Arg& a) { o.measure.recipes = Names(a); });
    f.Optional(kKeyword, "tensors", "FilePaths | None", py::none(),
               [](O& o, const Arg& a) { o.measure.inputs.files = Paths(a); });
    f.Optional(kKeyword, "select", "Names | None", py::none(),
               [](O& o, const Arg& a) { o.measure.tensors = NameList(a); });
    f.Optional(kKeyword, "steps", "int", py::int_(d.measure.update.adamw.steps),
               [](O& o, const Arg& a) { IntInto(o.measure.update.adamw.steps, a); });
    f.Optional(kKeyword, "lr", "float", py::float_(d.measure.update.adamw.lr),
               [](O& o, const Arg& a) { o.measure.update.adamw.lr = Real(a); });
    f.Optional(kKeyword, "seed", "int", py::int_(d.measure.update.seed),
               [](O& o, const Arg& a) { IntInto(o.measure.update.seed, a); });
    ThreadsParam(f, [](O& o) -> int& { return o.measure.update.threads; });
    QuietParam(f);
    // The measurement's glob field is this function's `select`.
    f.Rename("tensors", "select");
    f.Define(m, sig, [](O& o, const Call&) {
      return Run<api::TrainingPlanResult>([&] { return api::TrainingPlan(o); });
    });
  }
  {
    const api::PlanJobOptions d;
    using O = api::PlanJobOptions;
    Function<O> f(
        "plan", kDict,
        "`lowp plan --json`: for each candidate weight format (None: the mode's defaults) the "
        "memory on each device (None: h100-sxm) beside the precision it loses on the "
        "checkpoint `tensors` (None: the bundled one; `select`: globs on its names), and the "
        "Pareto front. eval=True: also each format on a real model's linear layers "
        "(eval_model, None: the bundled stories260K-hf), on sampled tokens (eval_sample, "
        "eval_seed) or a text file (eval_text, eval_ctx, eval_chunks). mix=True: per device "
        "the lowp.mix for what it leaves beside the job (mix_sensitivity as mix's sensitivity). "
        "kv='A,B,...' (several KV cache formats): each format with each, sized per device and "
        "its KL measured (implies eval; kv_sample 'N:LEN', None: 4 sequences of the evaluated "
        "model's context): 'kv_study'. html: also write the report there. And size()'s "
        "options.");
    f.Required(kKeyword, "model", "str", [](O& o, const Arg& a) { o.model = Text(a); });
    f.Required(kKeyword, "mode", "str",
               [](O& o, const Arg& a) { o.sizing.mode = Choice(a, ParseMode); });
    f.Optional(kKeyword, "formats", "Names | None", py::none(),
               [](O& o, const Arg& a) { o.formats = Names(a); });
    f.Optional(kKeyword, "device", "Names | None", py::none(),
               [](O& o, const Arg& a) { o.devices = Names(a); });
    SizingParams(f, [](O& o) -> SizingOptions& { return o.sizing; });
    f.Optional(kKeyword, "tensors", "FilePaths | None", py::none(),
               [](O& o, const Arg& a) { o.tensor_files = Paths(a); });
    f.Optional(kKeyword, "select", "Names | None", py::none(),
               [](O& o, const Arg& a) { o.select = NameList(a); });
    ThreadsParam(f, [](O& o) -> int& { return o.threads; });
    f.Optional(kKeyword, "eval", "bool", py::bool_(d.eval),
               [](O& o, const Arg& a) { o.eval = Bool(a); });
    f.Optional(kKeyword, "eval_model", "FilePath | None", py::none(),
               [](O& o, const Arg& a) { o.eval_model = ModelPath(a); });
    f.Optional(kKeyword, "eval_sample", "str", py::str(d.eval_sample),
               [](O& o, const Arg& a) { o.eval_sample = Text(a); });
    f.Optional(kKeyword, "eval_seed", "int", py::int_(d.eval_seed),
               [](O& o, const Arg& a) { IntInto(o.eval_seed, a); });
    f.Optional(kKeyword, "eval_text", "FilePath | None", py::none(),
               [](O& o, const Arg& a) { o.eval_text = Path(a); });
    f.Optional(kKeyword, "eval_ctx", "int", py::int_(d.eval_ctx),
               [](O& o, const Arg& a) { IntInto(o.eval_ctx, a); });
    f.Optional(kKeyword, "eval_chunks", "int", py::int_(d.eval_chunks),
               [](O& o, const Arg& a) { IntInto(o.eval_chunks, a); });
    f.Optional(kKeyword, "eval_imatrix", "FilePath | None", py::none(),
               [](O& o, const Arg& a) { o.eval_imatrix = Path(a); });
    TokenParams(
        f, "calib_", [](O& o) -> api::TokenOptions& { return o.calibration; }, d.calibration);
    f.Optional(kKeyword, "mix", "bool", py::bool_(d.mix),
               [](O& o, const Arg& a) { o.mix = Bool(a); });
    f.Optional(kKeyword, "mix_types", "Names | None", py::none(),
               [](O& o, const Arg& a) { o.mix_types = Names(a); });
    f.Optional(kKeyword, "mix_tune_sample", "str", py::str(d.mix_tune_sample),
               [](O& o, const Arg& a) { o.mix_tune_sample = Text(a); });
    f.Optional(kKeyword, "mix_tune_seed", "int", py::int_(d.mix_tune_seed),
               [](O& o, const Arg& a) { IntInto(o.mix_tune_seed, a); });
    f.Optional(kKeyword, "mix_sensitivity", "str", py::str(d.mix_sensitivity),
               [](O& o, const Arg& a) { o.mix_sensitivity = Text(a); });
    f.Optional(kKeyword, "kv_sample", "str | None", py::none(),
               [](O& o, const Arg& a) { o.kv_sample = Text(a); });
    f.Optional(kKeyword, "html", "FilePath | None", py::none(),
               [](O& o, const Arg& a) { o.html = Path(a); });
    QuietParam(f);
    f.Rename("devices", "device").Rename("tensor_files", "tensors");
    f.Define(m, sig, [](O& o, const Call& call) {
      o.html_command = call.Text();
      return Run<Plan>([&] { return api::PlanJob(o); });
    });
  }
}

// -------------------------------------------------------------- the model

void DefineModelFunctions(py::module_& m, py::dict& sig) {
  {
    struct Forward {
      std::string model;
      api::TokenArray tokens;
      bool one_d = false;
      int threads = 0;
    };
    Function<Forward> f("forward", kFloatArray,
                        "float32 logits of a model (a Hugging Face directory; None: the bundled "
                        "stories260K-hf) for integer tokens [sequences, length] -> [sequences, "
                        "length, vocab] ([length] -> [length, vocab]).");
    f.Required(kPositional, "model", "FilePath | None",
               [](Forward& w, const Arg& a) { w.model = ModelPath(a); });
    f.Required(kPositional, "tokens", "ArrayLike",
               [](Forward& w, const Arg& a) { w.tokens = Tokens(a, &w.one_d); });
    ThreadsParam(f, [](Forward& w) -> int& { return w.threads; });
    f.Define(m, sig, [](Forward& w, const Call&) {
      absl::StatusOr<std::vector<float>> logits;
      {
        py::gil_scoped_release release;
        logits = api::ForwardLogits(w.model, {}, w.tokens, w.threads);
      }
      const std::vector<float> values = Value(std::move(logits));
      const int64_t sequences = static_cast<int64_t>(w.tokens.ids.size()) / w.tokens.length;
      const int64_t vocab = static_cast<int64_t>(values.size()) / (sequences * w.tokens.length);
      std::vector<py::ssize_t> shape;
      if (!w.one_d) shape.push_back(sequences);
      shape.push_back(w.tokens.length);
      shape.push_back(vocab);
      py::array_t<float> out(shape);
      std::memcpy(out.mutable_data(), values.data(), values.size() * sizeof(float));
      return py::object(out);
    });
  }
  {
    struct Sample {
      std::string model;
      SampleOptions o = [] {
        SampleOptions o;
        o.count = kSampleCount;
        o.length = kSampleLength;
        return o;
      }();
    };
    const SampleOptions d;
    Function<Sample> f("sample", "NDArray[np.int32]",
                       "Token sequences [count, length] sampled from the float32 model (None: "
                       "the bundled stories260K-hf), BOS first (temperature 0: greedy).");
    f.Optional(kPositional, "model", "FilePath | None", py::none(),
               [](Sample& s, const Arg& a) { s.model = ModelPath(a); });
    f.Optional(kKeyword, "count", "int", py::int_(kSampleCount),
               [](Sample& s, const Arg& a) { IntInto(s.o.count, a); });
    f.Optional(kKeyword, "length", "int", py::int_(kSampleLength),
               [](Sample& s, const Arg& a) { IntInto(s.o.length, a); });
    f.Optional(kKeyword, "temperature", "float", py::float_(d.temperature),
               [](Sample& s, const Arg& a) { s.o.temperature = Real(a); });
    f.Optional(kKeyword, "seed", "int", py::int_(d.seed),
               [](Sample& s, const Arg& a) { IntInto(s.o.seed, a); });
    ThreadsParam(f, [](Sample& s) -> int& { return s.o.threads; });
    f.Define(m, sig, [](Sample& s, const Call&) {
      absl::StatusOr<api::TokenArray> tokens;
      {
        py::gil_scoped_release release;
        tokens = api::Sample(s.model, {}, s.o);
      }
      const api::TokenArray t = Value(std::move(tokens));
      py::array_t<int32_t> out(
          {static_cast<py::ssize_t>(t.ids.size() / t.length), static_cast<py::ssize_t>(t.length)});
      std::memcpy(out.mutable_data(), t.ids.data(), t.ids.size() * sizeof(int32_t));
      return py::object(out);
    });
  }
  {
    const api::EvalOptions d;
    using O = api::EvalOptions;
    Function<O> f(
        "eval", kDict,
        "`lowp eval --json`: a model (a Hugging Face directory, or `tensors` files; None: the "
        "bundled stories260K-hf) with each combination of the schemes on its sites (weights, "
        "activations, kv, compute; a str 'a,b' or a list; weights_file: GGUF or safetensors "
        "files of the model's quantized matrices) against float32: KL divergence, top-1 "
        "agreement, perplexity. Tokens: an array or .npy path, or sampled 'N:LEN' with seed, or "
        "text / text_file (llama.cpp's perplexity protocol: ctx, chunks -1 for all, tokenizer "
        "over the model's own). A weights scheme with ':gptq' (GPTQ), ':awq' (AWQ) or ':smooth' "
        "(SmoothQuant) is "
        "calibrated on the calib_ tokens (the same options with calib_ before each; default the "
        "bundled calibration text, calib_ctx 256, calib_chunks 64).");
    ModelParams(
        f, [](O& o) -> std::string& { return o.model; },
        [](O& o) -> std::vector<std::string>& { return o.tensors; });
    TokenParams(
        f, "", [](O& o) -> O& { return o; }, d);
    for (const auto& site : {std::pair{"weights", &O::weights},
                             {"activations", &O::activations},
                             {"kv", &O::kv},
                             {"compute", &O::compute}}) {
      std::string O::*field = site.second;
      f.Optional(kKeyword, site.first, "Names | None", py::none(),
                 [field](O& o, const Arg& a) { o.*field = NameList(a); });
    }
    f.Optional(kKeyword, "weights_file", "FilePaths | None", py::none(),
               [](O& o, const Arg& a) { o.weights_files = Paths(a); });
    f.Optional(kKeyword, "batch_tokens", "int", py::int_(d.batch_tokens),
               [](O& o, const Arg& a) { IntInto(o.batch_tokens, a); });
    f.Optional(kKeyword, "matrices", "str", py::str(d.matrices),
               [](O& o, const Arg& a) { o.matrices = Text(a); });
    f.Optional(kKeyword, "imatrix", "FilePath | None", py::none(),
               [](O& o, const Arg& a) { o.imatrix = Path(a); });
    TokenParams(
        f, "calib_", [](O& o) -> api::TokenOptions& { return o.calibration; }, d.calibration);
    ThreadsParam(f, [](O& o) -> int& { return o.threads; });
    f.Define(m, sig,
             [](O& o, const Call&) { return Run<api::EvalResult>([&] { return api::Eval(o); }); });
  }
  {
    const api::QuantizeModelOptions d;
    using O = api::QuantizeModelOptions;
    Function<O> f(
        "quantize_model", kDict,
        "`lowp quantize --model DIR --weights RULES --out OUT --json`: the Hugging Face model "
        "written to `out` (whole or not at all) with its matrices as eval's weights rules make "
        "them (':gptq' calibrated on the calib_ tokens, as eval's): a .safetensors file "
        "dequantized to dtype (F32, F16, BF16), the norms and biases as stored, or a .gguf file "
        "llama.cpp runs, each matrix in its llama.cpp type as the rules' own bytes, with the "
        "vocabulary of the model's tokenizer (or `tokenizer`); with format 'compressed-tensors' "
        "or 'gptq', a new model directory vLLM and transformers load, each matrix as the rules' "
        "own codes and scales. Returns each changed matrix's error.");
    f.Required(kKeyword, "model", "FilePath", [](O& o, const Arg& a) { o.model = Path(a); });
    f.Required(kKeyword, "weights", "Names",
               [](O& o, const Arg& a) { o.weights = NameList(a); });
    f.Required(kKeyword, "out", "FilePath", [](O& o, const Arg& a) { o.output = Path(a); });
    f.Optional(kKeyword, "dtype", "str", py::str(d.dtype),
               [](O& o, const Arg& a) { o.dtype = Text(a); });
    f.Optional(kKeyword, "tokenizer", "FilePath | None", py::none(),
               [](O& o, const Arg& a) { o.tokenizer = Path(a); });
    f.Optional(kKeyword, "format", "str | None", py::none(),
               [](O& o, const Arg& a) { o.format = Text(a); });
    ModelRunParams(f, d);
    f.Rename("output", "out");
    f.Define(m, sig, [](O& o, const Call&) {
      return Run<api::QuantErrorResult>([&] { return api::QuantizeModel(o); });
    });
  }
  {
    const api::ModelQuantErrorOptions d;
    using O = api::ModelQuantErrorOptions;
    Function<O> f(
        "model_quant_error", kDict,
        "`lowp quant-error --model DIR --scheme S --json`: each matrix of the Hugging Face model "
        "as eval's weights makes it from each scheme (a name or a list; ':gptq' calibrated on "
        "the calib_ tokens), against the model's.");
    f.Required(kKeyword, "model", "FilePath", [](O& o, const Arg& a) { o.model = Path(a); });
    f.Required(kKeyword, "scheme", "Names", [](O& o, const Arg& a) { o.schemes = Names(a); });
    ModelRunParams(f, d);
    f.Rename("schemes", "scheme");
    f.Define(m, sig, [](O& o, const Call&) {
      return Run<api::QuantErrorResult>([&] { return api::ModelQuantError(o); });
    });
  }
  {
    const api::MixOptions d;
    using O = api::MixOptions;
    Function<O> f(
        "mix", kDict,
        "`lowp mix --json`: the type of each matrix of a model (None: the bundled stories3M-hf) "
        "of least predicted KL within a budget, one of bits_per_weight, bytes (or '4.2GB') or "
        "device (with the serving job beside the weights: seq, batch, kv (None: fp16), "
        "prefill_tokens, buffers, headroom), verified beside llama.cpp's recipes (baselines, "
        "or 'none') and random_mixes. The verification's tokens as eval takes them, the "
        "tuning's with tune_ before each. With `out`, the mix is written there as "
        "quantize_model writes rules (.gguf, with the vocabulary of `tokenizer` or the model's, "
        "or .safetensors). sensitivity: 'predicted' (one probe type per matrix end to end, the "
        "other types scaled by their weight errors) or 'exact' (every matrix in every type). "
        "shard='I/N' with table_out: only that shard of the sensitivity sweep, written there; "
        "tables: the N shard files, read instead of measuring.");
    ModelParams(
        f, [](O& o) -> std::string& { return o.model; },
        [](O& o) -> std::vector<std::string>& { return o.tensors; });
    f.Optional(kKeyword, "bits_per_weight", "float | None", py::none(),
               [](O& o, const Arg& a) { o.bits_per_weight = Real(a); });
    f.Optional(kKeyword, "bytes", "int | str | None", py::none(), [](O& o, const Arg& a) {
      const int64_t bytes = ByteCount(a);
      if (bytes <= 0) WrongValue(a, "want a number > 0");
      o.bytes = static_cast<uint64_t>(bytes);
    });
    f.Optional(kKeyword, "device", "str | None", py::none(),
               [](O& o, const Arg& a) { o.device = Text(a); });
    JobParams(f, [](O& o) -> SizingOptions& { return o.job; });
    f.Optional(kKeyword, "types", "Names | None", py::none(),
               [](O& o, const Arg& a) { o.types = Names(a); });
    f.Optional(kKeyword, "sensitivity", "str", py::str(d.sensitivity),
               [](O& o, const Arg& a) { o.sensitivity = Text(a); });
    f.Optional(kKeyword, "baselines", "Names | None", py::none(),
               [](O& o, const Arg& a) { o.baselines = Names(a); });
    f.Optional(kKeyword, "random_mixes", "int", py::int_(d.random_mixes),
               [](O& o, const Arg& a) { IntInto(o.random_mixes, a); });
    f.Optional(kKeyword, "expert_groups", "str", py::str(d.expert_groups),
               [](O& o, const Arg& a) { o.expert_groups = Text(a); });
    f.Optional(kKeyword, "random_seed", "int", py::int_(d.seed),
               [](O& o, const Arg& a) { IntInto(o.seed, a); });
    TokenParams(
        f, "", [](O& o) -> api::TokenOptions& { return o.verify; }, d.verify);
    TokenParams(
        f, "tune_", [](O& o) -> api::TokenOptions& { return o.tune; }, d.tune);
    f.Optional(kKeyword, "imatrix", "FilePath | None", py::none(),
               [](O& o, const Arg& a) { o.imatrix = Path(a); });
    TokenParams(
        f, "calib_", [](O& o) -> api::TokenOptions& { return o.calibration; }, d.calibration);
    f.Optional(kKeyword, "out", "FilePath | None", py::none(),
               [](O& o, const Arg& a) { o.out = Path(a); });
    f.Optional(kKeyword, "shard", "str | None", py::none(),
               [](O& o, const Arg& a) { o.shard = Text(a); });
    f.Optional(kKeyword, "table_out", "FilePath | None", py::none(),
               [](O& o, const Arg& a) { o.table_out = Path(a); });
    f.Optional(kKeyword, "tables", "FilePaths | None", py::none(),
               [](O& o, const Arg& a) { o.tables = Paths(a); });
    ThreadsParam(f, [](O& o) -> int& { return o.threads; });
    f.Define(m, sig,
             [](O& o, const Call&) { return Run<api::MixResult>([&] { return api::Mix(o); }); });
  }
  {
    const api::ImatrixOptions d;
    using O = api::ImatrixOptions;
    Function<O> f(
        "imatrix", kDict,
        "`lowp imatrix --json` as a dict plus 'importance' (name -> float32 [matrices, "
        "columns]): llama-imatrix's importance matrix of a model (None: the bundled "
        "stories260K-hf) on tokens as eval takes them; process_output: also lm_head's input; "
        "out: also write it there (format 'gguf' or 'dat'; None: by the name, else gguf).");
    ModelParams(
        f, [](O& o) -> std::string& { return o.input.model; },
        [](O& o) -> std::vector<std::string>& { return o.input.tensors; });
    TokenParams(
        f, "", [](O& o) -> api::EvalOptions& { return o.input; }, d.input);
    f.Optional(kKeyword, "process_output", "bool", py::bool_(d.process_output),
               [](O& o, const Arg& a) { o.process_output = Bool(a); });
    f.Optional(kKeyword, "out", "FilePath | None", py::none(),
               [](O& o, const Arg& a) { o.out = Path(a); });
    f.Optional(kKeyword, "format", "str | None", py::none(),
               [](O& o, const Arg& a) { o.format = Text(a); });
    f.Optional(kKeyword, "min_expert_tokens", "int", py::int_(d.min_expert_tokens),
               [](O& o, const Arg& a) { IntInto(o.min_expert_tokens, a); });
    f.Optional(kKeyword, "batch_tokens", "int", py::int_(d.input.batch_tokens),
               [](O& o, const Arg& a) { IntInto(o.input.batch_tokens, a); });
    ThreadsParam(f, [](O& o) -> int& { return o.input.threads; });
    f.Rename("output", "out");
    f.Define(m, sig, [](O& o, const Call&) {
      absl::StatusOr<api::ImatrixResult> result;
      {
        py::gil_scoped_release release;
        result = api::MakeImatrix(o);
      }
      const api::ImatrixResult r = Value(std::move(result));
      py::dict out = ToPython(api::ToJson(r));
      py::dict importance;
      for (const auto& [name, e] : r.imatrix.entries()) {
        const std::vector<float> w = e.Values();
        py::array_t<float> a(
            {static_cast<py::ssize_t>(e.matrices), static_cast<py::ssize_t>(e.columns)});
        std::copy(w.begin(), w.end(), a.mutable_data());
        importance[py::str(e.name)] = a;
      }
      out["importance"] = importance;
      return py::object(out);
    });
  }
  {
    const api::TokenizeOptions d;
    using O = api::TokenizeOptions;
    Function<O> f("tokenize", kDict,
                  "`lowp tokenize --json`: the ids (and counts) of `text` or `text_file` by the "
                  "tokenizer of `model` (None: the bundled stories260K-hf) or the file "
                  "`tokenizer`; parse_special: special tokens written in the text become theirs; "
                  "add_bos None: as the tokenizer says; pieces: also each id's string.");
    f.Optional(kKeyword, "text", "str | None", py::none(),
               [](O& o, const Arg& a) { o.text = Text(a); });
    f.Optional(kKeyword, "text_file", "FilePath | None", py::none(),
               [](O& o, const Arg& a) { o.text_file = Path(a); });
    f.Optional(kKeyword, "model", "FilePath | None", py::none(),
               [](O& o, const Arg& a) { o.model = ModelPath(a); });
    f.Optional(kKeyword, "tokenizer", "FilePath | None", py::none(),
               [](O& o, const Arg& a) { o.tokenizer = Path(a); });
    f.Optional(kKeyword, "parse_special", "bool", py::bool_(d.parse_special),
               [](O& o, const Arg& a) { o.parse_special = Bool(a); });
    f.Optional(kKeyword, "add_bos", "bool | None", py::none(),
               [](O& o, const Arg& a) { o.add_bos = Bool(a); });
    f.Optional(kKeyword, "pieces", "bool", py::bool_(d.pieces),
               [](O& o, const Arg& a) { o.pieces = Bool(a); });
    f.Define(m, sig, [](O& o, const Call&) {
      return Run<api::TokenizeResult>([&] { return api::Tokenize(o); });
    });
  }
}

// ---------------------------------------------------- catalogs and paths

struct NoArguments {};

void DefineCatalogs(py::module_& m, py::dict& sig) {
  const std::pair<const char*, const char*> catalogs[] = {
      {"formats", "The format catalog: `lowp formats --json`."},
      {"schemes", "The quantization schemes: `lowp schemes --json`."},
      {"devices", "The device catalog: `lowp devices --json`."},
      {"training_recipes",
       "`lowp update-error --list --json`: each named training-state recipe, its spelling and "
       "bytes per parameter."}};
  for (const auto& [name, doc] : catalogs) {
    Function<NoArguments> f(name, kDict, doc);
    const std::string which = name;
    f.Define(m, sig, [which](NoArguments&, const Call&) {
      if (which == "formats") return ToPython(api::ToJson(api::Formats()));
      if (which == "schemes") return ToPython(api::ToJson(api::Schemes()));
      if (which == "devices") return ToPython(api::ToJson(api::Devices()));
      return ToPython(api::TrainingRecipesJson());
    });
  }
  Function<NoArguments>("bundled_model", "str",
                        "Directory of the bundled model in Hugging Face layout (stories260K-hf).")
      .Define(m, sig,
              [](NoArguments&, const Call&) { return py::object(py::str(Value(BundledModel()))); });
  Function<NoArguments>("bundled_checkpoint", "str",
                        "Path of the bundled real checkpoint (stories260K in float32; "
                        "$LOWP_DATA_DIR overrides).")
      .Define(m, sig, [](NoArguments&, const Call&) {
        return py::object(py::str(Value(BundledCheckpoint())));
      });
}

}  // namespace
}  // namespace lowp::python

PYBIND11_MODULE(_lowp, m) {
  using namespace lowp::python;
  m.doc() =
      "lowp: low-precision numerics for large-model work (the C++ library's bindings); "
      "the public functions, with their signatures, are lowp's";
  py::dict signatures;
  DefineCatalogs(m, signatures);
  DefineConversions(m, signatures);
  DefineTensorFunctions(m, signatures);
  DefineSizing(m, signatures);
  DefineModelFunctions(m, signatures);
  m.attr("_signatures") = signatures;
}
