// lowp._lowp: the C++ library for Python (pybind11), a thin shell over
// api/: keyword arguments become the same options structs the command line
// fills, the same functions run, and each result comes back as the dict of
// its ToJson (the command's --json), built from the JSON value directly.
// Conversions run the SIMD kernels.
//
// NumPy inputs are read in place when their dtype and layout allow (float32,
// float16 or float64 and C-contiguous); kernels run with the GIL released.
// Errors raise ValueError (bad input or options) or OSError (files), with
// the library's message.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
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
#include "api/api.h"
#include "formats/format.h"
#include "formats/packing.h"
#include "formats/reference.h"
#include "nlohmann/json.hpp"
#include "io/bundled.h"
#include "io/tensor.h"
#include "io/tensor_set.h"

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

// Keyword arguments read into options, one setter per name; each checks the
// type of its value (numbers stay numbers, lists lists). None is "not given".
// An unknown name is a TypeError, as Python's own for a function's keywords.
class Keywords {
 public:
  Keywords(const char* function, const py::kwargs& kwargs) : function_(function) {
    for (const auto& [key, value] : kwargs) {
      items_.emplace_back(py::cast<std::string>(key), py::reinterpret_borrow<py::object>(value));
    }
  }
  // Applies the setters; `setters` maps each name it knows.
  template <typename Setters>
  void Apply(const Setters& setters) const {
    for (const auto& [name, value] : items_) {
      auto it = setters.find(name);
      if (it == setters.end()) {
        throw py::type_error(
            absl::StrCat(function_, "() got an unexpected keyword argument '", name, "'"));
      }
      if (!value.is_none()) it->second(name, value);
    }
  }
  // The call as Python would write it: lowp.plan(model='x', ...).
  std::string Call() const {
    std::vector<std::string> parts;
    for (const auto& [name, value] : items_) {
      parts.push_back(absl::StrCat(name, "=", std::string(py::repr(value))));
    }
    return absl::StrCat("lowp.", function_, "(", absl::StrJoin(parts, ", "), ")");
  }

 private:
  const char* function_;
  std::vector<std::pair<std::string, py::object>> items_;
};

using Setter = std::function<void(const std::string&, const py::object&)>;
using Setters = std::map<std::string, Setter>;

bool IsBool(const py::handle& v) {
  return py::isinstance<py::bool_>(v) ||
         py::isinstance(v, py::module_::import("numpy").attr("bool_"));
}

[[noreturn]] void WrongType(const std::string& name, const char* want, const py::handle& v) {
  throw py::type_error(absl::StrCat(name, ": want ", want, ", not ",
                                    std::string(py::str(py::type::of(v).attr("__name__")))));
}

int64_t Int(const std::string& name, const py::handle& v) {
  if (IsBool(v) || !py::isinstance(v, py::module_::import("numbers").attr("Integral"))) {
    WrongType(name, "an integer", v);
  }
  return py::cast<int64_t>(py::int_(py::reinterpret_borrow<py::object>(v)));
}
double Real(const std::string& name, const py::handle& v) {
  if (IsBool(v) || !py::isinstance(v, py::module_::import("numbers").attr("Real"))) {
    WrongType(name, "a number", v);
  }
  return py::cast<double>(py::float_(py::reinterpret_borrow<py::object>(v)));
}
bool Bool(const std::string& name, const py::handle& v) {
  if (!IsBool(v)) WrongType(name, "True or False", v);
  return py::cast<bool>(v);
}
std::string Text(const std::string& name, const py::handle& v) {
  if (!py::isinstance<py::str>(v)) WrongType(name, "a str", v);
  return py::cast<std::string>(v);
}
// A list or tuple of names, or one str of comma-separated names (commas
// inside parentheses stay, as the command line's: float(e=4,m=3,...)).
std::vector<std::string> Names(const std::string& name, const py::handle& v) {
  std::vector<std::string> names;
  if (py::isinstance<py::str>(v)) {
    names.emplace_back();
    int depth = 0;
    for (char c : py::cast<std::string>(v)) {
      depth += c == '(' ? 1 : c == ')' && depth > 0 ? -1 : 0;
      if (c == ',' && depth == 0) {
        names.emplace_back();
      } else {
        names.back() += c;
      }
    }
  } else if (py::isinstance<py::list>(v) || py::isinstance<py::tuple>(v)) {
    for (const py::handle item : v) names.push_back(Text(name, item));
  } else {
    WrongType(name, "a str or a list of str", v);
  }
  // As the CLI's --NAME with nothing after it: an empty list is no choice.
  if (names.empty()) throw py::value_error(absl::StrCat(name, ": an empty list names nothing"));
  for (const std::string& n : names) {
    if (n.empty()) throw py::value_error(absl::StrCat(name, ": empty name in the list"));
  }
  return names;
}
// A path, or a list or tuple of paths.
std::vector<std::string> Paths(const std::string& name, const py::handle& v) {
  if (IsPath(v)) return {PathText(v)};
  std::vector<std::string> paths;
  if (!(py::isinstance<py::list>(v) || py::isinstance<py::tuple>(v))) {
    WrongType(name, "a path or a list of paths", v);
  }
  for (const py::handle item : v) {
    if (!IsPath(item)) WrongType(name, "a path or a list of paths", item);
    paths.push_back(PathText(item));
  }
  return paths;
}

template <typename T>
Setter IntInto(T* field) {
  return [field](const std::string& n, const py::object& v) {
    *field = static_cast<T>(Int(n, v));
  };
}
// A path (str or os.PathLike).
Setter PathInto(std::string* field) {
  return [field](const std::string& n, const py::object& v) {
    if (!IsPath(v)) WrongType(n, "a path", v);
    *field = PathText(v);
  };
}
// A seed: a whole number >= 0.
Setter SeedInto(uint64_t* field) {
  return [field](const std::string& n, const py::object& v) {
    const int64_t seed = Int(n, v);
    if (seed < 0) throw py::value_error(absl::StrCat(n, ": want a number >= 0"));
    *field = static_cast<uint64_t>(seed);
  };
}
Setter TextInto(std::string* field) {
  return [field](const std::string& n, const py::object& v) { *field = Text(n, v); };
}
template <typename Enum>
Setter EnumInto(Enum* field, absl::StatusOr<Enum> (*parse)(absl::string_view)) {
  return [field, parse](const std::string& n, const py::object& v) {
    *field = Value(parse(Text(n, v)));
  };
}

// The serving job's keywords beside the weights (`lowp mix --device`'s).
void JobSetters(SizingOptions* o, Setters* s) {
  (*s)["kv"] = [o](const std::string& n, const py::object& v) {
    o->kv = Text(n, v);
    if (o->kv.empty()) throw py::value_error(absl::StrCat(n, " is empty"));
  };
  (*s)["seq"] = IntInto(&o->seq);
  (*s)["batch"] = IntInto(&o->batch);
  (*s)["prefill_tokens"] = IntInto(&o->prefill_tokens);
  (*s)["buffers"] = [o](const std::string& n, const py::object& v) {
    o->buffers_bytes = py::isinstance<py::str>(v) ? Value(ParseBytes(Text(n, v), n)) : Int(n, v);
  };
  (*s)["headroom"] = [o](const std::string& n, const py::object& v) { o->headroom = Real(n, v); };
}

// The memory model's keywords, as `lowp size`'s options (docs/sizing.md).
void SizingSetters(SizingOptions* o, bool* mode_given, Setters* s) {
  JobSetters(o, s);
  (*s)["mode"] = [o, mode_given](const std::string& n, const py::object& v) {
    o->mode = Value(ParseMode(Text(n, v)));
    *mode_given = true;
  };
  for (const auto& slot : {std::pair{"weights", &o->weights}, {"embed", &o->embed},
                           {"grads", &o->grads}, {"master", &o->master},
                           {"opt_state", &o->opt_state}}) {
    std::string* field = slot.second;  // not a structured binding: clang 14 cannot capture one
    (*s)[slot.first] = [field](const std::string& n, const py::object& v) {
      *field = Text(n, v);
      if (field->empty()) throw py::value_error(absl::StrCat(n, " is empty"));
    };
  }
  (*s)["optimizer"] = EnumInto(&o->optimizer, ParseOptimizer);
  (*s)["recompute"] = EnumInto(&o->recompute, ParseRecompute);
  (*s)["activation_bytes"] = IntInto(&o->activation_bytes);
  (*s)["dp"] = IntInto(&o->dp);
  (*s)["tp"] = IntInto(&o->tp);
  (*s)["pp"] = IntInto(&o->pp);
  (*s)["zero"] = IntInto(&o->zero);
  (*s)["lora_rank"] = IntInto(&o->lora_rank);
  (*s)["sequence_parallel"] = [o](const std::string& n, const py::object& v) {
    o->sequence_parallel = Bool(n, v);
  };
  (*s)["no_flash_attention"] = [o](const std::string& n, const py::object& v) {
    o->flash_attention = !Bool(n, v);
  };
  (*s)["flash_attention"] = [o](const std::string& n, const py::object& v) {
    o->flash_attention = Bool(n, v);
  };
  (*s)["offload"] = [o](const std::string& n, const py::object& v) {
    const std::string what = Text(n, v);
    if (what != "optimizer") {
      throw py::value_error(absl::StrCat(n, " '", what, "': only 'optimizer' can be offloaded"));
    }
    o->offload_optimizer = true;
  };
  (*s)["lora_targets"] = [o](const std::string& n, const py::object& v) {
    o->lora_targets = Names(n, v);
  };
}

void RequireModelAndMode(const std::string& model, bool mode_given) {
  if (model.empty()) {
    throw py::value_error("model is required: a preset (e.g. llama-3.1-8b) or a config.json");
  }
  if (!mode_given) {
    throw py::value_error("mode is required (pretrain, finetune, lora, qlora, inference)");
  }
}

template <typename Result>
py::object Run(const std::function<absl::StatusOr<Result>()>& call) {
  absl::StatusOr<Result> result;
  {
    py::gil_scoped_release release;
    result = call();
  }
  return ToPython(api::ToJson(Value(std::move(result))));
}

py::object Size(const py::kwargs& kwargs) {
  const Keywords keywords("size", kwargs);
  api::SizeOptions o;
  bool mode_given = false, compare = false;
  std::optional<std::vector<std::string>> formats;
  Setters s;
  SizingSetters(&o.sizing, &mode_given, &s);
  s["model"] = TextInto(&o.model);
  s["device"] = TextInto(&o.device);
  s["compare_formats"] = [&](const std::string& n, const py::object& v) { compare = Bool(n, v); };
  s["formats"] = [&](const std::string& n, const py::object& v) { formats = Names(n, v); };
  keywords.Apply(s);
  if (formats && !compare) throw py::value_error("formats goes with compare_formats=True");
  RequireModelAndMode(o.model, mode_given);
  if (compare) {
    const api::CompareFormatsOptions c{o, formats.value_or(std::vector<std::string>{})};
    return Run<api::FormatComparison>([&] { return api::CompareFormats(c); });
  }
  return Run<SizingReport>([&] { return api::Size(o); });
}

py::object TrainingPlanCall(const py::kwargs& kwargs) {
  const Keywords keywords("training_plan", kwargs);
  api::TrainingPlanOptions o;
  bool mode_given = false;
  Setters s;
  SizingSetters(&o.size.sizing, &mode_given, &s);
  s["model"] = TextInto(&o.size.model);
  s["device"] = TextInto(&o.size.device);
  s["recipes"] = [&](const std::string& n, const py::object& v) { o.measure.recipes = Names(n, v); };
  s["tensors"] = [&](const std::string& n, const py::object& v) {
    o.measure.inputs.files = Paths(n, v);
  };
  s["select"] = [&](const std::string& n, const py::object& v) {
    o.measure.tensors = absl::StrJoin(Names(n, v), ",");
  };
  s["steps"] = IntInto(&o.measure.update.adamw.steps);
  s["lr"] = [&](const std::string& n, const py::object& v) {
    o.measure.update.adamw.lr = Real(n, v);
  };
  s["seed"] = SeedInto(&o.measure.update.seed);
  s["threads"] = IntInto(&o.measure.update.threads);
  s["quiet"] = [](const std::string& n, const py::object& v) { (void)Bool(n, v); };
  keywords.Apply(s);
  RequireModelAndMode(o.size.model, mode_given);
  return Run<api::TrainingPlanResult>([&] { return api::TrainingPlan(o); });
}

// A model path, or "" (the bundled model) for None.
std::string ModelArg(const py::object& model) {
  return model.is_none() ? std::string() : PathText(model);
}

py::object PlanCall(const py::kwargs& kwargs) {
  const Keywords keywords("plan", kwargs);
  api::PlanJobOptions o;
  bool mode_given = false;
  Setters s;
  SizingSetters(&o.sizing, &mode_given, &s);
  s["model"] = TextInto(&o.model);
  s["formats"] = [&](const std::string& n, const py::object& v) { o.formats = Names(n, v); };
  s["device"] = [&](const std::string& n, const py::object& v) { o.devices = Names(n, v); };
  s["tensors"] = [&](const std::string& n, const py::object& v) { o.tensor_files = Paths(n, v); };
  s["select"] = [&](const std::string& n, const py::object& v) {
    o.select = absl::StrJoin(Names(n, v), ",");
  };
  s["threads"] = IntInto(&o.threads);
  s["eval"] = [&](const std::string& n, const py::object& v) { o.eval = Bool(n, v); };
  s["eval_model"] = [&](const std::string&, const py::object& v) { o.eval_model = ModelArg(v); };
  s["eval_sample"] = TextInto(&o.eval_sample);
  s["eval_imatrix"] = PathInto(&o.eval_imatrix);
  s["eval_seed"] = SeedInto(&o.eval_seed);
  s["mix"] = [&](const std::string& n, const py::object& v) { o.mix = Bool(n, v); };
  s["mix_types"] = [&](const std::string& n, const py::object& v) { o.mix_types = Names(n, v); };
  s["mix_tune_sample"] = TextInto(&o.mix_tune_sample);
  s["mix_tune_seed"] = SeedInto(&o.mix_tune_seed);
  s["html"] = [&](const std::string& n, const py::object& v) {
    if (!IsPath(v)) WrongType(n, "a path", v);
    o.html = PathText(v);
  };
  s["quiet"] = [](const std::string& n, const py::object& v) { (void)Bool(n, v); };
  keywords.Apply(s);
  RequireModelAndMode(o.model, mode_given);
  o.html_command = keywords.Call();
  return Run<Plan>([&] { return api::PlanJob(o); });
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

// The input of quant_error and range_study: a path or a list of paths, a
// dict of name -> array, or anything else NumPy makes an array of (the
// tensor "array"). Arrays are viewed in place, kept alive in `keep`.
api::TensorInputs Inputs(const py::object& data, std::vector<py::array>& keep) {
  api::TensorInputs inputs;
  if (IsPath(data)) {
    inputs.files.push_back(PathText(data));
    return inputs;
  }
  if ((py::isinstance<py::list>(data) || py::isinstance<py::tuple>(data) ||
       py::isinstance<py::dict>(data)) &&
      py::len(data) == 0) {
    throw py::value_error(
        "no input: give a checkpoint path, a list of paths, an array or a dict of arrays");
  }
  if (py::isinstance<py::list>(data) || py::isinstance<py::tuple>(data)) {
    bool paths = true;
    for (const py::handle item : data) paths = paths && IsPath(item);
    if (paths) {
      for (const py::handle item : data) inputs.files.push_back(PathText(item));
      return inputs;
    }
  }
  if (py::isinstance<py::dict>(data)) {
    for (const auto& [name, array] : py::cast<py::dict>(data)) {
      inputs.arrays.push_back(
          ArrayView(py::str(name), py::reinterpret_borrow<py::object>(array), keep));
    }
    return inputs;
  }
  inputs.arrays.push_back(ArrayView("array", data, keep));
  return inputs;
}

py::object QuantError(const py::object& data, const py::object& scheme, const py::kwargs& kwargs) {
  api::QuantErrorOptions o;
  if (!scheme.is_none()) o.schemes = Names("scheme", scheme);
  Setters s;
  s["reference"] = [&](const std::string& n, const py::object& v) { o.reference = Paths(n, v); };
  s["tensors"] = [&](const std::string& n, const py::object& v) {
    o.tensors = absl::StrJoin(Names(n, v), ",");
  };
  s["summary"] = [&](const std::string& n, const py::object& v) { o.summary = Bool(n, v); };
  s["histogram"] = [&](const std::string& n, const py::object& v) { o.histogram = Bool(n, v); };
  s["relative_floor"] = [&](const std::string& n, const py::object& v) {
    o.relative_floor = Real(n, v);
  };
  s["imatrix"] = PathInto(&o.imatrix);
  s["threads"] = IntInto(&o.threads);
  s["quiet"] = [](const std::string& n, const py::object& v) { (void)Bool(n, v); };
  Keywords("quant_error", kwargs).Apply(s);
  std::vector<py::array> keep;
  o.inputs = Inputs(data, keep);
  return Run<api::QuantErrorResult>([&] { return api::QuantError(o); });
}

py::object UpdateErrorCall(const py::object& data, const py::object& recipes,
                           const py::kwargs& kwargs) {
  api::UpdateErrorApiOptions o;
  if (recipes.is_none()) {
    // the default ladder
  } else {
    o.recipes = Names("recipes", recipes);
    if (o.recipes.empty()) throw py::value_error("recipes: want at least one recipe");
  }
  AdamWOptions& a = o.update.adamw;
  auto real = [](double* field) {
    return [field](const std::string& n, const py::object& v) { *field = Real(n, v); };
  };
  Setters s;
  s["tensors"] = [&](const std::string& n, const py::object& v) {
    o.tensors = absl::StrJoin(Names(n, v), ",");
  };
  s["steps"] = IntInto(&a.steps);
  s["warmup"] = IntInto(&a.warmup);
  s["schedule"] = TextInto(&a.schedule);
  s["lr"] = real(&a.lr);
  s["min_lr_ratio"] = real(&a.min_lr_ratio);
  s["beta1"] = real(&a.beta1);
  s["beta2"] = real(&a.beta2);
  s["eps"] = real(&a.eps);
  s["weight_decay"] = real(&a.weight_decay);
  s["grad_scale"] = real(&o.update.grad_scale);
  s["grad_signal"] = real(&o.update.grad_signal);
  s["seed"] = SeedInto(&o.update.seed);
  s["threads"] = IntInto(&o.update.threads);
  s["quiet"] = [](const std::string& n, const py::object& v) { (void)Bool(n, v); };
  Keywords("update_error", kwargs).Apply(s);
  std::vector<py::array> keep;
  o.inputs = Inputs(data, keep);
  return Run<api::UpdateErrorResult>([&] { return api::UpdateError(o); });
}

py::object TrainingRecipesCall() { return ToPython(api::TrainingRecipesJson()); }

py::object TensorsCall(const py::object& files, const std::string& tensors, bool metadata) {
  api::TensorsOptions o;
  o.files = Paths("files", files);
  o.tensors = tensors;
  o.metadata = metadata;
  return Run<api::TensorsResult>([&] { return api::Tensors(o); });
}

py::object RangeStudy(const py::object& data, const py::kwargs& kwargs) {
  api::RangeStudyOptions o;
  Setters s;
  s["formats"] = [&](const std::string& n, const py::object& v) { o.formats = Names(n, v); };
  s["fraction"] = [&](const std::string& n, const py::object& v) { o.fraction = Real(n, v); };
  s["tensors"] = [&](const std::string& n, const py::object& v) {
    o.tensors = absl::StrJoin(Names(n, v), ",");
  };
  s["threads"] = IntInto(&o.threads);
  s["quiet"] = [](const std::string& n, const py::object& v) { (void)Bool(n, v); };
  Keywords("range_study", kwargs).Apply(s);
  std::vector<py::array> keep;
  o.inputs = Inputs(data, keep);
  return Run<api::RangeStudyResult>([&] { return api::RangeStudy(o); });
}

// Token ids from an integer array-like: [sequences, length] (or [length],
// one sequence, `*one_d` set). ValueError for another shape or dtype, or an
// id outside int32's range.
api::TokenArray TokensFrom(const std::string& name, const py::handle& v, bool* one_d) {
  py::array a = py::array::ensure(v);
  if (!a) throw py::error_already_set();
  const char kind = a.dtype().kind();
  if (kind != 'i' && kind != 'u') {
    throw py::value_error(absl::StrCat(name, ": want an integer array of token ids, not dtype ",
                                       std::string(py::str(a.dtype()))));
  }
  if (a.ndim() != 1 && a.ndim() != 2) {
    throw py::value_error(absl::StrCat(name, ": want [sequences, length] or [length], not ",
                                       a.ndim(), " dimensions"));
  }
  *one_d = a.ndim() == 1;
  py::array_t<int64_t, py::array::c_style | py::array::forcecast> ids(a);
  if (!ids) throw py::error_already_set();
  api::TokenArray out;
  out.length = a.ndim() == 1 ? a.shape(0) : a.shape(1);
  if (ids.size() == 0 || out.length == 0) throw py::value_error(name + ": no tokens");
  out.ids.resize(static_cast<size_t>(ids.size()));
  const int64_t* data = ids.data();
  for (size_t i = 0; i < out.ids.size(); ++i) {
    if (data[i] < 0 || data[i] > INT32_MAX) {
      throw py::value_error(absl::StrCat(name, ": token ", data[i], " at sequence ",
                                         i / out.length, ", position ", i % out.length,
                                         " is not a token id"));
    }
    out.ids[i] = static_cast<int32_t>(data[i]);
  }
  return out;
}

py::object ForwardCall(const py::object& model, const py::object& tokens,
                       const py::object& threads) {
  bool one_d = false;
  const api::TokenArray ids = TokensFrom("tokens", tokens, &one_d);
  const int n_threads = threads.is_none() ? 0 : static_cast<int>(Int("threads", threads));
  const std::string path = ModelArg(model);
  absl::StatusOr<std::vector<float>> logits;
  {
    py::gil_scoped_release release;
    logits = api::ForwardLogits(path, {}, ids, n_threads);
  }
  std::vector<float> values = Value(std::move(logits));
  const int64_t sequences = static_cast<int64_t>(ids.ids.size()) / ids.length;
  const int64_t vocab = static_cast<int64_t>(values.size()) / (sequences * ids.length);
  std::vector<py::ssize_t> shape;
  if (!one_d) shape.push_back(sequences);
  shape.push_back(ids.length);
  shape.push_back(vocab);
  py::array_t<float> out(shape);
  std::memcpy(out.mutable_data(), values.data(), values.size() * sizeof(float));
  return out;
}

py::object SampleCall(const py::object& model, int64_t count, int64_t length,
                      double temperature, uint64_t seed, const py::object& threads) {
  SampleOptions o;
  o.count = count;
  o.length = length;
  o.temperature = temperature;
  o.seed = seed;
  o.threads = threads.is_none() ? 0 : static_cast<int>(Int("threads", threads));
  const std::string path = ModelArg(model);
  absl::StatusOr<api::TokenArray> tokens;
  {
    py::gil_scoped_release release;
    tokens = api::Sample(path, {}, o);
  }
  api::TokenArray t = Value(std::move(tokens));
  py::array_t<int32_t> out({static_cast<py::ssize_t>(count), static_cast<py::ssize_t>(length)});
  std::memcpy(out.mutable_data(), t.ids.data(), t.ids.size() * sizeof(int32_t));
  return out;
}

// A site's list: a str ("a,b") or a list of str.
Setter SiteInto(std::string* field) {
  return [field](const std::string& n, const py::object& v) {
    *field = absl::StrJoin(Names(n, v), ",");
  };
}

// The token keywords of eval (and mix's, each with `prefix`): tokens,
// sample, seed, text, text_file, tokenizer, ctx, chunks.
void TokenSetters(Setters& s, api::EvalOptions& o, const std::string& prefix) {
  s[prefix + "tokens"] = [&o](const std::string& n, const py::object& v) {
    if (IsPath(v)) {
      o.tokens_file = PathText(v);
    } else {
      bool one_d = false;
      o.token_array = TokensFrom(n, v, &one_d);
    }
  };
  s[prefix + "sample"] = [&o](const std::string& n, const py::object& v) {
    if (py::isinstance<py::tuple>(v) && py::len(v) == 2) {
      const py::tuple t = v.cast<py::tuple>();
      o.sample = absl::StrCat(Int(n, t[0]), ":", Int(n, t[1]));
    } else {
      o.sample = Text(n, v);
    }
  };
  s[prefix + "seed"] = SeedInto(&o.seed);
  s[prefix + "text"] = [&o](const std::string& n, const py::object& v) { o.text = Text(n, v); };
  s[prefix + "text_file"] = [&o](const std::string& n, const py::object& v) {
    if (!IsPath(v)) WrongType(n, "a path", v);
    o.text_file = PathText(v);
  };
  s[prefix + "tokenizer"] = [&o](const std::string& n, const py::object& v) {
    if (!IsPath(v)) WrongType(n, "a path", v);
    o.tokenizer = PathText(v);
  };
  s[prefix + "ctx"] = IntInto(&o.ctx);
  s[prefix + "chunks"] = IntInto(&o.chunks);
}

py::object EvalCall(const py::kwargs& kwargs) {
  api::EvalOptions o;
  Setters s;
  s["model"] = [&](const std::string&, const py::object& v) { o.model = ModelArg(v); };
  s["tensors"] = [&](const std::string& n, const py::object& v) { o.tensors = Paths(n, v); };
  TokenSetters(s, o, "");
  s["weights"] = SiteInto(&o.weights);
  s["activations"] = SiteInto(&o.activations);
  s["kv"] = SiteInto(&o.kv);
  s["compute"] = SiteInto(&o.compute);
  s["weights_file"] = [&](const std::string& n, const py::object& v) {
    o.weights_files = Paths(n, v);
  };
  s["batch_tokens"] = [&](const std::string& n, const py::object& v) {
    o.batch_tokens = Int(n, v);
    if (o.batch_tokens < 0) throw py::value_error("batch_tokens: want a number >= 0");
  };
  s["imatrix"] = PathInto(&o.imatrix);
  s["threads"] = IntInto(&o.threads);
  Keywords("eval", kwargs).Apply(s);
  return Run<api::EvalResult>([&] { return api::Eval(o); });
}

py::object MixCall(const py::kwargs& kwargs) {
  api::MixOptions o;
  Setters s;
  s["model"] = [&](const std::string&, const py::object& v) { o.model = ModelArg(v); };
  s["tensors"] = [&](const std::string& n, const py::object& v) { o.tensors = Paths(n, v); };
  s["bits_per_weight"] = [&](const std::string& n, const py::object& v) {
    o.bits_per_weight = Real(n, v);
  };
  s["bytes"] = [&](const std::string& n, const py::object& v) {
    const int64_t bytes = py::isinstance<py::str>(v) ? Value(ParseBytes(Text(n, v), n)) : Int(n, v);
    if (bytes <= 0) throw py::value_error("bytes: want a number > 0");
    o.bytes = static_cast<uint64_t>(bytes);
  };
  s["device"] = [&](const std::string& n, const py::object& v) { o.device = Text(n, v); };
  JobSetters(&o.job, &s);
  s["types"] = [&](const std::string& n, const py::object& v) { o.types = Names(n, v); };
  s["baselines"] = [&](const std::string& n, const py::object& v) { o.baselines = Names(n, v); };
  s["random_mixes"] = [&](const std::string& n, const py::object& v) {
    o.random_mixes = static_cast<int>(std::clamp<int64_t>(Int(n, v), -1, 1 << 20));
  };
  s["random_seed"] = SeedInto(&o.seed);
  TokenSetters(s, o.verify, "");
  TokenSetters(s, o.tune, "tune_");
  s["imatrix"] = PathInto(&o.imatrix);
  s["threads"] = IntInto(&o.threads);
  Keywords("mix", kwargs).Apply(s);
  return Run<api::MixResult>([&] { return api::Mix(o); });
}

// lowp imatrix --json as a dict, with "importance": each entry's in_sum2 /
// count as a float32 array [matrices, columns] (what the quantizers get).
py::object ImatrixCall(const py::kwargs& kwargs) {
  api::ImatrixOptions o;
  Setters s;
  s["model"] = [&](const std::string&, const py::object& v) { o.input.model = ModelArg(v); };
  s["tensors"] = [&](const std::string& n, const py::object& v) { o.input.tensors = Paths(n, v); };
  TokenSetters(s, o.input, "");
  s["process_output"] = [&](const std::string& n, const py::object& v) {
    o.process_output = Bool(n, v);
  };
  s["out"] = PathInto(&o.out);
  s["format"] = TextInto(&o.format);
  s["batch_tokens"] = [&](const std::string& n, const py::object& v) {
    o.input.batch_tokens = Int(n, v);
    if (o.input.batch_tokens < 0) throw py::value_error("batch_tokens: want a number >= 0");
  };
  s["threads"] = IntInto(&o.input.threads);
  Keywords("imatrix", kwargs).Apply(s);
  absl::StatusOr<api::ImatrixResult> result;
  {
    py::gil_scoped_release release;
    result = api::MakeImatrix(o);
  }
  const api::ImatrixResult& r = Value(std::move(result));
  py::dict out = ToPython(api::ToJson(r));
  py::dict importance;
  for (const auto& [name, e] : r.imatrix.entries()) {
    const std::vector<float> w = e.Values();
    py::array_t<float> a({static_cast<py::ssize_t>(e.matrices), static_cast<py::ssize_t>(e.columns)});
    std::copy(w.begin(), w.end(), a.mutable_data());
    importance[py::str(e.name)] = a;
  }
  out["importance"] = importance;
  return out;
}

py::object TokenizeCall(const py::kwargs& kwargs) {
  api::TokenizeOptions o;
  Setters s;
  s["text"] = [&](const std::string& n, const py::object& v) { o.text = Text(n, v); };
  s["text_file"] = [&](const std::string& n, const py::object& v) {
    if (!IsPath(v)) WrongType(n, "a path", v);
    o.text_file = PathText(v);
  };
  s["model"] = [&](const std::string&, const py::object& v) { o.model = ModelArg(v); };
  s["tokenizer"] = [&](const std::string& n, const py::object& v) {
    if (!IsPath(v)) WrongType(n, "a path", v);
    o.tokenizer = PathText(v);
  };
  s["parse_special"] = [&](const std::string& n, const py::object& v) {
    o.parse_special = Bool(n, v);
  };
  s["add_bos"] = [&](const std::string& n, const py::object& v) { o.add_bos = Bool(n, v); };
  s["pieces"] = [&](const std::string& n, const py::object& v) { o.pieces = Bool(n, v); };
  Keywords("tokenize", kwargs).Apply(s);
  return Run<api::TokenizeResult>([&] { return api::Tokenize(o); });
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

// float32 or float16 values -> codes of `to`, one per element (uint8,
// uint16 or uint32 by the format's width), or with packed=True (4-bit
// formats) in the storage layout, two codes per byte, low nibble first.
// `threads`: None or 0 for every CPU the process may run on.
int Threads(const py::object& threads) {
  if (threads.is_none()) return 0;
  const int64_t n = Int("threads", threads);
  if (n < 0 || n > 4096) throw py::value_error(absl::StrCat("threads=", n, ": 0 (all) to 4096"));
  return static_cast<int>(n);
}

py::array Convert(const py::object& input, const std::string& to,
                  std::optional<std::string> rounding, std::optional<std::string> overflow,
                  std::optional<std::string> subnormals, std::optional<std::string> nan,
                  uint64_t seed, bool packed, const py::object& threads) {
  const int n_threads = Threads(threads);
  const Format format = Value(FindFormat(to));
  const ConvertOptions options = ReadConvertOptions(rounding, overflow, subnormals, nan, seed);
  if (packed && format.storage_bits() != 4) {
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
  py::array out =
      packed ? py::array(py::dtype::of<uint8_t>(),
                         std::vector<py::ssize_t>{static_cast<py::ssize_t>(StorageBytes(format, n))})
             : py::array(CodeDtype(format),
                         std::vector<py::ssize_t>(values.shape(), values.shape() + values.ndim()));
  const std::span<uint8_t> bytes(static_cast<uint8_t*>(out.mutable_data()),
                                 static_cast<size_t>(out.nbytes()));
  absl::Status status;
  {
    py::gil_scoped_release release;
    status = half ? api::EncodeHalfValues(
                        std::span<const uint16_t>(static_cast<const uint16_t*>(values.data()), n),
                        format, options, packed, bytes, n_threads)
                  : api::EncodeValues(
                        format, std::span<const float>(static_cast<const float*>(values.data()), n),
                        options, packed, bytes, n_threads);
  }
  Check(status);
  return out;
}

// Codes of `fmt` -> float32 values, exactly. Codes come one per element in
// an unsigned integer array (any width that holds them), or with packed=True
// (4-bit formats) as the storage layout holding `count` codes (default: two
// per byte).
py::array Decode(const py::object& input, const std::string& fmt, bool packed,
                 std::optional<size_t> count, const py::object& threads) {
  const int n_threads = Threads(threads);
  const Format format = Value(FindFormat(fmt));
  const py::array codes = NativeArray(input, "codes");
  if (codes.dtype().kind() != 'u') {
    throw py::value_error(absl::StrCat("decode takes unsigned integer codes (got ",
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
      throw py::value_error(absl::StrCat(n, " codes do not fill ", bytes, " bytes of storage"));
    }
    shape = {static_cast<py::ssize_t>(n)};
  }
  py::array_t<float> out(shape);
  absl::Status status;
  {
    py::gil_scoped_release release;
    status = api::DecodeCodes(format, codes.data(), itemsize, n, packed,
                              std::span<float>(static_cast<float*>(out.mutable_data()), n),
                              n_threads);
  }
  Check(status);
  return out;
}

// float32 values rounded to `to` and read back in one pass (fake_quant).
py::array RoundValues(const py::object& input, const std::string& to,
                      std::optional<std::string> rounding, std::optional<std::string> overflow,
                      std::optional<std::string> subnormals, std::optional<std::string> nan,
                      uint64_t seed, const py::object& threads) {
  const int n_threads = Threads(threads);
  const Format format = Value(FindFormat(to));
  const ConvertOptions options = ReadConvertOptions(rounding, overflow, subnormals, nan, seed);
  const py::array values = NativeArray(input, "values");
  if (!py::isinstance<py::array_t<float>>(values)) {
    throw py::value_error(absl::StrCat("round takes float32 values (got ",
                                       std::string(py::str(values.dtype())), ")"));
  }
  const size_t n = static_cast<size_t>(values.size());
  py::array_t<float> out(std::vector<py::ssize_t>(values.shape(), values.shape() + values.ndim()));
  absl::Status status;
  {
    py::gil_scoped_release release;
    status = api::RoundValues(
        format, std::span<const float>(static_cast<const float*>(values.data()), n), options,
        std::span<float>(static_cast<float*>(out.mutable_data()), n), n_threads);
  }
  Check(status);
  return out;
}

// An array quantized by `scheme` and dequantized (what `lowp quantize`
// writes), as float32 of the same shape; rows are the last axis.
py::array Quantize(const py::object& data, const std::string& scheme, const py::object& threads,
                   const py::object& imatrix) {
  const int n_threads = Threads(threads);
  std::vector<py::array> keep;
  const TensorView view = ArrayView("array", data, keep);
  // One importance per column (ggml_quantize_chunk's imatrix), float32.
  std::vector<float> importance;
  if (!imatrix.is_none()) {
    const py::array w = py::array_t<float, py::array::c_style | py::array::forcecast>::ensure(imatrix);
    if (!w || w.ndim() != 1) throw py::value_error("imatrix: want a 1-D array of one weight per column");
    importance.assign(static_cast<const float*>(w.data()),
                      static_cast<const float*>(w.data()) + w.size());
  }
  py::array_t<float> out(std::vector<py::ssize_t>(view.shape.begin(), view.shape.end()));
  absl::Status status;
  {
    py::gil_scoped_release release;
    status = api::QuantizeArray(
        view, scheme,
        std::span<float>(static_cast<float*>(out.mutable_data()), static_cast<size_t>(out.size())),
        n_threads, importance);
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
        PyErr_SetString(PyExc_ValueError,
                        absl::StrCat(what, "has no elements, but NumPy cannot represent the shape (",
                                     numpy, ")")
                            .c_str());
      } else {
        PyErr_SetString(PyExc_MemoryError, absl::StrCat(what, "cannot allocate its ",
                                                        t.elements(), " float32 values (", numpy,
                                                        ")")
                                               .c_str());
      }
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
      "formats", [] { return ToPython(api::ToJson(api::Formats())); },
      "The format catalog: `lowp formats --json`.");
  m.def(
      "schemes", [] { return ToPython(api::ToJson(api::Schemes())); },
      "The quantization schemes: `lowp schemes --json`.");
  m.def(
      "devices", [] { return ToPython(api::ToJson(api::Devices())); },
      "The device catalog: `lowp devices --json`.");
  m.def("convert", &Convert, py::arg("values"), py::arg("to"), py::kw_only(),
        py::arg("rounding") = py::none(), py::arg("overflow") = py::none(),
        py::arg("subnormals") = py::none(), py::arg("nan") = py::none(), py::arg("seed") = 0,
        py::arg("packed") = false, py::arg("threads") = py::none(),
        "float32 or float16 values -> codes of format `to` (uint8/uint16/uint32, one per "
        "element; packed=True: 4-bit codes two per byte). threads: None (every CPU the process "
        "may run on) or a count.");
  m.def("decode", &Decode, py::arg("codes"), py::arg("fmt"), py::kw_only(),
        py::arg("packed") = false, py::arg("count") = py::none(), py::arg("threads") = py::none(),
        "Codes of format `fmt` -> float32 values, exactly.");
  m.def("round_values", &RoundValues, py::arg("values"), py::arg("to"), py::kw_only(),
        py::arg("rounding") = py::none(), py::arg("overflow") = py::none(),
        py::arg("subnormals") = py::none(), py::arg("nan") = py::none(), py::arg("seed") = 0,
        py::arg("threads") = py::none(),
        "float32 values rounded to format `to` and read back as float32, in one pass: "
        "decode(convert(values, to, ...), to) bit for bit.");
  m.def("quant_error", &QuantError, py::arg("data"), py::arg("scheme") = py::none(),
        "`lowp quant-error --json` on a checkpoint path (or list of paths), an array, or a "
        "dict of arrays; scheme: a name or a list; keywords tensors='*.q_proj*', summary=True, "
        "relative_floor=1e-3, histogram=True, threads=0; reference=PATH(s) instead of scheme: "
        "each tensor of data (a GGUF file) as stored against its original there.");
  m.def("update_error", &UpdateErrorCall, py::arg("data"), py::arg("recipes") = py::none(),
        "`lowp update-error --json` on a checkpoint path (or paths), an array, or a dict of "
        "arrays: AdamW steps in float64 and per training-state recipe (a name of "
        "training_recipes() or a spelling 'weights=bf16+update=sr+...'; default the 16-to-6-byte "
        "ladder); keywords tensors, steps=100, lr=1e-4, schedule='constant'|'cosine', warmup, "
        "min_lr_ratio, beta1=0.9, beta2=0.95, eps=1e-8, weight_decay=0.1, grad_scale=1e-3, "
        "grad_signal=0.5, seed=0, threads=0.");
  m.def("training_plan", &TrainingPlanCall,
        "`lowp plan --mode pretrain|finetune --recipes ... --json`: per training-state recipe, "
        "the job's memory (model=, mode=, device=, every option of size) beside what the recipe "
        "does to AdamW's updates on tensors= (default the bundled stories260K), select=, "
        "steps=100, lr=1e-4, seed=0.");
  m.def("training_recipes", &TrainingRecipesCall,
        "`lowp update-error --list --json`: each named training-state recipe, its spelling and "
        "bytes per parameter.");
  m.def("tensors", &TensorsCall, py::arg("files"), py::kw_only(), py::arg("tensors") = "",
        py::arg("metadata") = false,
        "`lowp tensors --json`: each tensor of the files (safetensors, GGUF, .npy) with its "
        "type, shape, bytes and bits per weight; metadata=True adds GGUF's typed key/value "
        "pairs or safetensors' __metadata__.");
  m.def("range_study", &RangeStudy, py::arg("data"),
        "`lowp range --json` on a checkpoint path, an array or a dict of arrays (formats=[...], "
        "fraction=0.999, tensors=..., threads=0).");
  m.def("quantize", &Quantize, py::arg("array"), py::arg("scheme"), py::kw_only(),
        py::arg("threads") = py::none(), py::arg("imatrix") = py::none(),
        "The array quantized by `scheme` and dequantized, as float32; imatrix: one importance "
        "per column (the last axis), as ggml_quantize_chunk's imatrix argument, for the "
        "llama.cpp types (iq2_xxs, iq2_xs and iq1_s need it).");
  m.def("imatrix", &ImatrixCall,
        "`lowp imatrix --json` as a dict plus 'importance' (name -> float32 [matrices, columns]): "
        "model=..., the tokens as eval takes them (text_file=..., ctx=512, chunks=N, "
        "sample='16:128', ...), process_output=True, out=PATH (format='gguf'|'dat').");
  m.def("size", &Size,
        "`lowp size --json`: model=..., mode=..., the memory model's options by field name "
        "(weights='int4-g128', seq=8192, tp=2, zero=3, device='h100-sxm', ...), "
        "compare_formats=True with formats=[...].");
  m.def("plan", &PlanCall,
        "`lowp plan --json`: model=..., mode=..., formats=[...], device=[...], "
        "tensors=[paths], select='*mlp*', html='report.html', eval=True (eval_model=dir, "
        "eval_sample='16:128', eval_seed=0), mix=True (per device the lowp.mix for what it leaves "
        "beside the job; mix_types=[...], mix_tune_sample='8:256', mix_tune_seed=1), and "
        "size()'s options.");
  m.def("forward", &ForwardCall, py::arg("model") = py::none(), py::arg("tokens"),
        py::kw_only(), py::arg("threads") = py::none(),
        "float32 logits of a model (a Hugging Face directory; None: the bundled stories260K-hf) "
        "for integer tokens [sequences, length] -> [sequences, length, vocab] (1-D: [length, "
        "vocab]).");
  m.def("sample", &SampleCall, py::arg("model") = py::none(), py::kw_only(),
        py::arg("count") = 1, py::arg("length") = 64, py::arg("temperature") = 1.0,
        py::arg("seed") = 0, py::arg("threads") = py::none(),
        "Token sequences [count, length] sampled from the float32 model, BOS first "
        "(temperature 0: greedy).");
  m.def("mix", &MixCall,
        "`lowp mix --json`: bits_per_weight=B, bytes=N (or '4.2GB') or device='rtx-4090' with "
        "the job beside the weights (seq=4096, batch=1, kv='fp16', prefill_tokens, "
        "buffers='2GB', headroom=0); model=dir (default the bundled "
        "stories3M-hf), types=[...], baselines=[recipes] or 'none', random_mixes=0, "
        "random_seed=0; the verification's tokens as eval takes them (tokens, sample='16:256', "
        "seed, text, text_file, tokenizer, ctx, chunks) and the tuning's with tune_ before "
        "each (default tune_sample='8:256', tune_seed=1); threads=0.");
  m.def("eval", &EvalCall,
        "`lowp eval --json`: model=dir, tensors=[paths], tokens=array or .npy path, "
        "sample='N:LEN', seed=0, text='...' or text_file=path (llama.cpp's perplexity "
        "protocol: ctx=512, chunks=-1, tokenizer=path over the model's own), weights=[...], "
        "weights_file=[GGUF or safetensors files of the model], activations=[...], kv=[...], "
        "compute=[...], batch_tokens=0, threads=0.");
  m.def("tokenize", &TokenizeCall,
        "`lowp tokenize --json`: text='...' or text_file=path, model=dir (default: the "
        "bundled stories260K-hf) or tokenizer=path, parse_special=False, add_bos=None (the "
        "tokenizer's choice), pieces=False. Returns the ids and counts.");
  m.def(
      "bundled_model", [] { return Value(BundledModel()); },
      "Directory of the bundled model in Hugging Face layout (stories260K-hf).");
  m.def(
      "bundled_checkpoint", [] { return Value(BundledCheckpoint()); },
      "Path of the bundled real checkpoint (stories260K in float32; $LOWP_DATA_DIR overrides).");
  m.def("read_tensors", &ReadTensors, py::arg("path"), py::arg("tensors") = "",
        "The floating tensors of a checkpoint as float32 arrays, by name (tensors: globs).");
}
