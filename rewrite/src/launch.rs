//! What a launch's grid and block are. `k<<<grid, block>>>` names its sizes in many ways:
//! an integer literal, a `#define`, a `const`/`constexpr`/`static const` integer (at file
//! scope or in the launcher before the launch), arithmetic on those, or a `dim3` (a
//! variable, or `dim3(...)` written in the launch) whose one to three components are each
//! any of these. Names are followed back from where they are used as the compiler would
//! see them: macros first, then the launcher's declarations in scope, its parameters, the
//! file's declarations above. Anything the file cannot fix before the launcher runs is a
//! [`Size::RunTime`] that says where the value comes from, so a recipe that declines says
//! why in the source's own terms; an expression whose type (a number or a `dim3`) the file
//! does not show is [`Dims::Unknown`], since guessing it wrong writes code that does not build.

use crate::pattern::int_literal;
use crate::source::{HostFn, Kernel, Launch, Source};
use crate::syntax::{self, descendants, named_children, text};
use std::ops::Range;
use tree_sitter::Node;

/// How far names and expressions are followed (macros naming each other, chains of
/// constants) before a size counts as unknown: real launchers stay far below it, and a
/// file made to loop must still get an answer.
const MAX_DEPTH: usize = 32;

/// The three axes, in the order `dim3` takes them.
pub const AXES: [char; 3] = ['x', 'y', 'z'];

/// One extent of a launch (a block's or grid's size along one axis), as the source fixes it.
#[derive(Debug, Clone, PartialEq)]
pub enum Size {
    /// `256`, where it is written.
    Literal { value: i64, at: Range<usize> },
    /// A `#define` whose value is an integer constant.
    Macro(Macro),
    /// A `const`/`constexpr` integer whose initializer is a compile-time size.
    Constant(Box<Constant>),
    /// `+ - * / % << >>` over compile-time sizes: `2 * WARP`.
    Arithmetic(Box<Arithmetic>),
    /// Known only when the launcher runs.
    RunTime(Box<RunTime>),
}

#[derive(Debug, Clone, PartialEq)]
pub struct Macro {
    pub name: String,
    pub value: i64,
    /// The value as written: `256`, `(4 * WARP)`.
    pub text: String,
    /// The `#define` line (the first, where there are several).
    pub definition: Range<usize>,
    /// Behind `#ifndef NAME` (or `#if !defined(NAME)`), so `-DNAME=v` sets it; an
    /// unguarded definition overrides `-D` instead (with a warning), so it is no knob.
    pub guarded: bool,
    /// How many `#define NAME` the file holds (several under `#if` branches).
    pub definitions: usize,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Constant {
    pub name: String,
    pub scope: Scope,
    /// The whole declaration statement.
    pub declaration: Range<usize>,
    pub initializer: Size,
}

/// Where a named constant is declared.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Outside every function: the kernel sees it too, if it comes first.
    File,
    /// In the launcher's body: only the launcher sees it.
    Launcher,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Arithmetic {
    pub at: Range<usize>,
    pub text: String,
    /// The names in it, where each is written, and what each is.
    pub names: Vec<(Range<usize>, Size)>,
    /// None where it overflows or divides by zero.
    pub value: Option<i64>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct RunTime {
    /// The expression as written where it is used.
    pub expr: String,
    pub origin: Origin,
}

/// Where a run-time size comes from.
#[derive(Debug, Clone, PartialEq)]
pub enum Origin {
    /// A parameter of the launcher.
    Parameter { function: String },
    /// A variable initialized by a constant but not declared `const`.
    NotConst { declaration: String },
    /// A variable whose initializer is itself known only at run time.
    Computed { declaration: String },
    /// A variable assigned again after its declaration.
    Assigned { assignment: String },
    /// A macro whose value is not an integer constant.
    NotANumber { value: String },
    /// A name this file never declares (a header's, or the compiler's `-D`).
    Undeclared,
    /// An expression over another run-time size (the first one in it).
    Uses(Box<RunTime>),
    /// Syntax these rules do not evaluate: calls, conditionals, members.
    Unevaluated,
}

impl Size {
    /// The value, where the file fixes it.
    pub fn value(&self) -> Option<i64> {
        match self {
            Size::Literal { value, .. } => Some(*value),
            Size::Macro(m) => Some(m.value),
            Size::Constant(c) => c.initializer.value(),
            Size::Arithmetic(a) => a.value,
            Size::RunTime(_) => None,
        }
    }

    pub fn run_time(&self) -> Option<&RunTime> {
        match self {
            Size::RunTime(r) => Some(r),
            _ => None,
        }
    }

    /// The macros this size is made of, however deep (`const int t = 2 * BLOCK;` is
    /// `BLOCK`): what a `-D` of which moves the size.
    pub fn macros(&self) -> Vec<&str> {
        self.macro_defs().into_iter().map(|m| m.name.as_str()).collect()
    }

    /// The definitions of those macros.
    pub fn macro_defs(&self) -> Vec<&Macro> {
        match self {
            Size::Literal { .. } | Size::RunTime(_) => Vec::new(),
            Size::Macro(m) => vec![m],
            Size::Constant(c) => c.initializer.macro_defs(),
            Size::Arithmetic(a) => a.names.iter().flat_map(|(_, size)| size.macro_defs()).collect(),
        }
    }

    /// The size as an expression that code at file scope at byte `at` can use (where
    /// `__launch_bounds__` goes): a macro or file-scope constant by name when it is
    /// defined above `at`, a launcher's constant by its initializer. The error says why
    /// not, as a clause.
    pub fn at_file_scope(&self, t: &str, at: usize) -> Result<String, String> {
        match self {
            Size::Literal { at: r, .. } => Ok(t.get(r.clone()).unwrap_or_default().to_string()),
            Size::Macro(m) if m.definition.start < at => Ok(m.name.clone()),
            Size::Macro(m) => Err(format!("the macro `{}` is defined only below it", m.name)),
            Size::Constant(c) if c.scope == Scope::File && c.declaration.end <= at => Ok(c.name.clone()),
            Size::Constant(c) => c.initializer.at_file_scope(t, at).map(|e| parenthesized(&c.initializer, e)),
            Size::Arithmetic(a) => {
                let mut out = String::new();
                let mut from = a.at.start;
                for (r, s) in &a.names {
                    if r.start < from || r.end > a.at.end {
                        return Err(format!("`{}` could not be taken apart", a.text));
                    }
                    out.push_str(t.get(from..r.start).unwrap_or_default());
                    out.push_str(&parenthesized(s, s.at_file_scope(t, at)?));
                    from = r.end;
                }
                out.push_str(t.get(from..a.at.end).unwrap_or_default());
                Ok(out)
            }
            Size::RunTime(r) => Err(r.why()),
        }
    }
}

/// `e` in parentheses where the size it stands for is arithmetic.
fn parenthesized(s: &Size, e: String) -> String {
    let arithmetic = match s {
        Size::Arithmetic(_) => true,
        Size::Constant(c) => matches!(c.initializer, Size::Arithmetic(_)) && !e.chars().all(is_word),
        _ => false,
    };
    if arithmetic {
        format!("({e})")
    } else {
        e
    }
}

fn is_word(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

impl RunTime {
    /// Why this is known only at run time, as a clause: "`b` is a parameter of `launch`".
    pub fn why(&self) -> String {
        match &self.origin {
            Origin::Uses(inner) => {
                let mut leaf = inner.as_ref();
                while let Origin::Uses(next) = &leaf.origin {
                    leaf = next;
                }
                format!("`{}` depends on `{}`, {}", self.expr, leaf.expr, leaf.phrase())
            }
            _ => format!("`{}` is {}", self.expr, self.phrase()),
        }
    }

    fn phrase(&self) -> String {
        match &self.origin {
            Origin::Parameter { function } => format!("a parameter of `{function}`"),
            Origin::NotConst { declaration } => {
                format!("a variable, not a constant (`{declaration}` has no `const`)")
            }
            Origin::Computed { declaration } => format!("computed when the launcher runs (`{declaration}`)"),
            Origin::Assigned { assignment } => format!("assigned after its declaration (`{assignment}`)"),
            Origin::NotANumber { value } => format!("a macro whose value `{value}` is not an integer constant"),
            Origin::Undeclared => "declared nowhere in this file".to_string(),
            Origin::Uses(inner) => format!("an expression over `{}`", inner.expr),
            Origin::Unevaluated => "not a literal, macro, constant or arithmetic on them".to_string(),
        }
    }
}

/// One component of a launch's grid or block.
#[derive(Debug, Clone, PartialEq)]
pub struct Component {
    /// The expression as written.
    pub text: String,
    /// Where it is written (none for a component the source never writes out: a
    /// parameter's, or one assigned piecewise).
    pub at: Option<Range<usize>>,
    pub size: Size,
}

/// A `dim3` grid or block.
#[derive(Debug, Clone, PartialEq)]
pub struct Dim3 {
    /// An expression for the whole `dim3` its components can be read from: the
    /// variable the launch names, or the call that returns it; none for `dim3(...)`
    /// written in the launch, whose components are as written.
    pub whole: Option<String>,
    /// The components as given (one to three); the rest are 1.
    pub written: Vec<Component>,
}

/// A launch's grid or block.
#[derive(Debug, Clone, PartialEq)]
pub enum Dims {
    /// A number: the x extent; y and z are 1.
    Scalar(Component),
    Dim3(Dim3),
    /// An expression whose type, a number or a `dim3`, the file does not show; `why`
    /// says so as a clause.
    Unknown {
        expr: String,
        why: String,
    },
}

impl Dims {
    /// The component along `axis` (0 is x) where the source gives one; none means 1 (or
    /// an unknown type).
    pub fn component(&self, axis: usize) -> Option<&Component> {
        match self {
            Dims::Scalar(c) => (axis == 0).then_some(c),
            Dims::Dim3(d) => d.written.get(axis),
            Dims::Unknown { .. } => None,
        }
    }

    /// Whether the extent along `axis` is 1 for certain.
    pub fn is_one(&self, axis: usize) -> bool {
        match self {
            Dims::Unknown { .. } => false,
            _ => self.component(axis).is_none_or(|c| c.size.value() == Some(1)),
        }
    }

    /// The extent along `axis` as an expression at the launch: `block.y`, a component as
    /// written, `1`. None when the type is unknown.
    pub fn extent(&self, axis: usize) -> Option<String> {
        let c = AXES.get(axis)?;
        match self {
            Dims::Scalar(s) => Some(if axis == 0 { s.text.clone() } else { "1".to_string() }),
            Dims::Dim3(Dim3 { whole: Some(v), .. }) if v.chars().all(is_word) => Some(format!("{v}.{c}")),
            Dims::Dim3(Dim3 { whole: Some(v), .. }) => Some(format!("({v}).{c}")),
            Dims::Dim3(d) => Some(d.written.get(axis).map_or_else(|| "1".to_string(), |w| w.text.clone())),
            Dims::Unknown { .. } => None,
        }
    }

    /// The x extent as an expression around the launch's own text (`(g).x` for a `dim3`):
    /// what a recipe that scales a 1-D launch reads. An unknown type is taken for a
    /// number, as the launch text is all there is.
    pub fn x_extent(&self, written: &str) -> String {
        match self {
            Dims::Dim3(_) => format!("({written}).x"),
            _ => written.to_string(),
        }
    }

    /// The thread count, where every component is fixed (none on overflow).
    pub fn threads(&self) -> Option<i64> {
        self.varying().iter().try_fold(1i64, |acc, (_, c)| acc.checked_mul(c.size.value()?))
    }

    /// The macros any component is made of (see [`Size::macros`]).
    pub fn macros(&self) -> Vec<&str> {
        (0..3).filter_map(|a| self.component(a)).flat_map(|c| c.size.macros()).collect()
    }

    /// The components that are not 1 for certain, with their axes.
    pub fn varying(&self) -> Vec<(usize, &Component)> {
        (0..3).filter(|a| !self.is_one(*a)).filter_map(|a| self.component(a).map(|c| (a, c))).collect()
    }
}

/// The grid of a launch.
pub fn grid(src: &Source, l: &Launch) -> Option<Dims> {
    Resolver::new(src, l).config(l, 0)
}

/// The block of a launch; none when the launch names none.
pub fn block(src: &Source, l: &Launch) -> Option<Dims> {
    Resolver::new(src, l).config(l, 1)
}

/// What `name` is to code at file scope or in a kernel at byte `at`: a macro, a constant
/// of the file declared above, or unknown (run-time).
pub fn file_scope_size(src: &Source, name: &str, at: usize) -> Size {
    Resolver { src, t: src.text(), host: None }.name_size(name, at, 0)
}

/// The axes a kernel reads, in itself or in the file's device functions: a grid axis
/// through `blockIdx` or `gridDim`, a block axis through `threadIdx` or `blockDim`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AxesRead {
    pub grid: [bool; 3],
    pub block: [bool; 3],
}

pub fn axes_read(src: &Source, k: &Kernel) -> AxesRead {
    let t = src.text();
    let mut ranges = vec![k.range.clone()];
    ranges.extend(src.host_functions().into_iter().filter(|h| h.is_device).map(|h| h.range));
    let mut out = AxesRead::default();
    for r in ranges {
        let Some(n) = src.node_at(&r) else { continue };
        for d in descendants(n) {
            let Some((object, field)) = syntax::builtin(t, d) else { continue };
            let Some(axis) = AXES.iter().position(|a| *a == field) else { continue };
            match object {
                "blockIdx" | "gridDim" => out.grid[axis] = true,
                _ => out.block[axis] = true,
            }
        }
    }
    out
}

/// What a name stands for where it is used.
enum Named<'s> {
    /// A `#define` (the first) and how many the file holds.
    Macro(Node<'s>, usize),
    /// A declaration, the declarator of the name in it, and where it is.
    Declared(Node<'s>, Node<'s>, Scope),
    /// A parameter of the launcher, with its type as written.
    Parameter(String),
    Undeclared,
}

struct Resolver<'s> {
    src: &'s Source,
    t: &'s str,
    /// The launcher the launch is in (none for a launch outside any function).
    host: Option<HostFn>,
}

impl<'s> Resolver<'s> {
    fn new(src: &'s Source, l: &Launch) -> Resolver<'s> {
        let host =
            src.host_functions().into_iter().find(|h| h.range.start <= l.stmt.start && l.stmt.end <= h.range.end);
        Resolver { src, t: src.text(), host }
    }

    fn config(&self, l: &Launch, i: usize) -> Option<Dims> {
        let r = l.config_ranges.get(i)?;
        match self.src.node_at(r) {
            Some(n) => Some(self.dims(n, 0)),
            None => Some(Dims::Unknown {
                expr: l.config.get(i).cloned().unwrap_or_default(),
                why: "could not be found in the syntax tree".into(),
            }),
        }
    }

    fn component(&self, n: Node, depth: usize) -> Component {
        Component { text: text(self.t, n).to_string(), at: Some(n.byte_range()), size: self.size(n, depth) }
    }

    fn dims(&self, n: Node, depth: usize) -> Dims {
        let n = syntax::strip_parens(n);
        let expr = text(self.t, n).to_string();
        let unknown = |why: &str| Dims::Unknown { expr: expr.clone(), why: why.to_string() };
        if depth > MAX_DEPTH {
            return unknown("nested too deeply to follow");
        }
        match n.kind() {
            "call_expression" if self.callee(n) == Some("dim3") => {
                Dims::Dim3(Dim3 { whole: None, written: self.arguments(n.child_by_field_name("arguments"), depth) })
            }
            "initializer_list" => Dims::Dim3(Dim3 { whole: None, written: self.arguments(Some(n), depth) }),
            "identifier" => match self.named(&expr, n.start_byte()) {
                Named::Macro(def, _) => {
                    let value = def.child_by_field_name("value").map(|v| text(self.t, v).trim()).unwrap_or("");
                    if value.starts_with("dim3") || value.starts_with('{') {
                        unknown(&format!("a macro for `{value}`, whose components this recipe does not read"))
                    } else {
                        Dims::Scalar(self.component(n, depth))
                    }
                }
                Named::Declared(decl, declarator, scope) if is_dim3(self.t, decl) => {
                    self.dim3_variable(&expr, decl, declarator, scope, depth)
                }
                // `auto` takes the type of its initializer.
                Named::Declared(decl, declarator, scope) if is_auto(decl) => match initializer(declarator) {
                    Init::Expr(v) => match self.dims(v, depth + 1) {
                        Dims::Dim3(_) => self.dim3_variable(&expr, decl, declarator, scope, depth),
                        Dims::Scalar(_) => Dims::Scalar(self.component(n, depth)),
                        Dims::Unknown { expr: init, why } => unknown(&format!("declared `auto` from `{init}`, {why}")),
                    },
                    _ => unknown("declared `auto` without an initializer this recipe reads"),
                },
                Named::Parameter(ty) if is_dim3_type(&ty) => {
                    let function = self.host.as_ref().map(|h| h.name.clone()).unwrap_or_default();
                    Dims::Dim3(Dim3 {
                        whole: Some(expr.clone()),
                        written: AXES
                            .iter()
                            .map(|a| Component {
                                text: format!("{expr}.{a}"),
                                at: None,
                                size: run_time(
                                    &format!("{expr}.{a}"),
                                    Origin::Parameter { function: function.clone() },
                                ),
                            })
                            .collect(),
                    })
                }
                Named::Undeclared => unknown("declared nowhere in this file"),
                _ => Dims::Scalar(self.component(n, depth)),
            },
            "field_expression" => {
                let field = n.child_by_field_name("field").map(|f| text(self.t, f)).unwrap_or("");
                if matches!(field, "x" | "y" | "z") {
                    Dims::Scalar(self.component(n, depth))
                } else {
                    unknown("a member whose type this recipe does not follow")
                }
            }
            "call_expression" => match self.callee(n) {
                Some("min" | "max" | "std::min" | "std::max" | "umin" | "umax") => {
                    Dims::Scalar(self.component(n, depth))
                }
                Some(f) => match self.src.host_functions().into_iter().find(|h| h.name == f) {
                    Some(h) if is_dim3_type(&h.returns) => Dims::Dim3(Dim3 {
                        whole: Some(expr.clone()),
                        written: AXES
                            .iter()
                            .map(|a| Component {
                                text: format!("({expr}).{a}"),
                                at: None,
                                size: run_time(&expr, Origin::Computed { declaration: expr.clone() }),
                            })
                            .collect(),
                    }),
                    Some(_) => Dims::Scalar(self.component(n, depth)),
                    None => unknown(&format!("a call to `{f}`, which this file does not define")),
                },
                None => unknown("a call this recipe does not follow"),
            },
            "conditional_expression" => {
                let scalar = |f: &str| {
                    n.child_by_field_name(f).is_some_and(|b| matches!(self.dims(b, depth + 1), Dims::Scalar(_)))
                };
                if scalar("consequence") && scalar("alternative") {
                    Dims::Scalar(self.component(n, depth))
                } else {
                    unknown("a choice whose branches this recipe cannot both read as numbers")
                }
            }
            "cast_expression" => {
                let ty = n.child_by_field_name("type").map(|t| text(self.t, t)).unwrap_or("");
                match n.child_by_field_name("value") {
                    Some(v) if is_dim3_type(ty) => self.dims(v, depth + 1),
                    _ => Dims::Scalar(self.component(n, depth)),
                }
            }
            _ => Dims::Scalar(self.component(n, depth)),
        }
    }

    /// `dim3 NAME(...)`, `= dim3(...)`, `{...}`, `= other`, or no initializer (1, 1, 1).
    fn dim3_variable(&self, name: &str, decl: Node, declarator: Node, scope: Scope, depth: usize) -> Dims {
        let written = match initializer(declarator) {
            Init::None => Vec::new(),
            Init::List(items) => items.into_iter().map(|c| self.component(c, depth + 1)).collect(),
            Init::Expr(v) => match self.dims(v, depth + 1) {
                Dims::Dim3(d) => d.written,
                Dims::Scalar(c) => vec![c],
                // Declared a dim3, so its components can be named even where the value
                // (a helper's result) cannot be read.
                Dims::Unknown { .. } => {
                    let declaration = syntax::one_line(text(self.t, decl), 80);
                    AXES.iter()
                        .map(|a| Component {
                            text: format!("{name}.{a}"),
                            at: None,
                            size: run_time(name, Origin::Computed { declaration: declaration.clone() }),
                        })
                        .collect()
                }
            },
        };
        let assigned = self.assignment_after(name, decl, scope, true).filter(|_| !is_const(self.t, decl));
        let written = match assigned {
            Some(assignment) => AXES
                .iter()
                .map(|a| Component {
                    text: format!("{name}.{a}"),
                    at: None,
                    size: run_time(name, Origin::Assigned { assignment: assignment.clone() }),
                })
                .collect(),
            None => written,
        };
        Dims::Dim3(Dim3 { whole: Some(name.to_string()), written })
    }

    fn arguments(&self, list: Option<Node>, depth: usize) -> Vec<Component> {
        list.map(named_children)
            .unwrap_or_default()
            .into_iter()
            .filter(|c| c.kind() != "comment")
            .map(|c| self.component(c, depth + 1))
            .collect()
    }

    fn callee(&self, call: Node) -> Option<&'s str> {
        call.child_by_field_name("function").map(|f| text(self.t, f).trim())
    }

    fn size(&self, n: Node, depth: usize) -> Size {
        let n = syntax::strip(n);
        let expr = text(self.t, n).to_string();
        if depth > MAX_DEPTH {
            return run_time(&expr, Origin::Unevaluated);
        }
        match n.kind() {
            "number_literal" => match int_literal(&expr) {
                Some(value) => Size::Literal { value, at: n.byte_range() },
                None => run_time(&expr, Origin::Unevaluated),
            },
            // A type name is a constructor argument the grammar took for a parameter.
            "identifier" | "type_identifier" => self.name_size(&expr, n.start_byte(), depth),
            "binary_expression" => {
                let Some((op, l, r)) = syntax::binary(self.t, n) else { return run_time(&expr, Origin::Unevaluated) };
                if !matches!(op, "+" | "-" | "*" | "/" | "%" | "<<" | ">>") {
                    return run_time(&expr, Origin::Unevaluated);
                }
                let (ls, rs) = (self.size(l, depth + 1), self.size(r, depth + 1));
                if let Some(inner) = ls.run_time().or(rs.run_time()) {
                    return run_time(&expr, Origin::Uses(Box::new(inner.clone())));
                }
                let mut names = Vec::new();
                for (operand, size) in [(syntax::strip(l), &ls), (syntax::strip(r), &rs)] {
                    match size {
                        Size::Arithmetic(a) => names.extend(a.names.iter().cloned()),
                        Size::Macro(_) | Size::Constant(_) => names.push((operand.byte_range(), size.clone())),
                        _ => {}
                    }
                }
                let value = ls.value().zip(rs.value()).and_then(|(a, b)| apply(op, a, b));
                Size::Arithmetic(Box::new(Arithmetic { at: n.byte_range(), text: expr, names, value }))
            }
            _ => run_time(&expr, Origin::Unevaluated),
        }
    }

    fn name_size(&self, name: &str, at: usize, depth: usize) -> Size {
        match self.named(name, at) {
            Named::Macro(def, definitions) => {
                // A comment after the value (`#define BT 16  // tokens per block`) is no
                // part of it.
                let value_text = def
                    .child_by_field_name("value")
                    .map(|v| syntax::blank_comments(text(self.t, v)).trim().to_string())
                    .unwrap_or_default();
                let value_text = value_text.as_str();
                match self.macro_value(value_text, depth + 1) {
                    Some(value) => Size::Macro(Macro {
                        name: name.to_string(),
                        value,
                        text: value_text.to_string(),
                        definition: def.byte_range(),
                        guarded: guarded(self.t, def, name),
                        definitions,
                    }),
                    None => run_time(name, Origin::NotANumber { value: value_text.to_string() }),
                }
            }
            Named::Declared(decl, declarator, scope) => self.declared_size(name, decl, declarator, scope, depth),
            Named::Parameter(_) => run_time(
                name,
                Origin::Parameter { function: self.host.as_ref().map(|h| h.name.clone()).unwrap_or_default() },
            ),
            Named::Undeclared => run_time(name, Origin::Undeclared),
        }
    }

    fn declared_size(&self, name: &str, decl: Node, declarator: Node, scope: Scope, depth: usize) -> Size {
        let declaration = syntax::one_line(text(self.t, decl), 80);
        let is_const = is_const(self.t, decl);
        if let Some(assignment) = self.assignment_after(name, decl, scope, false).filter(|_| !is_const) {
            return run_time(name, Origin::Assigned { assignment });
        }
        let value = match initializer(declarator) {
            Init::Expr(v) => Some(v),
            Init::List(items) if items.len() == 1 => Some(items[0]),
            _ => None,
        };
        let Some(value) = value else { return run_time(name, Origin::Computed { declaration }) };
        let initializer = self.size(value, depth + 1);
        match (&initializer, is_const) {
            (Size::RunTime(_), _) => run_time(name, Origin::Computed { declaration }),
            (_, false) => run_time(name, Origin::NotConst { declaration }),
            (_, true) => Size::Constant(Box::new(Constant {
                name: name.to_string(),
                scope,
                declaration: decl.byte_range(),
                initializer,
            })),
        }
    }

    /// The first assignment to `name` after its declaration, in the launcher for a local
    /// and anywhere in the file for a file-scope name; with `fields`, assignments to its
    /// members (`block.x = 32`) count too. (A `const` is never asked: whatever assigns
    /// its name assigns another variable that shadows it.)
    fn assignment_after(&self, name: &str, decl: Node, scope: Scope, fields: bool) -> Option<String> {
        let within = match (scope, &self.host) {
            (Scope::Launcher, Some(h)) => self.src.node_at(&h.body)?,
            _ => self.src.root(),
        };
        descendants(within).into_iter().filter(|d| d.start_byte() >= decl.end_byte()).find_map(|d| {
            let target = match d.kind() {
                "assignment_expression" => d.child_by_field_name("left"),
                "update_expression" => d.child_by_field_name("argument"),
                _ => None,
            }?;
            let mut target = syntax::strip_parens(target);
            if fields && target.kind() == "field_expression" {
                target = target.child_by_field_name("argument")?;
            }
            (target.kind() == "identifier" && text(self.t, target) == name)
                .then(|| syntax::one_line(text(self.t, d), 80))
        })
    }

    /// What `name` stands for at byte `at`.
    fn named(&self, name: &str, at: usize) -> Named<'s> {
        let root = self.src.root();
        let defs: Vec<Node> = descendants(root)
            .into_iter()
            .filter(|n| {
                n.kind() == "preproc_def" && n.child_by_field_name("name").is_some_and(|x| text(self.t, x) == name)
            })
            .collect();
        if let Some(first) = defs.first() {
            return Named::Macro(*first, defs.len());
        }
        if let Some(h) = &self.host {
            if h.body.start <= at && at < h.body.end {
                if let Some(body) = self.src.node_at(&h.body) {
                    if let Some((d, x)) = self.declaration_before(body, name, at) {
                        return Named::Declared(d, x, Scope::Launcher);
                    }
                }
            }
            if h.range.start <= at && at < h.range.end {
                if let Some(i) = h.params.iter().position(|p| p == name) {
                    return Named::Parameter(h.param_types.get(i).cloned().unwrap_or_default());
                }
            }
        }
        match self.declaration_before(root, name, at) {
            Some((d, x)) => Named::Declared(d, x, Scope::File),
            None => Named::Undeclared,
        }
    }

    /// The last declaration of `name` under `within` that ends before `at` and whose
    /// scope holds `at` (at file scope: outside every function), with its declarator.
    fn declaration_before(&self, within: Node<'s>, name: &str, at: usize) -> Option<(Node<'s>, Node<'s>)> {
        let file_scope = within.kind() == "translation_unit";
        let mut found = None;
        for d in descendants(within) {
            if d.kind() != "declaration" || d.end_byte() > at {
                continue;
            }
            let in_scope = if file_scope {
                !has_ancestor(d, &["compound_statement", "field_declaration_list", "parameter_list"])
            } else {
                d.parent().is_some_and(|p| p.start_byte() <= at && at < p.end_byte())
            };
            if !in_scope {
                continue;
            }
            let mut c = d.walk();
            let declarators: Vec<Node> = d.children_by_field_name("declarator", &mut c).collect();
            for x in declarators {
                let id = match x.kind() {
                    "init_declarator" => x.child_by_field_name("declarator"),
                    "function_declarator" if matches!(initializer(x), Init::List(_)) => {
                        x.child_by_field_name("declarator")
                    }
                    _ => Some(x),
                };
                if id.is_some_and(|i| i.kind() == "identifier" && text(self.t, i) == name) {
                    found = Some((d, x));
                }
            }
        }
        found
    }

    /// The integer value of a macro's text (other macros in it followed).
    fn macro_value(&self, value: &str, depth: usize) -> Option<i64> {
        if depth > MAX_DEPTH {
            return None;
        }
        let tokens = tokens(value)?;
        let mut p = MacroExpr { tokens: &tokens, at: 0, resolve: &|name: &str| self.macro_by_name(name, depth + 1) };
        let v = p.shift()?;
        (p.at == tokens.len()).then_some(v)
    }

    fn macro_by_name(&self, name: &str, depth: usize) -> Option<i64> {
        let def = descendants(self.src.root()).into_iter().find(|n| {
            n.kind() == "preproc_def" && n.child_by_field_name("name").is_some_and(|x| text(self.t, x) == name)
        })?;
        self.macro_value(def.child_by_field_name("value").map(|v| text(self.t, v)).unwrap_or(""), depth)
    }
}

/// What a declarator initializes its variable with.
enum Init<'s> {
    None,
    /// `(a, b)` or `{a, b}`.
    List(Vec<Node<'s>>),
    /// `= e`.
    Expr(Node<'s>),
}

fn items(n: Node) -> Vec<Node> {
    named_children(n).into_iter().filter(|c| c.kind() != "comment").collect()
}

fn initializer(declarator: Node) -> Init {
    match declarator.kind() {
        "init_declarator" => match declarator.child_by_field_name("value") {
            Some(v) if matches!(v.kind(), "argument_list" | "initializer_list") => Init::List(items(v)),
            Some(v) => Init::Expr(v),
            None => Init::None,
        },
        // `dim3 block(BX, BY)` parses as a function declaration whose parameters are bare
        // type names; C++ reads it as a variable, and so does this.
        "function_declarator" => {
            let Some(params) = declarator.child_by_field_name("parameters") else { return Init::None };
            let mut types = Vec::new();
            for p in items(params) {
                match (p.kind(), p.child_by_field_name("type"), p.child_by_field_name("declarator")) {
                    ("parameter_declaration", Some(t), None)
                        if t.kind() == "type_identifier" && p.named_child_count() == 1 =>
                    {
                        types.push(t)
                    }
                    _ => return Init::None,
                }
            }
            if types.is_empty() {
                Init::None
            } else {
                Init::List(types)
            }
        }
        _ => Init::None,
    }
}

fn run_time(expr: &str, origin: Origin) -> Size {
    Size::RunTime(Box::new(RunTime { expr: expr.to_string(), origin }))
}

fn apply(op: &str, a: i64, b: i64) -> Option<i64> {
    match op {
        "+" => a.checked_add(b),
        "-" => a.checked_sub(b),
        "*" => a.checked_mul(b),
        "/" => a.checked_div(b),
        "%" => a.checked_rem(b),
        "<<" => u32::try_from(b).ok().and_then(|s| a.checked_shl(s)),
        ">>" => u32::try_from(b).ok().and_then(|s| a.checked_shr(s)),
        _ => None,
    }
}

fn is_dim3_type(ty: &str) -> bool {
    let words: Vec<&str> = ty.split_whitespace().filter(|w| !matches!(*w, "const" | "static" | "constexpr")).collect();
    matches!(words.as_slice(), ["dim3" | "::dim3"])
}

fn is_const(t: &str, decl: Node) -> bool {
    named_children(decl)
        .into_iter()
        .any(|c| c.kind() == "type_qualifier" && matches!(text(t, c), "const" | "constexpr"))
}

fn is_auto(decl: Node) -> bool {
    decl.child_by_field_name("type").is_some_and(|ty| ty.kind() == "placeholder_type_specifier")
}

fn is_dim3(t: &str, decl: Node) -> bool {
    decl.child_by_field_name("type").is_some_and(|ty| is_dim3_type(text(t, ty)))
}

fn has_ancestor(n: Node, kinds: &[&str]) -> bool {
    let mut p = n.parent();
    while let Some(x) = p {
        if kinds.contains(&x.kind()) {
            return true;
        }
        p = x.parent();
    }
    false
}

/// Whether a `#define NAME` sits right inside `#ifndef NAME` or `#if !defined(NAME)`.
fn guarded(t: &str, def: Node, name: &str) -> bool {
    let Some(p) = def.parent() else { return false };
    match p.kind() {
        "preproc_ifdef" => {
            p.child(0).is_some_and(|d| text(t, d) == "#ifndef")
                && p.child_by_field_name("name").is_some_and(|n| text(t, n) == name)
        }
        "preproc_if" => p.child_by_field_name("condition").is_some_and(|c| {
            let c: String = text(t, c).chars().filter(|c| !c.is_whitespace()).collect();
            c == format!("!defined({name})") || c == format!("!defined{name}")
        }),
        _ => false,
    }
}

/// A macro value's tokens: integers (suffixes dropped), names, operators. None for
/// anything else (a string, a cast, a call), which is then no integer constant.
fn tokens(s: &str) -> Option<Vec<String>> {
    let mut out = Vec::new();
    let chars: Vec<char> = s.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c.is_whitespace() {
            i += 1;
        } else if is_word(c) {
            let start = i;
            while i < chars.len() && is_word(chars[i]) {
                i += 1;
            }
            out.push(chars[start..i].iter().collect());
        } else if (c == '<' || c == '>') && chars.get(i + 1) == Some(&c) {
            out.push(format!("{c}{c}"));
            i += 2;
        } else if "+-*/%()".contains(c) {
            out.push(c.to_string());
            i += 1;
        } else {
            return None;
        }
    }
    Some(out)
}

/// Integer arithmetic over a macro's tokens, with C's precedence for the operators it reads.
struct MacroExpr<'a> {
    tokens: &'a [String],
    at: usize,
    resolve: &'a dyn Fn(&str) -> Option<i64>,
}

impl MacroExpr<'_> {
    fn peek(&self) -> Option<&str> {
        self.tokens.get(self.at).map(String::as_str)
    }

    fn binary(&mut self, ops: &[&str], next: fn(&mut Self) -> Option<i64>) -> Option<i64> {
        let mut v = next(self)?;
        while let Some(op) = self.peek().filter(|t| ops.contains(t)).map(str::to_string) {
            self.at += 1;
            v = apply(&op, v, next(self)?)?;
        }
        Some(v)
    }

    fn shift(&mut self) -> Option<i64> {
        self.binary(&["<<", ">>"], Self::sum)
    }

    fn sum(&mut self) -> Option<i64> {
        self.binary(&["+", "-"], Self::product)
    }

    fn product(&mut self) -> Option<i64> {
        self.binary(&["*", "/", "%"], Self::unary)
    }

    fn unary(&mut self) -> Option<i64> {
        let t = self.peek()?.to_string();
        self.at += 1;
        match t.as_str() {
            "-" => self.unary()?.checked_neg(),
            "+" => self.unary(),
            "(" => {
                let v = self.shift()?;
                (self.peek() == Some(")")).then(|| self.at += 1)?;
                Some(v)
            }
            _ if t.starts_with(|c: char| c.is_ascii_digit()) => int_literal(&t),
            _ => (self.resolve)(&t),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The block and grid of the file's first launch.
    fn shape(src: &str) -> (Dims, Dims) {
        let s = Source::parse(src);
        let l = s.launches().remove(0);
        (block(&s, &l).unwrap(), grid(&s, &l).unwrap())
    }

    fn launcher(body: &str) -> String {
        format!(
            "__global__ void k(float* y) {{ y[0] = 0; }}\nvoid launch(float* y, int n, int b, dim3 g) {{\n{body}\n}}\n"
        )
    }

    fn scalar(d: &Dims) -> &Size {
        match d {
            Dims::Scalar(c) => &c.size,
            other => panic!("not a number: {other:?}"),
        }
    }

    #[test]
    fn literals_macros_and_constants_are_compile_time() {
        let (b, _) = shape(&launcher("k<<<n, 256>>>(y);"));
        assert!(matches!(scalar(&b), Size::Literal { value: 256, .. }));

        let (b, _) = shape(&format!("#define WARP 32\n#define BLOCK (4 * WARP)\n{}", launcher("k<<<n, BLOCK>>>(y);")));
        let Size::Macro(m) = scalar(&b) else { panic!("{b:?}") };
        assert_eq!((m.name.as_str(), m.value, m.guarded, m.definitions), ("BLOCK", 128, false, 1));

        let (b, _) = shape(&format!("#ifndef BLOCK\n#define BLOCK 256\n#endif\n{}", launcher("k<<<n, BLOCK>>>(y);")));
        let Size::Macro(m) = scalar(&b) else { panic!("{b:?}") };
        assert!(m.guarded);

        for decl in ["const int threads = 256;", "constexpr int threads = 256;", "static const int threads(256);"] {
            let (b, _) = shape(&launcher(&format!("{decl}\nk<<<(n + threads - 1) / threads, threads>>>(y);")));
            let Size::Constant(c) = scalar(&b) else { panic!("{decl}: {b:?}") };
            assert_eq!((c.name.as_str(), c.scope, c.initializer.value()), ("threads", Scope::Launcher, Some(256)));
        }
        let (b, _) = shape(&format!("constexpr int kBlock = 2 * 64;\n{}", launcher("k<<<n, kBlock>>>(y);")));
        let Size::Constant(c) = scalar(&b) else { panic!("{b:?}") };
        assert_eq!((c.scope, c.initializer.value()), (Scope::File, Some(128)));
    }

    #[test]
    fn run_time_sizes_say_where_they_come_from() {
        let why = |body: &str| {
            let (b, _) = shape(&launcher(body));
            scalar(&b).run_time().map(|r| r.why()).unwrap_or_default()
        };
        assert_eq!(why("k<<<n, b>>>(y);"), "`b` is a parameter of `launch`");
        assert_eq!(
            why("int threads = 256;\nk<<<n, threads>>>(y);"),
            "`threads` is a variable, not a constant (`int threads = 256;` has no `const`)"
        );
        assert_eq!(
            why("const int threads = n > 4096 ? 256 : 64;\nk<<<n, threads>>>(y);"),
            "`threads` is computed when the launcher runs (`const int threads = n > 4096 ? 256 : 64;`)"
        );
        assert_eq!(
            why("int threads = 256;\nif (n < 64) threads = 64;\nk<<<n, threads>>>(y);"),
            "`threads` is assigned after its declaration (`threads = 64`)"
        );
        assert_eq!(why("k<<<n, b / 2>>>(y);"), "`b / 2` depends on `b`, a parameter of `launch`");
        assert_eq!(
            why("k<<<n, kThreads * 2>>>(y);"),
            "`kThreads * 2` depends on `kThreads`, declared nowhere in this file"
        );
        // A declaration below the launch, or in a block already closed, is not the one used.
        assert_eq!(
            why("{ const int t = 64; }\nk<<<n, t + 0>>>(y);\nconst int t = 32;"),
            "`t + 0` depends on `t`, declared nowhere in this file"
        );
        assert_eq!(
            why("const int t(b);\nk<<<n, t>>>(y);"),
            "`t` is computed when the launcher runs (`const int t(b);`)"
        );
    }

    #[test]
    fn the_macros_a_block_is_made_of_however_deep() {
        let (b, _) = shape(&format!(
            "#define WARP 32\n#define ROWS 4\n{}",
            launcher("const int threads = WARP * ROWS;\nk<<<n, threads>>>(y);")
        ));
        let mut names = b.macros();
        names.sort();
        assert_eq!(names, ["ROWS", "WARP"]);
        let (b, _) = shape(&format!("#define BY 8\n{}", launcher("dim3 block(32, BY);\nk<<<n, block>>>(y);")));
        assert_eq!(b.macros(), ["BY"]);
        let (b, _) = shape(&launcher("const int threads = 256;\nk<<<n, threads>>>(y);"));
        assert!(b.macros().is_empty());
    }

    #[test]
    fn dim3_blocks_resolve_component_by_component() {
        let (b, g) = shape(&format!(
            "#define BY 8\n{}",
            launcher("const int bx = 32;\ndim3 block(bx, BY);\ndim3 grid((n + 31) / 32, 4);\nk<<<grid, block>>>(y);")
        ));
        let Dims::Dim3(d) = &b else { panic!("{b:?}") };
        assert_eq!(d.whole.as_deref(), Some("block"));
        assert!(matches!(d.written[0].size, Size::Constant(_)) && matches!(d.written[1].size, Size::Macro(_)));
        assert_eq!((b.extent(1).as_deref(), b.is_one(2)), (Some("block.y"), true));
        assert_eq!(g.extent(0).as_deref(), Some("grid.x"));
        assert!(!g.is_one(1));

        let (b, g) = shape(&launcher("k<<<dim3(n, 2), dim3(16, 16, 1), 0>>>(y);"));
        assert_eq!((g.extent(1).as_deref(), b.extent(1).as_deref()), (Some("2"), Some("16")));
        assert_eq!(b.varying().len(), 2);

        // A dim3 assigned piecewise is run-time, whatever it started as.
        let (b, _) = shape(&launcher("dim3 block(256);\nblock.x = n;\nk<<<n, block>>>(y);"));
        let why = b.component(0).and_then(|c| c.size.run_time()).map(|r| r.why());
        assert_eq!(why.as_deref(), Some("`block` is assigned after its declaration (`block.x = n`)"));

        // The launcher's dim3 parameter is a dim3 of run-time sizes.
        let (_, g) = shape(&launcher("k<<<g, 128>>>(y);"));
        assert_eq!(g.extent(1).as_deref(), Some("g.y"));
        assert!(!g.is_one(1));
    }

    #[test]
    fn names_without_a_visible_type_are_unknown_not_guessed() {
        let (b, _) = shape(&launcher("k<<<n, kBlock>>>(y);"));
        assert_eq!(b, Dims::Unknown { expr: "kBlock".into(), why: "declared nowhere in this file".into() });
        let (b, _) = shape(&launcher("k<<<n, make_block(n)>>>(y);"));
        assert!(matches!(b, Dims::Unknown { .. }));
        let (b, _) = shape(&launcher("k<<<n, min(n, 256)>>>(y);"));
        assert!(matches!(b, Dims::Scalar(_)));
        // `auto` is what its initializer is; a helper this file does not define is not guessed.
        let (b, g) = shape(&launcher("auto block = dim3(32, 8);\nauto grid = grid_for(n);\nk<<<grid, block>>>(y);"));
        assert_eq!(b.extent(1).as_deref(), Some("block.y"));
        assert_eq!(
            g,
            Dims::Unknown {
                expr: "grid".into(),
                why: "declared `auto` from `grid_for(n)`, a call to `grid_for`, which this file does not define".into()
            }
        );
        // Declared a dim3, or returned as one by a helper of this file, it has components to name.
        let (_, g) = shape(&launcher("dim3 grid = grid_for(n);\nk<<<grid, 256>>>(y);"));
        assert_eq!((g.extent(1).as_deref(), g.is_one(1)), (Some("grid.y"), false));
        let (_, g) = shape(&format!(
            "static dim3 grid_for(int n) {{ return dim3(n, 2); }}\n{}",
            launcher("k<<<grid_for(n), 256>>>(y);")
        ));
        assert_eq!(g.extent(1).as_deref(), Some("(grid_for(n)).y"));
        let (_, g) = shape(&format!(
            "static int blocks_for(int n) {{ return n / 256; }}\n{}",
            launcher("k<<<blocks_for(n), 256>>>(y);")
        ));
        assert!(matches!(g, Dims::Scalar(_)));
    }

    #[test]
    fn file_scope_expressions_name_what_the_kernel_can_see() {
        let src = "#define WARP 32\nconstexpr int kWarps = 4;\n__global__ void k(float* y) { y[0] = 0; }\n#define LATE 64\nvoid launch(float* y, int n) {\n  const int threads = kWarps * WARP;\n  k<<<n, threads>>>(y);\n  k<<<n, LATE>>>(y);\n}\n";
        let s = Source::parse(src);
        let kernel_at = s.kernels()[0].range.start;
        let ls = s.launches();
        let b = block(&s, &ls[0]).unwrap();
        assert_eq!(scalar(&b).at_file_scope(s.text(), kernel_at), Ok("(kWarps * WARP)".to_string()));
        assert_eq!(scalar(&b).value(), Some(128));
        let late = block(&s, &ls[1]).unwrap();
        assert_eq!(
            scalar(&late).at_file_scope(s.text(), kernel_at),
            Err("the macro `LATE` is defined only below it".to_string())
        );
    }

    #[test]
    fn a_comment_after_a_macros_value_is_no_part_of_it() {
        let src = "#ifndef BT\n#define BT 16  // tokens per block: BT / 16 each\n#endif\n#define BK 32 /* deep */\n__global__ void k(float* y) { y[0] = 0; }\n";
        let s = Source::parse(src);
        let at = s.kernels()[0].range.start;
        assert_eq!(file_scope_size(&s, "BT", at).value(), Some(16));
        assert_eq!(file_scope_size(&s, "BK", at).value(), Some(32));
    }

    #[test]
    fn macros_that_loop_or_are_not_numbers_end() {
        let (b, _) = shape(&format!("#define A (B + 1)\n#define B (A + 1)\n{}", launcher("k<<<n, A>>>(y);")));
        let why = scalar(&b).run_time().map(|r| r.why());
        assert_eq!(why.as_deref(), Some("`A` is a macro whose value `(B + 1)` is not an integer constant"));
        let (b, _) = shape(&format!("#define T get_threads()\n{}", launcher("k<<<n, T>>>(y);")));
        assert!(scalar(&b).run_time().is_some());
        let (b, _) = shape(&launcher("const int a = a + 1;\nk<<<n, a>>>(y);"));
        assert!(scalar(&b).run_time().is_some());
        // Another function's local of the same name does not make a file constant run-time.
        let src = format!(
            "const int threads = 128;\nvoid other() {{ int threads; threads = 7; }}\n{}",
            launcher("k<<<n, threads>>>(y);")
        );
        let (b, _) = shape(&src);
        assert_eq!(scalar(&b).value(), Some(128));
    }

    #[test]
    fn the_axes_a_kernel_reads() {
        let s = Source::parse(
            "__device__ int row() { return blockIdx.y; }\n__global__ void k(float* y) { y[row() * gridDim.x + threadIdx.x] = 0; }\nvoid launch(float* y) { k<<<1, 1>>>(y); }\n",
        );
        let a = axes_read(&s, &s.kernels()[0]);
        assert_eq!(a.grid, [true, true, false]);
        assert_eq!(a.block, [true, false, false]);
    }
}
