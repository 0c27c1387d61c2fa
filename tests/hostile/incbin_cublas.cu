// expect: build-error
// task: gemm_bf16
// why: embeds the toolkit's cuBLAS in its library with .incbin, to load it from memory at run time; its task lets only the baseline link cuBLAS, so a candidate's build may not read it
#include <cuda_runtime.h>
#include <cuda_bf16.h>
asm(".section .rodata\n.incbin \"/usr/local/cuda/lib64/libcublas.so.13\", 0, 4096\n.text");
__global__ void zero(__nv_bfloat16* C, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) C[i] = __float2bfloat16(0.0f);
}
extern "C" void gemm_bf16(const __nv_bfloat16* A, const __nv_bfloat16* B, __nv_bfloat16* C, int M, int N, int K,
                          cudaStream_t s) {
  zero<<<(M * N + 255) / 256, 256, 0, s>>>(C, M * N);
}
