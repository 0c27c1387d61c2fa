//! Finding the host launcher in a .cu file and reading its C signature. Regular
//! expressions are enough for C declarations once comments and strings are out of the way;
//! C++ entries (templates, namespaces, overloads) are refused with the wrapping recipe,
//! because the worker finds the entry by its unmangled name.

use regex::Regex;
use std::sync::LazyLock;

/// One parameter as written, and what nightshift makes of it.
#[derive(Debug, Clone, PartialEq)]
pub struct Param {
    pub name: String,
    /// The type as task.toml spells it (`const float*`, `int64_t`, `cudaStream_t`).
    pub spelling: String,
    pub kind: ParamKind,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ParamKind {
    /// A pointer; `constant` when its data is const (an input).
    Pointer {
        elem: String,
        constant: bool,
    },
    Integer,
    Float,
    Stream,
}

/// An `extern "C"` host function: the candidate entry.
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub name: String,
    pub line: usize,
    pub params: Vec<Param>,
}

#[derive(Debug, Clone, PartialEq)]
pub enum SignatureError {
    /// No `extern "C"` host function; C++ functions that look like launchers, if any.
    NoEntry { cpp_candidates: Vec<(String, usize)> },
    /// Several, and no --entry to choose.
    Ambiguous(Vec<(String, usize)>),
    /// --entry names none of them.
    NotFound { wanted: String, found: Vec<(String, usize)> },
    /// The chosen function cannot be an entry as written.
    Unsupported { name: String, line: usize, why: String },
}

/// How to wrap a C++ launcher in an `extern "C"` entry: shown whenever one is refused.
pub const WRAPPING_HINT: &str = r#"nightshift calls the entry by its C name, so it must be a plain `extern "C"` function
returning void, taking pointers and scalars, with a cudaStream_t last. Wrap a C++ launcher
(template, namespace, overload, references, std:: types) in one, in the same file:

    namespace ops { template <typename T, int BLOCK>
    void fused_gelu(const T* x, T* y, int64_t n, cudaStream_t s); }   // your launcher

    extern "C" void fused_gelu_bf16(const __nv_bfloat16* x, __nv_bfloat16* y,
                                    int64_t n, cudaStream_t stream) {
      ops::fused_gelu<__nv_bfloat16, 256>(x, y, n, stream);           // one instantiation
    }

then run init again with --entry fused_gelu_bf16."#;

/// Blanks comments, string and character literals (keeping line breaks), so that the
/// patterns below never match inside them.
pub fn strip_comments(src: &str) -> String {
    let b = src.as_bytes();
    let mut out = String::with_capacity(src.len());
    let mut k = 0;
    while k < b.len() {
        if b[k] == b'/' && b.get(k + 1) == Some(&b'/') {
            while k < b.len() && b[k] != b'\n' {
                k += 1;
            }
        } else if b[k] == b'/' && b.get(k + 1) == Some(&b'*') {
            k += 2;
            while k < b.len() && !(b[k] == b'*' && b.get(k + 1) == Some(&b'/')) {
                out.push(if b[k] == b'\n' { '\n' } else { ' ' });
                k += 1;
            }
            k += 2;
        } else {
            let c = src[k..].chars().next().unwrap_or(' ');
            out.push(c);
            k += c.len_utf8();
        }
    }
    out
}

fn line_of(text: &str, offset: usize) -> usize {
    text[..offset.min(text.len())].bytes().filter(|c| *c == b'\n').count() + 1
}

static EXTERN_C_FN: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r#"extern\s+"C"\s+((?:__host__\s+|static\s+|inline\s+|__attribute__\s*\(\([^)]*\)\)\s+)*)([A-Za-z_][\w:<>\s\*]*?)\s*\b([A-Za-z_]\w*)\s*\(([^)]*)\)\s*[{;]"#).unwrap()
});
static EXTERN_C_BLOCK: LazyLock<Regex> = LazyLock::new(|| Regex::new(r#"extern\s+"C"\s*\{"#).unwrap());
static C_FN: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?m)^[ \t]*((?:__host__\s+|static\s+|inline\s+)*)([A-Za-z_][\w:<>\s\*]*?)\s*\b([A-Za-z_]\w*)\s*\(([^)]*)\)\s*\{").unwrap()
});
static CPP_LAUNCHER: LazyLock<Regex> = LazyLock::new(|| {
    Regex::new(r"(?m)^[ \t]*(?:template\s*<[^>]*>\s*)?(?:static\s+|inline\s+)*(?:void|cudaError_t)\s+([A-Za-z_][\w:]*)\s*\(([^)]*cudaStream_t[^)]*)\)").unwrap()
});

/// Every `extern "C"` host function in `src` (kernels marked `__global__` are skipped).
pub fn extern_c_functions(src: &str) -> Vec<(String, usize, String, String)> {
    let text = strip_comments(src);
    let mut out = Vec::new();
    for c in EXTERN_C_FN.captures_iter(&text) {
        let whole = c.get(0).unwrap();
        let ret = c[2].trim().to_string();
        if ret.contains("__global__") || ret.contains("__device__") {
            continue;
        }
        out.push((c[3].to_string(), line_of(&text, whole.start()), ret, c[4].to_string()));
    }
    // extern "C" { ... } blocks: the functions defined at their top level.
    for m in EXTERN_C_BLOCK.find_iter(&text) {
        let body_start = m.end();
        let mut depth = 1;
        let mut end = body_start;
        for (i, ch) in text[body_start..].char_indices() {
            match ch {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = body_start + i;
                        break;
                    }
                }
                _ => {}
            }
        }
        let block = &text[body_start..end];
        for c in C_FN.captures_iter(block) {
            let ret = c[2].trim().to_string();
            if ret.contains("__global__") || ret.contains("__device__") || ret.is_empty() {
                continue;
            }
            let start = body_start + c.get(0).unwrap().start();
            // Only the block's top level: skip functions nested in braces inside it.
            let nested = text[body_start..start].matches('{').count() > text[body_start..start].matches('}').count();
            if !nested {
                out.push((c[3].to_string(), line_of(&text, start), ret, c[4].to_string()));
            }
        }
    }
    out.sort_by_key(|f| f.1);
    out.dedup_by(|a, b| a.0 == b.0 && a.1 == b.1);
    out
}

/// C++ functions that take a cudaStream_t: launchers the user could wrap.
fn cpp_launchers(src: &str) -> Vec<(String, usize)> {
    let text = strip_comments(src);
    let extern_c: Vec<String> = extern_c_functions(src).into_iter().map(|f| f.0).collect();
    CPP_LAUNCHER
        .captures_iter(&text)
        .map(|c| (c[1].to_string(), line_of(&text, c.get(0).unwrap().start())))
        .filter(|(n, _)| !extern_c.contains(n))
        .collect()
}

/// Reads one parameter declaration.
pub fn parse_param(decl: &str) -> Result<Param, String> {
    let d = decl.split_whitespace().collect::<Vec<_>>().join(" ");
    if d.contains('&') {
        return Err(format!("`{d}` is a C++ reference"));
    }
    if d.contains('[') || d.contains('(') {
        return Err(format!("`{d}`: arrays and function pointers are not supported"));
    }
    // The name is the last identifier; everything before it is the type.
    let name_start = d
        .char_indices()
        .rev()
        .take_while(|(_, c)| c.is_ascii_alphanumeric() || *c == '_')
        .last()
        .map(|(i, _)| i)
        .ok_or_else(|| format!("`{d}`: no parameter name"))?;
    let name = d[name_start..].to_string();
    let ty = d[..name_start].trim();
    if ty.is_empty() || name.chars().next().is_some_and(|c| c.is_ascii_digit()) {
        return Err(format!("`{d}`: expected a type and a name"));
    }
    let stars = ty.matches('*').count();
    let unstarred = ty.replace('*', " ");
    let words: Vec<&str> = unstarred
        .split_whitespace()
        .filter(|w| !matches!(*w, "__restrict__" | "__restrict" | "restrict" | "volatile"))
        .collect();
    let constant = words.contains(&"const");
    let base: Vec<&str> = words.into_iter().filter(|w| *w != "const").collect();
    let base = base.join(" ");
    if base.contains("::") || base.contains('<') {
        return Err(format!("`{d}`: `{base}` is a C++ type"));
    }
    if stars > 1 {
        return Err(format!("`{d}`: pointers to pointers are not supported"));
    }
    if stars == 1 {
        let known = crate::task::types::ParamType::parse(&format!("{base}*")).is_ok();
        if !known {
            return Err(format!(
                "`{d}`: element type `{base}` is not one nightshift generates data for ({})",
                crate::task::types::known_type_names()
            ));
        }
        let spelling = if constant { format!("const {base}*") } else { format!("{base}*") };
        return Ok(Param { name, spelling, kind: ParamKind::Pointer { elem: base, constant } });
    }
    if base == "cudaStream_t" {
        return Ok(Param { name, spelling: base, kind: ParamKind::Stream });
    }
    let kind = match base.as_str() {
        "float" | "double" => ParamKind::Float,
        "half" | "__half" | "__nv_bfloat16" | "nv_bfloat16" => {
            return Err(format!("`{d}`: 16-bit floats by value are not supported; pass a float and convert inside"))
        }
        _ if crate::task::types::ParamType::parse(&base).is_ok() => ParamKind::Integer,
        _ => return Err(format!("`{d}`: unknown type `{base}`")),
    };
    Ok(Param { name, spelling: base, kind })
}

/// Splits a parameter list at top-level commas.
fn split_params(list: &str) -> Vec<String> {
    let list = list.trim();
    if list.is_empty() || list == "void" {
        return Vec::new();
    }
    list.split(',').map(|s| s.trim().to_string()).collect()
}

/// The entry of `src`: the `extern "C"` host function named `wanted`, or the only one.
pub fn find_entry(src: &str, wanted: Option<&str>) -> Result<Entry, SignatureError> {
    let all = extern_c_functions(src);
    let names: Vec<(String, usize)> = all.iter().map(|f| (f.0.clone(), f.1)).collect();
    let chosen = match wanted {
        Some(w) => all
            .iter()
            .find(|f| f.0 == w)
            .ok_or_else(|| SignatureError::NotFound { wanted: w.to_string(), found: names.clone() })?,
        None => match all.len() {
            0 => return Err(SignatureError::NoEntry { cpp_candidates: cpp_launchers(src) }),
            1 => &all[0],
            _ => return Err(SignatureError::Ambiguous(names)),
        },
    };
    let (name, line, ret, list) = chosen;
    let unsupported = |why: String| SignatureError::Unsupported { name: name.clone(), line: *line, why };
    if ret.split_whitespace().last() != Some("void") {
        return Err(unsupported(format!(
            "it returns `{ret}`; the entry must return void (report errors through the stream)"
        )));
    }
    let mut params = Vec::new();
    for decl in split_params(list) {
        params.push(parse_param(&decl).map_err(unsupported)?);
    }
    let streams: Vec<usize> =
        params.iter().enumerate().filter(|(_, p)| p.kind == ParamKind::Stream).map(|(i, _)| i).collect();
    match streams.as_slice() {
        [i] if *i + 1 == params.len() => {}
        [] => {
            return Err(unsupported(
                "it takes no cudaStream_t: nightshift times every call on its own stream. Add `cudaStream_t stream` as the last parameter and launch on it (kernel<<<grid, block, smem, stream>>>)".into(),
            ))
        }
        _ => return Err(unsupported("the cudaStream_t must be the last parameter, and only one".into())),
    }
    params.pop();
    Ok(Entry { name: name.clone(), line: *line, params })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parameters_of_every_common_spelling() {
        let p = |d: &str| parse_param(d).unwrap();
        assert_eq!(p("const float* __restrict__ x").kind, ParamKind::Pointer { elem: "float".into(), constant: true });
        assert_eq!(p("float const *x").spelling, "const float*");
        assert_eq!(p("__nv_bfloat16 *__restrict__ out").spelling, "__nv_bfloat16*");
        assert_eq!(p("const half* h").spelling, "const half*");
        assert_eq!(p("size_t n").kind, ParamKind::Integer);
        assert_eq!(p("int64_t  rows").spelling, "int64_t");
        assert_eq!(p("unsigned int k").spelling, "unsigned int");
        assert_eq!(p("float eps").kind, ParamKind::Float);
        assert_eq!(p("cudaStream_t s").kind, ParamKind::Stream);
        assert!(parse_param("float& x").unwrap_err().contains("C++ reference"));
        assert!(parse_param("float** x").unwrap_err().contains("pointers to pointers"));
        assert!(parse_param("std::vector<float> v").unwrap_err().contains("C++ type"));
        assert!(parse_param("float4* v").unwrap_err().contains("float4"));
    }

    #[test]
    fn comments_and_blocks() {
        let src = "// extern \"C\" void fake(int n, cudaStream_t s) {}\n/* extern \"C\" void also_fake() {} */\nextern \"C\" {\nvoid real(const float* x, int n, cudaStream_t s) {\n  if (n) { }\n}\n}\n";
        let all = extern_c_functions(src);
        assert_eq!(all.len(), 1, "{all:?}");
        assert_eq!(all[0].0, "real");
        assert_eq!(all[0].1, 4);
    }

    proptest::proptest! {
        #[test]
        fn any_text_is_an_entry_or_a_refusal_never_a_panic(text in "(extern \"C\" |void |\\(|\\)|\\{|\\}|const |float\\* |int |cudaStream_t |/\\*|\\*/|//|\n|[a-z_]{1,6}|, |é|\"){0,40}") {
            let _ = find_entry(&text, None);
            let _ = find_entry(&text, Some("f"));
            let _ = parse_param(&text);
        }
    }
}
