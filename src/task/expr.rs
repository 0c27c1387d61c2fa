//! A small, safe integer expression language for `len`, `bytes`, `flops` and scalar
//! `value` fields: `rows * cols`, `8 * (n + 1)`, `cdiv(n, 4)`, `1 << 20`.
//!
//! Parsing and evaluation never panic: every overflow, division by zero, unknown
//! variable and syntax error comes back as an [`ExprError`] with the byte offset in the
//! expression text, so the task loader can point at the exact field.

use std::collections::BTreeMap;
use std::fmt;

/// A parsed expression, ready to be evaluated against many size bindings.
#[derive(Debug, Clone, PartialEq)]
pub struct Expr {
    source: String,
    root: Node,
}

#[derive(Debug, Clone, PartialEq)]
enum Node {
    Int(i64),
    Var { name: String, offset: usize },
    Neg(Box<Node>),
    Binary { op: BinOp, lhs: Box<Node>, rhs: Box<Node>, offset: usize },
    Call { func: Func, args: Vec<Node>, offset: usize },
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum BinOp {
    Add,
    Sub,
    Mul,
    Div,
    Rem,
    Shl,
    Shr,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Func {
    Min,
    Max,
    Cdiv,
}

impl Func {
    fn from_name(name: &str) -> Option<Func> {
        match name {
            "min" => Some(Func::Min),
            "max" => Some(Func::Max),
            "cdiv" => Some(Func::Cdiv),
            _ => None,
        }
    }
}

/// What went wrong, and where in the expression text (byte offset).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExprError {
    pub offset: usize,
    pub message: String,
}

impl fmt::Display for ExprError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} (at character {})", self.message, self.offset + 1)
    }
}

impl std::error::Error for ExprError {}

fn err<T>(offset: usize, message: impl Into<String>) -> Result<T, ExprError> {
    Err(ExprError { offset, message: message.into() })
}

/// Deep nesting is the only way a short string could exhaust the stack.
const MAX_DEPTH: usize = 64;

impl Expr {
    pub fn parse(source: &str) -> Result<Expr, ExprError> {
        let tokens = tokenize(source)?;
        let mut parser = Parser { tokens: &tokens, pos: 0, depth: 0, end: source.len() };
        let root = parser.expr()?;
        if let Some(tok) = parser.peek() {
            return err(tok.offset, format!("unexpected {}", tok.kind.describe()));
        }
        Ok(Expr { source: source.to_string(), root })
    }

    pub fn source(&self) -> &str {
        &self.source
    }

    /// Variable names the expression reads, sorted and deduplicated.
    pub fn variables(&self) -> Vec<String> {
        fn walk(node: &Node, out: &mut Vec<String>) {
            match node {
                Node::Int(_) => {}
                Node::Var { name, .. } => out.push(name.clone()),
                Node::Neg(inner) => walk(inner, out),
                Node::Binary { lhs, rhs, .. } => {
                    walk(lhs, out);
                    walk(rhs, out);
                }
                Node::Call { args, .. } => args.iter().for_each(|a| walk(a, out)),
            }
        }
        let mut out = Vec::new();
        walk(&self.root, &mut out);
        out.sort();
        out.dedup();
        out
    }

    pub fn eval(&self, vars: &BTreeMap<String, i64>) -> Result<i64, ExprError> {
        eval_node(&self.root, vars)
    }

    /// The expression as C in 64-bit integer arithmetic, each variable written as `var`
    /// gives it; None if a variable has no C spelling.
    pub fn to_c(&self, var: &dyn Fn(&str) -> Option<String>) -> Option<String> {
        to_c_node(&self.root, var)
    }
}

fn to_c_node(node: &Node, var: &dyn Fn(&str) -> Option<String>) -> Option<String> {
    Some(match node {
        Node::Int(v) => format!("{v}LL"),
        Node::Var { name, .. } => format!("(long long)({})", var(name)?),
        Node::Neg(inner) => format!("(-{})", to_c_node(inner, var)?),
        Node::Binary { op, lhs, rhs, .. } => {
            format!("({} {} {})", to_c_node(lhs, var)?, op.symbol(), to_c_node(rhs, var)?)
        }
        Node::Call { func, args, .. } => {
            let a: Vec<String> = args.iter().map(|x| to_c_node(x, var)).collect::<Option<_>>()?;
            match func {
                Func::Min => a.into_iter().reduce(|x, y| format!("({x} < {y} ? {x} : {y})"))?,
                Func::Max => a.into_iter().reduce(|x, y| format!("({x} > {y} ? {x} : {y})"))?,
                Func::Cdiv => format!("(({} + {} - 1LL) / {})", a[0], a[1], a[1]),
            }
        }
    })
}

impl fmt::Display for Expr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.source)
    }
}

fn eval_node(node: &Node, vars: &BTreeMap<String, i64>) -> Result<i64, ExprError> {
    match node {
        Node::Int(v) => Ok(*v),
        Node::Var { name, offset } => match vars.get(name) {
            Some(v) => Ok(*v),
            None => err(*offset, format!("unknown variable `{name}`")),
        },
        Node::Neg(inner) => {
            let v = eval_node(inner, vars)?;
            v.checked_neg().map_or_else(|| err(0, "integer overflow in negation"), Ok)
        }
        Node::Binary { op, lhs, rhs, offset } => {
            let a = eval_node(lhs, vars)?;
            let b = eval_node(rhs, vars)?;
            let overflow =
                || ExprError { offset: *offset, message: format!("integer overflow in {a} {} {b}", op.symbol()) };
            match op {
                BinOp::Add => a.checked_add(b).ok_or_else(overflow),
                BinOp::Sub => a.checked_sub(b).ok_or_else(overflow),
                BinOp::Mul => a.checked_mul(b).ok_or_else(overflow),
                BinOp::Div | BinOp::Rem if b == 0 => {
                    err(*offset, format!("division by zero in {a} {} {b}", op.symbol()))
                }
                BinOp::Div => a.checked_div(b).ok_or_else(overflow),
                BinOp::Rem => a.checked_rem(b).ok_or_else(overflow),
                BinOp::Shl | BinOp::Shr if !(0..63).contains(&b) => {
                    err(*offset, format!("shift amount {b} is outside 0..63"))
                }
                BinOp::Shl => {
                    let r = a.checked_shl(b as u32).ok_or_else(overflow)?;
                    if (r >> b) != a {
                        return Err(overflow());
                    }
                    Ok(r)
                }
                BinOp::Shr => Ok(a >> b),
            }
        }
        Node::Call { func, args, offset } => {
            let vals = args.iter().map(|a| eval_node(a, vars)).collect::<Result<Vec<_>, _>>()?;
            match func {
                Func::Min => Ok(*vals.iter().min().expect("arity checked at parse time")),
                Func::Max => Ok(*vals.iter().max().expect("arity checked at parse time")),
                Func::Cdiv => {
                    let (a, b) = (vals[0], vals[1]);
                    if b <= 0 {
                        return err(*offset, format!("cdiv({a}, {b}): divisor must be positive"));
                    }
                    let q = a.div_euclid(b);
                    Ok(if a.rem_euclid(b) != 0 { q + 1 } else { q })
                }
            }
        }
    }
}

impl BinOp {
    fn symbol(self) -> &'static str {
        match self {
            BinOp::Add => "+",
            BinOp::Sub => "-",
            BinOp::Mul => "*",
            BinOp::Div => "/",
            BinOp::Rem => "%",
            BinOp::Shl => "<<",
            BinOp::Shr => ">>",
        }
    }
}

#[derive(Debug, Clone, PartialEq)]
enum TokKind {
    Int(i64),
    Ident(String),
    Op(BinOp),
    LParen,
    RParen,
    Comma,
}

impl TokKind {
    fn describe(&self) -> String {
        match self {
            TokKind::Int(v) => format!("number {v}"),
            TokKind::Ident(s) => format!("name `{s}`"),
            TokKind::Op(op) => format!("operator `{}`", op.symbol()),
            TokKind::LParen => "`(`".into(),
            TokKind::RParen => "`)`".into(),
            TokKind::Comma => "`,`".into(),
        }
    }
}

#[derive(Debug, Clone)]
struct Token {
    kind: TokKind,
    offset: usize,
}

fn tokenize(src: &str) -> Result<Vec<Token>, ExprError> {
    let bytes = src.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let c = bytes[i];
        let start = i;
        match c {
            b' ' | b'\t' => i += 1,
            b'0'..=b'9' => {
                while i < bytes.len() && (bytes[i].is_ascii_digit() || bytes[i] == b'_') {
                    i += 1;
                }
                let digits: String = src[start..i].chars().filter(|c| *c != '_').collect();
                let v = digits.parse::<i64>().map_err(|_| ExprError {
                    offset: start,
                    message: format!("number `{}` is too large", &src[start..i]),
                })?;
                out.push(Token { kind: TokKind::Int(v), offset: start });
            }
            b'a'..=b'z' | b'A'..=b'Z' | b'_' => {
                while i < bytes.len() && (bytes[i].is_ascii_alphanumeric() || bytes[i] == b'_') {
                    i += 1;
                }
                out.push(Token { kind: TokKind::Ident(src[start..i].to_string()), offset: start });
            }
            b'<' | b'>' => {
                if bytes.get(i + 1) != Some(&c) {
                    return err(start, format!("expected `{0}{0}`", c as char));
                }
                i += 2;
                let op = if c == b'<' { BinOp::Shl } else { BinOp::Shr };
                out.push(Token { kind: TokKind::Op(op), offset: start });
            }
            _ => {
                let kind = match c {
                    b'+' => TokKind::Op(BinOp::Add),
                    b'-' => TokKind::Op(BinOp::Sub),
                    b'*' => TokKind::Op(BinOp::Mul),
                    b'/' => TokKind::Op(BinOp::Div),
                    b'%' => TokKind::Op(BinOp::Rem),
                    b'(' => TokKind::LParen,
                    b')' => TokKind::RParen,
                    b',' => TokKind::Comma,
                    _ => {
                        let ch = src[start..].chars().next().unwrap_or('?');
                        return err(start, format!("unexpected character `{ch}`"));
                    }
                };
                i += 1;
                out.push(Token { kind, offset: start });
            }
        }
    }
    Ok(out)
}

struct Parser<'a> {
    tokens: &'a [Token],
    pos: usize,
    depth: usize,
    end: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.pos)
    }

    fn next(&mut self) -> Option<Token> {
        let t = self.tokens.get(self.pos).cloned();
        self.pos += 1;
        t
    }

    fn eat_op(&mut self, ops: &[BinOp]) -> Option<(BinOp, usize)> {
        match self.peek() {
            Some(Token { kind: TokKind::Op(op), offset }) if ops.contains(op) => {
                let found = (*op, *offset);
                self.pos += 1;
                Some(found)
            }
            _ => None,
        }
    }

    fn expr(&mut self) -> Result<Node, ExprError> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return err(self.peek().map_or(self.end, |t| t.offset), "expression is nested too deeply");
        }
        let node = self.shift()?;
        self.depth -= 1;
        Ok(node)
    }

    fn binary_level(
        &mut self,
        ops: &[BinOp],
        next: fn(&mut Self) -> Result<Node, ExprError>,
    ) -> Result<Node, ExprError> {
        let mut lhs = next(self)?;
        while let Some((op, offset)) = self.eat_op(ops) {
            let rhs = next(self)?;
            lhs = Node::Binary { op, lhs: Box::new(lhs), rhs: Box::new(rhs), offset };
        }
        Ok(lhs)
    }

    fn shift(&mut self) -> Result<Node, ExprError> {
        self.binary_level(&[BinOp::Shl, BinOp::Shr], Self::additive)
    }

    fn additive(&mut self) -> Result<Node, ExprError> {
        self.binary_level(&[BinOp::Add, BinOp::Sub], Self::term)
    }

    fn term(&mut self) -> Result<Node, ExprError> {
        self.binary_level(&[BinOp::Mul, BinOp::Div, BinOp::Rem], Self::unary)
    }

    fn unary(&mut self) -> Result<Node, ExprError> {
        if self.eat_op(&[BinOp::Sub]).is_some() {
            self.depth += 1;
            if self.depth > MAX_DEPTH {
                return err(self.peek().map_or(self.end, |t| t.offset), "expression is nested too deeply");
            }
            let inner = self.unary()?;
            self.depth -= 1;
            return Ok(Node::Neg(Box::new(inner)));
        }
        self.primary()
    }

    fn primary(&mut self) -> Result<Node, ExprError> {
        let Some(tok) = self.next() else {
            return err(self.end, "expression ends early: expected a number, a name or `(`");
        };
        match tok.kind {
            TokKind::Int(v) => Ok(Node::Int(v)),
            TokKind::LParen => {
                let inner = self.expr()?;
                self.expect_rparen(tok.offset)?;
                Ok(inner)
            }
            TokKind::Ident(name) => {
                if !matches!(self.peek(), Some(Token { kind: TokKind::LParen, .. })) {
                    return Ok(Node::Var { name, offset: tok.offset });
                }
                let Some(func) = Func::from_name(&name) else {
                    return err(tok.offset, format!("unknown function `{name}` (known: min, max, cdiv)"));
                };
                self.pos += 1;
                let mut args = vec![self.expr()?];
                while matches!(self.peek(), Some(Token { kind: TokKind::Comma, .. })) {
                    self.pos += 1;
                    args.push(self.expr()?);
                }
                self.expect_rparen(tok.offset)?;
                let arity_ok = match func {
                    Func::Min | Func::Max => !args.is_empty(),
                    Func::Cdiv => args.len() == 2,
                };
                if !arity_ok {
                    return err(
                        tok.offset,
                        format!(
                            "`{name}` takes {}",
                            if func == Func::Cdiv { "2 arguments" } else { "1 or more arguments" }
                        ),
                    );
                }
                Ok(Node::Call { func, args, offset: tok.offset })
            }
            other => err(tok.offset, format!("unexpected {}: expected a number, a name or `(`", other.describe())),
        }
    }

    fn expect_rparen(&mut self, open: usize) -> Result<(), ExprError> {
        match self.next() {
            Some(Token { kind: TokKind::RParen, .. }) => Ok(()),
            Some(t) => err(
                t.offset,
                format!("expected `)` to close the `(` at character {}, found {}", open + 1, t.kind.describe()),
            ),
            None => err(self.end, format!("missing `)` for the `(` at character {}", open + 1)),
        }
    }
}

#[cfg(test)]
mod to_c_tests {
    use super::*;

    #[test]
    fn c_renders_every_form() {
        let e = Expr::parse("cdiv(rows, 4) * max(cols, 2) + -1").unwrap();
        let c = e.to_c(&|v| Some(format!("P_{v}"))).unwrap();
        let cdiv = "(((long long)(P_rows) + 4LL - 1LL) / 4LL)";
        let max = "((long long)(P_cols) > 2LL ? (long long)(P_cols) : 2LL)";
        assert_eq!(c, format!("(({cdiv} * {max}) + (-1LL))"));
        assert!(Expr::parse("n").unwrap().to_c(&|_| None).is_none());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn vars(pairs: &[(&str, i64)]) -> BTreeMap<String, i64> {
        pairs.iter().map(|(k, v)| (k.to_string(), *v)).collect()
    }

    fn eval(src: &str, pairs: &[(&str, i64)]) -> Result<i64, ExprError> {
        Expr::parse(src)?.eval(&vars(pairs))
    }

    #[test]
    fn precedence_and_associativity_follow_c() {
        assert_eq!(eval("2 + 3 * 4", &[]), Ok(14));
        assert_eq!(eval("(2 + 3) * 4", &[]), Ok(20));
        assert_eq!(eval("20 - 5 - 3", &[]), Ok(12));
        assert_eq!(eval("100 / 10 / 5", &[]), Ok(2));
        assert_eq!(eval("1 << 4 + 1", &[]), Ok(32));
        assert_eq!(eval("-3 * -2", &[]), Ok(6));
        assert_eq!(eval("17 % 5", &[]), Ok(2));
        assert_eq!(eval("1_000_000", &[]), Ok(1_000_000));
    }

    #[test]
    fn variables_and_functions() {
        let v = [("rows", 67), ("cols", 4099)];
        assert_eq!(eval("rows * cols", &v), Ok(67 * 4099));
        assert_eq!(eval("8 * rows * cols", &v), Ok(8 * 67 * 4099));
        assert_eq!(eval("cdiv(cols, 4)", &v), Ok(1025));
        assert_eq!(eval("cdiv(8, 4)", &v), Ok(2));
        assert_eq!(eval("min(rows, cols, 3)", &v), Ok(3));
        assert_eq!(eval("max(rows, cols)", &v), Ok(4099));
        assert_eq!(Expr::parse("a * b + a").unwrap().variables(), vec!["a".to_string(), "b".to_string()]);
    }

    #[test]
    fn errors_name_the_problem_and_its_position() {
        let e = eval("rows * colz", &[("rows", 1)]).unwrap_err();
        assert_eq!(e.offset, 7);
        assert!(e.message.contains("unknown variable `colz`"), "{e}");

        let e = Expr::parse("rows * ").unwrap_err();
        assert!(e.message.contains("ends early"), "{e}");

        let e = Expr::parse("(rows + 1").unwrap_err();
        assert!(e.message.contains("missing `)`"), "{e}");

        let e = Expr::parse("rows $ 2").unwrap_err();
        assert_eq!(e.offset, 5);

        let e = Expr::parse("sqrt(4)").unwrap_err();
        assert!(e.message.contains("unknown function `sqrt`"), "{e}");

        let e = Expr::parse("cdiv(4)").unwrap_err();
        assert!(e.message.contains("2 arguments"), "{e}");

        assert!(eval("1 / (n - n)", &[("n", 3)]).unwrap_err().message.contains("division by zero"));
        assert!(eval("9223372036854775807 + 1", &[]).unwrap_err().message.contains("overflow"));
        assert!(eval("1 << 63", &[]).unwrap_err().message.contains("outside"));
        assert!(eval("3 << 62", &[]).unwrap_err().message.contains("overflow"));
        assert!(Expr::parse("99999999999999999999").unwrap_err().message.contains("too large"));
    }

    #[test]
    fn deep_nesting_is_an_error_not_a_stack_overflow() {
        let src = format!("{}1{}", "(".repeat(10_000), ")".repeat(10_000));
        assert!(Expr::parse(&src).unwrap_err().message.contains("nested too deeply"));
        let src = format!("{}1", "-".repeat(10_000));
        assert!(Expr::parse(&src).unwrap_err().message.contains("nested too deeply"));
    }

    /// A reference evaluator over a generated AST, to compare with parse-then-eval.
    #[derive(Debug, Clone)]
    enum Gen {
        Lit(i64),
        Var(usize),
        Add(Box<Gen>, Box<Gen>),
        Sub(Box<Gen>, Box<Gen>),
        Mul(Box<Gen>, Box<Gen>),
        Div(Box<Gen>, Box<Gen>),
        Min(Box<Gen>, Box<Gen>),
    }

    const NAMES: [&str; 3] = ["rows", "cols", "k"];

    impl Gen {
        fn render(&self) -> String {
            match self {
                Gen::Lit(v) => v.to_string(),
                Gen::Var(i) => NAMES[*i].to_string(),
                Gen::Add(a, b) => format!("({} + {})", a.render(), b.render()),
                Gen::Sub(a, b) => format!("({} - {})", a.render(), b.render()),
                Gen::Mul(a, b) => format!("({} * {})", a.render(), b.render()),
                Gen::Div(a, b) => format!("({} / {})", a.render(), b.render()),
                Gen::Min(a, b) => format!("min({}, {})", a.render(), b.render()),
            }
        }
        fn eval(&self, v: &[i64; 3]) -> Option<i64> {
            Some(match self {
                Gen::Lit(x) => *x,
                Gen::Var(i) => v[*i],
                Gen::Add(a, b) => a.eval(v)?.checked_add(b.eval(v)?)?,
                Gen::Sub(a, b) => a.eval(v)?.checked_sub(b.eval(v)?)?,
                Gen::Mul(a, b) => a.eval(v)?.checked_mul(b.eval(v)?)?,
                Gen::Div(a, b) => a.eval(v)?.checked_div(b.eval(v)?)?,
                Gen::Min(a, b) => a.eval(v)?.min(b.eval(v)?),
            })
        }
    }

    fn gen_strategy() -> impl Strategy<Value = Gen> {
        let leaf = prop_oneof![(0i64..1000).prop_map(Gen::Lit), (0usize..3).prop_map(Gen::Var)];
        leaf.prop_recursive(5, 40, 2, |inner| {
            prop_oneof![
                (inner.clone(), inner.clone()).prop_map(|(a, b)| Gen::Add(Box::new(a), Box::new(b))),
                (inner.clone(), inner.clone()).prop_map(|(a, b)| Gen::Sub(Box::new(a), Box::new(b))),
                (inner.clone(), inner.clone()).prop_map(|(a, b)| Gen::Mul(Box::new(a), Box::new(b))),
                (inner.clone(), inner.clone()).prop_map(|(a, b)| Gen::Div(Box::new(a), Box::new(b))),
                (inner.clone(), inner).prop_map(|(a, b)| Gen::Min(Box::new(a), Box::new(b))),
            ]
        })
    }

    proptest! {
        #[test]
        fn parse_then_eval_matches_the_reference(g in gen_strategy(), v in prop::array::uniform3(0i64..100_000)) {
            let expr = Expr::parse(&g.render()).unwrap();
            let bound = vars(&[("rows", v[0]), ("cols", v[1]), ("k", v[2])]);
            prop_assert_eq!(expr.eval(&bound).ok(), g.eval(&v));
        }

        #[test]
        fn never_panics_on_arbitrary_text(s in "\\PC{0,64}") {
            if let Ok(e) = Expr::parse(&s) {
                let _ = e.eval(&vars(&[("n", 7)]));
            }
        }

        #[test]
        fn never_panics_on_operator_soup(s in "[0-9a-z()+*/%<>, -]{0,48}") {
            if let Ok(e) = Expr::parse(&s) {
                let _ = e.eval(&vars(&[("a", i64::MAX), ("b", -1), ("c", 0)]));
            }
        }
    }
}
