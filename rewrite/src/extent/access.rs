//! Whether the kernels a launcher starts read each pointer argument, write it, or both:
//! an array read and then written in place (an optimizer's state, a residual added into
//! its output) is an input and an output, and a task that took it for an output alone
//! would poison it before the call and check nothing the kernel computed from it.
//!
//! Every use of the pointer is followed: into each kernel it is launched with (by the
//! argument's position), through local pointers (`float* p = x + off;`), pointer
//! arithmetic and casts (`reinterpret_cast<float4*>(x + i)`), into device and host
//! functions of the files (a wrapper launcher included), up to [`MAX_CALL_DEPTH`] calls
//! deep. An element on the left of `=` is written; on the left of `+=` or under `++` it is
//! read and written; an atomic reads and writes; any other element use reads; a
//! `cudaMemset*` writes, a `cudaMemcpy*` writes its destination and reads its source.
//! Whether the first use writes without reading tells state (read, then written back)
//! from an output the kernels read back after writing it (a scan's offsets, a residual
//! stored then re-read, a sum zeroed by the launcher before the atomics). A use the walk
//! cannot follow (the pointer stored, handed to a function it cannot read) is reported,
//! never guessed: the caller treats that pointer as possibly read.

use super::*;

/// One access as written, and its line (1-based) in the file it is in.
#[derive(Debug, Clone, PartialEq)]
pub struct Use {
    pub access: String,
    pub line: usize,
}

/// What the kernels do through one pointer argument of the launcher.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct PointerUse {
    pub name: String,
    /// The first element read, if any.
    pub read: Option<Use>,
    /// The first element written, if any.
    pub written: Option<Use>,
    /// A use the walk could not follow, where the pointer may be read or written.
    pub unknown: Option<String>,
    /// A write that always runs comes before every read and every use the walk could not
    /// follow, in the order they are evaluated: the kernels read only what they wrote, so
    /// the array is an output, not state.
    pub written_first: bool,
    /// Where the first read (or use not followed) and the first unconditional write are,
    /// as paths of positions (the launcher's call site, then the position in the callee).
    first_read: Option<Vec<usize>>,
    first_write: Option<Vec<usize>>,
}

/// Where a use is: the path of evaluation positions that leads to it, and whether some
/// condition on that path may skip it.
#[derive(Clone)]
struct At {
    path: Vec<usize>,
    conditional: bool,
    /// Bodies and aliases entered on the way: bounds the walk on any input.
    depth: usize,
}

/// The most bodies and local aliases the walk enters for one pointer.
const MAX_NESTING: usize = 24;

impl PointerUse {
    fn read_at(&mut self, t: &str, n: Node, at: &At) {
        if self.first_read.as_ref().is_none_or(|f| at.path < *f) {
            self.first_read = Some(at.path.clone());
        }
        if self.read.is_none() {
            self.read = Some(Use { access: text(t, n).to_string(), line: line_of(t, n.start_byte()) });
        }
    }

    fn written_at(&mut self, t: &str, n: Node, at: &At) {
        if !at.conditional && self.first_write.as_ref().is_none_or(|f| at.path < *f) {
            self.first_write = Some(at.path.clone());
        }
        if self.written.is_none() {
            self.written = Some(Use { access: text(t, n).to_string(), line: line_of(t, n.start_byte()) });
        }
    }

    fn unknown_at(&mut self, t: &str, n: Node, why: &str, at: &At) {
        if self.first_read.as_ref().is_none_or(|f| at.path < *f) {
            self.first_read = Some(at.path.clone());
        }
        if self.unknown.is_none() {
            self.unknown = Some(format!("{} {why}", quoted(t, n)));
        }
    }
}

/// How every pointer parameter of `entry` in `src` is used, in parameter order. `headers`
/// are other parsed files whose functions the code calls. Empty when `entry` is not a
/// function of `src`.
pub fn pointer_uses(src: &Source, headers: &[Source], entry: &str) -> Vec<PointerUse> {
    let files: Vec<&Source> = std::iter::once(src).chain(headers).collect();
    let Some((_, body, func)) = launcher_of(src, &files, entry) else { return Vec::new() };
    let walk = Walk { files: &files };
    parameters(src.text(), func)
        .into_iter()
        .filter(|p| p.pointer)
        .map(|p| {
            let mut out = PointerUse { name: p.name.clone(), ..PointerUse::default() };
            walk.uses(src, body, &p.name, None, &At { path: Vec::new(), conditional: false, depth: 0 }, &mut out);
            out.written_first = match (&out.first_write, &out.first_read) {
                (Some(w), Some(r)) => w < r,
                (Some(_), None) => true,
                (None, _) => false,
            };
            out
        })
        .collect()
}

/// Where `id` is evaluated in its body: an element on the left of an assignment is
/// stored after the right side is read (`y[i] = a * x[i] + y[i]` reads `y[i]` first).
fn evaluated_at(root: Node, id: Node) -> usize {
    let mut n = id;
    while let Some(p) = n.parent() {
        if p.kind() == "assignment_expression" && p.child_by_field_name("left").is_some_and(|l| contains(l, id)) {
            return p.end_byte();
        }
        if p.id() == root.id() {
            break;
        }
        n = p;
    }
    id.start_byte()
}

/// Whether some branch between `root` and `n` may skip `n`: an `if` (its condition
/// aside), `?:`, `switch`, `while`, `do`, the right side of `&&` or `||`, or a lambda. A
/// `for` loop's body runs for the indices its header gives, as the original code's does.
fn conditional(t: &str, root: Node, n: Node) -> bool {
    let mut child = n;
    while let Some(p) = child.parent() {
        if p.id() == root.id() {
            return false;
        }
        let skips = match p.kind() {
            "if_statement" => !p.child_by_field_name("condition").is_some_and(|c| contains(c, n)),
            "conditional_expression" => !p.child_by_field_name("condition").is_some_and(|c| contains(c, n)),
            "switch_statement" | "while_statement" | "do_statement" | "lambda_expression" | "case_statement" => true,
            "binary_expression" => {
                matches!(syntax::binary(t, p), Some(("&&" | "||", _, _)))
                    && p.child_by_field_name("right").is_some_and(|r| contains(r, n))
            }
            _ => false,
        };
        if skips {
            return true;
        }
        child = p;
    }
    false
}

/// How many function bodies deep the walk goes (the launcher, a kernel, helpers).
const MAX_BODIES: usize = MAX_CALL_DEPTH as usize + 2;

struct Walk<'a, 's> {
    files: &'a [&'s Source],
}

impl<'s> Walk<'_, 's> {
    /// Every use of the pointer `name` declared by `decl` (None: a parameter) in `root`, a
    /// function body of `file` entered at `base`.
    fn uses(
        &self,
        file: &'s Source,
        root: Node<'s>,
        name: &str,
        decl: Option<Node<'s>>,
        base: &At,
        out: &mut PointerUse,
    ) {
        let t = file.text();
        if base.path.len() >= MAX_BODIES {
            return out.unknown_at(t, root, &format!("is reached through more than {MAX_CALL_DEPTH} calls"), base);
        }
        if base.depth >= MAX_NESTING {
            return out.unknown_at(
                t,
                root,
                &format!("is reached through more than {MAX_NESTING} aliases and calls"),
                base,
            );
        }
        // A macro body is no code the parser sees: a read there would go unseen.
        if let Some(m) = macro_mentioning(self.files, name) {
            return out.unknown_at(
                t,
                root,
                &format!("is named by the macro `{m}`, which the walk does not read"),
                base,
            );
        }
        let launches = file.launches();
        for id in descendants(root) {
            if id.kind() != "identifier" || text(t, id) != name || is_declarator(id) {
                continue;
            }
            let resolved = declaration_of(t, root, id, name).map(|(d, _)| d.id());
            if resolved != decl.map(|d| d.id()) {
                continue;
            }
            let mut path = base.path.clone();
            path.push(evaluated_at(root, id));
            let here = At { path, conditional: base.conditional || conditional(t, root, id), depth: base.depth + 1 };
            // An argument of a kernel launch: the kernel's parameter at that position.
            let launched = launches.iter().find_map(|l| {
                l.arg_ranges.iter().position(|r| r.start <= id.start_byte() && id.end_byte() <= r.end).map(|i| (l, i))
            });
            match launched {
                Some((l, i)) => self.in_kernel(t, id, &l.kernel, i, &here, out),
                None => self.pointer(file, root, id, base, &here, out),
            }
        }
    }

    fn in_kernel(&self, t: &str, site: Node, kernel: &str, index: usize, here: &At, out: &mut PointerUse) {
        for f in self.files {
            for k in f.kernels().into_iter().filter(|k| k.name == kernel) {
                let Some(root) = f.node(&k.body, "compound_statement") else { continue };
                if k.has_error {
                    return out.unknown_at(
                        t,
                        site,
                        &format!("goes to `{kernel}`, whose syntax the parser does not know"),
                        here,
                    );
                }
                // By position among the parameters as written (not only the ones `Kernel`
                // keeps), so a `T**` or a reference before it does not shift the rest.
                let params = root.parent().map(|func| parameters(f.text(), func)).unwrap_or_default();
                match params.get(index) {
                    Some(p) if p.pointer => self.uses(f, root, &p.name, None, here, out),
                    _ => out.unknown_at(
                        t,
                        site,
                        &format!("goes to `{kernel}` as something the walk does not follow"),
                        here,
                    ),
                }
                return;
            }
        }
        out.unknown_at(
            t,
            site,
            &format!("goes to the kernel `{kernel}`, which is not defined in the files read"),
            here,
        );
    }

    /// What is done with the pointer-valued expression `d`, used at `here` in a body
    /// entered at `base`.
    fn pointer(&self, file: &'s Source, root: Node<'s>, d: Node<'s>, base: &At, here: &At, out: &mut PointerUse) {
        let t = file.text();
        let Some(p) = up(d) else { return };
        match p.kind() {
            "subscript_expression" if is_child(p, "argument", d) => self.element(file, root, p, base, here, out),
            "pointer_expression" if p.child(0).is_some_and(|o| text(t, o) == "*") => {
                self.element(file, root, p, base, here, out)
            }
            "binary_expression" => match syntax::binary(t, p) {
                Some(("+" | "-", _, _)) => self.pointer(file, root, p, base, here, out),
                // Null checks and comparisons read no element.
                Some(("==" | "!=" | "<" | "<=" | ">" | ">=" | "&&" | "||", _, _)) => {}
                _ => out.unknown_at(t, p, "uses the pointer in arithmetic the walk does not follow", here),
            },
            "condition_clause" => {}
            "unary_expression" if p.child(0).is_some_and(|o| text(t, o) == "!") => {}
            "cast_expression" | "conditional_expression" => self.pointer(file, root, p, base, here, out),
            "init_declarator" if is_child(p, "value", d) => match declared_alias(t, p) {
                Some((alias, owner)) => {
                    // The alias's uses sit in the same body: their positions compare with
                    // the parameter's own.
                    let inner = At { depth: here.depth, ..base.clone() };
                    self.uses(file, root, &alias, owner, &inner, out);
                }
                None => out.unknown_at(t, p, "stores the pointer", here),
            },
            "argument_list" => self.argument(file, root, p, d, base, here, out),
            _ => out.unknown_at(t, p, "uses the pointer in a way the walk does not follow", here),
        }
    }

    /// The pointer `d` handed to a call whose argument list is `args`.
    #[allow(clippy::too_many_arguments)]
    fn argument(
        &self,
        file: &'s Source,
        root: Node<'s>,
        args: Node<'s>,
        d: Node<'s>,
        base: &At,
        here: &At,
        out: &mut PointerUse,
    ) {
        let t = file.text();
        let Some(call) = args.parent().filter(|c| c.kind() == "call_expression") else {
            return out.unknown_at(t, args, "hands the pointer to something the walk does not follow", here);
        };
        let function = call.child_by_field_name("function").map(|f| text(t, f).to_string()).unwrap_or_default();
        let short = function.rsplit("::").next().unwrap_or(&function);
        if cast_target(&function).is_some() {
            return self.pointer(file, root, call, base, here, out);
        }
        if short.starts_with("atomic") {
            out.read_at(t, call, here);
            return out.written_at(t, call, here);
        }
        // The runtime's fills and copies: a memset writes the buffer, a copy writes its
        // destination (the first argument) and reads its source.
        let position = argument_position(args, d);
        if short.starts_with("cudaMemset") && position == Some(0) {
            return out.written_at(t, call, here);
        }
        if short.starts_with("cudaMemcpy") && matches!(position, Some(0 | 1)) {
            return if position == Some(0) { out.written_at(t, call, here) } else { out.read_at(t, call, here) };
        }
        if short.starts_with("__ld") {
            return out.read_at(t, call, here);
        }
        if short.starts_with("__st") {
            return out.written_at(t, call, here);
        }
        let name = short.split('<').next().unwrap_or(short).trim();
        for (f, h) in functions_named(self.files, &function) {
            let Some(body) = f.node(&h.body, "compound_statement") else { continue };
            let Some(func) = body.parent() else { continue };
            let params = parameters(f.text(), func);
            match position.and_then(|i| params.get(i)) {
                Some(p) if p.pointer => self.uses(f, body, &p.name, None, here, out),
                _ => out.unknown_at(t, call, &format!("hands the pointer to `{name}` as something else"), here),
            }
            return;
        }
        out.unknown_at(t, call, &format!("hands the pointer to `{name}`, whose body the walk cannot read"), here);
    }

    /// An element `e` (`p[i]`, `*p`): read, written, or both, by where it stands.
    fn element(&self, file: &'s Source, root: Node<'s>, e: Node<'s>, base: &At, here: &At, out: &mut PointerUse) {
        let t = file.text();
        let Some(p) = up(e) else { return out.read_at(t, e, here) };
        match p.kind() {
            "assignment_expression" if is_child(p, "left", e) => {
                let op = p.child_by_field_name("operator").map(|o| text(t, o)).unwrap_or("=");
                if op != "=" {
                    out.read_at(t, p, here);
                }
                out.written_at(t, p, here);
            }
            "update_expression" => {
                out.read_at(t, p, here);
                out.written_at(t, p, here);
            }
            // `&p[i]` is a pointer again; `p[i].x` is part of the element.
            "pointer_expression" if p.child(0).is_some_and(|o| text(t, o) == "&") => {
                self.pointer(file, root, p, base, here, out)
            }
            "field_expression" if is_child(p, "argument", e) => self.element(file, root, p, base, here, out),
            _ => out.read_at(t, e, here),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `name: r/w/rw/-` per pointer, `?` when a use was not followed.
    fn roles(src: &str, entry: &str) -> Vec<String> {
        pointer_uses(&Source::parse(src), &[], entry)
            .into_iter()
            .map(|u| {
                let rw = match (&u.read, &u.written) {
                    (Some(_), Some(_)) => "rw",
                    (Some(_), None) => "r",
                    (None, Some(_)) => "w",
                    (None, None) => "-",
                };
                format!("{}: {rw}{}", u.name, if u.unknown.is_some() { " ?" } else { "" })
            })
            .collect()
    }

    #[test]
    fn an_optimizer_step_reads_and_writes_its_state_in_place() {
        let src = r#"
__global__ void adam(float* p, const float* g, float* m, float* v, float lr, float b1, float b2, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  float mi = b1 * m[i] + (1.f - b1) * g[i];
  v[i] = b2 * v[i] + (1.f - b2) * g[i] * g[i];
  m[i] = mi;
  p[i] -= lr * mi / (sqrtf(v[i]) + 1e-8f);
}
extern "C" void step(float* p, const float* g, float* m, float* v, float lr, float b1, float b2, int n,
                     cudaStream_t s) {
  adam<<<(n + 255) / 256, 256, 0, s>>>(p, g, m, v, lr, b1, b2, n);
}
"#;
        assert_eq!(roles(src, "step"), ["p: rw", "g: r", "m: rw", "v: rw"]);
        let uses = pointer_uses(&Source::parse(src), &[], "step");
        assert_eq!(uses[2].read, Some(Use { access: "m[i]".into(), line: 5 }));
        assert_eq!(uses[0].written, Some(Use { access: "p[i] -= lr * mi / (sqrtf(v[i]) + 1e-8f)".into(), line: 8 }));
    }

    #[test]
    fn an_output_written_through_aliases_casts_and_helpers_is_written_only() {
        let src = r#"
__device__ void put4(float* dst, float4 v) { *reinterpret_cast<float4*>(dst) = v; }
__global__ void k(const float* x, float* y, float4* z, int* hist, int n) {
  int i = (blockIdx.x * blockDim.x + threadIdx.x) * 4;
  if (i >= n) return;
  float4 a = *reinterpret_cast<const float4*>(x + i);
  float* yr = y + i;
  put4(yr, a);
  float zx = z[i].x;
  atomicAdd(&hist[i % 16], 1);
}
extern "C" void run(const float* x, float* y, float4* z, int* hist, int n, cudaStream_t s) {
  if (!y) return;
  k<<<n / 1024, 256, 0, s>>>(x, y, z, hist, n);
}
"#;
        assert_eq!(roles(src, "run"), ["x: r", "y: w", "z: r", "hist: rw"]);
    }

    #[test]
    fn a_wrapper_launcher_is_followed_and_what_cannot_be_is_said() {
        let src = r#"
__global__ void k(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = 2.f * x[i];
}
void launch_impl(const float* a, float* b, int n, cudaStream_t s) { k<<<(n + 255) / 256, 256, 0, s>>>(a, b, n); }
extern "C" void entry(const float* x, float* y, float* w, int n, cudaStream_t s) {
  launch_impl(x, y, n, s);
  cudaMemsetAsync(w, 0, n * sizeof(float), s);
}
"#;
        assert_eq!(roles(src, "entry"), ["x: r", "y: w", "w: w"]);
        let src = src.replace("cudaMemsetAsync(w, 0, n * sizeof(float), s);", "cudaFooAsync(w, s);");
        let uses = pointer_uses(&Source::parse(&src), &[], "entry");
        assert!(uses[2].unknown.as_deref().unwrap().contains("`cudaFooAsync`, whose body the walk cannot read"));
    }

    #[test]
    fn the_first_use_tells_state_from_an_output_read_back_after_it_is_written() {
        let src = r#"
__global__ void scan(const int* len, int* off, int n) {
  int i = threadIdx.x;
  if (i > n) return;
  off[i] = i == 0 ? 0 : len[i - 1];
  __syncthreads();
  if (i == 0) for (int j = 1; j <= n; ++j) off[j] += off[j - 1];
}
__global__ void sum(const float* x, const int* off, float* total, float* acc, int n) {
  int s = blockIdx.x;
  float a = 0.f;
  for (int j = off[s]; j < off[s + 1]; ++j) a += x[j];
  atomicAdd(total, a);
  acc[s] += a;
}
extern "C" void run(const float* x, const int* len, int* off, float* total, float* acc, int n, cudaStream_t st) {
  cudaMemsetAsync(total, 0, sizeof(float), st);
  scan<<<1, 1024, 0, st>>>(len, off, n);
  sum<<<n, 1, 0, st>>>(x, off, total, acc, n);
}
"#;
        let uses = pointer_uses(&Source::parse(src), &[], "run");
        let first: Vec<(&str, bool)> = uses.iter().map(|u| (u.name.as_str(), u.written_first)).collect();
        // `off` is written by the scan before anything reads it; `total` is zeroed by the
        // launcher before the atomics; `acc` is read before it is written: state.
        assert_eq!(first, [("x", false), ("len", false), ("off", true), ("total", true), ("acc", false)]);
        assert_eq!(roles(src, "run"), ["x: r", "len: r", "off: rw", "total: rw", "acc: rw"]);
    }

    /// `written_first` of each pointer of `entry`.
    fn written_first(src: &str, entry: &str) -> Vec<(String, bool)> {
        pointer_uses(&Source::parse(src), &[], entry).into_iter().map(|u| (u.name, u.written_first)).collect()
    }

    /// From a review: every way a read could hide behind a write that comes first in the
    /// text but not in the evaluation, or a write that may not run.
    #[test]
    fn a_read_is_never_hidden_behind_a_write_that_runs_later_or_may_not_run() {
        let k = |body: &str| {
            format!(
                "#define BETA_ZERO(b) ((b) == 0.f)\n__global__ void k(const float* const* lists, float* y, const float* x, float a, int n) {{\n  int i = threadIdx.x;\n  if (i >= n) return;\n  {body}\n}}\nextern \"C\" void run(const float* const* lists, float* y, const float* x, float a, int n, cudaStream_t s) {{\n  k<<<1, 256, 0, s>>>(lists, y, x, a, n);\n}}\n"
            )
        };
        let y = |body: &str| written_first(&k(body), "run")[1].clone();
        // The right side is read before the left side is stored.
        assert_eq!(y("y[i] = a * x[i] + y[i];"), ("y".to_string(), false));
        // A store that may not run does not come first.
        assert_eq!(y("if (a == 0.f) y[i] = x[i]; else y[i] = x[i] + a * y[i];"), ("y".to_string(), false));
        assert_eq!(y("if (i == 0) y[0] = 0.f; y[i] += x[i];"), ("y".to_string(), false));
        // An alias's uses are ordered with the parameter's.
        assert_eq!(y("float* yr = y + i; float old = y[i]; yr[0] = old * 2.f;"), ("y".to_string(), false));
        // Written, then read back: an output.
        assert_eq!(y("y[i] = x[i]; y[i] = y[i] * a;"), ("y".to_string(), true));
        // The kernel's parameters by position as written: the `T**` before `y` counts.
        assert_eq!(roles(&k("y[i] = x[i];"), "run"), ["lists: -", "y: w", "x: r"]);
    }

    #[test]
    fn macros_and_a_kernel_that_launches_itself_are_said_not_followed() {
        let src = "#define LD(i) y[i]\n__global__ void k(float* y, int n) { float v = LD(0); y[0] = v * 2.f; }\n\
                   extern \"C\" void run(float* y, int n, cudaStream_t s) { k<<<1, 1, 0, s>>>(y, n); }\n";
        let u = &pointer_uses(&Source::parse(src), &[], "run")[0];
        assert!(u.unknown.as_deref().unwrap().contains("the macro `LD`"), "{u:?}");
        assert!(!u.written_first, "{u:?}");
        let src = "__global__ void k(float* y, int d) { if (d > 0) k<<<1, 1>>>(y, d - 1); y[0] += 1.f; }\n\
                   extern \"C\" void run(float* y, cudaStream_t s) { k<<<1, 1, 0, s>>>(y, 3); }\n";
        let u = &pointer_uses(&Source::parse(src), &[], "run")[0];
        assert!(u.unknown.as_deref().unwrap().contains("more than 3 calls"), "{u:?}");
        assert!(u.read.is_some() && !u.written_first, "{u:?}");
    }
}
