// NumPy .npy files (numpy.lib.format): the magic "\x93NUMPY", a version
// (1.0: u16 header length; 2.0 and 3.0: u32; 3.0's header is UTF-8), a
// Python dict literal {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
// padded with spaces and a newline, then the array's bytes.
#ifndef LOWP_IO_NPY_H_
#define LOWP_IO_NPY_H_

#include <cstdint>
#include <span>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "io/tensor.h"

namespace lowp {

// Parses a whole .npy file image into one tensor named after the file's stem
// ("dir/w.npy" -> "w"), its bytes pointing into `file`. Supported: C order,
// little-endian or byte-order-free descrs '<f2' '<f4' '<f8' '|i1' '|u1' '<i2'
// '<u2' '<i4' '<u4' '<i8' '<u8' '|b1'. Anything else (big-endian, Fortran
// order, structured dtypes, a malformed header, a data size that does not
// match the shape) is InvalidArgument naming `file_name`.
absl::StatusOr<TensorView> ParseNpy(std::span<const uint8_t> file, absl::string_view file_name);

}  // namespace lowp

#endif  // LOWP_IO_NPY_H_
