// The one checked path from a Python argument into a C++ value (lowp._lowp).
//
// Every converter takes the argument (its name as the function's signature
// spells it, and the object) and returns the value the options field holds,
// or raises
//   TypeError  "NAME: want WHAT, not TYPE"  the wrong kind of object;
//   ValueError "NAME: ..."                  one the field cannot hold.
// Integers are range-checked into the field's own type, never truncated or
// wrapped; bool is not an integer, NumPy's integer scalars are. Text is a
// str that UTF-8 can encode (a lone surrogate is refused); a path is a str,
// bytes or os.PathLike, encoded as os.fsencode does (so a name that is not
// UTF-8, decoded with surrogateescape, comes back as its bytes). An item of
// a list is named NAME[i].
//
// Library errors become Python's: ValueError for the caller's input, OSError
// for files, RuntimeError for lowp's own faults. An option error
// (formats/option_error.h) reads with the keyword for the field it names.
#ifndef LOWP_PYTHON_ARGUMENTS_H_
#define LOWP_PYTHON_ARGUMENTS_H_

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <functional>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "api/eval.h"
#include "io/tensor.h"

namespace lowp::python {

namespace py = pybind11;

// One argument of a call: the name errors give it, and its value.
struct Arg {
  std::string name;
  py::handle value;
  // Item i of a list argument, named NAME[i].
  Arg Item(size_t i, py::handle item) const { return {absl::StrCat(name, "[", i, "]"), item}; }
};

// ------------------------------------------------------------------ errors

// A library error on its way to Python: thrown by Check and Value, turned
// into the Python exception (with the call's keyword names) where the call
// is dispatched (signature.h).
struct StatusError {
  absl::Status status;
};

// The keyword a library field is written as in one function's signature;
// nullopt: the field's own name, hyphens as underscores (grad-scale is
// grad_scale).
using KeywordOf = std::function<std::optional<std::string>(absl::string_view field)>;

// The message of `status` with every option it names (the leading field of
// an option error, and `name` in backquotes) written as the keyword.
std::string KeywordMessage(const absl::Status& status, const KeywordOf& keyword);

// Raises the Python exception for `status` (not OK), its message as
// KeywordMessage writes it.
[[noreturn]] void RaiseStatus(const absl::Status& status, const KeywordOf& keyword);

// Raises the Python exception `type` with `message`, whose bytes that are
// not UTF-8 (a file name's) read as \xNN escapes.
[[noreturn]] void RaiseError(PyObject* type, const std::string& message);

// Throws StatusError unless OK.
void Check(const absl::Status& status);
template <typename T>
T Value(absl::StatusOr<T> value) {
  if (!value.ok()) throw StatusError{value.status()};
  return *std::move(value);
}

// Raises the Python exception for a library error about the argument `a`
// itself (a parser's): the message starts with a.name (replacing the field
// it names, else before it).
[[noreturn]] void RaiseFor(const Arg& a, const absl::Status& status);
inline void CheckFor(const Arg& a, const absl::Status& status) {
  if (!status.ok()) RaiseFor(a, status);
}
template <typename T>
T ValueFor(const Arg& a, absl::StatusOr<T> value) {
  if (!value.ok()) RaiseFor(a, value.status());
  return *std::move(value);
}

// TypeError "NAME: want WANT, not TYPE".
[[noreturn]] void WrongType(const Arg& a, absl::string_view want);
// ValueError "NAME: WHY".
[[noreturn]] void WrongValue(const Arg& a, absl::string_view why);

// --------------------------------------------------------------- converters

bool IsBool(py::handle v);
bool IsPath(py::handle v);  // str, bytes or os.PathLike

// An integer's value, exactly, when it is within [-2^64, 2^64] (else that
// bound, beyond every field). TypeError unless an integer.
__int128 WholeNumber(const Arg& a);
// The integer's text for a message (its bit length when Python will not
// print it).
std::string IntegerText(const Arg& a);

// An integer in [lo, hi], both within T.
template <typename T>
T Int(const Arg& a, T lo = std::numeric_limits<T>::min(), T hi = std::numeric_limits<T>::max()) {
  static_assert(std::is_integral_v<T> && !std::is_same_v<T, bool>);
  const __int128 v = WholeNumber(a);
  if (v < static_cast<__int128>(lo) || v > static_cast<__int128>(hi)) {
    WrongValue(a, absl::StrCat(IntegerText(a), " is not in ", lo, "..", hi));
  }
  return static_cast<T>(v);
}
// An integer into `field`, in the range of the field's own type.
template <typename T>
void IntInto(T& field, const Arg& a) {
  field = Int<T>(a);
}
// A thread count: 0 (every CPU the process may run on) to api::kMaxThreads.
int Threads(const Arg& a);

double Real(const Arg& a);  // int or float (not bool), finite or not
bool Bool(const Arg& a);    // True or False (Python's or NumPy's)
std::string Text(const Arg& a);
std::string Path(const Arg& a);
// A model directory; None: "" (the bundled one).
std::string ModelPath(const Arg& a);
// A str of comma-separated names (commas inside parentheses kept, as the
// command line's float(e=4,m=3,...)), or a list or tuple of str; not empty.
std::vector<std::string> Names(const Arg& a);
// Names joined by commas, as the options' glob and site lists are.
std::string NameList(const Arg& a);
// A path, or a list or tuple of them.
std::vector<std::string> Paths(const Arg& a);
// Bytes: an integer, or a str such as '4.2GB' (ParseBytes).
int64_t ByteCount(const Arg& a);
// A name one of the library's parsers reads (a mode, a rounding, ...).
template <typename T>
T Choice(const Arg& a, absl::StatusOr<T> (*parse)(absl::string_view)) {
  return ValueFor(a, parse(Text(a)));
}

// ------------------------------------------------------------------ arrays

// `a` as a C-contiguous, aligned array in native byte order: itself when it
// is one, else a copy (a list, a scalar, a big-endian or strided array).
// ValueError when NumPy makes no array of it; NumPy's MemoryError for a copy
// it cannot allocate.
py::array NativeArray(const Arg& a);
bool IsHalf(const py::array& array);

// A float16, float32 or float64 array (else ValueError naming `a`) as the
// tensor `tensor_name`, read in place; the array (or its copy) is kept
// alive in `keep`.
TensorView FloatTensor(const Arg& a, const std::string& tensor_name, std::vector<py::array>& keep);

// Token ids from an integer array-like: [sequences, length], or [length]
// (one sequence; `*one_d` set). ValueError for another shape or dtype, a
// ragged list, or an id outside 0..INT32_MAX.
api::TokenArray Tokens(const Arg& a, bool* one_d);

}  // namespace lowp::python

#endif  // LOWP_PYTHON_ARGUMENTS_H_
