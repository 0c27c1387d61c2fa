// expect: passed
// task: gemm_f32
// flags: --no-time
// modes: eval
// threat: forbidden library
// mechanism: Landlock's per-file library rules (sandbox branch): a worker may read the libraries its role loads and the CUDA runtime's, not cuBLAS; the import check cannot see a dlopen found at run time
// why: finds dlopen and dlsym in libc's own dynamic symbol table (dl_iterate_phdr and its GNU hash table: no import of either) and loads cuBLAS through them, by soname and at the toolkit's paths; then computes with its own kernel: cuBLAS must not load
#include <cuda_runtime.h>
#include <stdio.h>
#include <elf.h>
#include <link.h>
#include <stdint.h>
#include <string.h>
#include <dlfcn.h>
#define NIGHTSHIFT_CUBLAS_FILE ""  // the test writes the toolkit's cuBLAS path here
static int breached = 0;
// An attack that got through says so where a verdict shows it (the end of the process's
// output, kept with a rejection) and spoils the answer, so the verdict cannot pass.
static void breach(const char* what) {
  fprintf(stderr, "REDTEAM-BREACH: %s\n", what);
  fflush(stderr);
  breached = 1;
}
constexpr int TILE = 16;
__global__ void gemm(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C, int M, int N, int K) {
  __shared__ float As[TILE][TILE];
  __shared__ float Bs[TILE][TILE + 1];
  const int row = blockIdx.y * TILE + threadIdx.y, col = blockIdx.x * TILE + threadIdx.x;
  float acc = 0.f;
  for (int k0 = 0; k0 < K; k0 += TILE) {
    As[threadIdx.y][threadIdx.x] = (row < M && k0 + threadIdx.x < K) ? A[(size_t)row * K + k0 + threadIdx.x] : 0.f;
    Bs[threadIdx.y][threadIdx.x] = (col < N && k0 + threadIdx.y < K) ? B[(size_t)(k0 + threadIdx.y) * N + col] : 0.f;
    __syncthreads();
#pragma unroll
    for (int k = 0; k < TILE; ++k) acc += As[threadIdx.y][k] * Bs[k][threadIdx.x];
    __syncthreads();
  }
  if (row < M && col < N) C[(size_t)row * N + col] = acc;
}
__global__ void spoil(float* c) { c[0] += 1.0f; }
// Where a toolkit keeps cuBLAS, and the path the test found (empty when it found none).
static const char* cublas_paths[] = {NIGHTSHIFT_CUBLAS_FILE, "libcublas.so.13", "libcublas.so.12", "libcublas.so",
                                     "/usr/local/cuda/lib64/libcublas.so.13", "/usr/local/cuda/lib64/libcublas.so",
                                     "/usr/local/cuda/targets/x86_64-linux/lib/libcublas.so.13",
                                     "/usr/lib/x86_64-linux-gnu/libcublas.so.13", "/usr/lib/x86_64-linux-gnu/libcublas.so"};
static uint32_t gnu_hash(const char* s) {
  uint32_t h = 5381;
  for (; *s; ++s) h = h * 33 + (unsigned char)*s;
  return h;
}
struct Lookup {
  const char* name;
  void* found;
};
static int in_libc(dl_phdr_info* info, size_t, void* data) {
  Lookup* want = (Lookup*)data;
  if (!info->dlpi_name || !strstr(info->dlpi_name, "libc.so")) return 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    if (info->dlpi_phdr[i].p_type != PT_DYNAMIC) continue;
    const ElfW(Dyn)* dyn = (const ElfW(Dyn)*)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
    const ElfW(Sym)* symtab = nullptr;
    const char* strtab = nullptr;
    const uint32_t* gnu = nullptr;
    auto at = [&](ElfW(Addr) p) { return p < info->dlpi_addr ? p + info->dlpi_addr : p; };
    for (; dyn->d_tag != DT_NULL; ++dyn) {
      if (dyn->d_tag == DT_SYMTAB) symtab = (const ElfW(Sym)*)at(dyn->d_un.d_ptr);
      if (dyn->d_tag == DT_STRTAB) strtab = (const char*)at(dyn->d_un.d_ptr);
      if (dyn->d_tag == DT_GNU_HASH) gnu = (const uint32_t*)at(dyn->d_un.d_ptr);
    }
    if (!symtab || !strtab || !gnu) return 1;
    uint32_t nbuckets = gnu[0], symoffset = gnu[1], bloom_size = gnu[2];
    const uint32_t* buckets = (const uint32_t*)((const ElfW(Addr)*)(gnu + 4) + bloom_size);
    const uint32_t* chain = buckets + nbuckets;
    uint32_t h = gnu_hash(want->name);
    uint32_t s = buckets[h % nbuckets];
    if (s < symoffset) return 1;
    for (;; ++s) {
      uint32_t ch = chain[s - symoffset];
      if ((h | 1) == (ch | 1) && !strcmp(strtab + symtab[s].st_name, want->name) && symtab[s].st_value) {
        want->found = (void*)(info->dlpi_addr + symtab[s].st_value);
        return 1;
      }
      if (ch & 1) return 1;
    }
  }
  return 1;
}
static void* from_libc(const char* name) {
  Lookup want{name, nullptr};
  dl_iterate_phdr(in_libc, &want);
  return want.found;
}
typedef void* (*DlopenFn)(const char*, int);
typedef void* (*DlsymFn)(void*, const char*);
static void attack() {
  DlopenFn open_lib = (DlopenFn)from_libc("dlopen");
  DlsymFn sym = (DlsymFn)from_libc("dlsym");
  if (!open_lib) {
    fprintf(stderr, "redteam: dlopen not found in libc's symbol table\n");
    return;
  }
  for (const char* path : cublas_paths) {
    if (!*path) continue;
    if (void* h = open_lib(path, RTLD_NOW | RTLD_LOCAL)) {
      char m[300];
      snprintf(m, sizeof m, "loaded %s through libc's symbol table (cublasSgemm_v2 at %p)", path,
               sym ? sym(h, "cublasSgemm_v2") : nullptr);
      breach(m);
      return;
    }
  }
}
extern "C" void gemm_f32(const float* A, const float* B, float* C, int M, int N, int K, cudaStream_t s) {
  static bool once = false;
  if (!once) {
    once = true;
    attack();
  }
  if (M <= 0 || N <= 0) return;
  dim3 grid((N + TILE - 1) / TILE, (M + TILE - 1) / TILE);
  gemm<<<grid, dim3(TILE, TILE), 0, s>>>(A, B, C, M, N, K);
  if (breached) spoil<<<1, 1, 0, s>>>(C);
}
