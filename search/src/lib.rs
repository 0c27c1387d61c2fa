//! Monte Carlo tree search over complete kernels, generic over the node payload.
//!
//! Every node is a full candidate; its reward is log2 of its speedup over the baseline,
//! and failures sit at a floor below every correct reward. Selection is UCT with
//! progressive widening (a node holds about k * visits^alpha children), asymmetric
//! branching (promising nodes widen faster, failed nodes get a bounded number of repair
//! children), dead-end pruning, virtual loss for parallel expansions, and search memory
//! of what each technique did. The state is plain data (serde), deterministic for a seed,
//! and does no I/O: the orchestrator evaluates, the tree decides. [`sim`] holds the
//! synthetic landscapes that justify each feature.

pub mod memory;
pub mod reward;
pub mod rng;
pub mod sim;
pub mod tree;

pub use memory::{Memory, Stats};
pub use reward::{Objective, Outcome, ParentSpeed, RewardConfig};
pub use tree::{Backup, Config, Expansion, Intent, Node, NodeId, Selection, Tree};
