// A function of lowp._lowp as one table: each parameter's name, kind,
// annotation (Python text), default (a Python object, read from the
// default-constructed options struct where there is one) and the converter
// that sets it in the call's State. The table is both what a call reads its
// arguments by and what the module reports as the signature
// (_lowp._signatures, from which lowp/__init__.py gives each public function
// its __signature__ and lowp/_stub.py writes the .pyi stub), so that what
// help() and a type checker see is what runs.
//
// A call binds its arguments as Python binds a def's (TypeError for an
// unknown keyword, a missing one, one given twice or too many positional
// ones), runs each given argument's converter in the table's order (None
// for a parameter with a default is that default), then the body; all of it
// inside one InputScope (io/input_files.h), so that no output of the call
// replaces a file the call read, while a later call may. A library error
// from the body names the keyword for the field it names (Rename).
#ifndef LOWP_PYTHON_SIGNATURE_H_
#define LOWP_PYTHON_SIGNATURE_H_

#include <pybind11/pybind11.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "io/input_files.h"
#include "python/arguments.h"

namespace lowp::python {

enum class Kind {
  kPositional,  // POSITIONAL_OR_KEYWORD
  kKeyword,     // KEYWORD_ONLY
};

// The arguments a call was given, in the caller's order.
struct Call {
  std::string function;
  std::vector<std::pair<std::string, py::object>> given;
  // As Python would write it: lowp.plan(model='x', mode='inference').
  std::string Text() const {
    std::vector<std::string> parts;
    for (const auto& [name, value] : given) {
      parts.push_back(absl::StrCat(name, "=", std::string(py::repr(value))));
    }
    return absl::StrCat("lowp.", function, "(", absl::StrJoin(parts, ", "), ")");
  }
};

template <typename State>
class Function {
 public:
  using Setter = std::function<void(State&, const Arg&)>;
  using Body = std::function<py::object(State&, const Call&)>;

  // `returns`: the return annotation; `doc`: the docstring.
  Function(std::string name, std::string returns, std::string doc)
      : spec_(std::make_shared<Spec>()) {
    spec_->name = std::move(name);
    spec_->returns = std::move(returns);
    spec_->doc = std::move(doc);
  }

  // A parameter the caller must give.
  Function& Required(Kind kind, std::string name, std::string type, Setter set) {
    return Add(kind, std::move(name), std::move(type), py::object(), std::move(set));
  }
  // A parameter with a default: `set` runs only when it is given (and not
  // None).
  Function& Optional(Kind kind, std::string name, std::string type, py::object default_value,
                     Setter set) {
    return Add(kind, std::move(name), std::move(type), std::move(default_value), std::move(set));
  }
  // A library field named otherwise than the keyword (api's "output" is
  // imatrix's `out`).
  Function& Rename(std::string field, std::string keyword) {
    spec_->renames[std::move(field)] = std::move(keyword);
    return *this;
  }

  // Defines the function on `m` and adds its signature to `signatures`.
  void Define(py::module_& m, py::dict& signatures, Body body) {
    spec_->body = std::move(body);
    py::list parameters;
    for (const Param& p : spec_->params) {
      parameters.append(py::make_tuple(
          p.name, p.kind == Kind::kPositional ? "positional_or_keyword" : "keyword_only", p.type,
          static_cast<bool>(p.default_value), p.default_value ? p.default_value : py::none()));
    }
    signatures[py::str(spec_->name)] =
        py::dict(py::arg("parameters") = parameters, py::arg("returns") = spec_->returns,
                 py::arg("doc") = spec_->doc);
    std::shared_ptr<const Spec> spec = spec_;
    m.def(
        spec->name.c_str(),
        [spec](const py::args& args, const py::kwargs& kwargs) -> py::object {
          const InputScope scope;
          try {
            State state;
            const Call call = spec->Bind(args, kwargs, state);
            return spec->body(state, call);
          } catch (const StatusError& e) {
            RaiseStatus(e.status, [&spec](absl::string_view field) -> std::optional<std::string> {
              auto it = spec->renames.find(std::string(field));
              if (it == spec->renames.end()) return std::nullopt;
              return it->second;
            });
          }
        },
        spec->doc.c_str());
  }

 private:
  struct Param {
    std::string name;
    Kind kind;
    std::string type;
    py::object default_value;  // null: required
    Setter set;
  };
  struct Spec {
    std::string name, returns, doc;
    std::vector<Param> params;
    std::map<std::string, std::string> renames;
    Body body;

    Call Bind(const py::args& args, const py::kwargs& kwargs, State& state) const {
      Call call{name, {}};
      std::vector<py::object> values(params.size());
      size_t positional = 0;
      for (const Param& p : params) positional += p.kind == Kind::kPositional;
      if (args.size() > positional) {
        throw py::type_error(absl::StrCat(name, "() takes ", positional, " positional argument",
                                          positional == 1 ? "" : "s", " but ", args.size(),
                                          args.size() == 1 ? " was" : " were", " given"));
      }
      for (size_t i = 0; i < args.size(); ++i) {
        values[i] = py::reinterpret_borrow<py::object>(args[i]);
        call.given.emplace_back(params[i].name, values[i]);
      }
      for (const auto& [key, value] : kwargs) {
        const char* text = PyUnicode_AsUTF8(key.ptr());
        if (text == nullptr) {  // a surrogate: no parameter's name
          PyErr_Clear();
          throw py::type_error(absl::StrCat(name, "() got an unexpected keyword argument ",
                                            std::string(py::repr(key))));
        }
        const std::string keyword = text;
        size_t i = 0;
        while (i < params.size() && params[i].name != keyword) ++i;
        if (i == params.size()) {
          throw py::type_error(
              absl::StrCat(name, "() got an unexpected keyword argument '", keyword, "'"));
        }
        if (values[i]) {
          throw py::type_error(
              absl::StrCat(name, "() got multiple values for argument '", keyword, "'"));
        }
        values[i] = py::reinterpret_borrow<py::object>(value);
        call.given.emplace_back(keyword, values[i]);
      }
      for (size_t i = 0; i < params.size(); ++i) {
        if (!values[i] && !params[i].default_value) {
          throw py::type_error(absl::StrCat(
              name, "() missing required ",
              params[i].kind == Kind::kPositional ? "argument" : "keyword-only argument", ": '",
              params[i].name, "'"));
        }
      }
      for (size_t i = 0; i < params.size(); ++i) {
        if (!values[i] || (values[i].is_none() && params[i].default_value)) continue;
        params[i].set(state, Arg{params[i].name, values[i]});
      }
      return call;
    }
  };

  // The order Python's def requires: positional parameters first, and none
  // without a default after one with.
  Function& Add(Kind kind, std::string name, std::string type, py::object default_value,
                Setter set) {
    if (kind == Kind::kPositional && !spec_->params.empty()) {
      const Param& last = spec_->params.back();
      if (last.kind != Kind::kPositional || (last.default_value && !default_value)) {
        throw std::logic_error(absl::StrCat(spec_->name, "(", name, "): out of order"));
      }
    }
    spec_->params.push_back(
        {std::move(name), kind, std::move(type), std::move(default_value), std::move(set)});
    return *this;
  }

  std::shared_ptr<Spec> spec_;
};

}  // namespace lowp::python

#endif  // LOWP_PYTHON_SIGNATURE_H_
