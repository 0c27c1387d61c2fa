#!/usr/bin/env python3
"""The comparison a user makes: a task's baseline and nightshift's kernels against what a
PyTorch user would write instead, eager and under torch.compile, in one process on one
GPU, timed alike.

usage:
  scripts/vs-torch.py TASK_DIR [CANDIDATE.cu | RUN_DIR ...] [options]
  scripts/vs-torch.py --all TASK_DIR... [--runs RUNS_ROOT] [options]
  scripts/vs-torch.py --check-twins-cpu TASK_DIR...     (no GPU: the twin contract only)
  scripts/vs-torch.py --build-only TASK_DIR [CANDIDATE ...]   (no GPU, no torch: nvcc only)

  CANDIDATE.cu   a kernel file with the task's launcher, built as is
  RUN_DIR        a `nightshift optimize` run: its best.cu, built with the defines and nvcc
                 flags of best.json's "candidate" object
  --twin FILE    the twin to use instead of TASK_DIR/twin.py (one task only)
  --all          every argument is a task directory; with --runs RUNS_ROOT, the run
                 RUNS_ROOT/<task name> is that task's candidate (else every
                 RUNS_ROOT/<task name>-* with a best.cu, as scripts/optimize-gpu.sh suite
                 names them), row "best (<run folder>)". Keeps going past a failing task,
                 reports it, prints one combined table; a folder without task.toml is
                 skipped (and listed)
  --rounds 7 --reps 100 --warmup 5   the timing (below)
  --compile-mode default|max-autotune-no-cudagraphs
  --json FILE    the figures as JSON
  --arch sm_90a  the nvcc target (default: the GPU's, sm_XYa from Hopper on)
  --seed 0       the input seed

What it does, per task:
  1. Reads TASK_DIR/task.toml (lengths are evaluated at the bench size) and generates every
     input once at the bench size with torch on the GPU, seeded, following each `init`
     (normal, uniform, randint, const/zeros/ones, arange, randperm: index buffers stay in
     the range their init names).
  2. Builds the baseline ([task].baseline, linked with [build] libs and baseline_libs) and
     each candidate (with [build] libs) as shared libraries with nvcc (-O3 -arch=ARCH
     -shared -Xcompiler -fPIC -I TASK_DIR, -I for each [build] include, [build] flags),
     and calls the launcher [task].entry through ctypes with the args in task.toml order
     and torch's current stream last.
  3. Runs the baseline, each candidate, the eager twin and torch.compile(twin) once and
     compares every output with the baseline's under the task's tolerance
     (|got - want| <= atol + rtol * |want|, [check] rtol/atol or the arg's own). A
     mismatch, a twin that breaks its contract, or a side that writes into an input is
     printed and the script exits 1: a wrong twin is never timed.
  4. Times every side alike, as scripts/vs-eager.py does: the sides interleaved over
     --rounds rounds (the order reversed every other round), --warmup calls then --reps
     timed calls per side per round; before each call the L2 is flushed by a read-only
     reduction over a 150 MB tensor (unless the task sets [timing] flush_l2 = false) and
     the side's written buffers are restored; CUDA events around the call alone. Each
     side is timed twice over: "median ms", the GPU's work alone (a torch.cuda._sleep
     of twice the host's issue time holds the stream until the call's launches are
     queued, so a twin's Python wrapper, torch.compile's guards included, does not count;
     a sample whose wait ran out before the call returned is dropped and the wait
     doubled), which the speedups use; and "call ms (with launch)", the events also
     spanning the host's time to issue the launches, what one call costs in an eager
     program (it moves with the CPU: torch.compile's CV there was 9-38% on an H200). A
     side whose call synchronizes inside (a .item()) cannot hide that share: the table
     says "syncs inside" and its median ms keeps it. Per side: the median and the CV
     (population standard deviation over the mean).
  5. Prints a markdown table: side, median ms, CV, speedup over the baseline, and for
     candidates how many times faster than torch.compile and than eager (> 1: faster),
     then the call with its launch (median and CV). The JSON has both per side
     (median_ms and call_median_ms), whether the call syncs inside, and how many samples
     were dropped for a short wait.

The twin contract (TASK_DIR/twin.py):
  - `twin.py` defines `def twin(**args)`, or a function with named parameters (an arg
    named like a Python keyword, e.g. `in`, needs **args). It receives:
      * every buffer arg of task.toml that is not output-only, as a flat 1-D torch tensor
        on the GPU with the arg's element type (float -> float32, __half/half -> float16,
        __nv_bfloat16 -> bfloat16, int -> int32, int64_t/long long -> int64, unsigned
        char/uint8_t -> uint8, unsigned int -> uint32, ...) and length = the arg's `len`
        at the bench size; a buffer both initialised and written (`init` plus
        `output = true`) comes in as an input too;
      * every scalar arg (int or float, from [sizes] or `value =`) as a Python number.
    A function with named parameters gets only the ones it names.
  - It returns a dict {output arg name: tensor} with every output arg (`output = true`):
    any shape whose numel is the arg's len, contiguous (the work done, not a view), not
    an input's memory, with the arg's element type for float outputs (integer outputs
    may come back as any integer type: torch counts in int64). It must not write into
    its inputs.
  - It is what a PyTorch user would write: idiomatic torch ops, reshaping the flat
    inputs inside (x.view(rows, cols)), no hand-written kernels, no global settings;
    torch.compile of it is then the fair comparison.
  - Optionally `def twin_setup(**args)` (same arguments, untimed) returns a dict of
    extra precomputed things, passed to twin() as further keyword arguments. Rare.
  The twin is TASK_DIR/twin.py, or --twin FILE. A task `nightshift init` made has none:
  when its name (init names it after its folder) is that of a folder in examples/ with a
  twin.py and no task.toml, that twin is used: examples/bias_gelu_residual is such a
  kernel, and `scripts/optimize-gpu.sh suite` makes runs/tasks/bias_gelu_residual from it.
  For the README's walk-through, tasks/my_epilogue, pass
  --twin examples/bias_gelu_residual/twin.py (or copy it into the task folder).
  `--check-twins-cpu TASK_DIR...` runs each twin on the CPU at every check size and checks
  this contract (names, lengths, types, no writes into inputs); not the values.

Needs Python 3.11, PyTorch and nvcc ($NVCC, or nvcc on PATH, or /usr/local/cuda/bin/nvcc).
Exit status: 0 when every task ran, 1 when a check failed or a task could not run, 2 for
bad usage.
"""

from __future__ import annotations

import argparse
import ctypes
import importlib.util
import inspect
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FLUSH_BYTES = 150 * 1024 * 1024
COMPILE_MODES = ("default", "max-autotune-no-cudagraphs")

torch = None  # imported on first use: parsing, building and --help need no torch


class Failure(Exception):
    """An expected failure (bad task.toml, missing twin, nvcc error, mismatch): one message,
    no traceback."""


def need_torch():
    global torch
    if torch is None:
        try:
            import torch as t
        except Exception as e:  # noqa: BLE001 (a broken install raises more than ImportError)
            raise Failure(f"needs PyTorch: `import torch` failed: {e}") from None
        torch = t
    return torch


# ---------------------------------------------------------------------------------------
# Integer expressions (`len`, integer `value`): + - * / % << >>, unary minus, parentheses,
# names, integers, min/max/cdiv, as src/task/expr.rs reads them (/ and % truncate).

_TOKEN = re.compile(r"\s*(?:(?P<int>[0-9][0-9_]*)|(?P<name>[A-Za-z_][A-Za-z0-9_]*)|(?P<op><<|>>|[-+*/%(),]))")


class _Expr:
    def __init__(self, src: str, env: dict[str, int]):
        self.src, self.env, self.pos, self.tokens = src, env, 0, []
        i = 0
        while i < len(src):
            if src[i:].strip() == "":
                break
            m = _TOKEN.match(src, i)
            if not m:
                raise ValueError(f"unexpected character `{src[i:].lstrip()[0]}`")
            kind = m.lastgroup
            self.tokens.append((kind, m.group(kind)))
            i = m.end()

    def peek(self):
        return self.tokens[self.pos] if self.pos < len(self.tokens) else (None, None)

    def take(self):
        tok = self.peek()
        self.pos += 1
        return tok

    def parse(self) -> int:
        v = self.shift()
        if self.pos < len(self.tokens):
            raise ValueError(f"unexpected `{self.tokens[self.pos][1]}`")
        return v

    def level(self, ops, nxt):
        v = nxt()
        while self.peek() in [("op", o) for o in ops]:
            op = self.take()[1]
            w = nxt()
            v = _binop(op, v, w)
        return v

    def shift(self):
        return self.level(("<<", ">>"), self.additive)

    def additive(self):
        return self.level(("+", "-"), self.term)

    def term(self):
        return self.level(("*", "/", "%"), self.unary)

    def unary(self):
        if self.peek() == ("op", "-"):
            self.take()
            return -self.unary()
        return self.primary()

    def primary(self):
        kind, text = self.take()
        if kind == "int":
            return int(text.replace("_", ""))
        if kind == "op" and text == "(":
            v = self.shift()
            self.expect(")")
            return v
        if kind == "name":
            if self.peek() != ("op", "("):
                if text not in self.env:
                    known = ", ".join(sorted(self.env)) or "none"
                    raise ValueError(f"unknown variable `{text}` (the sizes define: {known})")
                return self.env[text]
            if text not in ("min", "max", "cdiv"):
                raise ValueError(f"unknown function `{text}` (known: min, max, cdiv)")
            self.take()
            args = [self.shift()]
            while self.peek() == ("op", ","):
                self.take()
                args.append(self.shift())
            self.expect(")")
            if text == "cdiv":
                if len(args) != 2:
                    raise ValueError("`cdiv` takes 2 arguments")
                if args[1] <= 0:
                    raise ValueError(f"cdiv({args[0]}, {args[1]}): divisor must be positive")
                return -((-args[0]) // args[1])
            return min(args) if text == "min" else max(args)
        raise ValueError("expression ends early" if kind is None else f"unexpected `{text}`")

    def expect(self, text):
        if self.take() != ("op", text):
            raise ValueError(f"missing `{text}`")


def _binop(op: str, a: int, b: int) -> int:
    if op in "/%" and b == 0:
        raise ValueError(f"division by zero in {a} {op} {b}")
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    if op in ("/", "%"):
        q = abs(a) // abs(b)
        q = q if (a >= 0) == (b > 0) else -q
        return q if op == "/" else a - b * q
    if not 0 <= b < 63:
        raise ValueError(f"shift amount {b} is outside 0..63")
    return a << b if op == "<<" else a >> b


def eval_expr(src: str, env: dict[str, int]) -> int:
    """Evaluates an integer expression of task.toml against size variables (never eval())."""
    v = _Expr(str(src), env).parse()
    if not -(2**63) <= v < 2**63:
        raise ValueError(f"{v} overflows a 64-bit integer")
    return v


# ---------------------------------------------------------------------------------------
# Types and init distributions, as src/task/types.rs and src/task/init.rs spell them.

ELEM_TYPES = {  # C spelling -> torch dtype name
    "float": "float32", "double": "float64", "half": "float16", "__half": "float16",
    "__nv_bfloat16": "bfloat16", "nv_bfloat16": "bfloat16",
    "int8_t": "int8", "signed char": "int8", "char": "int8",
    "uint8_t": "uint8", "unsigned char": "uint8",
    "int16_t": "int16", "short": "int16", "uint16_t": "uint16", "unsigned short": "uint16",
    "int": "int32", "int32_t": "int32", "unsigned": "uint32", "unsigned int": "uint32", "uint32_t": "uint32",
    "long": "int64", "long long": "int64", "int64_t": "int64",
    "unsigned long": "uint64", "unsigned long long": "uint64", "uint64_t": "uint64", "size_t": "uint64",
}  # fmt: skip
FLOAT_ELEMS = {"float32", "float64", "float16", "bfloat16"}
SCALAR_CTYPES = {
    "int32": ctypes.c_int32, "uint32": ctypes.c_uint32, "int64": ctypes.c_int64, "uint64": ctypes.c_uint64,
    "float32": ctypes.c_float, "float64": ctypes.c_double,
}  # fmt: skip
# torch has few ops on its wide unsigned types: they are handled through the signed view.
SIGNED_TWIN = {"uint16": "int16", "uint32": "int32", "uint64": "int64"}
INIT_FORMS = "normal(mean, std), uniform(lo, hi), randint(lo, hi), const(v), zeros, ones, arange, randperm"


def parse_type(spelling: str) -> tuple[str, bool, bool]:
    """`const __nv_bfloat16*` -> ("bfloat16", pointer, const)."""
    words, pointers, is_const = [], 0, False
    for w in spelling.replace("*", " * ").split():
        if w == "*":
            pointers += 1
        elif w == "const":
            is_const = True
        elif w not in ("__restrict__", "__restrict", "restrict"):
            words.append(w)
    base = " ".join(words)
    if base not in ELEM_TYPES:
        raise ValueError(f"unknown type `{base}` in `{spelling}`; expected one of: {', '.join(ELEM_TYPES)}")
    if pointers > 1:
        raise ValueError(f"`{spelling}` has {pointers} levels of pointer")
    elem = ELEM_TYPES[base]
    if pointers == 0 and elem not in SCALAR_CTYPES:
        raise ValueError(f"`{spelling}`: by-value parameters of this type are not supported")
    return elem, pointers == 1, is_const


@dataclass
class Init:
    kind: str  # normal, uniform, randint, const, arange, randperm
    a: float = 0.0
    b: float = 0.0

    def __str__(self):
        if self.kind in ("normal", "uniform"):
            return f"{self.kind}({self.a}, {self.b})"
        if self.kind == "randint":
            return f"randint({int(self.a)}, {int(self.b)})"
        return f"const({self.a})" if self.kind == "const" else self.kind


def parse_init(text: str) -> Init:
    t = text.strip()
    name, args = t, []
    if "(" in t:
        name, _, rest = t.partition("(")
        if not rest.endswith(")"):
            raise ValueError(f"`{t}`: missing `)`; expected one of {INIT_FORMS}")
        try:
            args = [float(a) for a in rest[:-1].split(",")]
        except ValueError:
            raise ValueError(f"`{t}`: the arguments must be numbers") from None
        name = name.strip()
    want = {"normal": 2, "uniform": 2, "randint": 2, "const": 1, "zeros": 0, "ones": 0, "arange": 0, "randperm": 0}
    if name not in want:
        raise ValueError(f"unknown distribution `{name}`; expected one of {INIT_FORMS}")
    if len(args) != want[name]:
        raise ValueError(f"`{t}`: `{name}` takes {want[name]} argument(s), got {len(args)}")
    if name == "normal" and not args[1] > 0:
        raise ValueError(f"`{t}`: the standard deviation must be positive")
    if name in ("uniform", "randint") and not args[0] < args[1]:
        raise ValueError(f"`{t}`: needs lo < hi")
    if name == "randint" and any(a != int(a) for a in args):
        raise ValueError(f"`{t}`: needs integers lo < hi (hi is excluded)")
    if name in ("zeros", "ones"):
        return Init("const", 0.0 if name == "zeros" else 1.0)
    return Init(name, *args)


# ---------------------------------------------------------------------------------------
# task.toml


@dataclass
class Arg:
    name: str
    spelling: str
    elem: str  # torch dtype name
    pointer: bool
    is_const: bool = False
    len: str | None = None
    init: Init | None = None
    output: bool = False
    rtol: float | None = None
    atol: float | None = None
    value: object = None  # scalars: an integer expression (str) or a float

    @property
    def is_input(self):  # a buffer the twin receives
        return self.pointer and self.init is not None

    @property
    def written(self):  # a buffer a launcher may write: restored before every call
        return self.pointer and not self.is_const


@dataclass
class Task:
    dir: Path
    name: str
    entry: str
    baseline: Path
    args: list[Arg]
    bench: dict[str, int]
    checks: list[dict[str, int]]
    rtol: float
    atol: float
    nonfinite: bool = False
    flush_l2: bool = True
    flags: list[str] = field(default_factory=list)
    libs: list[str] = field(default_factory=list)
    baseline_libs: list[str] = field(default_factory=list)
    include: list[str] = field(default_factory=list)

    def tolerance(self, a: Arg) -> tuple[float, float]:
        return (self.rtol if a.rtol is None else a.rtol, self.atol if a.atol is None else a.atol)

    def lengths(self, size: dict[str, int]) -> dict[str, int]:
        return {a.name: eval_expr(a.len, size) for a in self.args if a.pointer}

    def scalars(self, size: dict[str, int]) -> dict[str, int | float]:
        out = {}
        for a in self.args:
            if a.pointer:
                continue
            v = a.value
            if isinstance(v, str):
                v = eval_expr(v, size)
            out[a.name] = float(v) if a.elem in FLOAT_ELEMS else int(v)
        return out


def load_task(task_dir: Path) -> Task:
    """Reads TASK_DIR/task.toml; every refusal names the file and the field."""
    path = task_dir / "task.toml"
    if not path.is_file():
        hint = ""
        if (task_dir / "twin.py").is_file():  # examples/bias_gelu_residual: init makes the task
            hint = (
                f"; {task_dir} has a twin.py: make the task with `nightshift init` (the README's "
                f"walk-through, 'Optimize your own kernel'), then pass --twin {task_dir / 'twin.py'}"
            )
        raise Failure(f"{path}: no such file (a task directory holds a task.toml){hint}")
    try:
        raw = tomllib.loads(path.read_text())
    except (OSError, UnicodeDecodeError) as e:
        raise Failure(f"{path}: cannot read: {e}") from None
    except tomllib.TOMLDecodeError as e:
        raise Failure(f"{path}: not valid TOML: {e}") from None

    def bad(field_name, message):
        return Failure(f"{path}: {field_name}: {message}")

    def table(v, field_name):
        if not isinstance(v, dict):
            raise bad(field_name, "missing" if v is None else "expected a table")
        return v

    def string(tbl, key, field_name):
        v = tbl.get(key)
        if not isinstance(v, str) or not v.strip():
            raise bad(field_name, "missing" if v is None else f"expected a string, found {v!r}")
        return v.strip()

    def strings(tbl, key, field_name):
        v = tbl.get(key, [])
        if not isinstance(v, list) or not all(isinstance(s, str) for s in v):
            raise bad(field_name, "expected a list of strings")
        return v

    def number(tbl, key, field_name, default):
        v = tbl.get(key, default)
        if isinstance(v, bool) or not isinstance(v, (int, float)) or v < 0:
            raise bad(field_name, f"expected a number >= 0, found {v!r}")
        return float(v)

    def size_table(v, field_name):
        table(v, field_name)
        for k, n in v.items():
            if isinstance(n, bool) or not isinstance(n, int) or n < 0:
                raise bad(f"{field_name}.{k}", f"expected an integer size >= 0, found {n!r}")
        if not v:
            raise bad(field_name, "binds no variables")
        return dict(v)

    t = table(raw.get("task"), "task")
    name, entry = string(t, "name", "task.name"), string(t, "entry", "task.entry")
    baseline = task_dir / string(t, "baseline", "task.baseline")
    if not baseline.is_file():
        raise bad("task.baseline", f"`{t['baseline']}` does not exist in {task_dir}")
    sizes = table(raw.get("sizes"), "sizes")
    if "bench" not in sizes:
        raise bad("sizes.bench", "missing")
    bench = size_table(sizes["bench"], "sizes.bench")
    checks_raw = sizes.get("check", [])
    if not isinstance(checks_raw, list):
        raise bad("sizes.check", "expected a list of tables")
    checks = [size_table(c, f"sizes.check[{i}]") for i, c in enumerate(checks_raw)]
    check = table(raw.get("check", {}), "check")
    timing = table(raw.get("timing", {}), "timing")
    build = table(raw.get("build", {}), "build")

    raw_args = raw.get("arg")
    if not isinstance(raw_args, list) or not raw_args:
        raise bad("arg", "the task declares no [[arg]]")
    args: list[Arg] = []
    for i, a in enumerate(raw_args):
        table(a, f"arg[{i}]")
        aname = string(a, "name", f"arg[{i}].name")
        where = f"arg[{i}] ({aname})"
        spelling = string(a, "type", f"{where}.type")
        try:
            elem, pointer, is_const = parse_type(spelling)
        except ValueError as e:
            raise bad(f"{where}.type", str(e)) from None
        arg = Arg(aname, spelling, elem, pointer, is_const, output=bool(a.get("output", False)))
        if pointer:
            arg.len = string(a, "len", f"{where}.len")
            try:
                eval_expr(arg.len, bench)
            except ValueError as e:
                raise bad(f"{where}.len", f"`{arg.len}` at the bench size: {e}") from None
            if "init" in a:
                try:
                    arg.init = parse_init(string(a, "init", f"{where}.init"))
                except ValueError as e:
                    raise bad(f"{where}.init", str(e)) from None
                if arg.init.kind in ("normal", "uniform") and elem not in FLOAT_ELEMS:
                    raise bad(f"{where}.init", f"{arg.init} draws non-integers but the buffer holds {elem}")
            elif not arg.output:
                raise bad(f"{where}.init", f"input `{aname}` needs `init` ({INIT_FORMS}) or output = true")
            if arg.output and is_const:
                raise bad(f"{where}.output", f"`{spelling}` is const: the kernel cannot write it")
            for tol in ("rtol", "atol"):
                if tol in a:
                    setattr(arg, tol, number(a, tol, f"{where}.{tol}", 0.0))
        else:
            v = a.get("value")
            if v is None:
                if aname not in bench:
                    raise bad(
                        f"{where}.value", f"`{aname}` is not a size variable ({', '.join(bench)}); give it a `value`"
                    )
                v = aname
            elif isinstance(v, bool) or not isinstance(v, (int, float, str)):
                raise bad(f"{where}.value", f"expected a number or an integer expression, found {v!r}")
            elif isinstance(v, float) and elem not in FLOAT_ELEMS:
                raise bad(f"{where}.value", f"expected an integer (`{spelling}` is an integer type), found {v}")
            if isinstance(v, str):
                try:
                    eval_expr(v, bench)
                except ValueError as e:
                    raise bad(f"{where}.value", f"`{v}` at the bench size: {e}") from None
            arg.value = v
        args.append(arg)
    if not any(a.output for a in args):
        raise bad("arg", "no argument has output = true: nothing to compare")
    nonfinite = check.get("nonfinite", False)
    flush_l2 = timing.get("flush_l2", True)
    return Task(
        dir=task_dir, name=name, entry=entry, baseline=baseline, args=args, bench=bench, checks=checks,
        rtol=number(check, "rtol", "check.rtol", 1e-5), atol=number(check, "atol", "check.atol", 1e-6),
        nonfinite=bool(nonfinite), flush_l2=bool(flush_l2),
        flags=strings(build, "flags", "build.flags"), libs=strings(build, "libs", "build.libs"),
        baseline_libs=strings(build, "baseline_libs", "build.baseline_libs"),
        include=strings(build, "include", "build.include"),
    )  # fmt: skip


def size_words(size: dict[str, int]) -> str:
    return " ".join(f"{k}={v}" for k, v in size.items())


# ---------------------------------------------------------------------------------------
# Candidates and nvcc


@dataclass
class Candidate:
    name: str
    source: Path
    defines: dict[str, str] = field(default_factory=dict)
    flags: list[str] = field(default_factory=list)


def load_candidate(spec: str, name: str | None = None) -> Candidate:
    """A candidate from a .cu file or a run directory; `name` is its row in the table."""
    p = Path(spec)
    if p.is_dir():
        src, meta = p / "best.cu", p / "best.json"
        if not src.is_file():
            raise Failure(f"{p}: no best.cu (a run directory of `nightshift optimize` that found a best kernel)")
        cand = {}
        if meta.is_file():
            try:
                cand = json.loads(meta.read_text()).get("candidate") or {}
            except (OSError, ValueError) as e:
                raise Failure(f"{meta}: cannot read: {e}") from None
        defines = cand.get("defines") or {}
        flags = cand.get("flags") or []
        if not isinstance(defines, dict) or not isinstance(flags, list):
            raise Failure(f"{meta}: candidate: expected `defines` as an object and `flags` as a list")
        defines = {str(k): str(v) for k, v in defines.items()}
        return Candidate(name or p.resolve().name, src, defines, [str(f) for f in flags])
    if p.is_file() and p.suffix == ".cu":
        return Candidate(name or p.name, p)
    raise Failure(f"{spec}: expected a .cu file or a run directory (with best.cu and best.json)")


def find_nvcc() -> str:
    for c in (os.environ.get("NVCC"), shutil.which("nvcc"), "/usr/local/cuda/bin/nvcc"):
        if c and Path(c).is_file():
            return c
    raise Failure("nvcc not found: set NVCC, put nvcc on PATH, or install the CUDA toolkit in /usr/local/cuda")


def lib_flags(nvcc: str, names: list[str]) -> list[str]:
    """-l for each library, found in the toolkit's lib folder (a versioned .so.N by path,
    as nightshift links them) with an rpath to it."""
    root = Path(nvcc).resolve().parent.parent
    dirs = [d for d in (root / "lib64", root / "lib") if d.is_dir()]
    out = []
    for d in dirs:
        out += [f"-L{d}", "-Xlinker", f"-rpath={d}"]
    for name in names:
        versioned = None
        for d in dirs:
            if (d / f"lib{name}.so").exists():
                break
            found = sorted(d.glob(f"lib{name}.so.*"), key=lambda q: len(q.name))
            if found:
                versioned = found[0]
                break
        out += ["-Xlinker", str(versioned)] if versioned else [f"-l{name}"]
    return out


def build(task: Task, nvcc: str, arch: str, source: Path, out: Path, defines=None, flags=(), trusted=False) -> Path:
    cmd = [nvcc, "-O3", f"-arch={arch}", "-shared", "-Xcompiler", "-fPIC", f"-I{task.dir.resolve()}"]
    cmd += [f"-I{(task.dir / inc).resolve()}" for inc in task.include]
    cmd += list(task.flags) + list(flags) + [f"-D{k}={v}" for k, v in (defines or {}).items()]
    cmd += ["-o", str(out), str(source)]
    cmd += lib_flags(nvcc, task.libs + (task.baseline_libs if trusted else []))
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    except subprocess.TimeoutExpired:
        raise Failure(f"{source}: nvcc ran past 600 s") from None
    if r.returncode != 0:
        tail = "\n".join((r.stderr or r.stdout).strip().splitlines()[-25:])
        raise Failure(f"{source}: nvcc failed (exit {r.returncode})\n  {' '.join(cmd)}\n{tail}")
    return out


def load_launcher(so: Path, entry: str, source: Path):
    try:
        lib = ctypes.CDLL(str(so))
    except OSError as e:
        raise Failure(f"{source}: the built library does not load: {e}") from None
    try:
        return lib, getattr(lib, entry)
    except AttributeError:
        raise Failure(f'{source}: defines no extern "C" launcher `{entry}` ([task].entry)') from None


# ---------------------------------------------------------------------------------------
# Tensors


def dtype_of(elem: str):
    t = need_torch()
    dt = getattr(t, elem, None)
    if dt is None:
        raise Failure(f"element type {elem} needs a newer PyTorch (torch {t.__version__} lacks torch.{elem})")
    return dt


def from_int64(x, elem: str):
    """An int64 tensor as `elem` (the wide unsigned types through their signed view)."""
    if elem in SIGNED_TWIN:
        return x.to(dtype_of(SIGNED_TWIN[elem])).view(dtype_of(elem))
    return x.to(dtype_of(elem))


def as_f64(x):
    """Values as float64 (the wide unsigned types read through their signed view)."""
    t = need_torch()
    name = str(x.dtype).removeprefix("torch.")
    if name in SIGNED_TWIN:
        v = x.view(dtype_of(SIGNED_TWIN[name])).to(t.float64)
        return t.where(v < 0, v + float(2 ** (8 * x.element_size())), v)
    return x.to(t.float64)


def generate(init: Init, n: int, elem: str, gen, device):
    t = need_torch()
    if init.kind in ("normal", "uniform"):
        work = t.float64 if elem == "float64" else t.float32
        x = t.empty(n, dtype=work, device=device)
        if init.kind == "normal":
            x.normal_(init.a, init.b, generator=gen)
        else:
            x.uniform_(init.a, init.b, generator=gen)
        return x.to(dtype_of(elem))
    if init.kind == "randint":
        lo, hi = int(init.a), int(init.b)
        native = elem not in SIGNED_TWIN
        x = t.randint(lo, hi, (n,), generator=gen, device=device, dtype=dtype_of(elem) if native else t.int64)
        return x if native else from_int64(x, elem)
    if init.kind == "const":
        if elem in FLOAT_ELEMS:
            return t.full((n,), init.a, dtype=dtype_of(elem), device=device)
        return from_int64(t.full((n,), int(init.a), dtype=t.int64, device=device), elem)
    if init.kind == "arange":
        return from_int64(t.arange(n, dtype=t.int64, device=device), elem)
    if init.kind == "randperm":
        return from_int64(t.randperm(n, generator=gen, device=device), elem)
    raise AssertionError(init.kind)


def make_inputs(task: Task, size: dict[str, int], seed: int, device) -> dict:
    """Every initialised buffer at `size`, seeded: one generator per arg, so adding an arg
    leaves the others' values alone."""
    t = need_torch()
    lens = task.lengths(size)
    out = {}
    for i, a in enumerate(task.args):
        if a.is_input:
            gen = t.Generator(device=device)
            gen.manual_seed(seed * 1000003 + i)
            out[a.name] = generate(a.init, lens[a.name], a.elem, gen, device)
    return out


def poisoned(n: int, elem: str, device):
    """An output buffer full of 0xFF bytes (NaN for floats): a side that leaves part of an
    output unwritten shows up in the comparison."""
    t = need_torch()
    x = t.empty(n, dtype=dtype_of(elem), device=device)
    x.view(t.uint8).fill_(255)
    return x


def compare(got, want, rtol: float, atol: float, nonfinite_ok: bool) -> dict:
    """Whether |got - want| <= atol + rtol * |want| everywhere; with the first few
    differences for the message."""
    g, w = as_f64(got.reshape(-1)), as_f64(want.reshape(-1))
    err = (g - w).abs()
    ok = err <= atol + rtol * w.abs()
    if nonfinite_ok:
        ok |= (g.isnan() & w.isnan()) | (g.isinf() & (g == w))
    bad = (~ok).nonzero().flatten()
    finite = err[err.isfinite()]
    rel = (err / w.abs())[err.isfinite() & (w != 0)]
    res = {
        "elements": g.numel(),
        "mismatches": int(bad.numel()),
        "max_abs_err": float(finite.max()) if finite.numel() else 0.0,
        "max_rel_err": float(rel.max()) if rel.numel() else 0.0,
        "nonfinite_want": int((~w.isfinite()).sum()),
    }
    res["first"] = [(int(i), float(g[i]), float(w[i])) for i in bad[:5].tolist()]
    return res


def mismatch_text(side: str, out: str, c: dict, rtol: float, atol: float) -> str:
    lines = [
        f"{side}: output `{out}`: {c['mismatches']} of {c['elements']} elements differ from the baseline's "
        f"beyond |got - want| <= {atol:g} + {rtol:g} * |want| (max abs err {c['max_abs_err']:.3g})"
    ]
    lines += [f"    [{i}] got {g!r}, baseline {w!r}" for i, g, w in c["first"]]
    if c["nonfinite_want"]:
        lines.append(f"    the baseline's `{out}` itself holds {c['nonfinite_want']} non-finite values")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------
# The twin


def find_twin(task: Task, explicit: str | None) -> Path:
    if explicit:
        p = Path(explicit)
        if not p.is_file():
            raise Failure(f"--twin {explicit}: no such file")
        return p
    p = task.dir / "twin.py"
    if p.is_file():
        return p
    # A task `nightshift init` made from an example kernel (named after its folder, e.g.
    # runs/tasks/bias_gelu_residual): the example's twin, if the example is no task itself.
    example = REPO / "examples" / task.name
    if (example / "twin.py").is_file() and not (example / "task.toml").exists():
        log(f"{task.name}: no twin.py in {task.dir}; using {example / 'twin.py'} (the example init made it from)")
        return example / "twin.py"
    raise Failure(f"{p}: no such file: write the PyTorch twin there (see the docstring: --help), or pass --twin FILE")


@dataclass
class Twin:
    path: Path
    fn: object
    setup: object = None


_loaded = 0


def load_twin(path: Path) -> Twin:
    global _loaded
    _loaded += 1
    sys.dont_write_bytecode = True  # no __pycache__ left in task folders
    spec = importlib.util.spec_from_file_location(f"vs_torch_twin_{_loaded}", path)
    mod = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(mod)
    except SyntaxError as e:
        raise Failure(f"{path}:{e.lineno}: syntax error: {e.msg}") from None
    except Exception as e:  # noqa: BLE001 (the user's module: any error is reported, not raised)
        raise Failure(f"{path}: cannot import: {type(e).__name__}: {e}{where_in(e, path)}") from None
    fn = getattr(mod, "twin", None)
    if not callable(fn):
        raise Failure(f"{path}: defines no function `twin` (the contract: def twin(**args) -> dict)")
    setup = getattr(mod, "twin_setup", None)
    return Twin(path, fn, setup if callable(setup) else None)


def where_in(e: BaseException, path: Path) -> str:
    """` (twin.py:12)`: the innermost frame of the traceback in `path`."""
    tb, line = e.__traceback__, None
    while tb is not None:
        if Path(tb.tb_frame.f_code.co_filename).resolve() == path.resolve():
            line = tb.tb_lineno
        tb = tb.tb_next
    return f" (at {path}:{line})" if line else ""


def bind(fn, kwargs: dict, path: Path, what: str) -> dict:
    """The keyword arguments `fn` takes: all with **args, else the ones it names."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return kwargs
    if any(p.kind is p.VAR_KEYWORD for p in params):
        return kwargs
    names = {p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)}
    missing = [
        p.name for p in params if p.default is p.empty and p.kind is not p.VAR_POSITIONAL and p.name not in kwargs
    ]
    if missing:
        raise Failure(
            f"{path}: {what}() asks for {', '.join(missing)}, which the task does not pass "
            f"(it passes: {', '.join(kwargs)})"
        )
    return {k: v for k, v in kwargs.items() if k in names}


def call_twin(fn, kwargs: dict, path: Path, what: str):
    try:
        return fn(**kwargs)
    except Failure:
        raise
    except Exception as e:  # noqa: BLE001 (the user's twin: report it as the twin's failure)
        first = str(e).strip().splitlines()[0] if str(e).strip() else ""
        raise Failure(f"{path}: {what} raised {type(e).__name__}: {first}{where_in(e, path)}") from None


def twin_args(task: Task, inputs: dict, scalars: dict) -> dict:
    return {
        a.name: (inputs[a.name] if a.pointer else scalars[a.name])
        for a in task.args
        if a.name in inputs or not a.pointer
    }


def checked_result(res, task: Task, lens: dict, inputs: dict, path: Path, what: str, alias_ok=False) -> dict:
    """The twin's outputs, flat, after checking the contract. (`alias_ok`: at the tiny check
    sizes an output may legitimately be an input's memory, e.g. a 1 x 1 transpose.)"""
    t = need_torch()
    outs = [a for a in task.args if a.output]
    if not isinstance(res, dict):
        raise Failure(
            f"{path}: {what} returned {type(res).__name__}; expected a dict {{output name: tensor}} for {', '.join(a.name for a in outs)}"
        )
    missing = [a.name for a in outs if a.name not in res]
    extra = [k for k in res if k not in {a.name for a in outs}]
    if missing or extra:
        parts = ([f"lacks {', '.join(missing)}"] if missing else []) + (
            [f"has unknown keys {', '.join(map(str, extra))}"] if extra else []
        )
        raise Failure(f"{path}: {what}'s dict {' and '.join(parts)}; the outputs are {', '.join(a.name for a in outs)}")
    storages = {x.untyped_storage().data_ptr() for x in inputs.values() if x.numel()}
    flat = {}
    for a in outs:
        x = res[a.name]
        if not isinstance(x, t.Tensor):
            raise Failure(f"{path}: {what}'s `{a.name}` is a {type(x).__name__}, not a tensor")
        if inputs and x.device != next(iter(inputs.values())).device:
            raise Failure(
                f"{path}: {what}'s `{a.name}` is on {x.device}, its inputs on {next(iter(inputs.values())).device}"
            )
        if x.numel() != lens[a.name]:
            raise Failure(
                f"{path}: {what}'s `{a.name}` has {x.numel()} elements (shape {tuple(x.shape)}); the task's len `{a.len}` is {lens[a.name]}"
            )
        name = str(x.dtype).removeprefix("torch.")
        if (a.elem in FLOAT_ELEMS or name in FLOAT_ELEMS) and name != a.elem:
            raise Failure(
                f"{path}: {what}'s `{a.name}` is {name}, but the task's `{a.name}` is {a.spelling} ({a.elem}): return that type, as the kernel writes it"
            )
        if not x.is_contiguous():
            raise Failure(
                f"{path}: {what}'s `{a.name}` is a non-contiguous view: return it .contiguous(), as the kernel writes its buffer"
            )
        if not alias_ok and x.numel() and x.untyped_storage().data_ptr() in storages:
            raise Failure(f"{path}: {what}'s `{a.name}` is an input's memory: return a new tensor")
        flat[a.name] = x.reshape(-1)
    return flat


def unchanged(inputs: dict, pristine: dict) -> list[str]:
    t = need_torch()
    return [k for k, v in inputs.items() if not t.equal(v.view(t.uint8), pristine[k].view(t.uint8))]


# ---------------------------------------------------------------------------------------
# Sides and timing


@dataclass
class Side:
    name: str
    kind: str  # baseline, candidate, eager, compile
    call: object
    prepare: object = None
    outputs: object = None  # () -> {name: tensor}: the buffers (native) or the last result (twin)


def native_side(name, kind, launcher, task: Task, inputs, pristine, scalars, lens, device, stream) -> Side:
    buffers, restore, cargs, argtypes = {}, [], [], []
    for a in task.args:
        if not a.pointer:
            ctype = SCALAR_CTYPES[a.elem]
            cargs.append(ctype(scalars[a.name]))
            argtypes.append(ctype)
            continue
        if a.name in inputs and not a.written:
            buf = inputs[a.name]  # const: shared by every side (checked for writes)
        elif a.name in inputs:
            buf = pristine[a.name].clone()  # written and initialised: own copy, restored per call
            restore.append((buf, pristine[a.name]))
        else:
            buf = poisoned(lens[a.name], a.elem, device)
        buffers[a.name] = buf
        cargs.append(ctypes.c_void_p(buf.data_ptr()))
        argtypes.append(ctypes.c_void_p)
    launcher.argtypes = argtypes + [ctypes.c_void_p]
    launcher.restype = None
    cargs.append(ctypes.c_void_p(stream))

    def prepare():
        for buf, src in restore:
            buf.copy_(src)

    return Side(name, kind, lambda: launcher(*cargs), prepare if restore else None,
                lambda: {a.name: buffers[a.name] for a in task.args if a.output})  # fmt: skip


def twin_side(name, kind, fn, kwargs) -> Side:
    last = {}

    def call():
        last["out"] = fn(**kwargs)

    return Side(name, kind, call, None, lambda: last.get("out"))


def sleep_cycles_per_ms() -> float:
    """How many cycles of torch.cuda._sleep make a millisecond on this GPU, measured."""
    t = need_torch()
    start, end = t.cuda.Event(enable_timing=True), t.cuda.Event(enable_timing=True)
    t.cuda._sleep(1_000_000)  # the first call loads the kernel
    best = float("inf")
    for _ in range(3):
        start.record()
        t.cuda._sleep(1_000_000)
        end.record()
        end.synchronize()
        best = min(best, start.elapsed_time(end))
    return 1_000_000 / max(best, 1e-3)


# The longest wait queued ahead of a timed call, and the wait that tells whether a call
# synchronizes inside (a .item(), a host copy): such a call cannot return before it ends.
MAX_WAIT_MS = 20.0
SYNC_PROBE_MS = 20.0


def time_sides(sides: list[Side], rounds: int, reps: int, warmup: int, flush) -> dict[str, dict]:
    """Per side, two timings of the same calls, both between CUDA events on the stream:
    `gpu`, with the GPU held busy (torch.cuda._sleep) until the call's launches are all
    queued, so the events span the GPU's work alone, however slow the Python wrapper;
    and `call`, where the events also span the host's time to issue the launches (what
    one eager call costs, and what makes a twin's figure move with the CPU).

    The wait is twice the host's issue time (the median of the round's warm-up calls,
    one untimed probe call when --warmup is 0). A `gpu` sample whose start event had
    already passed when the call returned waited too little: it is dropped and the wait
    doubled. A side whose call synchronizes inside cannot hide its host time (the host
    waits for the GPU, then issues the rest): it is marked `syncs`, and its `gpu` figure
    keeps that share."""
    import time

    t = need_torch()
    per_ms = sleep_cycles_per_ms()
    times = {s.name: {"gpu": [], "call": []} for s in sides}
    syncs = {s.name: sync_inside(s, per_ms) for s in sides}
    short = {s.name: 0 for s in sides}
    start, end = t.cuda.Event(enable_timing=True), t.cuda.Event(enable_timing=True)
    for r in range(rounds):
        for s in sides if r % 2 == 0 else reversed(sides):
            host = []
            for _ in range(max(warmup, 1)):
                if s.prepare:
                    s.prepare()
                t0 = time.perf_counter()
                s.call()
                host.append(1e3 * (time.perf_counter() - t0))
                t.cuda.synchronize()
            wait_ms = min(2 * statistics.median(host) + 0.05, MAX_WAIT_MS)
            for hidden in (True, False):
                taken, attempts = 0, 0
                while taken < reps and attempts < 3 * reps:
                    attempts += 1
                    if s.prepare:
                        s.prepare()
                    if flush is not None:
                        flush.amax()
                    if hidden:
                        t.cuda._sleep(int(per_ms * wait_ms))
                    start.record()
                    s.call()
                    too_short = hidden and not syncs[s.name] and start.query()
                    end.record()
                    end.synchronize()
                    if too_short and wait_ms < MAX_WAIT_MS:
                        short[s.name] += 1
                        wait_ms = min(2 * wait_ms, MAX_WAIT_MS)
                        continue
                    times[s.name]["gpu" if hidden else "call"].append(start.elapsed_time(end))
                    taken += 1

    def stats(v):
        mean = statistics.mean(v)
        return statistics.median(v), statistics.pstdev(v) / mean if mean else 0.0

    out = {}
    for k, v in times.items():
        (ms, cv), (call_ms, call_cv) = stats(v["gpu"]), stats(v["call"])
        out[k] = {
            "ms": ms, "cv": cv, "call_ms": call_ms, "call_cv": call_cv, "samples": v["gpu"],
            "syncs": syncs[k], "short_waits": short[k],
        }  # fmt: skip
    return out


def sync_inside(s: Side, per_ms: float) -> bool:
    """Whether the side's call waits for the GPU before it returns: a long wait is queued
    ahead of it, and if the wait is over when the call returns, the call waited for it."""
    t = need_torch()
    t.cuda.synchronize()
    if s.prepare:
        s.prepare()
    t.cuda._sleep(int(per_ms * SYNC_PROBE_MS))
    mark = t.cuda.Event()
    mark.record()
    s.call()
    waited = mark.query()
    t.cuda.synchronize()
    return waited


# ---------------------------------------------------------------------------------------
# One task


def log(msg: str):
    print(f"vs-torch: {msg}", file=sys.stderr, flush=True)


def default_arch() -> str:
    t = need_torch()
    major, minor = t.cuda.get_device_capability()
    return f"sm_{major}{minor}{'a' if major >= 9 else ''}"


def run_task(task_dir: Path, cand_specs: list, opts, twin_path: str | None, flush, device="cuda") -> dict:
    """One task: build, check, time. `cand_specs`: paths, or (path, name) pairs."""
    t = need_torch()
    task = load_task(task_dir)
    twin = load_twin(find_twin(task, twin_path))
    cands = [load_candidate(*((c,) if isinstance(c, str) else c)) for c in cand_specs]
    seen = {"baseline", "eager", "torch.compile"}
    for c in cands:
        base, k = c.name, 2
        while c.name in seen:
            c.name, k = f"{base}#{k}", k + 1
        seen.add(c.name)
    device = t.device(device)
    nvcc = find_nvcc()
    arch = opts.arch or default_arch()
    result = {
        "task": task.name,
        "dir": str(task_dir),
        "twin": str(twin.path),
        "bench": task.bench,
        "sides": [],
        "check": {},
    }

    with tempfile.TemporaryDirectory(prefix="vs-torch-") as tmp:
        log(f"{task.name}: building the baseline and {len(cands)} candidate(s) for {arch}")
        so = build(task, nvcc, arch, task.baseline, Path(tmp) / "baseline.so", trusted=True)
        libs = [("baseline", "baseline", so, task.baseline)]
        for i, c in enumerate(cands):
            so = build(task, nvcc, arch, c.source, Path(tmp) / f"cand{i}.so", c.defines, c.flags)
            libs.append((c.name, "candidate", so, c.source))
        launchers = [(n, k, load_launcher(so, task.entry, src)) for n, k, so, src in libs]

        log(f"{task.name}: inputs at the bench size {size_words(task.bench)}")
        lens, scalars = task.lengths(task.bench), task.scalars(task.bench)
        inputs = make_inputs(task, task.bench, opts.seed, device)
        pristine = {k: v.clone() for k, v in inputs.items()}
        stream = t.cuda.current_stream().cuda_stream if device.type == "cuda" else 0
        sides = [
            native_side(n, k, fn, task, inputs, pristine, scalars, lens, device, stream) for n, k, (_, fn) in launchers
        ]

        kwargs = twin_args(task, inputs, scalars)
        if twin.setup is not None:
            extra = call_twin(twin.setup, bind(twin.setup, kwargs, twin.path, "twin_setup"), twin.path, "twin_setup()")
            if not isinstance(extra, dict):
                raise Failure(f"{twin.path}: twin_setup() returned {type(extra).__name__}; expected a dict")
            clash = [k for k in extra if k in kwargs]
            if clash:
                raise Failure(f"{twin.path}: twin_setup() returns {', '.join(clash)}, already the task's args")
            kwargs = {**kwargs, **extra}
        kwargs = bind(twin.fn, kwargs, twin.path, "twin")
        mode = None if opts.compile_mode == "default" else opts.compile_mode
        compiled = t.compile(twin.fn, mode=mode, fullgraph=False, dynamic=False)
        sides.append(twin_side("eager", "eager", twin.fn, kwargs))
        sides.append(twin_side("torch.compile", "compile", compiled, kwargs))

        # One call of every side, each checked against the baseline before any timing.
        want = None
        for s in sides:
            if s.kind == "compile":
                log(f"{task.name}: torch.compile(twin, mode={opts.compile_mode}) (the first call compiles)")
            if s.prepare:
                s.prepare()
            what = "twin()" if s.kind == "eager" else "torch.compile(twin)()"
            if s.kind in ("eager", "compile"):
                call_twin(s.call, {}, twin.path, what)
            else:
                s.call()
            try:
                t.cuda.synchronize()
            except RuntimeError as e:  # an illegal address or launch failure, caught at the sync
                raise Failure(f"{task.name}: {s.name}: a CUDA error after its call: {e}") from None
            outs = s.outputs()
            if s.kind in ("eager", "compile"):
                outs = checked_result(outs, task, lens, inputs, twin.path, what)
            written = unchanged(inputs, pristine)
            if written:
                raise Failure(f"{task.name}: {s.name} wrote into its input(s) {', '.join(written)}")
            if want is None:
                want = {k: v.clone() for k, v in outs.items()}
                continue
            result["check"][s.name], differ = {}, []
            for a in task.args:
                if not a.output:
                    continue
                rtol, atol = task.tolerance(a)
                c = compare(outs[a.name], want[a.name], rtol, atol, task.nonfinite)
                result["check"][s.name][a.name] = {k: v for k, v in c.items() if k != "first"}
                if c["mismatches"]:
                    differ.append(mismatch_text(s.name, a.name, c, rtol, atol))
            if differ:
                raise Failure(f"{task.name}: the check failed, nothing was timed\n" + "\n".join(differ))
            log(f"{task.name}: {s.name} agrees with the baseline (" + ", ".join(
                f"{o}: max abs err {c['max_abs_err']:.3g}" for o, c in result["check"][s.name].items()) + ")")  # fmt: skip

        log(f"{task.name}: timing {len(sides)} sides, {opts.rounds} rounds x ({opts.warmup} warm-up + {opts.reps} timed calls)"
            + ("" if task.flush_l2 else "; the task sets flush_l2 = false: no L2 flush"))  # fmt: skip
        timed = time_sides(sides, opts.rounds, opts.reps, opts.warmup, flush if task.flush_l2 else None)

    base_ms = timed["baseline"]["ms"]
    eager_ms, compile_ms = timed["eager"]["ms"], timed["torch.compile"]["ms"]
    for s in sides:
        tm = timed[s.name]
        ms = tm["ms"]
        row = {
            "side": s.name, "kind": s.kind, "median_ms": ms, "cv": tm["cv"], "speedup_vs_baseline": base_ms / ms,
            "call_median_ms": tm["call_ms"], "call_cv": tm["call_cv"], "syncs": tm["syncs"],
            "short_waits": tm["short_waits"],
        }  # fmt: skip
        if s.kind == "candidate":
            row["x_faster_than_compile"] = compile_ms / ms
            row["x_faster_than_eager"] = eager_ms / ms
        result["sides"].append(row)
    return result


# ---------------------------------------------------------------------------------------
# Reports


def markdown_table(results: list[dict], with_task: bool) -> str:
    head = ["side", "median ms", "CV", "vs baseline", "x faster than torch.compile", "x faster than eager",
            "call ms (with launch)"]  # fmt: skip
    if with_task:
        head = ["task"] + head
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join(" --- " for _ in head) + "|"]
    for r in results:
        if r.get("error"):
            cells = ["failed: " + r["error"].splitlines()[0].replace("|", "\\|"), "", "", "", "", "", ""]
            lines.append("| " + " | ".join(([r["task"]] if with_task else []) + cells) + " |")
            continue
        for s in r["sides"]:
            cells = [
                s["side"], f"{s['median_ms']:.4f}", f"{100 * s['cv']:.1f}%", f"{s['speedup_vs_baseline']:.3f}x",
                f"{s['x_faster_than_compile']:.3f}x" if "x_faster_than_compile" in s else "",
                f"{s['x_faster_than_eager']:.3f}x" if "x_faster_than_eager" in s else "",
                (f"{s['call_median_ms']:.4f} (CV {100 * s['call_cv']:.1f}%)" if "call_median_ms" in s else "")
                + ("; syncs inside: its median ms keeps the host's share" if s.get("syncs") else ""),
            ]  # fmt: skip
            lines.append("| " + " | ".join(([r["task"]] if with_task else []) + cells) + " |")
    return "\n".join(lines)


def environment(opts) -> dict:
    t = need_torch()
    return {
        "device": t.cuda.get_device_name(),
        "torch": t.__version__,
        "compile_mode": opts.compile_mode,
        "rounds": opts.rounds,
        "reps": opts.reps,
        "warmup": opts.warmup,
        "seed": opts.seed,
    }


# ---------------------------------------------------------------------------------------
# Modes without a GPU


def check_twins_cpu(task_dirs: list[Path], seed: int, twin_path: str | None) -> int:
    """Each twin on the CPU at every check size: the contract (arguments, result names,
    lengths, types, no writes into inputs), not the values."""
    t = need_torch()
    failed = 0
    for d in task_dirs:
        try:
            task = load_task(d)
            twin = load_twin(find_twin(task, twin_path))
            for size in task.checks:
                lens, scalars = task.lengths(size), task.scalars(size)
                inputs = make_inputs(task, size, seed, t.device("cpu"))
                pristine = {k: v.clone() for k, v in inputs.items()}
                kwargs = twin_args(task, inputs, scalars)
                if twin.setup is not None:
                    extra = call_twin(
                        twin.setup, bind(twin.setup, kwargs, twin.path, "twin_setup"), twin.path, "twin_setup()"
                    )
                    if not isinstance(extra, dict):
                        raise Failure(f"{twin.path}: twin_setup() returned {type(extra).__name__}; expected a dict")
                    kwargs = {**kwargs, **extra}
                kwargs = bind(twin.fn, kwargs, twin.path, "twin")
                res = call_twin(twin.fn, kwargs, twin.path, f"twin() at {size_words(size)}")
                checked_result(res, task, lens, inputs, twin.path, f"twin() at {size_words(size)}", alias_ok=True)
                written = unchanged(inputs, pristine)
                if written:
                    raise Failure(f"{twin.path}: twin() at {size_words(size)} wrote into {', '.join(written)}")
            print(f"ok    {task.name}: {twin.path} keeps the contract at {len(task.checks)} check sizes")
        except Failure as e:
            failed += 1
            print(f"FAIL  {d}: {e}")
    return 1 if failed else 0


def build_only(task_dir: Path, cand_specs: list[str], arch: str) -> int:
    task = load_task(task_dir)
    nvcc = find_nvcc()
    with tempfile.TemporaryDirectory(prefix="vs-torch-") as tmp:
        so = build(task, nvcc, arch, task.baseline, Path(tmp) / "baseline.so", trusted=True)
        load_launcher(so, task.entry, task.baseline)
        print(f"ok    {task.name}: baseline {task.baseline} builds for {arch} and exports {task.entry}")
        for i, spec in enumerate(cand_specs):
            c = load_candidate(spec)
            so = build(task, nvcc, arch, c.source, Path(tmp) / f"cand{i}.so", c.defines, c.flags)
            load_launcher(so, task.entry, c.source)
            print(f"ok    {task.name}: candidate {c.name} builds for {arch} and exports {task.entry}")
    return 0


# ---------------------------------------------------------------------------------------


def runs_of(root: Path, task_name: str) -> list[tuple[str, str]]:
    """The runs of a task under RUNS_ROOT: RUNS_ROOT/<task name>, else every
    RUNS_ROOT/<task name>-* holding a best.cu (`scripts/optimize-gpu.sh suite` names them
    <task>-<strategy>); as (path, row name) pairs."""
    exact = root / task_name
    if (exact / "best.cu").is_file():
        return [(str(exact), f"best ({exact.name})")]
    found = sorted(d for d in root.glob(f"{task_name}-*") if (d / "best.cu").is_file())
    return [(str(d), f"best ({d.name})") for d in found]


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(
        prog="vs-torch.py",
        description="A task's baseline and candidates against its PyTorch twin, eager and torch.compile.",
        epilog="The twin contract and the timing method: see the docstring at the top of this file.",
    )
    ap.add_argument(
        "paths", nargs="+", metavar="PATH", help="TASK_DIR [CANDIDATE.cu | RUN_DIR ...]; with --all, task dirs"
    )
    ap.add_argument("--all", action="store_true", help="every PATH is a task directory; one combined table")
    ap.add_argument("--runs", metavar="RUNS_ROOT", help="with --all: RUNS_ROOT/<task name> is that task's run")
    ap.add_argument("--twin", metavar="FILE", help="the twin to use instead of TASK_DIR/twin.py")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--reps", type=int, default=100)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--compile-mode", choices=COMPILE_MODES, default="default")
    ap.add_argument("--json", metavar="FILE", help="write the figures as JSON")
    ap.add_argument("--arch", help="nvcc target, e.g. sm_90a (default: the GPU's)")
    ap.add_argument("--seed", type=int, default=0, help="input seed (default 0)")
    ap.add_argument(
        "--check-twins-cpu", action="store_true", help="check each PATH's twin.py keeps the contract, on the CPU"
    )
    ap.add_argument("--build-only", action="store_true", help="build the baseline and candidates with nvcc, then stop")
    opts = ap.parse_args(argv)
    if opts.rounds < 1 or opts.reps < 1 or opts.warmup < 0:
        ap.error("--rounds and --reps must be >= 1, --warmup >= 0")
    if opts.twin and (opts.all or (opts.check_twins_cpu and len(opts.paths) > 1)):
        ap.error("--twin applies to one task; with several, each task directory holds its twin.py")
    if opts.runs and not opts.all:
        ap.error("--runs goes with --all (for one task, name the run directory after TASK_DIR)")

    try:
        if opts.check_twins_cpu:
            return check_twins_cpu([Path(p) for p in opts.paths], opts.seed, opts.twin)
        if opts.build_only:
            return build_only(Path(opts.paths[0]), opts.paths[1:], opts.arch or "sm_90a")
        t = need_torch()
        if not t.cuda.is_available():
            raise Failure(
                "needs a CUDA GPU (torch.cuda.is_available() is False); --check-twins-cpu and --build-only need none"
            )
        flush = t.empty(FLUSH_BYTES // 4, device="cuda").uniform_()
        if opts.all:
            jobs, skipped = [], []
            for p in opts.paths:
                if Path(p).is_dir() and not (Path(p) / "task.toml").exists():
                    skipped.append(p)  # e.g. examples/bias_gelu_residual, a task only once init makes it
                    log(f"{p}: no task.toml, not a task directory: skipped")
                    continue
                cands = []
                if opts.runs:
                    try:
                        cands = runs_of(Path(opts.runs), load_task(Path(p)).name)
                    except Failure:
                        pass  # run_task reports the bad task.toml
                jobs.append((Path(p), cands))
        else:
            jobs, skipped = [(Path(opts.paths[0]), opts.paths[1:])], []
        results = []
        for task_dir, cands in jobs:
            try:
                results.append(run_task(task_dir, cands, opts, opts.twin, flush))
            except Failure as e:
                if not opts.all:
                    raise
                log(f"{task_dir}: {e}")
                results.append({"task": str(task_dir), "dir": str(task_dir), "error": str(e)})
            except Exception as e:  # noqa: BLE001 (--all keeps going; a CUDA error may end the rest)
                if not opts.all:
                    raise
                log(f"{task_dir}: unexpected {type(e).__name__}: {e}")
                results.append({"task": str(task_dir), "dir": str(task_dir), "error": f"{type(e).__name__}: {e}"})
            finally:
                t._dynamo.reset()
                t.cuda.empty_cache()
        env = environment(opts)
        print(f"\n{env['device']}, torch {env['torch']}, torch.compile mode {env['compile_mode']}; "
              f"{opts.rounds} rounds x {opts.reps} calls per side, L2 flushed before each call; medians of "
              f"the GPU's time (launches queued behind a wait; speedups use these)\n")  # fmt: skip
        if not opts.all:
            r = results[0]
            print(f"{r['task']} at {size_words(r['bench'])}\n")
        print(markdown_table(results, with_task=opts.all))
        if skipped:
            print(f"\nskipped (no task.toml): {', '.join(skipped)}")
        if opts.json:
            Path(opts.json).write_text(json.dumps({**env, "tasks": results, "skipped": skipped}, indent=2) + "\n")
        return 1 if any(r.get("error") for r in results) else 0
    except Failure as e:
        print(f"vs-torch: error: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
