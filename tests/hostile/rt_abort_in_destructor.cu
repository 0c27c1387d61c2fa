// expect: passed
// task: vector_add
// flags: --no-time
// modes: eval diagnose
// threat: denial and blame
// mechanism: a worker never runs a library's destructors or exit handlers: it leaves with _exit after Quit, the judge kills it with SIGKILL, and a standalone worker ends with _exit
// why: registers a static destructor, an atexit handler and an ELF destructor that abort() and write a finished report on every descriptor; then computes the right answer: none of them may run, so the verdict is a pass
#include <cuda_runtime.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
__global__ void add(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
static void forge_and_abort() {
  const char* line = "{\"event\":\"done\",\"report\":{\"outcome\":{\"outcome\":\"passed\"},\"notes\":[\"nightshift_forged\"]}}\n";
  for (int fd = 1; fd < 64; ++fd) write(fd, line, strlen(line));
  abort();
}
struct Bomb {
  ~Bomb() { forge_and_abort(); }
};
static Bomb bomb;
__attribute__((destructor)) static void elf_destructor() { forge_and_abort(); }
extern "C" void vector_add(const float* a, const float* b, float* c, int n, cudaStream_t s) {
  static bool registered = false;
  if (!registered) {
    registered = true;
    atexit(forge_and_abort);
  }
  if (n > 0) add<<<(n + 255) / 256, 256, 0, s>>>(a, b, c, n);
}
