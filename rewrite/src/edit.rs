//! Edits by byte range. A rewrite is a set of replacements on the original text, so code a
//! recipe does not touch keeps its exact text, comments and formatting.

use std::ops::Range;

/// Replacements and insertions on one text, applied together.
#[derive(Debug, Clone, Default)]
pub struct Edits {
    edits: Vec<(Range<usize>, String)>,
}

/// Two edits claim the same bytes: the recipe's matcher found overlapping sites.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Overlap {
    pub first: Range<usize>,
    pub second: Range<usize>,
}

impl Edits {
    pub fn new() -> Edits {
        Edits::default()
    }

    pub fn replace(&mut self, range: Range<usize>, text: impl Into<String>) {
        self.edits.push((range, text.into()));
    }

    /// Inserts before the byte at `at`; insertions at one place keep the order they were
    /// added in.
    pub fn insert(&mut self, at: usize, text: impl Into<String>) {
        self.edits.push((at..at, text.into()));
    }

    pub fn is_empty(&self) -> bool {
        self.edits.is_empty()
    }

    pub fn len(&self) -> usize {
        self.edits.len()
    }

    /// The edits that fall inside `range`, moved so that `range.start` is 0.
    pub fn within(&self, range: &Range<usize>) -> Edits {
        let edits = self
            .edits
            .iter()
            .filter(|(r, _)| r.start >= range.start && r.end <= range.end)
            .map(|(r, t)| (r.start - range.start..r.end - range.start, t.clone()))
            .collect();
        Edits { edits }
    }

    pub fn extend(&mut self, other: Edits) {
        self.edits.extend(other.edits);
    }

    /// The text with every edit applied. Fails if two edits overlap (an insertion at the
    /// boundary of a replacement does not overlap it) or one runs past the text.
    pub fn apply(&self, text: &str) -> Result<String, Overlap> {
        let mut order: Vec<usize> = (0..self.edits.len()).collect();
        // Stable: insertions at one offset keep their order, and an insertion at the
        // start of a replacement goes before it.
        order.sort_by_key(|&i| (self.edits[i].0.start, self.edits[i].0.end > self.edits[i].0.start));
        let mut out = String::with_capacity(text.len() + 256);
        let mut at = 0usize;
        let mut last: Option<Range<usize>> = None;
        for i in order {
            let (r, t) = &self.edits[i];
            if r.start < at
                || r.end > text.len()
                || r.start > r.end
                || !text.is_char_boundary(r.start)
                || !text.is_char_boundary(r.end)
            {
                return Err(Overlap { first: last.unwrap_or(0..0), second: r.clone() });
            }
            out.push_str(&text[at..r.start]);
            out.push_str(t);
            at = r.end;
            last = Some(r.clone());
        }
        out.push_str(&text[at..]);
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn untouched_text_is_kept_and_insertions_keep_their_order() {
        let mut e = Edits::new();
        e.replace(4..7, "BAR");
        e.insert(0, "a");
        e.insert(0, "b");
        e.insert(7, "!");
        assert_eq!(e.apply("foo bar baz").unwrap(), "abfoo BAR! baz");
    }

    #[test]
    fn overlapping_edits_are_refused() {
        let mut e = Edits::new();
        e.replace(0..5, "x");
        e.replace(3..6, "y");
        assert!(e.apply("0123456789").is_err());
        let mut past = Edits::new();
        past.replace(8..20, "z");
        assert!(past.apply("0123456789").is_err());
    }

    #[test]
    fn within_moves_edits_to_the_range() {
        let mut e = Edits::new();
        e.replace(10..12, "XY");
        e.replace(0..1, "Q");
        let inner = e.within(&(8..14));
        assert_eq!(inner.apply("abcdef").unwrap(), "abXYef");
    }
}
