// The JSON pieces the results share (a device, bytes by component, the
// sizing options, one error report); each result's ToJson (api/*.h) is built
// from them and is the only place its schema is written. JSON has no
// infinities or NaN: a non-finite double is written null.
#ifndef LOWP_API_JSON_H_
#define LOWP_API_JSON_H_

#include "nlohmann/json.hpp"
#include "quant/measure.h"
#include "sizing/devices.h"
#include "sizing/memory.h"
#include "model/config.h"

namespace lowp::api {

// A double, null when not finite (an exact reconstruction's SQNR, a rate
// without a bandwidth).
nlohmann::json JsonNumber(double v);

nlohmann::json DeviceJson(const Device& d);
nlohmann::json BytesJson(const Bytes& b);
nlohmann::json ModelJson(const ModelConfig& m);
nlohmann::json SizingOptionsJson(const SizingOptions& o);
// One row of quant-error's "results" or "aggregates".
nlohmann::json QuantReportJson(const QuantReport& r, float relative_floor, bool histogram);

}  // namespace lowp::api

#endif  // LOWP_API_JSON_H_
