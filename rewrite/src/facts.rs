//! What a recipe may know about the task besides the source: the launcher's arguments in
//! call order (element types, which buffers are only read, how long each is as a C
//! expression over the launcher's parameters), the largest value each size takes over
//! the bench and check sizes, and the tolerance the check applies.

use serde::{Deserialize, Serialize};

/// How the kernel may use a buffer, by the task's contract (the wall checks it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Read only; must be unchanged after the call.
    Input,
    /// Written only: its contents before the call are poison.
    Output,
    /// Read and updated in place.
    InOut,
}

/// The number of elements of a buffer.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Len {
    /// A C expression of 64-bit integer arithmetic in which `{i}` stands for the
    /// launcher's parameter `i` (zero-based); None when the length cannot be written that
    /// way (it depends on a size that is not an argument).
    pub c: Option<String>,
    /// At the bench size.
    pub bench: i64,
    /// The largest over the bench and check sizes.
    pub max: i64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum ArgKind {
    Buffer {
        /// Bytes per element.
        elem_size: usize,
        /// The element's C type as the task spells it (`__nv_bfloat16`).
        elem: String,
        is_float: bool,
        role: Role,
        len: Len,
        /// The check's tolerance for this buffer, where the task gives one (outputs and
        /// buffers updated in place); otherwise the task-wide one applies.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tolerance: Option<Tolerance>,
    },
    Scalar {
        is_float: bool,
        /// For integer sizes: the value at the bench size and the largest over all sizes.
        bench: Option<i64>,
        max: Option<i64>,
    },
}

/// `|out - ref| <= atol + rtol * |ref|`, element by element.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Tolerance {
    pub rtol: f64,
    pub atol: f64,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ArgFacts {
    pub name: String,
    pub kind: ArgKind,
}

impl ArgFacts {
    pub fn role(&self) -> Option<Role> {
        match &self.kind {
            ArgKind::Buffer { role, .. } => Some(*role),
            ArgKind::Scalar { .. } => None,
        }
    }

    pub fn len(&self) -> Option<&Len> {
        match &self.kind {
            ArgKind::Buffer { len, .. } => Some(len),
            ArgKind::Scalar { .. } => None,
        }
    }
}

/// Everything the task says that a recipe may rely on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Facts {
    /// The launcher every kernel of the task exports.
    pub entry: String,
    /// The launcher's arguments in call order, the stream excluded.
    pub args: Vec<ArgFacts>,
    /// `|out - ref| <= atol + rtol * |ref|`: the tightest over the outputs (each
    /// output's own is on its [`ArgKind::Buffer`]).
    pub rtol: f64,
    pub atol: f64,
    /// Every output buffer holds 16-bit floats (bf16 or fp16).
    pub outputs_16bit: bool,
}

impl Facts {
    /// Facts that know nothing beyond the entry: every length unknown, the tightest
    /// tolerance. Recipes that need more decline with a reason.
    pub fn unknown(entry: &str) -> Facts {
        Facts { entry: entry.to_string(), args: Vec::new(), rtol: 0.0, atol: 0.0, outputs_16bit: false }
    }

    /// The largest element count of any buffer over every size of the task.
    pub fn largest_buffer(&self) -> Option<i64> {
        self.args.iter().filter_map(|a| a.len().map(|l| l.max)).max()
    }

    /// The largest value any integer scalar takes.
    pub fn largest_scalar(&self) -> Option<i64> {
        self.args
            .iter()
            .filter_map(|a| match &a.kind {
                ArgKind::Scalar { max, .. } => *max,
                _ => None,
            })
            .max()
    }

    /// A length expression with the launcher's parameter names put in.
    pub fn len_in(&self, arg: usize, launcher_params: &[String]) -> Option<String> {
        let c = self.args.get(arg)?.len()?.c.as_ref()?;
        substitute_positions(c, launcher_params)
    }
}

/// `{i}` replaced by the i-th name; None if a position has no name.
pub fn substitute_positions(template: &str, names: &[String]) -> Option<String> {
    let mut out = String::new();
    let mut rest = template;
    while let Some(open) = rest.find('{') {
        out.push_str(&rest[..open]);
        let close = rest[open..].find('}')? + open;
        let i: usize = rest[open + 1..close].parse().ok()?;
        let name = names.get(i).filter(|n| !n.is_empty())?;
        out.push_str(name);
        rest = &rest[close + 1..];
    }
    out.push_str(rest);
    Some(out)
}

/// A builder for tests and tools that make facts by hand.
#[derive(Debug, Clone)]
pub struct FactsBuilder {
    facts: Facts,
}

impl FactsBuilder {
    pub fn new(entry: &str) -> FactsBuilder {
        FactsBuilder {
            facts: Facts { entry: entry.into(), args: vec![], rtol: 1e-5, atol: 1e-6, outputs_16bit: false },
        }
    }

    /// A buffer; `len` is a C expression over earlier or later argument names, written
    /// with `{name}` (resolved to positions at `build`).
    pub fn buffer(mut self, name: &str, elem: &str, role: Role, len: &str, bench: i64, max: i64) -> FactsBuilder {
        let size = crate::syntax::type_size(elem).unwrap_or(4);
        let is_float = matches!(elem, "float" | "double" | "half" | "__half" | "__nv_bfloat16" | "nv_bfloat16");
        self.facts.args.push(ArgFacts {
            name: name.into(),
            kind: ArgKind::Buffer {
                elem_size: size,
                elem: elem.into(),
                is_float,
                role,
                len: Len { c: Some(len.into()), bench, max },
                tolerance: None,
            },
        });
        self
    }

    /// The tolerance of the buffer added last, in place of the task-wide one.
    pub fn own_tolerance(mut self, rtol: f64, atol: f64) -> FactsBuilder {
        if let Some(ArgFacts { kind: ArgKind::Buffer { tolerance, .. }, .. }) = self.facts.args.last_mut() {
            *tolerance = Some(Tolerance { rtol, atol });
        }
        self
    }

    pub fn int(mut self, name: &str, bench: i64, max: i64) -> FactsBuilder {
        self.facts.args.push(ArgFacts {
            name: name.into(),
            kind: ArgKind::Scalar { is_float: false, bench: Some(bench), max: Some(max) },
        });
        self
    }

    pub fn float(mut self, name: &str) -> FactsBuilder {
        self.facts
            .args
            .push(ArgFacts { name: name.into(), kind: ArgKind::Scalar { is_float: true, bench: None, max: None } });
        self
    }

    pub fn tolerance(mut self, rtol: f64, atol: f64) -> FactsBuilder {
        self.facts.rtol = rtol;
        self.facts.atol = atol;
        self
    }

    pub fn build(mut self) -> Facts {
        let names: Vec<String> = self.facts.args.iter().map(|a| a.name.clone()).collect();
        for a in &mut self.facts.args {
            if let ArgKind::Buffer { len, .. } = &mut a.kind {
                if let Some(c) = &len.c {
                    let mut t = c.clone();
                    for (i, n) in names.iter().enumerate() {
                        t = t.replace(&format!("{{{n}}}"), &format!("{{{i}}}"));
                    }
                    len.c = Some(t);
                }
            }
        }
        self.facts.outputs_16bit = self.facts.args.iter().any(|a| a.role() == Some(Role::Output))
            && self.facts.args.iter().all(|a| match &a.kind {
                ArgKind::Buffer { role: Role::Output | Role::InOut, elem_size, is_float, .. } => {
                    *elem_size == 2 && *is_float
                }
                _ => true,
            });
        self.facts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn positions_become_launcher_names() {
        let f = FactsBuilder::new("e")
            .buffer("x", "float", Role::Input, "(long long)({rows}) * ({cols})", 10, 20)
            .int("rows", 2, 4)
            .int("cols", 5, 5)
            .build();
        assert_eq!(f.args[0].len().unwrap().c.as_deref(), Some("(long long)({1}) * ({2})"));
        let names = vec!["in".to_string(), "R".to_string(), "C".to_string()];
        assert_eq!(f.len_in(0, &names).as_deref(), Some("(long long)(R) * (C)"));
        assert_eq!(substitute_positions("{3}", &names), None);
        assert_eq!(f.largest_buffer(), Some(20));
    }
}
