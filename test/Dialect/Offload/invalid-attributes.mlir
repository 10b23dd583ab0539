// Shape inference never trusts an attribute the verifier has not checked yet:
// a missing, mistyped or out-of-range attribute of an op with inferred result
// types is an error at the op's location, never a crash (issue 18: these
// segfaulted in inferReturnTypes, and stride 0 died of SIGFPE).
// RUN: offload-opt %s -split-input-file -verify-diagnostics

// expected-error @+1 {{'offload.cat' op requires attribute 'dim'}}
%0 = offload.cat %x, %x : tensor<4x8xf32>, tensor<4x8xf32>

// -----

func.func @f(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'offload.cat' op attribute 'dim' must be a 64-bit signless integer}}
  %0 = offload.cat %x, %x {dim = "zero"} : tensor<4x8xf32>, tensor<4x8xf32>
  return
}

// -----

func.func @f(%x: tensor<4x9223372036854775807xf32>) {
  // expected-error @+1 {{cat result size along dimension 1 overflows a 64-bit integer}}
  %0 = offload.cat %x, %x {dim = 1 : i64} : tensor<4x9223372036854775807xf32>, tensor<4x9223372036854775807xf32>
  return
}

// -----

func.func @f(%x: tensor<2x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+1 {{'offload.conv2d' op requires attribute 'stride'}}
  %y = offload.conv2d %x, %w {padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, groups = 1 : i64} : tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>
  return
}

// -----

func.func @f(%x: tensor<2x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+1 {{'offload.conv2d' op requires attribute 'padding'}}
  %y = offload.conv2d %x, %w {stride = array<i64: 1, 1>, dilation = array<i64: 1, 1>, groups = 1 : i64} : tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>
  return
}

// -----

func.func @f(%x: tensor<2x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+1 {{'offload.conv2d' op requires attribute 'dilation'}}
  %y = offload.conv2d %x, %w {stride = array<i64: 1, 1>, padding = array<i64: 0, 0>, groups = 1 : i64} : tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>
  return
}

// -----

func.func @f(%x: tensor<2x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+1 {{'offload.conv2d' op requires attribute 'groups'}}
  %y = offload.conv2d %x, %w {stride = array<i64: 1, 1>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>} : tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>
  return
}

// -----

func.func @f(%x: tensor<2x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+1 {{'offload.conv2d' op attribute 'stride' has value 0 (must be >= 1)}}
  %y = offload.conv2d %x, %w {stride = array<i64: 1, 0>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, groups = 1 : i64} : tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>
  return
}

// -----

func.func @f(%x: tensor<2x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+1 {{'offload.conv2d' op attribute 'padding' has value -1 (must be >= 0)}}
  %y = offload.conv2d %x, %w {stride = array<i64: 1, 1>, padding = array<i64: -1, 0>, dilation = array<i64: 1, 1>, groups = 1 : i64} : tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>
  return
}

// -----

func.func @f(%x: tensor<2x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+1 {{'offload.conv2d' op attribute 'dilation' must have 2 values, got 3}}
  %y = offload.conv2d %x, %w {stride = array<i64: 1, 1>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1, 1>, groups = 1 : i64} : tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>
  return
}

// -----

func.func @f(%x: tensor<2x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+1 {{'offload.conv2d' op attribute 'groups' is 0, outside [1, 9223372036854775807]}}
  %y = offload.conv2d %x, %w {stride = array<i64: 1, 1>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, groups = 0 : i64} : tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>
  return
}

// -----

// Padding 2^62: (in + 2p) overflowed int64 before.
func.func @f(%x: tensor<2x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+1 {{'offload.conv2d' op attribute 'padding' has value 4611686018427387904 (must be <= 2147483648)}}
  %y = offload.conv2d %x, %w {stride = array<i64: 1, 1>, padding = array<i64: 4611686018427387904, 0>, dilation = array<i64: 1, 1>, groups = 1 : i64} : tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>
  return
}

// -----

// groups * (C/groups) overflowed in the verifier.
func.func @f(%x: tensor<2x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+1 {{input has 3 channels but weight expects 3 x 4611686018427387904 groups}}
  %y = offload.conv2d %x, %w {stride = array<i64: 1, 1>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, groups = 4611686018427387904 : i64} : tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>
  return
}

// -----

func.func @f(%x: tensor<2x3x8x8xf32>) {
  // expected-error @+1 {{'offload.max_pool2d' op requires attribute 'kernel_size'}}
  %y, %i = offload.max_pool2d %x {stride = array<i64: 2, 2>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>} : tensor<2x3x8x8xf32>
  return
}

// -----

func.func @f(%x: tensor<2x3x8x8xf32>) {
  // expected-error @+1 {{'offload.max_pool2d' op requires attribute 'stride'}}
  %y, %i = offload.max_pool2d %x {kernel_size = array<i64: 2, 2>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>} : tensor<2x3x8x8xf32>
  return
}

// -----

func.func @f(%x: tensor<2x3x8x8xf32>) {
  // expected-error @+1 {{'offload.max_pool2d' op requires attribute 'padding'}}
  %y, %i = offload.max_pool2d %x {kernel_size = array<i64: 2, 2>, stride = array<i64: 2, 2>, dilation = array<i64: 1, 1>} : tensor<2x3x8x8xf32>
  return
}

// -----

func.func @f(%x: tensor<2x3x8x8xf32>) {
  // expected-error @+1 {{'offload.max_pool2d' op requires attribute 'dilation'}}
  %y, %i = offload.max_pool2d %x {kernel_size = array<i64: 2, 2>, stride = array<i64: 2, 2>, padding = array<i64: 0, 0>} : tensor<2x3x8x8xf32>
  return
}

// -----

func.func @f(%x: tensor<2x3x8x8xf32>) {
  // expected-error @+1 {{'offload.max_pool2d' op attribute 'stride' has value 0 (must be >= 1)}}
  %y, %i = offload.max_pool2d %x {kernel_size = array<i64: 2, 2>, stride = array<i64: 0, 2>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>} : tensor<2x3x8x8xf32>
  return
}

// -----

func.func @f(%x: tensor<2x3x8x8xf32>) {
  // expected-error @+1 {{'offload.max_pool2d' op attribute 'ceil_mode' must be a bool attribute}}
  %y, %i = offload.max_pool2d %x {kernel_size = array<i64: 2, 2>, stride = array<i64: 2, 2>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, ceil_mode = 1 : i64} : tensor<2x3x8x8xf32>
  return
}

// -----

// A huge kernel with half of it as padding: d*(k-1) and 2p overflowed; the
// runtime's window limit (2^31) is the compiler's.
func.func @f(%x: tensor<2x3x8x8xf32>) {
  // expected-error @+1 {{'offload.max_pool2d' op attribute 'kernel_size' has value 9223372036854775807 (must be <= 2147483648)}}
  %y, %i = offload.max_pool2d %x {kernel_size = array<i64: 9223372036854775807, 2>, stride = array<i64: 1, 2>, padding = array<i64: 4611686018427387903, 0>, dilation = array<i64: 1, 1>} : tensor<2x3x8x8xf32>
  return
}

// -----

func.func @f(%x: tensor<2x3x8x8xf32>) {
  // expected-error @+1 {{'offload.avg_pool2d' op requires attribute 'kernel_size'}}
  %y = offload.avg_pool2d %x {stride = array<i64: 2, 2>, padding = array<i64: 0, 0>} : tensor<2x3x8x8xf32>
  return
}

// -----

func.func @f(%x: tensor<2x3x8x8xf32>) {
  // expected-error @+1 {{'offload.avg_pool2d' op attribute 'kernel_size' has value 0 (must be >= 1)}}
  %y = offload.avg_pool2d %x {kernel_size = array<i64: 0, 2>, stride = array<i64: 2, 2>, padding = array<i64: 0, 0>} : tensor<2x3x8x8xf32>
  return
}

// -----

func.func @f(%x: tensor<2x3x8x8xf32>) {
  // expected-error @+1 {{'offload.adaptive_avg_pool2d' op requires attribute 'output_size'}}
  %y = offload.adaptive_avg_pool2d %x : tensor<2x3x8x8xf32>
  return
}

// -----

func.func @f(%x: tensor<2x3x8x8xf32>) {
  // expected-error @+1 {{'offload.adaptive_avg_pool2d' op attribute 'output_size' has value 0 (must be >= 1)}}
  %y = offload.adaptive_avg_pool2d %x {output_size = array<i64: 0, 1>} : tensor<2x3x8x8xf32>
  return
}

// -----

func.func @f(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'offload.transpose' op requires attribute 'perm'}}
  %y = offload.transpose %x : tensor<4x8xf32>
  return
}

// -----

func.func @f(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'offload.transpose' op attribute 'perm' must be an i64 dense array}}
  %y = offload.transpose %x {perm = [1, 0]} : tensor<4x8xf32>
  return
}

// -----

func.func @f(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'offload.slice' op requires attribute 'dim'}}
  %y = offload.slice %x {start = 0 : i64, end = 2 : i64} : tensor<4x8xf32>
  return
}

// -----

func.func @f(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'offload.slice' op requires attribute 'start'}}
  %y = offload.slice %x {dim = 0 : i64, end = 2 : i64} : tensor<4x8xf32>
  return
}

// -----

func.func @f(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'offload.slice' op requires attribute 'end'}}
  %y = offload.slice %x {dim = 0 : i64, start = 0 : i64} : tensor<4x8xf32>
  return
}

// -----

// A huge step and extreme start/end: (end - start + step - 1) overflowed.
func.func @f(%x: tensor<4x8xf32>) {
  // CHECK-NOT: error
  %y = offload.slice %x {dim = 1 : i64, start = -9223372036854775808 : i64, end = 9223372036854775807 : i64, step = 9223372036854775807 : i64} : tensor<4x8xf32>
  %z = offload.reshape %y : tensor<4x1xf32> -> tensor<4xf32>
  return
}

// -----

func.func @f(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'offload.layer_norm' op requires attribute 'normalized_ndim'}}
  %y, %m, %r = offload.layer_norm %x, %x, %x {eps = 1.0e-5 : f64} : tensor<4x8xf32>, tensor<4x8xf32>
  return
}

// -----

func.func @f(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'offload.reduce_sum' op attribute 'keepdim' must be a bool attribute}}
  %y = offload.reduce_sum %x {dims = array<i64: 0>, keepdim = 1 : i64} : tensor<4x8xf32>
  return
}

// -----

func.func @f(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'offload.reduce_mean' op attribute 'dims' must be an i64 dense array}}
  %y = offload.reduce_mean %x {dims = 0 : i64} : tensor<4x8xf32>
  return
}

// -----

func.func @f(%x: tensor<4x8xf32>) {
  // expected-error @+1 {{'offload.matmul' op attribute 'transpose_a' must be a bool attribute}}
  %y = offload.matmul %x, %x {transpose_a = 1 : i64} : tensor<4x8xf32>, tensor<4x8xf32>
  return
}

// -----

// The generic form gives result types, so the parser infers nothing: the
// verifier's own inference check reaches the same errors.
func.func @f(%x: tensor<2x3x8x8xf32>, %w: tensor<4x3x3x3xf32>) {
  // expected-error @+2 {{'offload.conv2d' op attribute 'stride' has value 0 (must be >= 1)}}
  // expected-error @+1 {{'offload.conv2d' op failed to infer returned types}}
  %y = "offload.conv2d"(%x, %w) {stride = array<i64: 0, 0>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, groups = 1 : i64} : (tensor<2x3x8x8xf32>, tensor<4x3x3x3xf32>) -> tensor<2x4x6x6xf32>
  return
}

// -----

// Dimensions near 2^63 with a dilated kernel: the window size is computed in
// 128 bits, so the result is exact (or an error), never a wrapped value.
func.func @f(%x: tensor<1x1x9223372036854775807x8xf32>, %w: tensor<1x1x3x3xf32>) {
  %y = offload.conv2d %x, %w {stride = array<i64: 1, 1>, padding = array<i64: 0, 0>, dilation = array<i64: 1, 1>, groups = 1 : i64} : tensor<1x1x9223372036854775807x8xf32>, tensor<1x1x3x3xf32>
  // expected-error @+1 {{conv2d output size along spatial dim 0 overflows a 64-bit integer}}
  %z = offload.conv2d %x, %w {stride = array<i64: 1, 1>, padding = array<i64: 2147483648, 0>, dilation = array<i64: 1, 1>, groups = 1 : i64} : tensor<1x1x9223372036854775807x8xf32>, tensor<1x1x3x3xf32>
  return
}

// -----

// A tensor whose byte count overflows int64 made the memory plan report a
// peak of 0 bytes; a step's tensors are bounded by what a plan can hold.
// expected-error @+1 {{argument #0 of type 'tensor<4611686018427387904x4xf32>' holds more than 2^48 bytes}}
func.func @huge(%x: tensor<4611686018427387904x4xf32> {offload.name = "x", offload.role = #offload.role<input>}) attributes {offload.step} {
  offload.phase forward
  return
}

// -----

func.func @huge_result(%x: tensor<65536x65536xf32> {offload.name = "x", offload.role = #offload.role<input>}) attributes {offload.step} {
  offload.phase forward
  // expected-error @+1 {{result #0 of type 'tensor<65536x65536x65536xf32>' holds more than 2^48 bytes}}
  %y = offload.broadcast_to %x : tensor<65536x65536xf32> -> tensor<65536x65536x65536xf32>
  return
}
