// Errors in an option a caller set: InvalidArgument whose message starts with
// the option's field name ("seq: 0 is not in 1..16777216"), the name also kept
// as the payload kOptionPayload, so that a front end can name the option its
// own way (the command line's --seq, Python's seq=) without parsing text.
// Where a message mentions another option in its text, it is written in
// backquotes (`tp`), which front ends may rewrite the same way.
#ifndef LOWP_FORMATS_OPTION_ERROR_H_
#define LOWP_FORMATS_OPTION_ERROR_H_

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"

namespace lowp {

inline constexpr char kOptionPayload[] = "lowp.option";

// InvalidArgument "FIELD: why" (`separator` between the two). `field` is
// the text the message starts with: a field name ("seq"), a field and the
// value at fault ("formats nosuch"), or two fields ("buffers and headroom").
absl::Status OptionError(absl::string_view field, absl::string_view why,
                         absl::string_view separator = ": ");

// The leading text OptionError named, when `status` came from it.
std::optional<std::string> OptionOf(const absl::Status& status);

// `status` with `prefix` before the option it names ("sample" -> "tune_sample",
// in the message too), for options read under another name (lowp mix's
// tune_ tokens); other statuses as they are.
absl::Status PrefixOption(const absl::Status& status, absl::string_view prefix);

}  // namespace lowp

#endif  // LOWP_FORMATS_OPTION_ERROR_H_
