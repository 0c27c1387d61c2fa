#!/usr/bin/env python3
"""What nightshift workers did after their sandbox went up, from `strace -f -ff -o DIR/t`
traces (one file per thread), grouped by run folder (ROOT/<mode>-<anything>/t.<tid>).

For every process that exec'd `nightshift worker`, its calls after its last seccomp()
are taken, with those of all its threads. Threads are found by the clone's child_tid
pointer (glibc's set_robust_list in the new thread is child_tid + 0x10): clone's return
value is a pid in the caller's PID namespace, which for hosted workers (ncu,
compute-sanitizer, in a private PID namespace) is not the host tid the trace file is
named by. Threads started before the sandbox (a tool's injected code) are listed apart.

usage: trace-syscalls.py ROOT [--refused]
  prints, per mode: the syscalls made and how often; argument details for the calls the
  seccomp profiles treat specially (socket kinds, prctl, fcntl, clone flags...); with
  --refused, every call that failed with EPERM, ENOSYS or EACCES after the sandbox (what
  the filter or Landlock refused, or the program's own checks); then the paths touched.
"""
import collections
import os
import re
import sys

WORKER = re.compile(r'"[^"]*nightshift", \["[^"]*nightshift", "worker"')
CALL = re.compile(r'^([a-z_0-9]+)\((.*)$')
RET = re.compile(r'= (-?\d+|0x[0-9a-f]+|\?)(?: (E[A-Z]+))?')
DETAIL = {'socket', 'socketpair', 'prctl', 'fcntl', 'setsockopt', 'bind', 'connect', 'listen', 'accept',
          'accept4', 'prlimit64', 'kill', 'tgkill', 'clone', 'clone3', 'execve', 'mknod', 'mknodat', 'chmod',
          'fchmod', 'fchmodat', 'sched_setaffinity', 'perf_event_open', 'memfd_create', 'keyctl',
          'io_uring_setup', 'ptrace', 'personality', 'unshare', 'setns', 'mount'}
PATHS = {'openat', 'open', 'stat', 'lstat', 'newfstatat', 'statx', 'readlink', 'readlinkat', 'access',
         'faccessat', 'faccessat2', 'connect', 'bind', 'mkdir', 'unlink', 'symlink', 'chmod', 'execve'}


def parse(path):
    out = []
    for line in open(path, errors='replace'):
        m = CALL.match(line)
        if not m:
            continue
        name, rest = m.group(1), m.group(2)
        tail = line.rsplit(') ', 1)[-1] if ') ' in line else ''
        r = RET.search(tail)
        out.append((name, rest, r.group(1) if r else None, r.group(2) if r else None))
    return out


def robust_list(calls):
    for n, r, _, _ in calls[:6]:
        if n == 'set_robust_list':
            try:
                return int(r.split(',')[0], 16)
            except ValueError:
                return None
    return None


def workers(root):
    """(mode, {tid: (calls, 'main'|'post'|'pre')}) per worker process."""
    for run in sorted(os.listdir(root)):
        d = os.path.join(root, run)
        if not os.path.isdir(d):
            continue
        files = {}
        for f in os.listdir(d):
            try:
                files[int(f.split('.')[-1])] = parse(os.path.join(d, f))
            except ValueError:
                pass
        by_robust = collections.defaultdict(list)
        for tid, calls in files.items():
            if any(n == 'execve' for n, *_ in calls):
                continue
            a = robust_list(calls)
            if a is not None:
                by_robust[a].append(tid)
        for tid, calls in files.items():
            execs = [i for i, c in enumerate(calls) if c[0] == 'execve' and WORKER.match(c[1]) and c[2] == '0']
            if not execs:
                continue
            start = execs[-1]
            sec = [i for i, c in enumerate(calls) if c[0] == 'seccomp' and i > start]
            if not sec:
                continue
            after = sec[-1] + 1
            group = {tid: (calls[after:], 'main')}
            todo = [(tid, calls[start:], start)]
            while todo:
                t, cs, offset = todo.pop()
                for i, (n, r, ret, err) in enumerate(cs):
                    if n not in ('clone', 'clone3') or 'CLONE_THREAD' not in r:
                        continue
                    m = re.search(r'child_tid(?:ptr)?=(0x[0-9a-f]+)', r)
                    if not m:
                        continue
                    for ft in by_robust.get(int(m.group(1), 16) + 0x10, []):
                        if ft in group:
                            continue
                        pre = (t == tid and i + offset < after) or group[t][1] == 'pre'
                        group[ft] = (files[ft], 'pre' if pre else 'post')
                        todo.append((ft, files[ft], 0))
            yield run.split('-')[0], group


def detail(n, r, ret, err):
    args = r.rsplit(')', 1)[0]
    args = re.sub(r'0x[0-9a-f]+', 'X', args)
    args = re.sub(r'\b\d{3,}\b', 'N', args)
    return f'{n}({args[:110]}) -> {"ok" if ret and not ret.startswith("-") else err}'


def main():
    root = sys.argv[1]
    refused_too = '--refused' in sys.argv
    counts = collections.defaultdict(collections.Counter)
    pre = collections.defaultdict(collections.Counter)
    details = collections.defaultdict(collections.Counter)
    refused = collections.defaultdict(collections.Counter)
    paths = collections.defaultdict(set)
    for mode, group in workers(root):
        for _, (calls, kind) in group.items():
            for n, r, ret, err in calls:
                (pre if kind == 'pre' else counts)[mode][n] += 1
                if n in DETAIL:
                    details[mode][detail(n, r, ret, err)] += 1
                if err in ('EPERM', 'ENOSYS', 'EACCES'):
                    refused[mode][detail(n, r, ret, err)] += 1
                if n in PATHS:
                    m = re.findall(r'"([^"]*)"', r)
                    if m:
                        p = m[-1] if n == 'symlink' else m[0]
                        p = re.sub(r'/proc/\d+', '/proc/PID', p)
                        p = re.sub(r'task/\d+', 'task/TID', p)
                        p = re.sub(r'build/[0-9a-f]{24}', 'build/HASH', p)
                        p = re.sub(r'(eval|probe)-\w{6}', r'\1-X', p)
                        paths[f'{n} {p} -> {"ok" if ret and not ret.startswith("-") else err}'].add(mode)
    for mode in sorted(counts):
        print(f'== {mode}: {len(counts[mode])} syscalls after the sandbox')
        print('  ', ' '.join(f'{n}:{c}' for n, c in sorted(counts[mode].items())))
        if pre[mode]:
            print('   threads started before the sandbox:', ' '.join(f'{n}:{c}' for n, c in sorted(pre[mode].items())))
        for d, c in sorted(details[mode].items()):
            print(f'      {c} {d}')
        if refused_too:
            print(f'   refused or failed with EPERM/ENOSYS/EACCES ({sum(refused[mode].values())}):')
            for d, c in sorted(refused[mode].items()):
                print(f'      {c} {d}')
    print('== paths (after the sandbox)')
    for p in sorted(paths):
        print('  ', p, sorted(paths[p]))


if __name__ == '__main__':
    main()
