// entry: logits_temperature_f32
// arg: logits in float n
// arg: out out float n
// arg: n int 16777216
// arg: temperature float
// tolerance: 1e-5 1e-6
// expect: applies reciprocal: divisions in loops as multiplications by a reciprocal computed once: `temperature_kernel`: 2 division(s) by `temperature` (2)
// Sampling temperature on logits: a grid-stride loop divides by a launch parameter.
#include <cuda_runtime.h>

__global__ void temperature_kernel(const float* logits, float* out, int n, float temperature) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) {
    const float v = logits[i];
    out[i] = v > 0.0f ? v / temperature : 0.5f * v / temperature;
  }
}

extern "C" void logits_temperature_f32(const float* logits, float* out, int n, float temperature,
                                       cudaStream_t stream) {
  if (n <= 0) return;
  temperature_kernel<<<1024, 256, 0, stream>>>(logits, out, n, temperature);
}
