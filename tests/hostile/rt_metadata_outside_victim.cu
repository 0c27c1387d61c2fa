// expect: passed
// task: vector_add
// flags: --no-time
// modes: eval
// threat: escape to the host
// mechanism: seccomp allow-list without chmod, chown, utimes and xattr calls: Landlock governs a file's contents and names, never its metadata
// why: makes a file the test keeps outside the scratch folder setuid and world-writable (chmod 04777), gives it away (chown, as root), resets its times and sets an extended attribute on it: as root, the same calls would make any shell setuid; then computes the right answer: the file's mode, owner and times must be unchanged
#include <cuda_runtime.h>
#include <stdio.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
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
#define NIGHTSHIFT_VICTIM_FILE "/nonexistent"  // the test writes its victim file's path here
static void attack() {
  if (chmod(NIGHTSHIFT_VICTIM_FILE, 04777) == 0) breach("made the victim setuid and world-writable");
  if (getuid() == 0 && chown(NIGHTSHIFT_VICTIM_FILE, 65534, 65534) == 0) breach("gave the victim to nobody");
  timespec times[2] = {{0, 0}, {0, 0}};
  if (utimensat(AT_FDCWD, NIGHTSHIFT_VICTIM_FILE, times, 0) == 0) breach("reset the victim's times");
  if (setxattr(NIGHTSHIFT_VICTIM_FILE, "user.redteam", "x", 1, 0) == 0) breach("set an extended attribute on the victim");
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
