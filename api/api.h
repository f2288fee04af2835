// lowp's use cases, one function each: options in, a result struct out
// (absl::StatusOr), and ToJson(result), the only place each JSON schema is
// written. Errors in an option name its field (formats/option_error.h), as
// the options structs spell it.
//
//   Formats(), Schemes(), Devices()        api/catalog.h
//   ConvertFile(), EncodeValues(), ...     api/convert.h
//   QuantError(), Quantize(), RangeStudy() api/quant.h
//   QuantizeModel()                        api/quantize_model.h
//   Size(), CompareFormats()               api/size.h
//   PlanJob()                              api/plan.h
//   Tensors()                              api/tensors.h
#ifndef LOWP_API_API_H_
#define LOWP_API_API_H_

#include "api/calib.h"
#include "api/catalog.h"
#include "api/convert.h"
#include "api/eval.h"
#include "api/imatrix.h"
#include "api/mix.h"
#include "api/plan.h"
#include "api/quant.h"
#include "api/quantize_model.h"
#include "api/size.h"
#include "api/tensors.h"
#include "api/tokenize.h"
#include "api/training_plan.h"
#include "api/update_error.h"

#endif  // LOWP_API_API_H_
