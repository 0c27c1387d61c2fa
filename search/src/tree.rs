//! The search tree. The orchestrator drives it in three steps: [`Tree::select`] picks a
//! node to expand (and how: improve it, or repair it if it failed), [`Tree::add_pending`]
//! registers the child being generated (virtual loss steers parallel selections apart),
//! and [`Tree::record`] stores the child's outcome and backs its reward up the path.

use crate::memory::Memory;
use crate::reward::{Outcome, RewardConfig};
use crate::rng::SplitMix64;
use serde::{Deserialize, Serialize};

pub type NodeId = usize;

/// The statistic a node's children are compared by.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case", tag = "backup")]
pub enum Backup {
    /// Mean reward of the subtree (classic UCT): failures drag a subtree down.
    Mean,
    /// Best reward in the subtree: we keep the best kernel, not the average one.
    Max,
    /// `weight` x max + (1 - weight) x mean.
    Mix { weight: f64 },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Config {
    /// UCT exploration constant, on the log2-speedup reward scale.
    pub exploration: f64,
    pub backup: Backup,
    /// Progressive widening: a node may hold about `widen_k * visits^widen_alpha` children.
    pub widen_k: f64,
    pub widen_alpha: f64,
    /// Asymmetric branching: nodes whose reward is within `promising_margin` of the best
    /// widen `promising_boost` times faster.
    pub promising_margin: f64,
    pub promising_boost: f64,
    /// Failed nodes get at most this many repair children.
    pub max_repairs: u32,
    /// While it has repairs left, a failed node is valued at its parent's reward minus
    /// this (log2) per repair already tried: a broken change is of unknown value, not a
    /// known loss, and a repair recovers it part of the time.
    pub repair_penalty: f64,
    /// Whether failed nodes are treated asymmetrically (bounded repairs) at all.
    pub asymmetric: bool,
    /// Dead-end pruning: close a node after this many consecutive failed children...
    pub dead_end_failures: u32,
    /// ...or after this many correct children without a gain of `min_gain`.
    pub stale_children: u32,
    pub min_gain: f64,
    pub pruning: bool,
    /// Virtual loss: each pending evaluation counts as a failure in the mean and lowers
    /// the max by `virtual_loss_penalty`, so parallel selections spread out.
    pub virtual_loss: bool,
    pub virtual_loss_penalty: f64,
    pub reward: RewardConfig,
}

impl Default for Config {
    /// Chosen by `cargo run --release -p search --example simulate -- sweep` on 200 tuning
    /// landscapes (disjoint from the comparison's) at 150 evaluations; README.md and
    /// ARCHITECTURE.md record the numbers.
    fn default() -> Self {
        Config {
            exploration: 0.4,
            backup: Backup::Max,
            widen_k: 1.0,
            widen_alpha: 0.3,
            promising_margin: 0.15,
            promising_boost: 1.5,
            max_repairs: 2,
            repair_penalty: 0.5,
            asymmetric: true,
            dead_end_failures: 5,
            stale_children: 8,
            min_gain: 0.02,
            // Redundant with max backup in simulation (a stalled node already loses UCT);
            // off by default, kept for runs that want a hard stop on dead ends.
            pruning: false,
            virtual_loss: true,
            virtual_loss_penalty: 0.0,
            reward: RewardConfig::default(),
        }
    }
}

/// What kind of child the generator should write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Expansion {
    /// Make a correct kernel faster.
    Improve,
    /// Fix a kernel that failed (build error, wrong answer, ...).
    Repair,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Selection {
    pub parent: NodeId,
    pub kind: Expansion,
}

/// What the child was meant to do: the generator's technique tag and the diagnosis tool
/// it targeted (for search memory).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Intent {
    pub technique: String,
    pub tool: Option<String>,
    /// The family of moves the technique belongs to, as the generator names it (a recipe,
    /// a knob, a flag: its values are one family); empty when it has none. The search
    /// memory's lineage counts families, not single values.
    #[serde(default)]
    pub family: String,
    /// The move made a new kernel (it changed the work) rather than tuning the one it had.
    #[serde(default)]
    pub structural: bool,
    /// The move rewrote the kernel's source (a recipe, a kernel written anew), not only
    /// its build configuration (a knob, a flag).
    #[serde(default)]
    pub rewrites: bool,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Node<P> {
    pub id: NodeId,
    pub parent: Option<NodeId>,
    pub children: Vec<NodeId>,
    pub depth: u32,
    pub payload: P,
    pub intent: Intent,
    pub kind: Expansion,
    /// None while the evaluation is in flight.
    pub outcome: Option<Outcome>,
    /// The reward backed up into this node (the floor for failures).
    pub reward: Option<f64>,
    pub visits: u32,
    pub value_sum: f64,
    /// Best reward in the subtree.
    pub value_max: f64,
    pub pending: u32,
    pub closed: bool,
    /// Why it was closed.
    pub closed_because: Option<String>,
    /// Takes no more children (the generator has nothing new from it); unlike a closed
    /// node, its subtree stays open.
    #[serde(default)]
    pub saturated: bool,
    /// Dropped while pending: the generator produced nothing for it. It is no one's child.
    #[serde(default)]
    pub cancelled: bool,
}

impl<P> Node<P> {
    pub fn is_correct(&self) -> bool {
        self.outcome.as_ref().is_some_and(|o| o.correct)
    }

    pub fn is_failed(&self) -> bool {
        self.outcome.as_ref().is_some_and(|o| !o.correct)
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Tree<P> {
    pub config: Config,
    nodes: Vec<Node<P>>,
    best: NodeId,
    pub memory: Memory,
    rng: SplitMix64,
}

impl<P: Clone> Tree<P> {
    /// A tree whose root is the baseline, already evaluated (reward 0: speedup 1).
    pub fn new(root: P, config: Config, seed: u64) -> Tree<P> {
        let reward = config.reward.reward(&Outcome::correct(1.0));
        let root = Node {
            id: 0,
            parent: None,
            children: Vec::new(),
            depth: 0,
            payload: root,
            intent: Intent { technique: "baseline".into(), structural: true, rewrites: true, ..Default::default() },
            kind: Expansion::Improve,
            outcome: Some(Outcome::correct(1.0)),
            reward: Some(reward),
            visits: 1,
            value_sum: reward,
            value_max: reward,
            pending: 0,
            closed: false,
            closed_because: None,
            saturated: false,
            cancelled: false,
        };
        Tree { config, nodes: vec![root], best: 0, memory: Memory::default(), rng: SplitMix64::new(seed) }
    }

    pub fn node(&self, id: NodeId) -> &Node<P> {
        &self.nodes[id]
    }

    pub fn nodes(&self) -> &[Node<P>] {
        &self.nodes
    }

    pub fn len(&self) -> usize {
        self.nodes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.nodes.is_empty()
    }

    /// The best correct node: highest reward, then earliest found. A failed node is never
    /// best, nor one that regresses a served shape ([`Outcome::regresses`]).
    pub fn best(&self) -> &Node<P> {
        &self.nodes[self.best]
    }

    /// How many children `id` may hold now.
    pub fn widening_limit(&self, id: NodeId) -> usize {
        let n = &self.nodes[id];
        if n.is_failed() && self.config.asymmetric {
            return self.config.max_repairs as usize;
        }
        let mut k = self.config.widen_k;
        if self.config.asymmetric && n.is_correct() {
            let best = self.nodes[self.best].reward.unwrap_or(0.0);
            if n.reward.unwrap_or(f64::NEG_INFINITY) >= best - self.config.promising_margin {
                k *= self.config.promising_boost;
            }
        }
        let limit = (k * (n.visits.max(1) as f64).powf(self.config.widen_alpha)).floor() as usize;
        limit.max(1)
    }

    /// Children that count against the widening limit. For a correct node, failed
    /// children do not: failures are bounded by repair budgets and dead-end pruning, and
    /// must not use up the room a promising node has to grow.
    pub fn widening_count(&self, id: NodeId) -> usize {
        let n = &self.nodes[id];
        if n.is_failed() {
            return n.children.len();
        }
        n.children.iter().filter(|c| !self.nodes[**c].is_failed()).count()
    }

    fn can_expand(&self, id: NodeId) -> bool {
        let n = &self.nodes[id];
        !n.closed && !n.saturated && n.outcome.is_some() && self.widening_count(id) < self.widening_limit(id)
    }

    /// Q with virtual loss: pending evaluations count as failures in the mean until they
    /// return (the max is unaffected; the exploration term still sees them as visits).
    fn value(&self, n: &Node<P>) -> f64 {
        let vl = if self.config.virtual_loss { n.pending as f64 } else { 0.0 };
        let visits = n.visits as f64 + vl;
        if visits == 0.0 {
            return 0.0;
        }
        let mean = (n.value_sum + vl * self.config.reward.failure_floor) / visits;
        let max = n.value_max - vl * self.config.virtual_loss_penalty;
        let q = match self.config.backup {
            Backup::Mean => mean,
            Backup::Max => max,
            Backup::Mix { weight } => weight * max + (1.0 - weight) * mean,
        };
        match self.repair_prior(n) {
            Some(prior) => q.max(prior - vl * self.config.virtual_loss_penalty),
            None => q,
        }
    }

    /// The value a failed node with repairs left stands for (see `repair_penalty`).
    fn repair_prior(&self, n: &Node<P>) -> Option<f64> {
        if !(self.config.asymmetric
            && n.is_failed()
            && !n.closed
            && (n.children.len() as u32) < self.config.max_repairs)
        {
            return None;
        }
        let parent = self.nodes[n.parent?].reward?;
        Some(parent - self.config.repair_penalty * (1 + n.children.len()) as f64)
    }

    fn uct(&self, parent: &Node<P>, child: &Node<P>) -> f64 {
        let vl = if self.config.virtual_loss { child.pending as f64 } else { 0.0 };
        let n = child.visits as f64 + vl;
        let total =
            (parent.visits as f64 + if self.config.virtual_loss { parent.pending as f64 } else { 0.0 }).max(1.0);
        if n == 0.0 {
            return f64::INFINITY;
        }
        self.value(child) + self.config.exploration * (total.ln() / n).sqrt()
    }

    /// Walks from the root by UCT to the first node that may take another child. Returns
    /// None when every node is closed or waiting on pending children.
    pub fn select(&mut self) -> Option<Selection> {
        let mut id = 0;
        loop {
            if self.can_expand(id) {
                let kind = if self.nodes[id].is_failed() { Expansion::Repair } else { Expansion::Improve };
                return Some(Selection { parent: id, kind });
            }
            let node = &self.nodes[id];
            let candidates: Vec<NodeId> = node
                .children
                .iter()
                .copied()
                .filter(|c| !self.nodes[*c].closed && self.nodes[*c].outcome.is_some() && self.subtree_open(*c))
                .collect();
            if candidates.is_empty() {
                return None;
            }
            let scores: Vec<f64> = candidates.iter().map(|c| self.uct(node, &self.nodes[*c])).collect();
            let top = scores.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let tied: Vec<NodeId> =
                candidates.iter().zip(&scores).filter(|(_, s)| **s >= top - 1e-12).map(|(c, _)| *c).collect();
            id = tied[self.rng.below(tied.len())];
        }
    }

    /// Whether anything under `id` (itself included) can still be expanded.
    fn subtree_open(&self, id: NodeId) -> bool {
        let mut stack = vec![id];
        while let Some(n) = stack.pop() {
            if self.can_expand(n) {
                return true;
            }
            stack.extend(
                self.nodes[n]
                    .children
                    .iter()
                    .copied()
                    .filter(|c| !self.nodes[*c].closed && self.nodes[*c].outcome.is_some()),
            );
        }
        false
    }

    fn path_to_root(&self, mut id: NodeId) -> Vec<NodeId> {
        let mut path = vec![id];
        while let Some(p) = self.nodes[id].parent {
            path.push(p);
            id = p;
        }
        path
    }

    /// Registers a child being evaluated under `selection.parent`.
    pub fn add_pending(&mut self, selection: &Selection, payload: P, intent: Intent) -> NodeId {
        let id = self.nodes.len();
        let parent = selection.parent;
        let depth = self.nodes[parent].depth + 1;
        self.nodes.push(Node {
            id,
            parent: Some(parent),
            children: Vec::new(),
            depth,
            payload,
            intent,
            kind: selection.kind,
            outcome: None,
            reward: None,
            visits: 0,
            value_sum: 0.0,
            value_max: f64::NEG_INFINITY,
            pending: 0,
            closed: false,
            closed_because: None,
            saturated: false,
            cancelled: false,
        });
        self.nodes[parent].children.push(id);
        for n in self.path_to_root(id) {
            self.nodes[n].pending += 1;
        }
        id
    }

    /// Stores `id`'s outcome, backs its reward up to the root, updates the best node,
    /// search memory and dead-end pruning.
    pub fn record(&mut self, id: NodeId, outcome: Outcome) {
        assert!(self.nodes[id].outcome.is_none(), "node {id} was recorded twice");
        let reward = self.config.reward.reward(&outcome);
        let parent = self.nodes[id].parent;
        let parent_reward = parent.and_then(|p| self.nodes[p].reward);
        let delta = self.memory.record(&self.nodes[id].intent, self.nodes[id].kind, &outcome, reward, parent_reward);
        let gained = parent_reward.is_some_and(|p| reward > p);
        self.memory.lineage.record(id, parent, &self.nodes[id].intent, &outcome, gained, delta);
        self.nodes[id].outcome = Some(outcome);
        self.nodes[id].reward = Some(reward);
        for n in self.path_to_root(id) {
            let node = &mut self.nodes[n];
            node.pending = node.pending.saturating_sub(1);
            node.visits += 1;
            node.value_sum += reward;
            node.value_max = node.value_max.max(reward);
        }
        if self.nodes[id].outcome.as_ref().is_some_and(Outcome::eligible) && self.better_than_best(id) {
            self.best = id;
        }
        if let Some(p) = parent {
            self.prune(p);
        }
        if self.config.pruning && self.nodes[id].is_failed() && self.config.asymmetric && self.config.max_repairs == 0 {
            self.close(id, "failed, and repairs are off".into());
        }
    }

    fn better_than_best(&self, id: NodeId) -> bool {
        let r = self.nodes[id].reward.unwrap_or(f64::NEG_INFINITY);
        r > self.nodes[self.best].reward.unwrap_or(f64::NEG_INFINITY)
    }

    fn close(&mut self, id: NodeId, why: String) {
        if id == 0 {
            return;
        }
        let n = &mut self.nodes[id];
        if !n.closed {
            n.closed = true;
            n.closed_because = Some(why);
        }
    }

    /// Dead-end pruning of `id` after one of its children returned.
    fn prune(&mut self, id: NodeId) {
        let cfg = &self.config;
        let node = &self.nodes[id];
        let done: Vec<&Node<P>> =
            node.children.iter().map(|c| &self.nodes[*c]).filter(|c| c.outcome.is_some()).collect();
        if node.is_failed() && cfg.asymmetric {
            let repaired = done.iter().any(|c| c.is_correct());
            if done.len() >= cfg.max_repairs as usize && cfg.pruning {
                let why = if repaired { "repairs done" } else { "repairs exhausted" };
                self.close(id, why.into());
            }
            return;
        }
        if !cfg.pruning {
            return;
        }
        let trailing_failures = done.iter().rev().take_while(|c| c.is_failed()).count() as u32;
        if trailing_failures >= cfg.dead_end_failures {
            self.close(id, format!("{trailing_failures} children in a row failed"));
            return;
        }
        let base = node.reward.unwrap_or(0.0);
        let correct: Vec<&&Node<P>> = done.iter().filter(|c| c.is_correct()).collect();
        let improved = correct.iter().any(|c| c.reward.unwrap_or(f64::NEG_INFINITY) >= base + cfg.min_gain);
        if correct.len() as u32 >= cfg.stale_children && !improved {
            self.close(id, format!("{} correct children, none faster by {:.2} log2", correct.len(), cfg.min_gain));
        }
    }

    /// Replaces a node's payload (when the evaluation produced the artifact, e.g. a
    /// repaired kernel's final source).
    pub fn set_payload(&mut self, id: NodeId, payload: P) {
        self.nodes[id].payload = payload;
    }

    /// Sets what a pending child was meant to do, once the generator has said it.
    pub fn set_intent(&mut self, id: NodeId, intent: Intent) {
        self.nodes[id].intent = intent;
    }

    /// Drops a pending child that will never be evaluated (the generator produced
    /// nothing): it leaves its parent's children and the pending counts along its path.
    pub fn cancel(&mut self, id: NodeId) {
        let n = &self.nodes[id];
        assert!(n.outcome.is_none() && !n.cancelled, "only a pending node can be cancelled (node {id})");
        for p in self.path_to_root(id) {
            self.nodes[p].pending = self.nodes[p].pending.saturating_sub(1);
        }
        if let Some(parent) = self.nodes[id].parent {
            self.nodes[parent].children.retain(|c| *c != id);
        }
        let n = &mut self.nodes[id];
        n.cancelled = true;
        n.closed = true;
        n.closed_because = Some("dropped: nothing was generated".into());
    }

    /// Lets `id` take no more children, leaving its subtree open.
    pub fn saturate(&mut self, id: NodeId) {
        self.nodes[id].saturated = true;
    }

    /// Closes a node from outside: the generator has nothing left to try from it.
    pub fn close_node(&mut self, id: NodeId, why: &str) {
        self.close(id, why.to_string());
    }

    /// The path from the root to `id`, root first.
    pub fn lineage(&self, id: NodeId) -> Vec<NodeId> {
        let mut p = self.path_to_root(id);
        p.reverse();
        p
    }

    /// Nodes by reward, correct ones first (a wrong kernel never outranks a right one), and
    /// of those the ones that regress no served shape first.
    pub fn ranking(&self) -> Vec<NodeId> {
        let mut ids: Vec<NodeId> = self.nodes.iter().filter(|n| n.outcome.is_some()).map(|n| n.id).collect();
        let eligible = |n: &Node<P>| n.outcome.as_ref().is_some_and(Outcome::eligible);
        ids.sort_by(|a, b| {
            let (na, nb) = (&self.nodes[*a], &self.nodes[*b]);
            nb.is_correct()
                .cmp(&na.is_correct())
                .then(eligible(nb).cmp(&eligible(na)))
                .then(nb.reward.unwrap_or(f64::MIN).total_cmp(&na.reward.unwrap_or(f64::MIN)))
                .then(a.cmp(b))
        });
        ids
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cancelled_child_vanishes_and_a_saturated_node_keeps_its_subtree_open() {
        let mut t = Tree::new((), Config::default(), 1);
        let sel = t.select().unwrap();
        let a = t.add_pending(&sel, (), Intent::default());
        assert_eq!(t.node(0).pending, 1);
        t.cancel(a);
        assert_eq!(t.node(0).pending, 0);
        assert!(t.node(0).children.is_empty());
        assert!(t.ranking().iter().all(|id| *id != a));
        let sel = t.select().unwrap();
        let b = t.add_pending(&sel, (), Intent { technique: "x".into(), ..Default::default() });
        t.set_intent(
            b,
            Intent { technique: "vectorize".into(), tool: Some("scalar-global-access".into()), ..Default::default() },
        );
        t.record(b, Outcome::correct(1.5));
        assert_eq!(t.memory.technique("vectorize").unwrap().tries, 1);
        t.saturate(0);
        let next = t.select().expect("the root is saturated but its child is open");
        assert_eq!(next.parent, b);
        t.saturate(b);
        assert!(t.select().is_none());
    }

    #[test]
    fn a_kernel_that_regresses_a_served_shape_is_never_the_best() {
        let mut t = Tree::new((), Config::default(), 1);
        let sel = t.select().unwrap();
        let fast_mean = t.add_pending(&sel, (), Intent::default());
        t.record(fast_mean, Outcome::correct(3.0).regressing(true));
        assert_eq!(t.best().id, 0, "the baseline stays best beside a kernel that loses a served shape");
        let sel = t.select().unwrap();
        let steady = t.add_pending(&sel, (), Intent::default());
        t.record(steady, Outcome::correct(1.5));
        assert_eq!(t.best().id, steady, "a slower mean that loses nowhere is the best");
        assert_eq!(t.ranking()[..2], [steady, 0]);
        assert_eq!(t.ranking()[2], fast_mean, "ranked after every eligible correct node");
        assert!(
            t.node(fast_mean).reward.unwrap() > t.node(steady).reward.unwrap(),
            "its reward still guides the search"
        );
    }
}
