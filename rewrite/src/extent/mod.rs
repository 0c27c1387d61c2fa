//! How many elements each pointer argument of a launcher spans, read from the kernels'
//! own indexing: the largest subscript each launched kernel can reach, as a polynomial
//! over the launcher's integer parameters, plus one.
//!
//! An index is bounded by what the code says about each name in it: the checks that
//! guard the access (`if (row >= rows) return;`, `if (i < n)`, a loop's `c < cols`), the
//! declaration of a local (`int c = i % cols;`), the launch configuration for
//! `blockIdx`/`threadIdx` when the grid is a plain expression, and the launch arguments
//! for the kernel's parameters. `x[row * cols + c]` with `row < rows` and `c < cols` gives
//! `rows * cols`. Local pointers (`const float* p = x + row * cols;`) carry their offset;
//! a pointer handed to a device function of the file counts what that function touches
//! when it is a fixed number of elements (`load(x + i)` reading `p[0]`).
//!
//! Anything the analysis cannot follow (a cast to another element type, a pointer passed
//! to an unknown function or moved, an index it cannot bound) makes that argument
//! [`Extent::Unknown`] with the reason; it never guesses. Pure: text in, data out.
//!
//! Beside the extents, for `init`: whether each pointer is read, written or both
//! ([`pointer_uses`]), what each integer parameter does ([`scalar_uses`]), and what is
//! stored through each pointer ([`pointer_stores`]).

use crate::pattern::{condition, int_literal, subscript_index};
use crate::poly::Poly;
use crate::source::Source;
use crate::syntax::{self, builtin, children, descendants, named_children, strip, strip_parens, text};
use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet};
use tree_sitter::Node;

mod access;
mod body;
mod bounds;
mod launcher;
mod names;
mod reach;
mod scalars;
mod stores;

pub use access::{pointer_uses, PointerUse, Use};
use body::*;
use bounds::*;
use launcher::*;
use names::*;
use reach::*;
pub use scalars::{scalar_uses, ScalarRole, ScalarUse};
pub use stores::{pointer_stores, PointerStores, Stored};

/// What the kernels say about one pointer argument of the launcher.
#[derive(Debug, Clone, PartialEq)]
pub enum Extent {
    /// The element count the kernels reach, over the launcher's integer parameters.
    Derived {
        len: Poly,
        /// The access that reaches furthest, as written, and its line (1-based).
        access: String,
        line: usize,
    },
    /// Why the indexing does not tell.
    Unknown { why: String },
}

/// One pointer parameter of the launcher and its extent.
#[derive(Debug, Clone, PartialEq)]
pub struct PointerExtent {
    pub name: String,
    pub extent: Extent,
    /// The index tables whose values the extent counts on: integer inputs whose
    /// elements index this pointer, taken to hold values from 0 to their length minus one
    /// (a permutation of their length: every id valid, as a block table's are).
    pub through: Vec<String>,
    /// For an index table some extent counted on: the bound its values were taken below.
    pub values_below: Option<TableRange>,
    /// The element type a wrapper launcher hands the pointer on as, where it differs from
    /// the entry's (`reinterpret_cast<__nv_fp8_e4m3*>(out)` of a `uint8_t*`).
    pub passed_as: Option<String>,
}

/// What an index table's values are taken below.
#[derive(Debug, Clone, PartialEq)]
pub enum TableRange {
    /// The launcher's one integer parameter that it uses for nothing else (`max_pos`,
    /// `vocab`: the range its caller states).
    Param(String),
    /// The table's own length: its values a permutation of its positions.
    OwnLength,
}

/// Recursion past which an expression is not bounded (a real index is far shallower).
const MAX_DEPTH: u32 = 48;
/// Device-function calls followed from a kernel.
const MAX_CALL_DEPTH: u32 = 3;

/// The exact value of `n`, an expression inside the launcher `entry`, as a polynomial over
/// the launcher's integer parameters: its locals followed where they are declared once
/// and never written, the file's constants put in. None where it is no polynomial.
pub fn launcher_value(src: &Source, entry: &str, n: Node) -> Option<Poly> {
    if src.max_depth() > crate::source::MAX_DEPTH {
        return None;
    }
    let consts = constants(&[src]);
    let host = src.host_functions().into_iter().find(|h| h.name == entry)?;
    let body = src.node(&host.body, "compound_statement")?;
    let t = src.text();
    let params = parameters(t, body.parent()?);
    let sizes: Vec<String> = params.iter().filter(|p| !p.pointer).map(|p| p.name.clone()).collect();
    Launcher { t, body, sizes: &sizes, consts: &consts, depth: Cell::new(0) }.value(n)
}

/// The extents of every pointer parameter of `entry` in `src`, in parameter order.
/// `headers` are other parsed files whose device functions and macros the kernels use.
/// Empty when `entry` is not a function of `src`.
pub fn pointer_extents(src: &Source, headers: &[Source], entry: &str) -> Vec<PointerExtent> {
    let files: Vec<&Source> = std::iter::once(src).chain(headers).collect();
    extents_in(src, &files, entry, 0)
}

/// Wrapper launchers followed from the entry (a C launcher around a C++ one).
const MAX_WRAPPERS: usize = 2;

/// [`pointer_extents`] of the host function `entry` of `src`, among `files`, `wrapped`
/// wrappers deep.
fn extents_in(src: &Source, files: &[&Source], entry: &str, wrapped: usize) -> Vec<PointerExtent> {
    let Some((host, body, func)) = launcher_of(src, files, entry) else { return Vec::new() };
    let consts = constants(files);
    let t = src.text();
    let params = parameters(t, func);
    let sizes: Vec<String> = params.iter().filter(|p| !p.pointer).map(|p| p.name.clone()).collect();
    let launcher = Launcher { t, body, sizes: &sizes, consts: &consts, depth: Cell::new(0) };
    let launches: Vec<crate::source::Launch> =
        src.launches().into_iter().filter(|l| l.host == entry && !l.fallback).collect();
    let kernels = src.kernels();
    let extent_of = |name: &str, tables: &BTreeMap<String, Poly>| {
        let mut tables = IndexTables { known: tables, used: BTreeSet::new() };
        let extent = match launcher_pointer(&launcher, src, files, &kernels, &launches, name, &mut tables) {
            Ok((hi, node_text, line)) => match hi.add(&Poly::constant(1)) {
                Some(len) => Extent::Derived { len, access: node_text, line },
                None => Extent::Unknown { why: "the largest index overflows".into() },
            },
            Err(why) => Extent::Unknown { why },
        };
        PointerExtent {
            name: name.to_string(),
            extent,
            through: tables.used.into_iter().collect(),
            values_below: None,
            passed_as: None,
        }
    };
    let mut out: Vec<PointerExtent> =
        params.iter().filter(|p| p.pointer).map(|p| extent_of(&p.name, &BTreeMap::new())).collect();
    // A pointer whose index reads an integer input of known length (a block table, token
    // ids): the table holds values below the one size the launcher takes and uses for
    // nothing else (`max_pos`, `vocab`: the range its caller states), else below its own
    // length (a permutation of its positions).
    let unused: Vec<&String> = host
        .params
        .iter()
        .zip(&host.param_types)
        .filter(|(n, ty)| !ty.contains('*') && !params.iter().any(|p| p.pointer && p.name == **n))
        .filter(|(n, ty)| {
            let int = ["int", "long", "short", "unsigned", "size_t"].iter().any(|w| ty.contains(w));
            int && only_voided(t, body, n)
        })
        .map(|(n, _)| n)
        .collect();
    let mut range = match unused.as_slice() {
        [one] => Some((*one).clone()),
        _ => None,
    };
    let is_written = |name: &str| {
        host.params
            .iter()
            .position(|n| n == name)
            .is_some_and(|i| !host.param_types[i].split_whitespace().any(|w| w == "const"))
    };
    let first = out.clone();
    // Ids drawn below a stated range may repeat: fine for rows read, not for rows written
    // (two threads storing one row), which take ids a permutation of the table's length.
    for _ in 0..2 {
        let tables: BTreeMap<String, Poly> = first
            .iter()
            .filter(|e| {
                host.params.iter().position(|n| *n == e.name).is_some_and(|i| is_index_type(&host.param_types[i]))
            })
            .filter_map(|e| match (&e.extent, &range) {
                (Extent::Derived { .. }, Some(r)) => {
                    Poly::var(r).sub(&Poly::constant(1)).map(|hi| (e.name.clone(), hi))
                }
                (Extent::Derived { len, .. }, None) => len.sub(&Poly::constant(1)).map(|hi| (e.name.clone(), hi)),
                (Extent::Unknown { .. }, _) => None,
            })
            .collect();
        out = first.clone();
        if tables.is_empty() {
            break;
        }
        for e in out.iter_mut().filter(|e| matches!(e.extent, Extent::Unknown { .. })) {
            let others: BTreeMap<String, Poly> =
                tables.iter().filter(|(n, _)| **n != e.name).map(|(n, p)| (n.clone(), p.clone())).collect();
            let again = extent_of(&e.name, &others);
            if matches!(again.extent, Extent::Derived { .. }) {
                *e = again;
            }
        }
        if range.is_some() && out.iter().any(|e| !e.through.is_empty() && is_written(&e.name)) {
            range = None;
            continue;
        }
        break;
    }
    if wrapped < MAX_WRAPPERS {
        for e in out.iter_mut().filter(|e| matches!(e.extent, Extent::Unknown { .. })) {
            if let Some(found) = through_wrapper(&launcher, files, &host, &e.name, wrapped) {
                *e = found;
            }
        }
    }
    // The tables some extent counted on, with the range their values were taken in.
    let used: BTreeSet<String> = out.iter().flat_map(|e| e.through.clone()).collect();
    for e in out.iter_mut().filter(|e| used.contains(&e.name)) {
        e.values_below = Some(range.clone().map_or(TableRange::OwnLength, TableRange::Param));
    }
    out
}

/// The extent of the entry's pointer `name` where the entry hands it to other host
/// functions of the files (a wrapper around the launcher that starts the kernels): each
/// function's extent for its parameter, its sizes replaced by the entry's arguments, the
/// largest of them. Every use of the pointer in the entry must be such a call, with the
/// pointer as it is or cast to a pointer of the same element size, and the sizes exact
/// values of the entry's integers; otherwise None.
fn through_wrapper(
    launcher: &Launcher,
    files: &[&Source],
    host: &crate::source::HostFn,
    name: &str,
    wrapped: usize,
) -> Option<PointerExtent> {
    let t = launcher.t;
    let own_type = host.params.iter().position(|p| p == name).map(|i| host.param_types[i].clone())?;
    let own_size = syntax::type_size(own_type.trim().trim_end_matches('*').trim());
    let mut best: Option<PointerExtent> = None;
    for id in descendants(launcher.body) {
        if id.kind() != "identifier" || text(t, id) != name || declaration_of(t, launcher.body, id, name).is_some() {
            continue;
        }
        // Up through a cast to the argument it is, then to its call.
        let mut arg = id;
        let is_cast = |c: Node| {
            c.kind() == "call_expression"
                && c.child_by_field_name("function").is_some_and(|f| cast_target(text(t, f)).is_some())
        };
        while let Some(p) = up(arg).filter(|p| {
            p.kind() == "cast_expression"
                || is_cast(*p)
                || (p.kind() == "argument_list" && p.parent().is_some_and(is_cast))
        }) {
            arg = p;
        }
        let args = up(arg).filter(|a| a.kind() == "argument_list")?;
        let call = args.parent().filter(|c| c.kind() == "call_expression")?;
        let function = call.child_by_field_name("function").map(|f| text(t, f).to_string())?;
        let args: Vec<Node> = named_children(args).into_iter().filter(|c| c.kind() != "comment").collect();
        let position = args.iter().position(|a| a.id() == arg.id() || strip_parens(*a).id() == arg.id())?;
        let cast = passes_pointer(t, args[position], name, own_size)?;
        let (f, callee) = functions_named(files, &function).into_iter().find(|(_, h)| h.params.len() == args.len())?;
        let inner = extents_in(f, files, &callee.name, wrapped + 1);
        let found = inner.into_iter().find(|e| e.name == callee.params[position])?;
        // The callee's index tables and their ranges are its own names: not carried over.
        if !found.through.is_empty() || found.values_below.is_some() {
            return None;
        }
        let Extent::Derived { len, access, line } = found.extent else { return None };
        // The callee's sizes are the entry's arguments at their positions.
        let mut values = BTreeMap::new();
        for v in len.variables() {
            let at = callee.params.iter().position(|p| *p == v)?;
            values.insert(v, launcher.value(args[at])?);
        }
        let len = len.substitute(&values)?;
        let here = PointerExtent {
            name: name.to_string(),
            extent: Extent::Derived { len: len.clone(), access: format!("{access}` in `{}", callee.name), line },
            through: found.through,
            values_below: None,
            passed_as: cast.filter(|c| *c != syntax::unqualified(own_type.trim_end_matches('*'))).or(found.passed_as),
        };
        best = match best {
            None => Some(here),
            Some(b) => match &b.extent {
                Extent::Derived { len: other, .. } if other.at_least(&len) => Some(b),
                Extent::Derived { len: other, .. } if len.at_least(other) => Some(here),
                _ => return None,
            },
        };
    }
    best
}

/// Whether the argument `a` is the pointer `name`, as it is (`Some(None)`) or cast to a
/// pointer whose element has the same size (`reinterpret_cast<__nv_fp8_e4m3*>(out)` of a
/// `uint8_t*`: `Some(Some("__nv_fp8_e4m3"))`).
fn passes_pointer(t: &str, a: Node, name: &str, own_size: Option<usize>) -> Option<Option<String>> {
    let a = strip_parens(a);
    if a.kind() == "identifier" {
        return (text(t, a) == name).then_some(None);
    }
    let (target, inner) = match a.kind() {
        "cast_expression" => {
            (a.child_by_field_name("type").map(|ty| text(t, ty).to_string()), a.child_by_field_name("value"))
        }
        "call_expression" => {
            let f = a.child_by_field_name("function").map(|f| text(t, f)).unwrap_or("");
            let target = cast_target(f).map(str::to_string);
            let inner = a.child_by_field_name("arguments").and_then(|x| named_children(x).into_iter().next());
            (target, inner)
        }
        _ => (None, None),
    };
    let (Some(target), Some(inner)) = (target, inner) else { return None };
    let pointee = target.trim().trim_end_matches('*').trim().to_string();
    let same = strip_parens(inner).kind() == "identifier"
        && text(t, strip_parens(inner)) == name
        && own_size.is_some()
        && syntax::type_size(&pointee) == own_size;
    same.then(|| Some(syntax::unqualified(&pointee)))
}

/// Whether the launcher `body` names its parameter `name` only to mark it unused
/// (`(void)max_pos;`), or not at all.
fn only_voided(t: &str, body: Node, name: &str) -> bool {
    descendants(body).into_iter().filter(|n| n.kind() == "identifier" && text(t, *n) == name).all(|n| {
        up(n).is_some_and(|c| {
            c.kind() == "cast_expression"
                && c.child_by_field_name("type").is_some_and(|ty| text(t, ty).trim() == "void")
        })
    })
}

/// Whether a pointer parameter's element type, as written, is a constant integer (an
/// input that can hold indices).
fn is_index_type(ty: &str) -> bool {
    let words: Vec<&str> =
        ty.split(|c: char| !c.is_ascii_alphanumeric() && c != '_').filter(|w| !w.is_empty()).collect();
    words.contains(&"const")
        && words.iter().any(|w| {
            matches!(
                *w,
                "int" | "unsigned" | "long" | "short" | "int32_t" | "int64_t" | "uint32_t" | "uint64_t" | "size_t"
            )
        })
}
#[cfg(test)]
mod tests {
    use super::*;

    /// The extents of `entry`'s pointers, rendered over the launcher's parameter order.
    fn lens(src: &str, entry: &str) -> Vec<(String, String)> {
        let s = Source::parse(src);
        let order: Vec<String> =
            s.host_functions().into_iter().find(|h| h.name == entry).map(|h| h.params).unwrap_or_default();
        pointer_extents(&s, &[], entry)
            .into_iter()
            .map(|p| {
                let shown = match p.extent {
                    Extent::Derived { len, .. } => len.render(&order),
                    Extent::Unknown { why } => format!("? {why}"),
                };
                (p.name, shown)
            })
            .collect()
    }

    fn derived(src: &str, entry: &str) -> Vec<String> {
        lens(src, entry).into_iter().map(|(n, l)| format!("{n}: {l}")).collect()
    }

    #[test]
    fn rows_picked_by_an_index_table_count_on_its_values_and_a_value_within_a_range_does_not() {
        let src = r#"
__global__ void embed(const float* table, const int* ids, float* out, int n, int d) {
  int r = blockIdx.x;
  if (r >= n) return;
  const int id = ids[r];
  for (int c = threadIdx.x; c < d; c += blockDim.x) out[(long)r * d + c] = table[(long)id * d + c];
}
__global__ void codebook(const float* tables, const int* codes, float* out, int n, int V, int d) {
  int r = blockIdx.x;
  if (r >= n) return;
  for (int c = threadIdx.x; c < d; c += blockDim.x) out[(long)r * d + c] = tables[((long)r * V + codes[r]) * d + c];
}
extern "C" void embedding(const float* table, const int* ids, float* out, int n, int d, cudaStream_t s) {
  embed<<<n, 128, 0, s>>>(table, ids, out, n, d);
}
extern "C" void lookup(const float* tables, const int* codes, float* out, int n, int V, int d, cudaStream_t s) {
  codebook<<<n, 128, 0, s>>>(tables, codes, out, n, V, d);
}
"#;
        let got = lens(src, "embedding");
        assert_eq!(got[0], ("table".to_string(), "n * d".to_string()), "{got:?}");
        let extents = pointer_extents(&Source::parse(src), &[], "embedding");
        assert_eq!(extents[0].through, ["ids"]);
        assert_eq!(extents[1].values_below, Some(TableRange::OwnLength));
        assert!(extents[1].through.is_empty() && extents[2].through.is_empty());
        // `codes[r]` is added to a multiple of V: a code within 0 .. V - 1, which the code
        // does not state. Its length is no bound on it.
        let got = lens(src, "lookup");
        assert!(got[0].1.starts_with("? "), "{got:?}");
        // A size the launcher takes and uses for nothing else is the ids' range.
        let ranged = src.replace(
            "extern \"C\" void embedding(const float* table, const int* ids, float* out, int n, int d, cudaStream_t s) {",
            "extern \"C\" void embedding(const float* table, const int* ids, float* out, int n, int d, int vocab, cudaStream_t s) {\n  (void)vocab;",
        );
        assert_eq!(lens(&ranged, "embedding")[0], ("table".to_string(), "d * vocab".to_string()));
        let extents = pointer_extents(&Source::parse(&ranged), &[], "embedding");
        assert_eq!(extents[1].values_below, Some(TableRange::Param("vocab".into())));
        // Rows written through ids must not repeat: a permutation, whatever range is stated.
        let src2 = r#"
__global__ void put(const float* src, const int* dst, float* out, int n, int d) {
  int r = blockIdx.x;
  if (r >= n) return;
  for (int c = threadIdx.x; c < d; c += blockDim.x) out[(long)dst[r] * d + c] = src[(long)r * d + c];
}
extern "C" void scatter(const float* src, const int* dst, float* out, int n, int d, int capacity, cudaStream_t s) {
  (void)capacity;
  put<<<n, 128, 0, s>>>(src, dst, out, n, d);
}
__global__ void cb(const float* tables, const int* codes, float* out, int n, int K, int V, int d) {
  int r = blockIdx.x;
  if (r >= n) return;
  for (int c = threadIdx.x; c < d; c += blockDim.x) {
    float acc = 0.f;
    for (int k = 0; k < K; ++k) acc += tables[(long)k * V * d + (long)codes[r * K + k] * d + c];
    out[(long)r * d + c] = acc;
  }
}
extern "C" void codebook(const float* tables, const int* codes, float* out, int n, int K, int V, int d, cudaStream_t s) {
  cb<<<n, 128, 0, s>>>(tables, codes, out, n, K, V, d);
}
"#;
        let e = pointer_extents(&Source::parse(src2), &[], "scatter");
        assert_eq!(lens(src2, "scatter")[2], ("out".to_string(), "n * d".to_string()));
        assert_eq!(e[1].values_below, Some(TableRange::OwnLength));
        // A code added to a block of V rows (`k * V * d + code * d`) is no row of its own.
        assert!(lens(src2, "codebook")[0].1.starts_with("? "), "{:?}", lens(src2, "codebook"));
    }

    #[test]
    fn a_wrapper_whose_lengths_count_on_its_own_index_tables_is_not_carried_over() {
        let src = r#"
__global__ void embed(const float* table, const int* ids, float* out, int n, int d) {
  int r = blockIdx.x;
  if (r >= n) return;
  for (int c = threadIdx.x; c < d; c += blockDim.x) out[(long)r * d + c] = table[(long)ids[r] * d + c];
}
static void embedding_impl(const float* table, const int* ids, float* out, int n, int d, int vocab, cudaStream_t s) {
  (void)vocab;
  embed<<<n, 128, 0, s>>>(table, ids, out, n, d);
}
extern "C" void embedding(const float* table, const int* ids, float* out, int n, int d, int vocab, cudaStream_t s) {
  embedding_impl(table, ids, out, n, d, vocab, s);
}
"#;
        let got = lens(src, "embedding");
        assert!(got[0].1.starts_with("? "), "{got:?}");
        assert_eq!(got[2], ("out".to_string(), "n * d".to_string()));
    }

    #[test]
    fn a_wrapper_launcher_is_followed_with_its_sizes_in_the_entrys_words() {
        let src = r#"
__global__ void k(const float* x, unsigned char* q, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) q[i] = (unsigned char)x[i];
}
namespace ops {
void launch(const float* x, unsigned char* q, int n, cudaStream_t s) { k<<<(n + 255) / 256, 256, 0, s>>>(x, q, n); }
}
extern "C" void entry(const float* x, char* q, int rows, int cols, cudaStream_t s) {
  ops::launch(x, reinterpret_cast<unsigned char*>(q), rows * cols, s);
}
extern "C" void widened(const float* x, char* q, int rows, int cols, cudaStream_t s) {
  ops::launch(x, reinterpret_cast<unsigned char*>(q), rows * cols, s);
  ops::launch(reinterpret_cast<const float*>(q), nullptr, rows, s);
}
"#;
        assert_eq!(lens(src, "entry"), [("x".into(), "rows * cols".into()), ("q".into(), "rows * cols".into())]);
        let e = pointer_extents(&Source::parse(src), &[], "entry");
        assert!(matches!(&e[1].extent, Extent::Derived { access, .. } if access.ends_with("in `launch")), "{e:?}");
        // A cast to an element of another size is not followed: its lengths would count
        // other units.
        assert!(lens(src, "widened")[1].1.starts_with("? "), "{:?}", lens(src, "widened"));
    }

    #[test]
    fn a_row_major_matrix_and_a_per_column_vector() {
        let src = r#"
__global__ void k(const float* x, const float* bias, float* y, int rows, int cols) {
  int row = blockIdx.x;
  if (row >= rows) return;
  for (int c = threadIdx.x; c < cols; c += blockDim.x)
    y[row * cols + c] = x[row * cols + c] + bias[c];
}
extern "C" void launch(const float* x, const float* bias, float* y, int rows, int cols, cudaStream_t s) {
  k<<<rows, 256, 0, s>>>(x, bias, y, rows, cols);
}
"#;
        assert_eq!(derived(src, "launch"), ["x: rows * cols", "bias: cols", "y: rows * cols"]);
    }

    #[test]
    fn a_flat_index_with_division_and_remainder() {
        let src = r#"
#define BLOCK 256
__global__ void k(const float* x, const float* b, float* y, int n, int cols) {
  size_t i = (size_t)blockIdx.x * BLOCK + threadIdx.x;
  if (i < n) {
    int r = i / cols;
    int c = i % cols;
    y[r * cols + c] = x[i] + b[c];
  }
}
extern "C" void f(const float* x, const float* b, float* y, int rows, int cols, cudaStream_t s) {
  const int n = rows * cols;
  k<<<(n + BLOCK - 1) / BLOCK, BLOCK, 0, s>>>(x, b, y, n, cols);
}
"#;
        assert_eq!(derived(src, "f"), ["x: rows * cols", "b: cols", "y: rows * cols"]);
    }

    #[test]
    fn a_local_row_pointer_and_a_loop() {
        let src = r#"
__global__ void k(const float* logits, float* lse, int rows, int cols) {
  int row = blockIdx.x * blockDim.x + threadIdx.x;
  if (row >= rows) return;
  const float* p = logits + (size_t)row * cols;
  float m = -1e30f;
  for (int c = 0; c < cols; ++c) m = fmaxf(m, p[c]);
  lse[row] = m;
}
extern "C" void run(const float* logits, float* lse, int rows, int cols, cudaStream_t stream) {
  k<<<(rows + 255) / 256, 256, 0, stream>>>(logits, lse, rows, cols);
}
"#;
        assert_eq!(derived(src, "run"), ["logits: rows * cols", "lse: rows"]);
    }

    #[test]
    fn a_3d_grid_from_dim3() {
        let src = r#"
__global__ void k(const float* q, float* o, int B, int H, int D) {
  int b = blockIdx.y, h = blockIdx.x;
  for (int d = threadIdx.x; d < D; d += blockDim.x) {
    size_t at = ((size_t)b * H + h) * D + d;
    o[at] = q[at] * 2.0f;
  }
}
extern "C" void go(const float* q, float* o, int B, int H, int D, cudaStream_t s) {
  dim3 grid(H, B);
  k<<<grid, 128, 0, s>>>(q, o, B, H, D);
}
"#;
        assert_eq!(derived(src, "go"), ["q: B * H * D", "o: B * H * D"]);
    }

    #[test]
    fn a_device_helper_that_reads_one_element() {
        let src = r#"
__device__ float load(const float* p) { return *p; }
__device__ void store(float* p, float v) { p[0] = v; }
__global__ void k(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n) return;
  store(y + i, load(x + i) * 2.0f);
}
extern "C" void h(const float* x, float* y, int n, cudaStream_t s) { k<<<(n + 127) / 128, 128, 0, s>>>(x, y, n); }
"#;
        assert_eq!(derived(src, "h"), ["x: n", "y: n"]);
    }

    #[test]
    fn a_single_output_written_by_atomics() {
        let src = r#"
__global__ void sum(const float* x, float* out, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) atomicAdd(out, x[i]);
}
extern "C" void s(const float* x, float* out, int n, cudaStream_t st) { sum<<<(n + 255) / 256, 256, 0, st>>>(x, out, n); }
"#;
        assert_eq!(derived(src, "s"), ["x: n", "out: 1"]);
    }

    #[test]
    fn what_cannot_be_followed_says_why() {
        let src = r#"
__global__ void k(const float* x, float* y, const int* idx, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n / 4) reinterpret_cast<float4*>(y)[i] = reinterpret_cast<const float4*>(x)[i];
  y[idx[0]] = 0;
}
extern "C" void v(const float* x, float* y, const int* idx, const float* unused, int n, cudaStream_t s) {
  cudaMemsetAsync(y, 0, n * sizeof(float), s);
  k<<<n / 1024, 256, 0, s>>>(x, y, idx, n);
}
"#;
        let got = lens(src, "v");
        assert!(got[0].1.starts_with("? in `k`"), "{got:?}");
        assert!(got[1].1.contains("outside a kernel launch"), "{got:?}");
        assert_eq!(got[2].1, "1", "idx[0] only: {got:?}");
        assert!(got[3].1.contains("passed to no kernel"), "{got:?}");
    }

    #[test]
    fn an_unguarded_thread_index_has_no_bound() {
        let src = r#"
__global__ void k(float* y) { y[blockIdx.x * blockDim.x + threadIdx.x] = 0; }
extern "C" void z(float* y, int n, cudaStream_t s) { k<<<(n + 255) / 256, 256, 0, s>>>(y); }
"#;
        let got = lens(src, "z");
        assert!(got[0].1.starts_with("? in `k`, nothing bounds `blockIdx.x * blockDim.x + threadIdx.x`"), "{got:?}");
    }

    #[test]
    fn a_guard_on_a_variable_the_loop_changes_does_not_count() {
        let src = r#"
__global__ void k(float* y, int n) {
  int i = threadIdx.x;
  if (i < n) {
    while (true) { y[i] = 0; i += 7; if (i > 1000) break; }
  }
}
extern "C" void w(float* y, int n, cudaStream_t s) { k<<<1, 256, 0, s>>>(y, n); }
"#;
        let got = lens(src, "w");
        assert!(got[0].1.starts_with('?'), "i changes after the check: {got:?}");
    }

    #[test]
    fn a_check_on_two_terms_of_a_sum_bounds_them_together() {
        // A tile loop: `k0 + threadIdx.x < K` keeps the sum below K, not K - 1 + 15.
        let src = r#"
#define TILE 16
__global__ void g(const float* A, float* C, int M, int K) {
  const int row = blockIdx.y * TILE + threadIdx.y;
  float acc = 0.f;
  for (int k0 = 0; k0 < K; k0 += TILE)
    acc += (row < M && k0 + threadIdx.x < K) ? A[(size_t)row * K + k0 + threadIdx.x] : 0.f;
  if (row < M && threadIdx.x == 0) C[row] = acc;
}
extern "C" void gemv(const float* A, float* C, int M, int K, cudaStream_t s) {
  g<<<dim3(1, (M + TILE - 1) / TILE), dim3(TILE, TILE), 0, s>>>(A, C, M, K);
}
"#;
        assert_eq!(derived(src, "gemv"), ["A: M * K", "C: M"]);
    }

    #[test]
    fn a_pointer_a_macro_names_is_not_counted() {
        let src = r#"
#define LOAD(i) x[(i) + 1]
__global__ void k(const float* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] + LOAD(i);
}
extern "C" void m(const float* x, float* y, int n, cudaStream_t s) { k<<<(n + 255) / 256, 256, 0, s>>>(x, y, n); }
"#;
        let got = lens(src, "m");
        assert!(got[0].1.contains("the macro `LOAD` names `x`"), "{got:?}");
        assert_eq!(got[1].1, "n");
    }

    #[test]
    fn a_bound_no_thread_reaches_is_no_length() {
        // `i - i % L` is below i, but the bound `i`'s maximum minus 0 is not reached; a
        // check on `2 * i + j` says nothing about how far `i + j` goes.
        let src = r#"
__global__ void k(const float* x, float* y, int n, int L) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n * L) return;
  int l = i % L;
  y[i] = x[i - l];
}
__global__ void k2(const float* x, float* y, int n) {
  for (int i = 0; i < n; ++i)
    for (int j = 0; j < n; ++j)
      if (2 * i + j < n) y[i + j] = x[0];
}
extern "C" void a(const float* x, float* y, int n, int L, cudaStream_t s) { k<<<(n * L + 255) / 256, 256, 0, s>>>(x, y, n, L); }
extern "C" void b(const float* x, float* y, int n, cudaStream_t s) { k2<<<1, 1, 0, s>>>(x, y, n); }
"#;
        let got = lens(src, "a");
        assert!(got[0].1.contains("stays below n * L elements, but no thread need reach that far"), "{got:?}");
        assert_eq!(got[1].1, "n * L");
        let got = lens(src, "b");
        assert!(got[1].1.contains("no thread need reach"), "{got:?}");
    }

    #[test]
    fn a_grid_of_exactly_rows_blocks_bounds_block_idx() {
        let src = r#"
__global__ void k(const float* x, float* y, int cols) {
  const float* row = x + blockIdx.x * cols;
  for (int c = threadIdx.x; c < cols; c += blockDim.x) y[blockIdx.x * cols + c] = row[c];
}
extern "C" void g(const float* x, float* y, int rows, int cols, cudaStream_t s) { k<<<rows, 128, 0, s>>>(x, y, cols); }
"#;
        assert_eq!(derived(src, "g"), ["x: rows * cols", "y: rows * cols"]);
    }
}
