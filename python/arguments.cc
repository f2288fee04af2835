#include "python/arguments.h"

#include <algorithm>
#include <cctype>
#include <cstring>
#include <stdexcept>
#include <type_traits>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "api/quant.h"
#include "formats/option_error.h"
#include "sizing/devices.h"

namespace lowp::python {
namespace {

constexpr const char* kPathKinds = "a path (str, bytes or os.PathLike)";

std::string TypeName(py::handle v) {
  return std::string(py::str(py::type::of(v).attr("__name__")));
}

std::string Repr(py::handle v) { return std::string(py::repr(v)); }

bool IsFieldChar(char c) { return std::islower(static_cast<unsigned char>(c)) || c == '_'; }

std::string KeywordFor(absl::string_view field, const KeywordOf& keyword) {
  if (keyword) {
    if (std::optional<std::string> k = keyword(field)) return *k;
  }
  std::string name(field);
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
}

[[noreturn]] void RaiseMessage(absl::StatusCode code, const std::string& message) {
  switch (code) {
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kUnimplemented:
      RaiseError(PyExc_ValueError, message);
    case absl::StatusCode::kInternal:
    case absl::StatusCode::kUnknown:
      RaiseError(PyExc_RuntimeError, message);
    default:  // files not found, unreadable, unwritable
      RaiseError(PyExc_OSError, message);
  }
}

bool IsInstance(py::handle v, const char* module, const char* type) {
  return py::isinstance(v, py::module_::import(module).attr(type));
}

}  // namespace

// ------------------------------------------------------------------ errors

void RaiseError(PyObject* type, const std::string& message) {
  const py::object text = py::reinterpret_steal<py::object>(PyUnicode_DecodeUTF8(
      message.data(), static_cast<Py_ssize_t>(message.size()), "backslashreplace"));
  if (!text) throw py::error_already_set();
  PyErr_SetObject(type, text.ptr());
  throw py::error_already_set();
}

std::string KeywordMessage(const absl::Status& status, const KeywordOf& keyword) {
  const std::string message(status.message());
  std::string out;
  size_t start = 0;
  // The subject an option error starts with: "seq", "formats nosuch",
  // "buffers and headroom".
  if (std::optional<std::string> field = OptionOf(status);
      field && absl::StartsWith(message, *field)) {
    std::vector<std::string> parts;
    for (absl::string_view part : absl::StrSplit(*field, " and ")) {
      const size_t end = std::min(part.find(' '), part.size());
      parts.push_back(absl::StrCat(KeywordFor(part.substr(0, end), keyword), part.substr(end)));
    }
    out = absl::StrJoin(parts, " and ");
    start = field->size();
  }
  // Other options named in the text, written `name`.
  for (size_t i = start; i < message.size(); ++i) {
    if (message[i] == '`') {
      size_t j = i + 1;
      while (j < message.size() && IsFieldChar(message[j])) ++j;
      if (j > i + 1 && j < message.size() && message[j] == '`') {
        absl::StrAppend(&out, "`", KeywordFor(message.substr(i + 1, j - i - 1), keyword), "`");
        i = j;
        continue;
      }
    }
    out += message[i];
  }
  return out;
}

void RaiseStatus(const absl::Status& status, const KeywordOf& keyword) {
  RaiseMessage(status.code(), KeywordMessage(status, keyword));
}

void Check(const absl::Status& status) {
  if (!status.ok()) throw StatusError{status};
}

void RaiseFor(const Arg& a, const absl::Status& status) {
  std::string message(status.message());
  const std::optional<std::string> field = OptionOf(status);
  if (field && absl::StartsWith(message, *field)) {
    // The field the parser names is this argument.
    message = absl::StrCat(a.name, message.substr(std::min(field->find(' '), field->size())));
  } else if (!(absl::StartsWith(message, a.name) &&
               (message.size() == a.name.size() || message[a.name.size()] == ' ' ||
                message[a.name.size()] == ':'))) {
    message = absl::StrCat(a.name, ": ", message);
  }
  RaiseMessage(status.code(), message);
}

void WrongType(const Arg& a, absl::string_view want) {
  RaiseError(PyExc_TypeError, absl::StrCat(a.name, ": want ", want, ", not ", TypeName(a.value)));
}

void WrongValue(const Arg& a, absl::string_view why) {
  RaiseError(PyExc_ValueError, absl::StrCat(a.name, ": ", why));
}

// --------------------------------------------------------------- converters

bool IsBool(py::handle v) {
  return py::isinstance<py::bool_>(v) || IsInstance(v, "numpy", "bool_");
}

bool IsPath(py::handle v) {
  return py::isinstance<py::str>(v) || py::isinstance<py::bytes>(v) ||
         py::hasattr(py::type::of(v), "__fspath__");
}

__int128 WholeNumber(const Arg& a) {
  if (IsBool(a.value) || !IsInstance(a.value, "numbers", "Integral")) {
    WrongType(a, "an integer");
  }
  const py::object index = py::reinterpret_steal<py::object>(PyNumber_Index(a.value.ptr()));
  if (!index) throw py::error_already_set();
  int overflow = 0;
  const long long v = PyLong_AsLongLongAndOverflow(index.ptr(), &overflow);
  if (v == -1 && PyErr_Occurred()) throw py::error_already_set();
  if (overflow == 0) return v;
  constexpr __int128 kBeyond = static_cast<__int128>(1) << 64;  // past every field
  if (overflow < 0) return -kBeyond;
  const unsigned long long u = PyLong_AsUnsignedLongLong(index.ptr());
  if (u == static_cast<unsigned long long>(-1) && PyErr_Occurred()) {
    PyErr_Clear();
    return kBeyond;
  }
  return u;
}

std::string IntegerText(const Arg& a) {
  const py::object index = py::reinterpret_steal<py::object>(PyNumber_Index(a.value.ptr()));
  if (!index) throw py::error_already_set();
  try {
    return std::string(py::str(index));
  } catch (py::error_already_set&) {
    // Python prints at most sys.get_int_max_str_digits() digits.
    return absl::StrCat("an integer of ", py::cast<int64_t>(index.attr("bit_length")()), " bits");
  }
}

int Threads(const Arg& a) { return Int<int>(a, 0, api::kMaxThreads); }

double Real(const Arg& a) {
  if (IsBool(a.value) || !IsInstance(a.value, "numbers", "Real")) WrongType(a, "a number");
  const double v = PyFloat_AsDouble(a.value.ptr());
  if (v == -1.0 && PyErr_Occurred()) {
    if (!PyErr_ExceptionMatches(PyExc_OverflowError)) throw py::error_already_set();
    PyErr_Clear();
    WrongValue(a, absl::StrCat(PyIndex_Check(a.value.ptr()) ? IntegerText(a) : Repr(a.value),
                               " is beyond a float's range"));
  }
  return v;
}

bool Bool(const Arg& a) {
  if (!IsBool(a.value)) WrongType(a, "True or False");
  return PyObject_IsTrue(a.value.ptr()) == 1;
}

std::string Text(const Arg& a) {
  if (!PyUnicode_Check(a.value.ptr())) WrongType(a, "a str");
  Py_ssize_t size = 0;
  const char* data = PyUnicode_AsUTF8AndSize(a.value.ptr(), &size);
  if (data == nullptr) {
    // Only a surrogate, which a str may hold and UTF-8 cannot, stops it.
    PyErr_Clear();
    const Py_ssize_t n = PyUnicode_GetLength(a.value.ptr());
    for (Py_ssize_t i = 0; i < n; ++i) {
      const Py_UCS4 c = PyUnicode_ReadChar(a.value.ptr(), i);
      if (c >= 0xD800 && c <= 0xDFFF) {
        WrongValue(a, absl::StrFormat("holds a lone surrogate (U+%04X at index %d), which is "
                                      "not text UTF-8 can encode",
                                      c, i));
      }
    }
    WrongValue(a, "is not text UTF-8 can encode");
  }
  return std::string(data, static_cast<size_t>(size));
}

std::string Path(const Arg& a) {
  if (!IsPath(a.value)) WrongType(a, kPathKinds);
  py::object fs = py::reinterpret_steal<py::object>(PyOS_FSPath(a.value.ptr()));
  if (!fs) {  // __fspath__ gave neither str nor bytes
    PyErr_Clear();
    WrongType(a, kPathKinds);
  }
  if (PyUnicode_Check(fs.ptr())) {
    // os.fsencode: the file system's bytes, surrogate escapes included.
    fs = py::reinterpret_steal<py::object>(PyUnicode_EncodeFSDefault(fs.ptr()));
    if (!fs) {
      PyErr_Clear();
      WrongValue(a, absl::StrCat(Repr(a.value),
                                 ": not a file name (a character the file system's encoding "
                                 "cannot write)"));
    }
  }
  std::string path(PyBytes_AS_STRING(fs.ptr()), static_cast<size_t>(PyBytes_GET_SIZE(fs.ptr())));
  if (path.find('\0') != std::string::npos) {
    // C file names end at a NUL: "a.safetensors\0b" would open a.safetensors.
    WrongValue(a, absl::StrCat(Repr(a.value), ": a file name cannot hold a NUL byte"));
  }
  return path;
}

std::string ModelPath(const Arg& a) { return a.value.is_none() ? std::string() : Path(a); }

std::vector<std::string> Names(const Arg& a) {
  std::vector<std::string> names;
  if (py::isinstance<py::str>(a.value)) {
    names.emplace_back();
    int depth = 0;
    for (char c : Text(a)) {
      depth += c == '(' ? 1 : c == ')' && depth > 0 ? -1 : 0;
      if (c == ',' && depth == 0) {
        names.emplace_back();
      } else {
        names.back() += c;
      }
    }
  } else if (py::isinstance<py::list>(a.value) || py::isinstance<py::tuple>(a.value)) {
    size_t i = 0;
    for (const py::handle item : a.value) names.push_back(Text(a.Item(i++, item)));
  } else {
    WrongType(a, "a str or a list of str");
  }
  // As the CLI's --NAME with nothing after it: an empty list is no choice.
  if (names.empty()) WrongValue(a, "an empty list names nothing");
  for (const std::string& n : names) {
    if (n.empty()) WrongValue(a, "empty name in the list");
  }
  return names;
}

std::string NameList(const Arg& a) { return absl::StrJoin(Names(a), ","); }

std::vector<std::string> Paths(const Arg& a) {
  if (IsPath(a.value)) return {Path(a)};
  if (!(py::isinstance<py::list>(a.value) || py::isinstance<py::tuple>(a.value))) {
    WrongType(a, "a path or a list of paths");
  }
  std::vector<std::string> paths;
  size_t i = 0;
  for (const py::handle item : a.value) paths.push_back(Path(a.Item(i++, item)));
  return paths;
}

int64_t ByteCount(const Arg& a) {
  if (py::isinstance<py::str>(a.value)) return ValueFor(a, ParseBytes(Text(a), a.name));
  if (IsBool(a.value) || !IsInstance(a.value, "numbers", "Integral")) {
    WrongType(a, "an integer or a str such as '2GB'");
  }
  return Int<int64_t>(a);
}

// ------------------------------------------------------------------ arrays

py::array NativeArray(const Arg& a) {
  py::array array;
  if (py::isinstance<py::array>(a.value)) {
    array = py::reinterpret_borrow<py::array>(a.value);
  } else {
    try {
      array = py::module_::import("numpy").attr("asarray")(a.value);
    } catch (py::error_already_set& e) {
      if (e.matches(PyExc_MemoryError)) throw;
      WrongValue(a,
                 absl::StrCat("not an array of numbers (", std::string(py::str(e.value())), ")"));
    }
  }
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

bool IsHalf(const py::array& array) { return array.dtype().kind() == 'f' && array.itemsize() == 2; }

TensorView FloatTensor(const Arg& a, const std::string& tensor_name, std::vector<py::array>& keep) {
  py::array array = NativeArray(a);
  DType dtype;
  if (py::isinstance<py::array_t<float>>(array)) {
    dtype = DType::kF32;
  } else if (py::isinstance<py::array_t<double>>(array)) {
    dtype = DType::kF64;
  } else if (IsHalf(array)) {
    dtype = DType::kF16;
  } else {
    WrongValue(a, absl::StrCat("want a float16, float32 or float64 array (got ",
                               std::string(py::str(array.dtype())), ")"));
  }
  keep.push_back(array);
  TensorView view;
  view.name = tensor_name;
  view.dtype = dtype;
  view.shape.assign(array.shape(), array.shape() + array.ndim());
  view.bytes = std::span<const uint8_t>(static_cast<const uint8_t*>(array.data()),
                                        static_cast<size_t>(array.nbytes()));
  view.file = "(array)";
  return view;
}

api::TokenArray Tokens(const Arg& a, bool* one_d) {
  const py::array array = NativeArray(a);
  const char kind = array.dtype().kind();
  if (kind != 'i' && kind != 'u') {
    WrongValue(a, absl::StrCat("want an integer array of token ids, not dtype ",
                               std::string(py::str(array.dtype()))));
  }
  if (array.ndim() != 1 && array.ndim() != 2) {
    WrongValue(
        a, absl::StrCat("want [sequences, length] or [length], not ", array.ndim(), " dimensions"));
  }
  *one_d = array.ndim() == 1;
  api::TokenArray out;
  out.length = array.ndim() == 1 ? array.shape(0) : array.shape(1);
  if (array.size() == 0 || out.length == 0) WrongValue(a, "no tokens");
  out.ids.resize(static_cast<size_t>(array.size()));
  auto take = [&](const auto* data) {
    using Id = std::remove_cv_t<std::remove_pointer_t<decltype(data)>>;
    for (size_t i = 0; i < out.ids.size(); ++i) {
      bool bad = data[i] > INT32_MAX;
      if constexpr (std::is_signed_v<Id>) bad = bad || data[i] < 0;
      if (bad) {
        WrongValue(a, absl::StrCat("token ", data[i], " at sequence ", i / out.length,
                                   ", position ", i % out.length, " is not a token id"));
      }
      out.ids[i] = static_cast<int32_t>(data[i]);
    }
  };
  // Read in its own signedness, so that no id wraps on the way.
  if (kind == 'u') {
    const py::array_t<uint64_t, py::array::c_style | py::array::forcecast> ids(array);
    take(ids.data());
  } else {
    const py::array_t<int64_t, py::array::c_style | py::array::forcecast> ids(array);
    take(ids.data());
  }
  return out;
}

}  // namespace lowp::python
