//! Integer polynomials over named sizes: `rows * cols`, `B * H * D + 1`. The extent
//! analysis ([`crate::extent`]) bounds indices with them, because a sum of products
//! simplifies on its own: `(rows - 1) * cols + (cols - 1) + 1` is `rows * cols`.
//!
//! Every variable stands for a size of a launch that does some work, so it is at least 1;
//! that is what lets [`Poly::at_least`] compare two polynomials without knowing their
//! values (an empty dimension touches nothing, so no length matters there).

use std::collections::{BTreeMap, BTreeSet};

/// Terms past which a polynomial is given up on (an index never needs so many).
const MAX_TERMS: usize = 32;
/// Variables per term past which a polynomial is given up on.
const MAX_DEGREE: usize = 8;

/// A sum of integer multiples of products of variables; the empty product is the
/// constant term. Arithmetic returns None on overflow or past the size limits.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Poly {
    /// Sorted variable names (repeated for powers) -> nonzero coefficient.
    terms: BTreeMap<Vec<String>, i64>,
}

impl Poly {
    pub fn constant(c: i64) -> Poly {
        let mut terms = BTreeMap::new();
        if c != 0 {
            terms.insert(Vec::new(), c);
        }
        Poly { terms }
    }

    pub fn var(name: &str) -> Poly {
        Poly { terms: BTreeMap::from([(vec![name.to_string()], 1)]) }
    }

    /// The value, when the polynomial has no variables.
    pub fn as_constant(&self) -> Option<i64> {
        match self.terms.len() {
            0 => Some(0),
            1 => self.terms.get(&Vec::new()).copied(),
            _ => None,
        }
    }

    /// The polynomial with each variable replaced by its value in `values`; None when a
    /// variable has none, or on overflow.
    pub fn substitute(&self, values: &BTreeMap<String, Poly>) -> Option<Poly> {
        let mut sum = Poly::constant(0);
        for (m, c) in &self.terms {
            let mut term = Poly::constant(*c);
            for v in m {
                term = term.mul(values.get(v)?)?;
            }
            sum = sum.add(&term)?;
        }
        Some(sum)
    }

    /// Each term: its variables (sorted, repeated for powers) and its coefficient.
    pub fn terms(&self) -> impl Iterator<Item = (&[String], i64)> {
        self.terms.iter().map(|(m, c)| (m.as_slice(), *c))
    }

    pub fn variables(&self) -> BTreeSet<String> {
        self.terms.keys().flatten().cloned().collect()
    }

    fn checked(terms: BTreeMap<Vec<String>, i64>) -> Option<Poly> {
        let terms: BTreeMap<_, _> = terms.into_iter().filter(|(_, c)| *c != 0).collect();
        (terms.len() <= MAX_TERMS && terms.keys().all(|m| m.len() <= MAX_DEGREE)).then_some(Poly { terms })
    }

    pub fn add(&self, other: &Poly) -> Option<Poly> {
        let mut terms = self.terms.clone();
        for (m, c) in &other.terms {
            let e = terms.entry(m.clone()).or_insert(0);
            *e = e.checked_add(*c)?;
        }
        Poly::checked(terms)
    }

    pub fn sub(&self, other: &Poly) -> Option<Poly> {
        self.add(&other.scale(-1)?)
    }

    pub fn scale(&self, k: i64) -> Option<Poly> {
        let mut terms = BTreeMap::new();
        for (m, c) in &self.terms {
            terms.insert(m.clone(), c.checked_mul(k)?);
        }
        Poly::checked(terms)
    }

    pub fn mul(&self, other: &Poly) -> Option<Poly> {
        let mut terms: BTreeMap<Vec<String>, i64> = BTreeMap::new();
        for (ma, ca) in &self.terms {
            for (mb, cb) in &other.terms {
                let mut m: Vec<String> = ma.iter().chain(mb).cloned().collect();
                m.sort();
                let e = terms.entry(m).or_insert(0);
                *e = e.checked_add(ca.checked_mul(*cb)?)?;
            }
        }
        Poly::checked(terms)
    }

    /// Whether no coefficient is negative: then the value is >= 0 for any sizes.
    pub fn never_negative(&self) -> bool {
        self.terms.values().all(|c| *c >= 0)
    }

    /// Whether `self >= other` whenever every size is at least 1 (a launch with an
    /// empty dimension touches nothing): their difference, with each size written as
    /// `1 + w`, has no negative coefficient.
    pub fn at_least(&self, other: &Poly) -> bool {
        let Some(d) = self.sub(other) else { return false };
        let mut shifted = Poly::default();
        for (m, c) in &d.terms {
            let mut term = Poly::constant(*c);
            for v in m {
                let Some(t) = Poly::var(v).add(&Poly::constant(1)).and_then(|x| term.mul(&x)) else { return false };
                term = t;
            }
            let Some(sum) = shifted.add(&term) else { return false };
            shifted = sum;
        }
        shifted.never_negative()
    }

    /// `floor(self / divisor)` for a divisor that is never zero, where the division
    /// comes out in polynomials: each term a multiple of a one-term divisor, with a
    /// remainder of 0 or -1 (the largest index below a multiple, `n * d - 1`).
    pub fn div_floor(&self, divisor: &Poly) -> Option<Poly> {
        if divisor.terms.len() != 1 {
            return None;
        }
        let (dm, dc) = divisor.terms.iter().next()?;
        if *dc <= 0 {
            return None;
        }
        let mut quotient = BTreeMap::new();
        let mut remainder = Poly::default();
        for (m, c) in &self.terms {
            let mut rest = m.clone();
            let divides_vars = dm.iter().all(|v| match rest.iter().position(|x| x == v) {
                Some(i) => {
                    rest.remove(i);
                    true
                }
                None => false,
            });
            if divides_vars && c % dc == 0 {
                quotient.insert(rest, c / dc);
            } else {
                remainder = remainder.add(&Poly { terms: BTreeMap::from([(m.clone(), *c)]) })?;
            }
        }
        let q = Poly::checked(quotient)?;
        // floor((d * q + r) / d) = q + floor(r / d), for a constant remainder r.
        let r = remainder.as_constant()?;
        let floor_r = if dm.is_empty() {
            r.div_euclid(*dc)
        } else if r >= -*dc && r < *dc {
            // d = dc * (a product of sizes >= 1) >= dc: r / d lies in [-1, 1).
            if r < 0 {
                -1
            } else {
                0
            }
        } else {
            return None;
        };
        q.add(&Poly::constant(floor_r))
    }

    /// The value for the given sizes (None on overflow or a missing variable).
    pub fn eval(&self, vars: &BTreeMap<String, i64>) -> Option<i64> {
        let mut sum = 0i64;
        for (m, c) in &self.terms {
            let mut term = *c;
            for v in m {
                term = term.checked_mul(*vars.get(v)?)?;
            }
            sum = sum.checked_add(term)?;
        }
        Some(sum)
    }

    /// As task.toml writes an expression: highest degree first, variables in the order
    /// given (the launcher's parameter order), then the rest alphabetically.
    pub fn render(&self, order: &[String]) -> String {
        if self.terms.is_empty() {
            return "0".into();
        }
        let rank = |v: &String| order.iter().position(|o| o == v).unwrap_or(order.len());
        let mut terms: Vec<(Vec<String>, i64)> = self
            .terms
            .iter()
            .map(|(m, c)| {
                let mut m = m.clone();
                m.sort_by(|a, b| rank(a).cmp(&rank(b)).then(a.cmp(b)));
                (m, *c)
            })
            .collect();
        terms.sort_by(|(a, _), (b, _)| {
            b.len().cmp(&a.len()).then_with(|| {
                let ra: Vec<usize> = a.iter().map(rank).collect();
                let rb: Vec<usize> = b.iter().map(rank).collect();
                ra.cmp(&rb).then(a.cmp(b))
            })
        });
        let mut out = String::new();
        for (i, (m, c)) in terms.iter().enumerate() {
            let magnitude = c.unsigned_abs();
            let mut factors: Vec<String> = Vec::new();
            if magnitude != 1 || m.is_empty() {
                factors.push(magnitude.to_string());
            }
            factors.extend(m.iter().cloned());
            let body = factors.join(" * ");
            match (i, *c < 0) {
                (0, false) => out.push_str(&body),
                (0, true) => out.push_str(&format!("-{body}")),
                (_, false) => out.push_str(&format!(" + {body}")),
                (_, true) => out.push_str(&format!(" - {body}")),
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn v(n: &str) -> Poly {
        Poly::var(n)
    }

    #[test]
    fn a_row_major_index_simplifies_to_the_product() {
        let rows_1 = v("rows").sub(&Poly::constant(1)).unwrap();
        let cols_1 = v("cols").sub(&Poly::constant(1)).unwrap();
        let hi = rows_1.mul(&v("cols")).unwrap().add(&cols_1).unwrap();
        let len = hi.add(&Poly::constant(1)).unwrap();
        assert_eq!(len, v("rows").mul(&v("cols")).unwrap());
        assert_eq!(len.render(&["rows".into(), "cols".into()]), "rows * cols");
        assert_eq!(len.render(&["cols".into(), "rows".into()]), "cols * rows");
    }

    #[test]
    fn rendering_orders_terms_and_signs() {
        let p = v("n").scale(2).unwrap().add(&Poly::constant(-3)).unwrap().add(&v("m").mul(&v("n")).unwrap()).unwrap();
        assert_eq!(p.render(&["n".into(), "m".into()]), "n * m + 2 * n - 3");
        assert_eq!(Poly::constant(1).render(&[]), "1");
    }

    #[test]
    fn comparison_needs_a_difference_without_negative_terms() {
        let n = v("n");
        let n1 = n.sub(&Poly::constant(1)).unwrap();
        assert!(n.at_least(&n1));
        assert!(!n1.at_least(&n));
        let m = v("m");
        assert!(!n.at_least(&m) && !m.at_least(&n), "unrelated sizes do not compare");
        // rows * cols - 1 >= cols - 1 because rows >= 1.
        let rc1 = v("rows").mul(&v("cols")).unwrap().sub(&Poly::constant(1)).unwrap();
        let c1 = v("cols").sub(&Poly::constant(1)).unwrap();
        assert!(rc1.at_least(&c1) && !c1.at_least(&rc1));
        assert!(!v("n").at_least(&Poly::constant(2)), "n may be 1");
    }

    #[test]
    fn floor_division_of_the_largest_index() {
        // (rows * cols - 1) / cols = rows - 1
        let hi = v("rows").mul(&v("cols")).unwrap().sub(&Poly::constant(1)).unwrap();
        assert_eq!(hi.div_floor(&v("cols")).unwrap(), v("rows").sub(&Poly::constant(1)).unwrap());
        // (4 * n - 1) / 4 = n - 1; (4 * n + 2) / 4 = n
        let four_n = v("n").scale(4).unwrap();
        assert_eq!(
            four_n.sub(&Poly::constant(1)).unwrap().div_floor(&Poly::constant(4)).unwrap(),
            v("n").sub(&Poly::constant(1)).unwrap()
        );
        assert_eq!(four_n.add(&Poly::constant(2)).unwrap().div_floor(&Poly::constant(4)).unwrap(), v("n"));
        // n / m has no polynomial floor
        assert_eq!(v("n").div_floor(&v("m")), None);
        // (n - 1) / 2 is not a polynomial either
        assert_eq!(v("n").sub(&Poly::constant(1)).unwrap().div_floor(&Poly::constant(2)), None);
    }

    #[test]
    fn overflow_is_none_not_a_panic() {
        let big = Poly::constant(i64::MAX);
        assert_eq!(big.add(&Poly::constant(1)), None);
        assert_eq!(big.mul(&v("n")).and_then(|p| p.scale(2)), None);
    }
}
