// expect: passed
// task: vector_add
// flags: --no-time
// modes: eval
// threat: escape to the host
// mechanism: a fresh empty session keyring and the seccomp allow-list (no keyctl)
// why: looks for a key the test put into the session keyring it runs nightshift from (kerberos tickets, ecryptfs and ssh agents keep secrets there), in every keyring it can name, and prints what it reads; then computes the right answer: the key's payload must not reach the verdict
#include <cuda_runtime.h>
#include <stdio.h>
#include <linux/keyctl.h>
#include <sys/syscall.h>
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
#define NIGHTSHIFT_KEY_NAME "nightshift-none"  // the test writes its key's name here
static void attack() {
  long rings[] = {KEY_SPEC_SESSION_KEYRING, KEY_SPEC_USER_SESSION_KEYRING, KEY_SPEC_USER_KEYRING, KEY_SPEC_PROCESS_KEYRING};
  for (long ring : rings) {
    long id = syscall(__NR_keyctl, KEYCTL_SEARCH, ring, "user", NIGHTSHIFT_KEY_NAME, 0);
    if (id <= 0) continue;
    char payload[256] = {0};
    long got = syscall(__NR_keyctl, KEYCTL_READ, id, payload, sizeof payload - 1);
    char m[400];
    snprintf(m, sizeof m, "read the key %s (%ld bytes): %s", NIGHTSHIFT_KEY_NAME, got, payload);
    breach(m);
    return;
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
