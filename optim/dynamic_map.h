// bitsandbytes' 8-bit blockwise optimizer states (Dettmers et al., arXiv
// 2110.02861), as bitsandbytes 0.44 through 0.50 store them on CUDA
// (csrc/kernels.cu kOptimizerStatic8bit2StateBlockwise, functional.py
// create_dynamic_map; read at 95f9af3): blocks of 256 values, one float32
// absmax per block, each value stored as the index of the nearest of 256
// map values of x / absmax.
//
// The maps (create_dynamic_map, max_exponent_bits 7, total_bits 8): for
// decades i = 0..6, the float32 means of neighbouring points of a float32
// linspace(0.1, 1, n) (n = 2^i + 1 signed, 2^(i+1) + 1 unsigned), each times
// float32(10^(i-6)) in float32; the signed map adds their negatives; both
// add 0 and 1; sorted. linspace is torch >= 2.0's scalar kernel without a
// fused multiply-add: step = (1 - 0.1) / (n - 1) in float32, point k =
// 0.1 + step * k for k < n / 2, else 1 - step * (n - 1 - k). Adam's first
// moment uses the signed map, the second the unsigned.
//
// Quantizing: the nearest map value by float32 midpoints (code[a] +
// code[a+1]) * 0.5f, an exact midpoint going to the even index (the CUDA
// binary search's result); for the signed map a negative value that lands on
// +0 moves to the next negative code (the kernel's sign fix-up). An all-zero
// block stores zeros. Not emulated: the kernel's --use_fast_math division
// and square root (about 1 ulp), which can move a value lying at a midpoint.
#ifndef LOWP_OPTIM_DYNAMIC_MAP_H_
#define LOWP_OPTIM_DYNAMIC_MAP_H_

#include <array>
#include <cstdint>
#include <span>

namespace lowp {

inline constexpr int64_t kDynamicBlock = 256;

// The 256 values, ascending (signed: code[127] = 0, code[255] = 1;
// unsigned: code[0] = 0, code[255] = 1).
const std::array<float, 256>& DynamicMap(bool is_signed);

// The index of the nearest map value to x (x already divided by the
// block's absmax), the rule above. NaN gives 0.
uint8_t QuantizeDynamic(const std::array<float, 256>& map, bool is_signed, float x);

// Each block of kDynamicBlock values of `values` (the last may be short)
// replaced by map[q] * absmax, as stored and read back. Returns the number of
// nonzero values stored as 0.
uint64_t RoundTripDynamic(bool is_signed, std::span<float> values);

}  // namespace lowp

#endif  // LOWP_OPTIM_DYNAMIC_MAP_H_
