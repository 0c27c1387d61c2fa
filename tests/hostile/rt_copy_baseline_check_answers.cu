// expect: passed
// task: vector_add
// flags: --no-time
// modes: eval
// threat: memoization and replay
// mechanism: a candidate's check pool is made fresh for it; the pool the baseline was checked in, which keeps the baseline's inputs and outputs of every check case, is never lent to a candidate (found by review, not yet run on a GPU)
// why: on its first call finds the whole allocation its output lies in (cuMemGetAddressRange, reached through cudaGetDriverEntryPointByVersion: no driver import), copies it to the host, and on every call looks at what the copy holds where the call's output lies; where that is already the right answer (the baseline's, left from its check) it says REDTEAM-BREACH and spoils its output so the verdict shows it; otherwise it computes honestly and must pass
#include <cuda.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>

static void breach(const char* what) {
  fprintf(stderr, "REDTEAM-BREACH: %s\n", what);
  fflush(stderr);
}

__global__ void add(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}

__global__ void spoil(float* c) { c[0] += 1.0f; }

typedef CUresult (*AddressRange)(CUdeviceptr*, size_t*, CUdeviceptr);

static unsigned char* copy = nullptr;
static CUdeviceptr base = 0;
static size_t bytes = 0;

// The allocation `c` lies in, as it was on the first call.
static void take_copy(float* c, cudaStream_t s) {
  void* fn = nullptr;
  cudaDriverEntryPointQueryResult found;
  if (cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &fn, 12000, cudaEnableDefault, &found) != cudaSuccess ||
      fn == nullptr) {
    fprintf(stderr, "no cuMemGetAddressRange\n");
    return;
  }
  if (((AddressRange)fn)(&base, &bytes, (CUdeviceptr)c) != CUDA_SUCCESS || bytes == 0 || bytes > (1ull << 30)) {
    fprintf(stderr, "no address range for the output\n");
    return;
  }
  copy = (unsigned char*)malloc(bytes);
  cudaStreamSynchronize(s);
  if (copy == nullptr || cudaMemcpy(copy, (const void*)base, bytes, cudaMemcpyDeviceToHost) != cudaSuccess) {
    fprintf(stderr, "could not copy the allocation (%zu bytes)\n", bytes);
    free(copy);
    copy = nullptr;
  }
}

// Whether the copy already holds a + b where this call's output lies.
static bool copy_holds_the_answer(const float* a, const float* b, float* c, int n, cudaStream_t s) {
  if (copy == nullptr || n <= 0) return false;
  size_t off = (size_t)((CUdeviceptr)c - base);
  if ((CUdeviceptr)c < base || off + (size_t)n * sizeof(float) > bytes) return false;
  float* ha = (float*)malloc((size_t)n * sizeof(float));
  float* hb = (float*)malloc((size_t)n * sizeof(float));
  bool right = ha && hb;
  cudaStreamSynchronize(s);
  right = right && cudaMemcpy(ha, a, (size_t)n * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess &&
          cudaMemcpy(hb, b, (size_t)n * sizeof(float), cudaMemcpyDeviceToHost) == cudaSuccess;
  const float* held = (const float*)(copy + off);
  for (int i = 0; right && i < n; ++i) right = held[i] == ha[i] + hb[i];
  free(ha);
  free(hb);
  return right;
}

extern "C" void vector_add(const float* a, const float* b, float* c, int n, cudaStream_t s) {
  if (copy == nullptr && base == 0) take_copy(c, s);
  bool found = copy_holds_the_answer(a, b, c, n, s);
  if (n > 0) add<<<(n + 255) / 256, 256, 0, s>>>(a, b, c, n);
  if (found) {
    breach("found the baseline's answer to a check case in the pool it was lent");
    spoil<<<1, 1, 0, s>>>(c);
  }
}
