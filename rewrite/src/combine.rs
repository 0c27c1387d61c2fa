//! How a reduction combines two values, as the recipes that turn reductions into warp
//! shuffles (`cooperative`, `shuffle-reduce`) write it back out.

/// A sum, a product, or a binary max/min function (named as the source names it).
#[derive(Debug, Clone, PartialEq)]
pub enum Combine {
    Sum,
    Product,
    /// `fmaxf`, `min`, `__hmax`...: idempotent, so a value taken twice changes nothing.
    Call(String),
}

impl Combine {
    /// The statement `acc = acc (op) other`.
    pub fn apply(&self, acc: &str, other: &str) -> String {
        match self {
            Combine::Sum => format!("{acc} += {other};"),
            Combine::Product => format!("{acc} *= {other};"),
            Combine::Call(f) => format!("{acc} = {f}({acc}, {other});"),
        }
    }

    /// The value that leaves a sum or product unchanged (max and min need none).
    pub fn identity(&self) -> Option<&'static str> {
        match self {
            Combine::Sum => Some("0"),
            Combine::Product => Some("1"),
            Combine::Call(_) => None,
        }
    }
}

/// Whether a function is a two-argument max or min the shuffles can use.
pub fn is_min_max(f: &str) -> bool {
    matches!(f, "fmaxf" | "fminf" | "fmax" | "fmin" | "max" | "min" | "umax" | "umin" | "__hmax" | "__hmin")
        || f.ends_with("::max")
        || f.ends_with("::min")
}
