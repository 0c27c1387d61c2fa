//! Search memory: what each technique (and each diagnosis tool targeted) did across the
//! tree, summarized in a few lines for the generator's prompt; and, per kernel lineage,
//! which families of moves keep landing within their parent's noise, every try of a move
//! with what it did, and which code each kernel runs ([`Lineage`]).

use crate::reward::{Outcome, ParentSpeed};
use crate::tree::{Expansion, Intent, NodeId};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write;

/// How many children of one family must land within their parent's interval, on one
/// kernel's lineage, before that family is stale there. One is not enough: a real gain
/// of a few percent still lands inside a wide interval now and then, and a family's first
/// value is often not its best (a register cap of 32 where 64 pays, vectorizing by 2
/// where 4 pays), so one try of another value is worth it. Two are already more than the
/// run of issue 34 needed to see it: after a 7.98x cooperative kernel it spent 36 nodes on
/// register caps, a flag and unroll factors, all within 3% of it.
pub const STALE_AFTER: u32 = 2;

/// How many children of one family must land within their parent's interval across the
/// whole run, with none of its children moving a kernel beyond the noise either way,
/// before the family is idle: it does nothing measurable to this task's kernels, and the
/// tuner proposes it anywhere only after every other move. Each sibling kernel starts a
/// lineage of its own, so [`STALE_AFTER`] alone lets one such family come back on every
/// one of them: a 5-minute causal_conv1d run put 16 of its 78 nodes on
/// `--extra-device-vectorization`, every one within its parent's interval, on 16 kernels
/// within 5% of each other.
pub const IDLE_AFTER: u32 = 4;

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Stats {
    pub tries: u32,
    pub correct: u32,
    pub repairs: u32,
    pub repaired: u32,
    /// Sum and count of reward changes against the parent, over correct improvements.
    pub delta_sum: f64,
    pub deltas: u32,
    pub best_delta: Option<f64>,
    /// Failure classes seen.
    pub failures: BTreeMap<String, u32>,
}

impl Stats {
    pub fn correct_rate(&self) -> f64 {
        if self.tries == 0 {
            return 0.0;
        }
        self.correct as f64 / self.tries as f64
    }

    pub fn mean_delta(&self) -> Option<f64> {
        (self.deltas > 0).then(|| self.delta_sum / self.deltas as f64)
    }

    fn add(&mut self, kind: Expansion, o: &Outcome, delta: Option<f64>) {
        self.tries += 1;
        if o.correct {
            self.correct += 1;
        } else if let Some(f) = &o.failure {
            *self.failures.entry(f.clone()).or_default() += 1;
        }
        if kind == Expansion::Repair {
            self.repairs += 1;
            if o.correct {
                self.repaired += 1;
            }
        }
        if let Some(d) = delta {
            self.delta_sum += d;
            self.deltas += 1;
            self.best_delta = Some(self.best_delta.map_or(d, |b: f64| b.max(d)));
        }
    }
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Memory {
    pub techniques: BTreeMap<String, Stats>,
    pub tools: BTreeMap<String, Stats>,
    #[serde(default)]
    pub lineage: Lineage,
}

/// How a judged node was made, as far as its lineage needs it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
struct Made {
    parent: NodeId,
    /// Its move made a new kernel: a structural move whose child the timing tells apart
    /// from its parent. The families tried on its ancestors say nothing of it.
    #[serde(alias = "structural")]
    new_kernel: bool,
    /// Its move rewrote the source and ran faster than its parent beyond the noise: new
    /// code ([`Lineage::code_of`]).
    #[serde(default)]
    new_code: bool,
}

/// What one try of a move (one technique: a recipe application, a knob or flag value) did
/// against its parent. Faster and slower are by the run's reward: under an energy or mixed
/// objective, better and worse.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum TryResult {
    /// Correct and faster than its parent beyond the noise.
    Faster,
    /// Correct, within its parent's interval.
    Same,
    /// Correct and slower than its parent beyond the noise.
    Slower,
    /// Correct, with nothing to compare: its parent failed or has no timing.
    Unknown,
    /// Not correct: the failure class.
    Failed(String),
}

/// One try of a move on a parent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Try {
    pub parent: NodeId,
    pub result: TryResult,
    /// Its reward change against the parent (as [`Stats::delta_sum`] sums them), where
    /// both were correct and timed: what a generator needs to weigh the tries of a move
    /// by something other than its name (a knob stepped up, wherever it started).
    #[serde(default)]
    pub delta: Option<f64>,
}

/// Per kernel lineage, the families whose children landed within their parent's interval
/// (a gain the timing cannot tell from noise). A kernel's lineage runs from it up through
/// the moves that only tuned it (knobs, flags, tuning recipes), and the structural ones
/// that landed within their parent's interval, to the nearest kernel a structural move
/// made at a speed of its own, or the root; the children of every kernel on it count,
/// since each is a try of that family on a kernel that runs alike. A family with
/// [`STALE_AFTER`] such children there is stale: not worth proposing on the kernel or
/// below it, until a structural move makes a new kernel, whose lineage starts afresh.
///
/// A structural move in the noise does not start one: `read-only` on a causal
/// convolution landed within its parent's interval on 5 of 7 kernels, and each of them
/// had the register caps, flags and block sizes its parent had shown to be noise tried
/// again. Across the run, a family that only ever lands in the noise is idle
/// ([`IDLE_AFTER`]).
///
/// It also keeps every try of each exact move ([`Lineage::tries`]) and, per kernel, the
/// code it runs ([`Lineage::code_of`]): what a generator needs to tell a move that loses
/// on one code from one that loses everywhere.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Lineage {
    made: BTreeMap<NodeId, Made>,
    /// By parent: how many children of each family landed within its interval.
    within: BTreeMap<NodeId, BTreeMap<String, u32>>,
    /// By family: correct children that landed outside their parent's interval, faster
    /// or slower (the family changes something on this task's kernels). A child whose
    /// parent failed or has no timing counts neither here nor in `within`.
    #[serde(default)]
    moved: BTreeMap<String, u32>,
    /// By technique: every try of it, in the order judged.
    #[serde(default)]
    tries: BTreeMap<String, Vec<Try>>,
}

impl Lineage {
    /// Records judged node `id` under `parent` (None: the root). `gained`: it ran faster
    /// than its parent beyond the noise; `delta`: its reward change against the parent
    /// ([`Try::delta`]; the caller holds the rewards).
    pub fn record(
        &mut self,
        id: NodeId,
        parent: Option<NodeId>,
        intent: &Intent,
        o: &Outcome,
        gained: bool,
        delta: Option<f64>,
    ) {
        let Some(parent) = parent else { return };
        let new_code = intent.rewrites && o.correct && o.parent == ParentSpeed::Apart && gained;
        self.made.insert(id, Made { parent, new_kernel: intent.structural && !o.in_parents_noise(), new_code });
        if !intent.technique.is_empty() {
            let result = match (o.correct, o.parent) {
                (false, _) => TryResult::Failed(o.failure.clone().unwrap_or_default()),
                (true, ParentSpeed::Same) => TryResult::Same,
                (true, ParentSpeed::Apart) if gained => TryResult::Faster,
                (true, ParentSpeed::Apart) => TryResult::Slower,
                (true, ParentSpeed::Unknown) => TryResult::Unknown,
            };
            // A change against a parent with nothing to compare is no measure of the move.
            let delta = delta.filter(|_| matches!(result, TryResult::Faster | TryResult::Same | TryResult::Slower));
            self.tries.entry(intent.technique.clone()).or_default().push(Try { parent, result, delta });
        }
        if intent.family.is_empty() || !o.correct {
            return;
        }
        match o.parent {
            ParentSpeed::Same => {
                *self.within.entry(parent).or_default().entry(intent.family.clone()).or_default() += 1;
            }
            ParentSpeed::Apart => *self.moved.entry(intent.family.clone()).or_default() += 1,
            // A child of a failed or untimed parent says nothing of what its move is worth.
            ParentSpeed::Unknown => {}
        }
    }

    /// The families idle across the run: [`IDLE_AFTER`] or more of their children landed
    /// within their parent's interval, and none outside it.
    pub fn idle_families(&self) -> BTreeSet<String> {
        let mut within: BTreeMap<&str, u32> = BTreeMap::new();
        for (family, k) in self.within.values().flatten() {
            *within.entry(family.as_str()).or_default() += k;
        }
        within
            .into_iter()
            .filter(|(f, k)| *k >= IDLE_AFTER && !self.moved.contains_key(*f))
            .map(|(f, _)| f.to_string())
            .collect()
    }

    /// Children of each family that landed within their parent's interval on `id`'s
    /// lineage, summed over the kernels on it.
    pub fn within_counts(&self, id: NodeId) -> BTreeMap<&str, u32> {
        let mut counts: BTreeMap<&str, u32> = BTreeMap::new();
        let mut at = Some(id);
        // Every step goes to a parent, whose id is smaller: the walk ends at the root.
        while let Some(n) = at {
            for (family, k) in self.within.get(&n).into_iter().flatten() {
                *counts.entry(family.as_str()).or_default() += k;
            }
            at = self.made.get(&n).filter(|m| !m.new_kernel && m.parent < n).map(|m| m.parent);
        }
        counts
    }

    /// The families not worth proposing on `id`: [`STALE_AFTER`] or more of their children
    /// landed within their parent's interval on its lineage.
    pub fn stale_families(&self, id: NodeId) -> BTreeSet<String> {
        self.within_counts(id).into_iter().filter(|(_, k)| *k >= STALE_AFTER).map(|(f, _)| f.to_string()).collect()
    }

    /// Every judged try of `technique`, in the order judged.
    pub fn tries(&self, technique: &str) -> &[Try] {
        self.tries.get(technique).map_or(&[], Vec::as_slice)
    }

    /// The code `id` runs: the nearest node, itself or an ancestor, whose move rewrote the
    /// source and ran faster than its parent beyond the noise, or the root. The nodes
    /// between only tuned that code (knobs, flags) or changed it without a measured gain.
    /// What a move did on one code says little of what it does on another: on a causal
    /// convolution, a faster division lost 4% on a kernel of one block's work per block
    /// and paid on the coarse-block kernel that came later.
    pub fn code_of(&self, id: NodeId) -> NodeId {
        let mut at = id;
        // Every step goes to a parent, whose id is smaller: the walk ends at the root.
        while let Some(m) = self.made.get(&at).filter(|m| !m.new_code && m.parent < at) {
            at = m.parent;
        }
        at
    }
}

impl Memory {
    /// Records a judged child's technique and tool; its reward change against its parent,
    /// where there is one.
    pub fn record(
        &mut self,
        intent: &Intent,
        kind: Expansion,
        o: &Outcome,
        reward: f64,
        parent_reward: Option<f64>,
    ) -> Option<f64> {
        // A reward change means something only between two correct kernels.
        let delta = match (o.correct, kind, parent_reward) {
            (true, Expansion::Improve, Some(p)) => Some(reward - p),
            _ => None,
        };
        if !intent.technique.is_empty() {
            self.techniques.entry(intent.technique.clone()).or_default().add(kind, o, delta);
        }
        if let Some(tool) = &intent.tool {
            self.tools.entry(tool.clone()).or_default().add(kind, o, delta);
        }
        delta
    }

    pub fn technique(&self, name: &str) -> Option<&Stats> {
        self.techniques.get(name)
    }

    /// At most `max_lines` lines: techniques ordered by mean gain, then failures.
    pub fn summary(&self, max_lines: usize) -> String {
        let mut rows: Vec<(&String, &Stats)> = self.techniques.iter().collect();
        rows.sort_by(|a, b| {
            b.1.mean_delta()
                .unwrap_or(f64::NEG_INFINITY)
                .total_cmp(&a.1.mean_delta().unwrap_or(f64::NEG_INFINITY))
                .then(a.0.cmp(b.0))
        });
        let mut out = String::new();
        for (name, s) in rows.into_iter().take(max_lines) {
            let gain = match (s.mean_delta(), s.best_delta) {
                (Some(m), Some(b)) => format!("mean {:+.2} log2 (best {:+.2})", m, b),
                _ => "no correct improvement yet".to_string(),
            };
            let fails = if s.failures.is_empty() {
                String::new()
            } else {
                format!(
                    "; failed: {}",
                    s.failures.iter().map(|(k, v)| format!("{k} x{v}")).collect::<Vec<_>>().join(", ")
                )
            };
            let _ = writeln!(out, "- {name}: {} tries, {} correct, {gain}{fails}", s.tries, s.correct);
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tree::{Config, Selection, Tree};

    #[test]
    fn summary_orders_by_gain_and_lists_failures() {
        let mut m = Memory::default();
        let i = |t: &str| Intent { technique: t.into(), tool: Some("uncoalesced-global".into()), ..Default::default() };
        m.record(&i("vectorize"), Expansion::Improve, &Outcome::correct(2.0), 1.0, Some(0.0));
        m.record(&i("vectorize"), Expansion::Improve, &Outcome::failed("wrong-answer"), -5.0, Some(0.0));
        m.record(&i("unroll"), Expansion::Improve, &Outcome::correct(1.1), 0.14, Some(0.0));
        let s = m.summary(5);
        let lines: Vec<&str> = s.lines().collect();
        assert!(lines[0].starts_with("- vectorize: 2 tries, 1 correct, mean +1.00"), "{s}");
        assert!(lines[0].contains("wrong-answer x1"), "{s}");
        assert!(lines[1].starts_with("- unroll"), "{s}");
        assert_eq!(m.tools["uncoalesced-global"].tries, 3);
        assert_eq!(m.summary(1).lines().count(), 1);
    }

    /// Drives a tree by hand: a child of `parent` made by `family` (`structural` or not)
    /// at `speedup`, within its parent's interval or not.
    fn child(t: &mut Tree<()>, parent: NodeId, family: &str, structural: bool, speedup: f64, within: bool) -> NodeId {
        let sel = Selection { parent, kind: Expansion::Improve };
        let id = t.add_pending(&sel, (), Intent::default());
        let intent =
            Intent { technique: format!("{family}=x"), family: family.into(), structural, ..Default::default() };
        t.set_intent(id, intent);
        t.record(id, Outcome::correct(speedup).within_parent(within));
        id
    }

    #[test]
    fn a_family_that_lands_within_the_noise_goes_stale_on_its_kernel_and_below_until_the_kernel_changes() {
        let mut t = Tree::new((), Config::default(), 1);
        let coop = child(&mut t, 0, "cooperative", true, 7.98, false);
        // Register caps land within the cooperative kernel's interval; block sizes gain.
        child(&mut t, coop, "flag:maxrregcount", false, 7.99, true);
        assert!(t.memory.lineage.stale_families(coop).is_empty(), "one landing in the noise is not enough");
        let capped = child(&mut t, coop, "flag:maxrregcount", false, 7.95, true);
        let bigger = child(&mut t, coop, "knob:BLOCK", false, 8.60, false);
        let biggest = child(&mut t, bigger, "knob:BLOCK", false, 9.30, false);
        let stale = |t: &Tree<()>, id| t.memory.lineage.stale_families(id);
        for id in [coop, capped, bigger, biggest] {
            assert_eq!(stale(&t, id), BTreeSet::from(["flag:maxrregcount".to_string()]), "node {id}");
        }
        // Tries on a knob-tuned descendant count toward its lineage too: an unroll factor
        // in the noise on `bigger`, another on `biggest`.
        child(&mut t, bigger, "unroll", false, 8.61, true);
        child(&mut t, biggest, "unroll", false, 9.31, true);
        assert!(stale(&t, biggest).contains("unroll"), "{:?}", stale(&t, biggest));
        assert!(!stale(&t, coop).contains("unroll"), "the noise below a kernel says nothing of its ancestors");
        // Nothing leaks up to the root. A structural move in the noise runs alike and
        // keeps the lineage; one that moves the time makes a new kernel, whose lineage
        // starts afresh.
        assert!(stale(&t, 0).is_empty());
        let restricted = child(&mut t, biggest, "read-only", true, 9.31, true);
        assert!(stale(&t, restricted).contains("unroll"), "{:?}", stale(&t, restricted));
        assert!(stale(&t, restricted).contains("flag:maxrregcount"), "{:?}", stale(&t, restricted));
        let vectorized = child(&mut t, restricted, "vectorize", true, 11.0, false);
        assert!(stale(&t, vectorized).is_empty(), "{:?}", stale(&t, vectorized));
        // A failed child is no landing.
        let sel = Selection { parent: vectorized, kind: Expansion::Improve };
        for _ in 0..2 {
            let id = t.add_pending(&sel, (), Intent::default());
            t.set_intent(id, Intent { family: "intrinsics".into(), structural: true, ..Default::default() });
            t.record(id, Outcome { parent: ParentSpeed::Same, ..Outcome::failed("wrong-answer") });
        }
        assert!(stale(&t, vectorized).is_empty());
    }

    #[test]
    fn a_family_that_only_ever_lands_in_the_noise_goes_idle_across_the_run_and_one_that_moves_a_kernel_does_not() {
        let mut t = Tree::new((), Config::default(), 1);
        // Sibling kernels, each a lineage of its own (structural moves that moved the time).
        let kernels: Vec<NodeId> =
            (0..5).map(|i| child(&mut t, 0, "vectorize", true, 2.0 + 0.2 * f64::from(i), false)).collect();
        let idle = |t: &Tree<()>| t.memory.lineage.idle_families();
        for (n, k) in kernels.iter().enumerate() {
            let speed = 2.0 + 0.2 * n as f64;
            child(&mut t, *k, "flag:extra-device-vectorization", false, speed, true);
            child(&mut t, *k, "knob:BLOCK", false, speed, true);
            if n == 1 {
                // A block size that moves a kernel beyond the noise (slower counts: the
                // knob matters, another value may pay) keeps its family out.
                child(&mut t, *k, "knob:BLOCK", false, 1.5, false);
            }
            assert!(t.memory.lineage.stale_families(*k).is_empty(), "one landing per lineage is not stale");
            let landings = n as u32 + 1;
            let expect = if landings >= IDLE_AFTER {
                BTreeSet::from(["flag:extra-device-vectorization".to_string()])
            } else {
                BTreeSet::new()
            };
            assert_eq!(idle(&t), expect, "after {landings} landings in the noise");
        }
        // A child whose parent has no timing to compare with (a failed parent, repaired)
        // says nothing of its family: it neither lands in the noise nor moves a kernel.
        let sel = Selection { parent: kernels[0], kind: Expansion::Improve };
        let id = t.add_pending(&sel, (), Intent::default());
        t.set_intent(id, Intent { family: "flag:extra-device-vectorization".into(), ..Default::default() });
        t.record(id, Outcome::correct(2.5).against_parent(ParentSpeed::Unknown));
        assert!(idle(&t).contains("flag:extra-device-vectorization"), "{:?}", idle(&t));
        // Nor does it land in the noise on its parent's lineage, or count as a loss.
        let lone = child(&mut t, 0, "vectorize", true, 2.9, false);
        for _ in 0..STALE_AFTER {
            let sel = Selection { parent: lone, kind: Expansion::Improve };
            let id = t.add_pending(&sel, (), Intent::default());
            t.set_intent(id, Intent { technique: "unroll=2".into(), family: "unroll".into(), ..Default::default() });
            t.record(id, Outcome::correct(0.5).against_parent(ParentSpeed::Unknown));
        }
        assert!(t.memory.lineage.stale_families(lone).is_empty());
        let results: Vec<&TryResult> = t.memory.lineage.tries("unroll=2").iter().map(|x| &x.result).collect();
        assert_eq!(results, [&TryResult::Unknown; STALE_AFTER as usize], "unknown is no loss");
        // A failed child is no landing.
        let empty = child(&mut t, 0, "vectorize", true, 3.0, false);
        for _ in 0..IDLE_AFTER {
            let sel = Selection { parent: empty, kind: Expansion::Improve };
            let id = t.add_pending(&sel, (), Intent::default());
            t.set_intent(id, Intent { family: "unroll".into(), ..Default::default() });
            t.record(id, Outcome { parent: ParentSpeed::Same, ..Outcome::failed("build-error") });
        }
        assert!(!idle(&t).contains("unroll"));
    }

    /// A child of `parent` made by `technique` (a rewrite of the source or not), judged `o`.
    fn tried(t: &mut Tree<()>, parent: NodeId, technique: &str, rewrites: bool, o: Outcome) -> NodeId {
        let sel = Selection { parent, kind: Expansion::Improve };
        let id = t.add_pending(&sel, (), Intent::default());
        t.set_intent(
            id,
            Intent { technique: technique.into(), family: technique.into(), rewrites, ..Default::default() },
        );
        t.record(id, o);
        id
    }

    #[test]
    fn new_code_is_a_rewrite_that_gained_and_every_try_is_kept_with_what_it_did() {
        let mut t = Tree::new((), Config::default(), 1);
        let apart = |s: f64| Outcome::correct(s).within_parent(false);
        let faster = tried(&mut t, 0, "vectorize", true, apart(2.0));
        let level = tried(&mut t, faster, "read-only", true, Outcome::correct(2.01).within_parent(true));
        let tuned = tried(&mut t, level, "knob:BLOCK=64", false, apart(2.4));
        let slower = tried(&mut t, tuned, "unroll", true, apart(1.9));
        let coarse = tried(&mut t, tuned, "coarsen", true, apart(3.0));
        let code = |id| t.memory.lineage.code_of(id);
        assert_eq!(code(0), 0);
        assert_eq!(code(faster), faster, "a rewrite that gained is new code");
        assert_eq!(code(level), faster, "a rewrite in the noise runs its parent's code");
        assert_eq!(code(tuned), faster, "a knob that gained tunes its parent's code");
        assert_eq!(code(slower), faster, "a rewrite that lost runs no code of its own");
        assert_eq!(code(coarse), coarse, "a tuning recipe that gained rewrote the source: new code");
        tried(&mut t, coarse, "unroll", true, Outcome::failed("build-error"));
        let sel = Selection { parent: slower, kind: Expansion::Improve };
        let untimed = t.add_pending(&sel, (), Intent::default());
        t.set_intent(untimed, Intent { technique: "unroll".into(), rewrites: true, ..Default::default() });
        t.record(untimed, Outcome::correct(2.0).against_parent(ParentSpeed::Unknown));
        let unroll: Vec<(NodeId, TryResult)> =
            t.memory.lineage.tries("unroll").iter().map(|x| (x.parent, x.result.clone())).collect();
        assert_eq!(
            unroll,
            [
                (tuned, TryResult::Slower),
                (coarse, TryResult::Failed("build-error".into())),
                (slower, TryResult::Unknown)
            ]
        );
        let deltas: Vec<Option<f64>> = t.memory.lineage.tries("unroll").iter().map(|x| x.delta).collect();
        assert_eq!(deltas, [Some((1.9f64).log2() - (2.4f64).log2()), None, None], "only against a timed parent");
        let vectorize: Vec<&TryResult> = t.memory.lineage.tries("vectorize").iter().map(|x| &x.result).collect();
        assert_eq!(vectorize, [&TryResult::Faster]);
        assert_eq!(t.memory.lineage.tries("read-only")[0].result, TryResult::Same);
        assert!(t.memory.lineage.tries("never tried").is_empty());
        // Beside a failed parent there is no gain, so no new code.
        let broken = tried(&mut t, 0, "cooperative", true, Outcome::failed("wrong-answer"));
        let fixed =
            tried(&mut t, broken, "vectorize", true, Outcome::correct(2.0).against_parent(ParentSpeed::Unknown));
        assert_eq!(t.memory.lineage.code_of(fixed), 0);
    }
}
