// Activation functions shared by the epilogues.
#pragma once

namespace epilogue {
// The exact GELU: x * Phi(x) with the error function.
__device__ __forceinline__ float gelu_erf(float x) { return 0.5f * x * (1.f + erff(x * 0.70710678118654752f)); }
}  // namespace epilogue
