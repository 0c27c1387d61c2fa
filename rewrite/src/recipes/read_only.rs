//! Read-only paths: `__restrict__` on pointer parameters, so the compiler may keep loads
//! in flight across stores and use the read-only data path, and `__ldg` on reads of
//! buffers the kernel never writes. Both assume the buffers do not overlap, which the
//! launcher checks from the task's lengths before it takes the fast path.

use crate::facts::Facts;
use crate::guards;
use crate::helpers;
use crate::pattern::subscript_index;
use crate::recipe::{Applied, NotApplicable, ParamSpec, Params};
use crate::source::{Kernel, Source};
use crate::syntax::{descendants, text};
use crate::version::Change;

pub const PARAMS: &[ParamSpec] = &[ParamSpec {
    name: "mode",
    values: &["restrict", "ldg"],
    doc: "restrict: __restrict__ on every pointer parameter; ldg: also __ldg on reads of never-written buffers",
}];

/// Element types `__ldg` has an overload for.
fn ldg_type(base: &str) -> bool {
    matches!(
        base,
        "float"
            | "double"
            | "int"
            | "unsigned"
            | "unsigned int"
            | "char"
            | "signed char"
            | "unsigned char"
            | "short"
            | "unsigned short"
            | "long long"
            | "unsigned long long"
            | "int8_t"
            | "uint8_t"
            | "int16_t"
            | "uint16_t"
            | "int32_t"
            | "uint32_t"
            | "int64_t"
            | "uint64_t"
            | "__half"
            | "half"
            | "__nv_bfloat16"
            | "nv_bfloat16"
            | "float2"
            | "float4"
            | "int2"
            | "int4"
            | "uint2"
            | "uint4"
            | "__half2"
            | "__nv_bfloat162"
    )
}

pub fn apply(src: &Source, facts: &Facts, params: &Params) -> Applied {
    let ldg = params.get(PARAMS, "mode") == "ldg";
    super::per_kernel(src, params, |k| plan(src, facts, k, ldg))
}

fn plan<'k>(src: &Source, facts: &Facts, k: &'k Kernel, ldg: bool) -> Result<(Change<'k>, String), NotApplicable> {
    let t = src.text();
    if k.has_error {
        return Err(NotApplicable::new(format!("`{}` contains syntax this parser does not know", k.name)));
    }
    let body = src.node(&k.body, "compound_statement").ok_or_else(|| NotApplicable::new("no body"))?;
    let pointers: Vec<_> = k.params.iter().filter(|p| p.pointer).collect();
    if pointers.is_empty() {
        return Err(NotApplicable::new(format!("`{}` takes no pointer parameters", k.name)));
    }
    let mut change = Change::new(k);
    let mut restricted = Vec::new();
    for p in &pointers {
        if !p.restrict {
            change.edits.insert(p.name_range.start, "__restrict__ ");
            restricted.push(p.name.clone());
        }
    }
    // Reads of buffers never written: not assigned through, not passed on unless const.
    let mut ldgs = 0;
    if ldg {
        for p in &pointers {
            if !ldg_type(&p.base) {
                continue;
            }
            let mut sites = Vec::new();
            let mut written = false;
            for d in descendants(body) {
                if d.kind() != "identifier" || text(t, d) != p.name {
                    continue;
                }
                let Some(parent) = d.parent() else { continue };
                if parent.kind() == "subscript_expression"
                    && parent.child_by_field_name("argument").is_some_and(|a| a.id() == d.id())
                {
                    let Some(up) = parent.parent() else { continue };
                    let is_target = matches!(up.kind(), "assignment_expression" | "update_expression")
                        && [up.child_by_field_name("left"), up.child_by_field_name("argument")]
                            .into_iter()
                            .flatten()
                            .any(|x| x.id() == parent.id());
                    if is_target {
                        written = true;
                    } else if up.kind() == "pointer_expression" {
                        // `&p[i]`: passed on, or already an __ldg argument.
                        if !p.is_const {
                            written = true;
                        }
                    } else if subscript_index(parent).is_some() {
                        sites.push(parent);
                    }
                } else if !p.is_const {
                    // Passed on, or an alias (`q = p + off`) we do not follow: maybe written.
                    written = true;
                }
            }
            if written {
                continue;
            }
            for s in sites {
                change.edits.replace(s.byte_range(), format!("__ldg(&{})", text(t, s)));
                ldgs += 1;
            }
        }
    }
    if restricted.is_empty() && ldgs == 0 {
        return Err(NotApplicable::new(format!(
            "every pointer parameter of `{}` is __restrict__ already{}",
            k.name,
            if ldg { " and no read of an unwritten buffer is left to __ldg" } else { "" }
        )));
    }
    // Non-overlap of every written buffer with every other buffer.
    let written: Vec<_> = pointers.iter().filter(|p| !p.is_const).collect();
    for w in &written {
        for o in &pointers {
            if o.name == w.name || (o.is_const && w.is_const) {
                continue;
            }
            if written.iter().any(|x| x.name == o.name) && o.name < w.name {
                continue;
            }
            change.guards.push(format!(
                "ns_disjoint({{{}}}, {}, {{{}}}, {})",
                w.name,
                guards::buffer_bytes(src, facts, k, &w.name)?,
                o.name,
                guards::buffer_bytes(src, facts, k, &o.name)?
            ));
        }
    }
    if !change.guards.is_empty() {
        change.helpers.push(&helpers::HOST_CHECKS);
    }
    let mut what = Vec::new();
    if !restricted.is_empty() {
        what.push(format!("__restrict__ on `{}`", restricted.join("`, `")));
    }
    if ldgs > 0 {
        what.push(format!("{ldgs} read(s) through __ldg"));
    }
    Ok((change, format!("`{}`: {}", k.name, what.join(", "))))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::facts::{FactsBuilder, Role};

    const SRC: &str = r#"
__global__ void saxpy(const float* x, float* y, float a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
extern "C" void launch(const float* x, float* y, float a, int n, cudaStream_t s) {
  saxpy<<<(n + 255) / 256, 256, 0, s>>>(x, y, a, n);
}
"#;

    fn facts() -> Facts {
        FactsBuilder::new("launch")
            .buffer("x", "float", Role::Input, "{n}", 1 << 20, 1 << 20)
            .buffer("y", "float", Role::InOut, "{n}", 1 << 20, 1 << 20)
            .float("a")
            .int("n", 1 << 20, 1 << 20)
            .build()
    }

    #[test]
    fn restrict_and_ldg_behind_an_overlap_check() {
        let r = apply(&Source::parse(SRC), &facts(), &Params::default().with("mode", "ldg")).unwrap();
        let s = &r.source;
        assert!(s.contains("saxpy_fast(const float* __restrict__ x, float* __restrict__ y, float a, int n)"), "{s}");
        assert!(s.contains("y[i] = a * __ldg(&x[i]) + y[i];"), "{s}");
        assert_eq!(r.guards, ["ns_disjoint(y, (n) * (long long)sizeof(float), x, (n) * (long long)sizeof(float))"]);
    }

    #[test]
    fn declines_when_everything_is_restricted_or_lengths_are_unknown() {
        let done = SRC.replace(
            "const float* x, float* y, float a",
            "const float* __restrict__ x, float* __restrict__ y, float a",
        );
        let e = apply(&Source::parse(&done), &facts(), &Params::default()).unwrap_err();
        assert!(e.0.contains("already"), "{e}");
        let e = apply(&Source::parse(SRC), &FactsBuilder::new("launch").build(), &Params::default()).unwrap_err();
        assert!(e.0.contains("overlap cannot be checked"), "{e}");
    }
}
