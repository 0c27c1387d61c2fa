//! Values that hold one value over a run of `vectorize`, read from the source: the V
//! elements of a run come from V of the original threads, so a per-element value is one
//! value for the run only when everything it is computed from is. That is the kernel's
//! parameters (never changed), literals, the quotient of a divisor the run never crosses
//! (an aligned [`index_split`](super::index_split)), loads of `const` buffers at such
//! addresses, the counter of a loop whose header is one value for the run, and locals
//! declared once from those alone and never changed.
//!
//! [`super::jam`] runs such a loop once per run, and [`super::gather`] reads a row at such
//! an offset wide; both rest on this reading, so it admits only what it can see whole: no
//! calls, no fields, no names a macro of the file or a reference may change.

use super::index_split::Splits;
use crate::source::{Kernel, Source};
use crate::syntax::{self, descendants, named_children, text};
use std::cell::RefCell;
use std::ops::Range;
use tree_sitter::Node;

pub(super) struct RunUniform<'a> {
    t: &'a str,
    k: &'a Kernel,
    splits: &'a Splits,
    /// Names the kernel declares (one entry per declaration).
    declared: Vec<String>,
    /// Names the kernel may change (see [`super::index_split`]).
    changed: Vec<String>,
    /// Locals (and loop counters) found to hold one value over a run.
    names: Vec<String>,
    /// The buffers whose loads were taken as one value: a write through another pointer
    /// to them would make them differ between elements.
    loaded: RefCell<Vec<String>>,
}

impl<'a> RunUniform<'a> {
    /// None when the kernel has what hides a change of a name (a reference, also through a
    /// type alias, a lambda, asm).
    pub fn new(src: &'a Source, k: &'a Kernel, body: Node, splits: &'a Splits) -> Option<Self> {
        let hides = syntax::has_reference_alias(src.text(), src.root())
            || descendants(body).iter().any(|d| {
                matches!(
                    d.kind(),
                    "reference_declarator" | "lambda_expression" | "gnu_asm_expression" | "for_range_loop"
                )
            });
        if hides {
            return None;
        }
        Some(RunUniform {
            t: src.text(),
            k,
            splits,
            declared: syntax::declared_names(src.text(), body),
            changed: super::index_split::changed_names(src, body),
            names: Vec::new(),
            loaded: RefCell::new(Vec::new()),
        })
    }

    /// Adds the locals `stmts` declare that hold one value over a run, in order (a later
    /// declaration may read an earlier one).
    pub fn add_declarations(&mut self, root: Node, stmts: &[Range<usize>]) {
        for r in stmts {
            let Some(d) = root.descendant_for_byte_range(r.start, r.end) else { continue };
            if d.kind() != "declaration" || d.byte_range() != *r {
                continue;
            }
            if let Some(name) = self.uniform_declaration(d) {
                self.names.push(name);
            }
        }
    }

    /// The name a declaration declares when it holds one value over a run.
    pub fn uniform_declaration(&self, d: Node) -> Option<String> {
        let (name, init) = syntax::single_declarator(self.t, d)?;
        let words = text(self.t, d);
        let plain = !["__shared__", "volatile", "static", "extern"].iter().any(|w| words.contains(w));
        (plain && self.is_local(&name) && self.expr(init?, &[])).then_some(name)
    }

    /// Declared once in the kernel, never changed, not a parameter's name.
    pub fn is_local(&self, name: &str) -> bool {
        self.declared.iter().filter(|d| *d == name).count() == 1
            && !self.changed.iter().any(|c| c == name)
            && self.k.param(name).is_none()
    }

    /// Declared once in the kernel (a loop's counter is changed by its header).
    pub fn declared_once(&self, name: &str) -> bool {
        self.declared.iter().filter(|d| *d == name).count() == 1 && self.k.param(name).is_none()
    }

    /// A counter declared once and stepped only by its loop's header.
    pub fn add_counter(&mut self, name: &str) {
        self.names.push(name.to_string());
    }

    /// The buffers read where a value was taken as one for the run.
    pub fn loaded(&self) -> Vec<String> {
        let mut v = self.loaded.borrow().clone();
        v.sort();
        v.dedup();
        v
    }

    pub fn holds(&self, name: &str) -> bool {
        self.names.iter().any(|n| n == name)
    }

    /// Whether `n` holds one value over a run (`also`: names that do too here).
    pub fn expr(&self, n: Node, also: &[&str]) -> bool {
        let t = self.t;
        if let Some(site) = self.splits.sites.iter().find(|s| s.range == n.byte_range()) {
            return !site.remainder && self.splits.divisors[site.divisor].aligned;
        }
        match n.kind() {
            "number_literal" | "true" | "false" | "comment" => true,
            "identifier" => {
                let name = text(t, n);
                if also.contains(&name) || self.holds(name) {
                    return true;
                }
                let stable = !self.declared.iter().any(|d| d == name) && !self.changed.iter().any(|c| c == name);
                stable && self.k.param(name).is_some()
            }
            "parenthesized_expression" | "binary_expression" | "conditional_expression" => {
                named_children(n).into_iter().all(|c| self.expr(c, also))
            }
            "unary_expression" => n.child_by_field_name("argument").is_some_and(|a| self.expr(a, also)),
            "cast_expression" => n.child_by_field_name("value").is_some_and(|v| self.expr(v, also)),
            // A load of a `const` buffer the kernel never repoints, at such an address.
            "subscript_expression" => {
                let Some(p) = n.child_by_field_name("argument") else { return false };
                let name = text(t, p);
                let constant = p.kind() == "identifier"
                    && self.k.param(name).is_some_and(|q| q.pointer && q.is_const)
                    && !self.declared.iter().any(|d| d == name)
                    && !self.changed.iter().any(|c| c == name);
                let holds = constant && crate::pattern::subscript_index(n).is_some_and(|i| self.expr(i, also));
                if holds {
                    self.loaded.borrow_mut().push(name.to_string());
                }
                holds
            }
            _ => false,
        }
    }
}
