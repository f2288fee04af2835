// The entry points of the dispatched kernels (kernels/convert_simd.cc), each
// running the best target of the CPU. They trust the plan: kernels/convert.cc
// validates the call and builds it. Internal to kernels/.
#ifndef LOWP_KERNELS_DISPATCH_H_
#define LOWP_KERNELS_DISPATCH_H_

#include <cstddef>
#include <cstdint>

#include "kernels/convert.h"
#include "kernels/plan.h"

namespace lowp::kernels {

// The plan of a float32 (or fp16/bf16) -> `to` conversion (kernels/convert.cc).
EncodePlan MakeEncodePlan(const Format& to, const ConvertOptions& o, Source source);

void DispatchEncode(const EncodePlan& p, const void* in, size_t count, uint64_t first,
                    uint8_t* out);
void DispatchDecode(const DecodePlan& p, const uint8_t* in, size_t count, float* out);
void DispatchMeasure(const EncodePlan& p, const DecodePlan& dp, const float* in, size_t count,
                     uint64_t first, ConversionError* e);
void DispatchRound(const EncodePlan& p, const DecodePlan& dp, const float* in, size_t count,
                   uint64_t first, float* out);
// Codes and EncodeEvent bits of float32 inputs, unpacked (tests).
void DispatchEncodeWithEvents(const EncodePlan& p, const float* in, size_t count, uint64_t first,
                              uint32_t* codes, uint32_t* events);

const char* DispatchTargetName();

// Adds n elements' events and errors (input x, result read back q) to *e;
// the caller counts e->error.count.
inline void Accumulate(const float* x, const float* q, const uint32_t* events, size_t n,
                       ConversionError* e) {
  for (size_t k = 0; k < n; ++k) {
    const double xd = x[k];
    const double qd = q[k];
    const uint32_t ev = events[k];
    const bool x_finite = xd - xd == 0;
    e->error.nan_inputs += xd != xd;
    e->error.inf_inputs += xd == xd && !x_finite;
    e->inexact += (ev & kInexact) != 0;
    e->overflow += (ev & kOverflow) != 0;
    e->saturated += (ev & kSaturated) != 0;
    e->flushed += (ev & kFlushed) != 0;
    e->underflow += (ev & kUnderflow) != 0;
    e->nan_replaced += (ev & kNanReplaced) != 0;
    e->error.nonfinite_outputs += x_finite && qd - qd != 0;  // overflow to inf or NaN
    if (x_finite && qd - qd == 0) {
      const double error = qd - xd;
      ++e->error.measured;
      e->error.sum_squared_error += error * error;
      e->error.sum_squared_input += xd * xd;
      const double magnitude = error < 0 ? -error : error;
      if (magnitude > e->error.max_abs_error) e->error.max_abs_error = magnitude;
    }
  }
}

}  // namespace lowp::kernels

#endif  // LOWP_KERNELS_DISPATCH_H_
