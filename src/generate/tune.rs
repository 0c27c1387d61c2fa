//! The built-in generator: executable prescriptions and knob moves, no network.
//!
//! From a parent it proposes one of three kinds of move: a recipe application from the
//! `rewrite` crate (the parent's source rewritten: vectorized, index math narrowed, a
//! reduction turned into shuffles...), a knob move (a task `[tune]` knob, or a macro the
//! source offers as one, set with `-D`), or a safe compiler flag (`-maxrregcount`,
//! `--extra-device-vectorization`, `--use_fast_math` only where the task's tolerance can
//! absorb approximate transcendentals). Moves compose along a path: a child's source is
//! the parent's, rewritten, so a vectorized kernel can next be unrolled.
//!
//! Structural recipes (those that change the work, [`rewrite::RecipeKind::Structural`])
//! come before every move that only tunes the kernel (knobs, flags, tuning recipes), so
//! each structural win gets the next structural rewrite tried on top of it before its
//! knobs are polished; the tuning moves come when none is left, or when the parent is
//! near its floor, where what is left is polish and the two kinds compete on their scores.
//! One exception: on the child of `block-knob`, which only offers the block size as a
//! knob, the block sizes go first (they are that step's point).
//! A rewrite that holds more in registers ([`rewrite::Recipe::more_registers`]) starts its
//! child from a free register budget (no `-maxrregcount`, `NS_MIN_BLOCKS` at 1): the
//! budget fit the parent's code, not the new one. Where every kernel has launch bounds
//! with blocks per SM, ptxas ignores `-maxrregcount`, so no cap is proposed.
//! Within each group the parent's diagnoses order the moves: each recipe answers a list of
//! diagnosis tools and is weighted by the time they say their fix saves; knob and flag
//! moves are voted as an expert would (low occupancy: smaller blocks, a register cap or
//! more resident blocks per SM; spilled registers: a looser cap or fewer blocks;
//! scalar memory access: larger blocks; special functions: fast math; a knob a recipe
//! introduced, as that recipe). A knob's values that form a ladder (`16 32 64`) are
//! followed up to two steps past the end its parent sits at, after the listed values
//! that score alike.
//! A block whose x and y sizes are two knobs is also reshaped at its thread count (x
//! doubled and y halved, or the reverse): a family of its own, voted for the wider rows
//! where a warp's accesses fall badly along them (uncoalesced access, re-reads through L2
//! or DRAM), since a single knob's step changes the occupancy as well as the shape.
//! The search memory adds what each move and its family did elsewhere in this tree (the
//! move's mean gain over its parents, shrunk toward its family's other moves' while it has
//! few measured tries, and theirs toward none; for a knob's step, only the tries that
//! stepped the same way, up or down, from the value their parent had; a term for exploring
//! families tried less, as a tree search weighs its nodes; how often the family failed),
//! and leaves out the families that went stale on the parent's lineage (their children
//! kept landing within their parent's interval: [`search::memory::Lineage`]), and puts
//! last those idle across the run (only ever landing there). A move that did nothing but
//! lose on parents running one code, and lost twice there (slower, or failing to launch;
//! a knob's step, slower only stepping the same way), is left out on that code and tried
//! again on new code: a rewrite that gained ([`search::memory::Lineage::code_of`]); one
//! that failed to build twice, and has built nowhere, is left out everywhere. A recipe
//! that declines on coarse blocks is offered under them, the parent rebuilt along its path
//! ([`super::reorder`]). Without diagnoses the order is a seeded shuffle. The tuner never
//! proposes a kernel (source and configuration) already tried anywhere in the run. Its
//! order is deterministic for a seed and a parent; with several expansions in flight,
//! which of them claims a move first depends on timing.

use super::{Kernel, Proposal, Request};
use crate::run::config::Guidance;
use crate::run::events::{Candidate, NodeSummary};
use crate::run::failure::NodeFailure;
use crate::task::Task;
use crate::wall::protocol::FailureClass;
use heuristics::ToolId;
use rewrite::{Application, RecipeId, RecipeKind, Source};
use search::memory::{Lineage, Stats, Try, TryResult};
use search::rng::SplitMix64;
use search::Expansion;
use search::NodeId;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet, VecDeque};
use std::fmt;
use std::str::FromStr;
use std::sync::{Arc, Mutex};

const REGISTER_CAPS: [&str; 3] = ["32", "64", "128"];
const VECTORIZE_FLAG: &str = "--extra-device-vectorization";
const FAST_MATH: &str = "--use_fast_math";

/// How many parents' moves the tuner keeps ([`Tuner::moves_of`]): a move of a kernel of
/// a few hundred lines holds its source, tens of kilobytes.
const RECENT_PARENTS: usize = 8;

/// Whether `--use_fast_math` can pass this task's check: approximate `__expf` and friends
/// are good to about 2^-21 relative plus a few ulp, and flush denormals to zero, so only
/// tolerances of at least 1e-3 relative, or 16-bit outputs, can absorb them.
pub fn fast_math_allowed(task: &Task) -> bool {
    use crate::task::types::ElemType;
    let outs = crate::task::output_elems(task);
    let sixteen = !outs.is_empty() && outs.iter().all(|e| matches!(e, ElemType::F16 | ElemType::Bf16));
    sixteen || task.tolerance.rtol >= 1e-3
}

fn numeric(v: &str) -> Option<f64> {
    v.parse::<f64>().ok()
}

/// What a recipe's child does to the register budget it inherits, read once per parent
/// (in [`Tuner::moves`], whose moves are kept), not each time the child is made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Budget {
    /// The parent's cap and bound stay.
    Kept,
    /// The cap goes: every kernel of the child has launch bounds with blocks per SM, which
    /// ptxas obeys instead ([`register_cap_ignored`]).
    Uncapped,
    /// A rewrite that holds more in registers makes a new kernel whose registers are
    /// ptxas's choice again until a move caps them anew: the cap goes, and the file's
    /// blocks-per-SM knob, where it has one, goes to 1 (`Some(true)`: 1 is its default, so
    /// the define goes). A budget found for the parent's code starves code that holds more
    /// in registers: on an H200 a linear layer's `prefetch` under the `-maxrregcount=64`
    /// and two blocks of 256 threads its parent ran best with had 128 registers, spilled
    /// 1232 bytes and took 2.157 ms; at one block, 245 registers, 0.9705 ms.
    Freed { knob_default_one: Option<bool> },
}

impl Budget {
    /// The budget of a child `recipe` writes as `source`.
    fn of(recipe: RecipeId, source: &str) -> Budget {
        if rewrite::recipes::get(recipe).more_registers {
            let name = rewrite::recipes::launch_bounds::KNOB;
            // Only the recipe's own knob: a macro of that name the file defines itself is left be.
            let knob = source
                .contains(name)
                .then(|| rewrite::knobs::knobs(&Source::parse(source)).into_iter().find(|k| k.name == name))
                .flatten();
            Budget::Freed { knob_default_one: knob.map(|k| k.default.as_deref() == Some("1")) }
        } else if recipe == RecipeId::LaunchBounds && register_cap_ignored(&Source::parse(source)) {
            Budget::Uncapped
        } else {
            Budget::Kept
        }
    }

    fn apply(self, defines: &mut BTreeMap<String, String>, flags: &mut Vec<String>) {
        if self != Budget::Kept {
            flags.retain(|f| !FlagKind::RegisterCap.is_mine(f));
        }
        let name = rewrite::recipes::launch_bounds::KNOB;
        match self {
            Budget::Freed { knob_default_one: Some(true) } => {
                defines.remove(name);
            }
            Budget::Freed { knob_default_one: Some(false) } => {
                defines.insert(name.to_string(), "1".to_string());
            }
            _ => {}
        }
    }
}

/// Whether every kernel the file launches has `__launch_bounds__` with blocks per SM, so
/// that ptxas ignores `-maxrregcount` (measured on the linear layer: 245 registers under
/// `-maxrregcount=64` with `(256, 1)`, 128 with `(256, 2)`).
fn register_cap_ignored(src: &Source) -> bool {
    let kernels = src.primary_kernels();
    !kernels.is_empty()
        && kernels.iter().all(|k| {
            let head = &src.text()[k.range.start..k.body.start];
            head.find("__launch_bounds__").is_some_and(|at| two_arguments(&head[at..]))
        })
}

/// `__launch_bounds__(a, b)`: a comma at the top level of the first parentheses.
fn two_arguments(call: &str) -> bool {
    let mut depth = 0;
    for c in call.chars() {
        match c {
            '(' => depth += 1,
            ')' if depth == 1 => return false,
            ')' => depth -= 1,
            ',' if depth == 1 => return true,
            _ => {}
        }
    }
    false
}

/// A move that tightens the register budget (`tighter` > 0) answers register pressure and
/// low occupancy and costs where registers spill; one that loosens it, the reverse.
fn register_budget_vote(tighter: f64, add: &mut impl FnMut(ToolId, f64)) {
    for t in [ToolId::RegisterPressure, ToolId::LowOccupancy] {
        add(t, tighter);
    }
    add(ToolId::LocalMemory, -tighter);
}

/// A knob the tuner moves: a task's `[tune]` knob, or a macro the source offers as one.
#[derive(Debug, Clone)]
struct KnobSpec {
    name: String,
    values: Vec<String>,
    /// The source's value for it when unset (its `#define NAME VALUE`).
    default: Option<String>,
    /// A block size the source offers as a knob: voted as one.
    block_size: bool,
    /// Some launch's block is made of it: its range is the hardware's, not a ladder of the
    /// author's to follow past its end.
    sizes_a_block: bool,
}

/// A knob's value at a node, and the source's value for it there when unset.
#[derive(Debug, Clone, Default)]
struct KnobAt {
    value: Option<String>,
    default: Option<String>,
}

type KnobsAt = BTreeMap<String, KnobAt>;

/// Which way a knob move goes from its parent's value: up or down a numeric knob.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Way {
    Up,
    Down,
}

impl Way {
    fn of(from: &str, to: &str) -> Option<Way> {
        let (from, to) = (from.trim().parse::<f64>().ok()?, to.trim().parse::<f64>().ok()?);
        match to.partial_cmp(&from)? {
            std::cmp::Ordering::Greater => Some(Way::Up),
            std::cmp::Ordering::Less => Some(Way::Down),
            std::cmp::Ordering::Equal => None,
        }
    }
}

/// A sum of reward changes and their count.
#[derive(Debug, Clone, Copy, Default)]
struct Gains {
    sum: f64,
    n: u32,
}

impl Gains {
    fn add(&mut self, delta: f64) {
        self.sum += delta;
        self.n += 1;
    }
}

/// What the knob moves of a run did, by the way each went from its parent's value: per
/// knob, and per move (a technique, `knob:BT=128`). A knob value's own record mixes steps
/// either way (`BT=32` is a larger tile from 16 and a smaller one from 64), and on a tiled
/// kernel the two go opposite ways: in a 10-minute linear_splitk_f32 run (55e6ace) nine of
/// `BT`'s ten steps down lost (18-44% each) and five of its six steps up gained; keyed by
/// value, `BT=128` had one loss (on a 4.05x kernel) and was never tried again. Counted by
/// the way they went, two runs of that protocol tried it on their best kernels and ended
/// at 5.88x and 5.87x, against 5.10x and 5.37x.
#[derive(Debug, Default)]
struct Steps {
    by_knob: BTreeMap<(String, Way), Gains>,
    by_move: BTreeMap<(String, Way), Gains>,
}

/// One way to make a child.
#[derive(Debug, Clone)]
enum Move {
    /// The parent's source rewritten by a recipe.
    Recipe { app: Application, source: String, budget: Budget },
    /// `-D NAME=VALUE` (None: the source's default); `past_the_range`: a value beyond the
    /// knob's listed ones ([`past_the_range`]).
    /// `value` is the value in the child, the default's included.
    Knob {
        name: String,
        from: Option<String>,
        to: Option<String>,
        value: String,
        block_size: bool,
        past_the_range: bool,
    },
    /// A compiler flag switched (a register cap to a value, or a switch on or off).
    Flag { kind: FlagKind, from: Option<String>, to: Option<String> },
    /// A block's x and y sizes, two knobs, moved together at the block's thread count
    /// ([`shapes`]).
    Shape { x: Step, y: Step },
}

/// One knob of a [`Move::Shape`]: its name, value now and value in the child.
#[derive(Debug, Clone)]
struct Step {
    name: String,
    from: i64,
    to: i64,
    /// The value the source gives the knob when unset: set to it, the define goes.
    default: Option<String>,
}

/// A compiler flag the tuner moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FlagKind {
    RegisterCap,
    Vectorize,
    FastMath,
}

impl FlagKind {
    const ALL: [FlagKind; 3] = [FlagKind::RegisterCap, FlagKind::Vectorize, FlagKind::FastMath];

    fn name(self) -> &'static str {
        match self {
            FlagKind::RegisterCap => "maxrregcount",
            FlagKind::Vectorize => "extra-device-vectorization",
            FlagKind::FastMath => "use_fast_math",
        }
    }

    fn flag(self, value: Option<&str>) -> Option<String> {
        match (self, value) {
            (_, None) => None,
            (FlagKind::RegisterCap, Some(v)) => Some(format!("-maxrregcount={v}")),
            (FlagKind::Vectorize, Some(_)) => Some(VECTORIZE_FLAG.into()),
            (FlagKind::FastMath, Some(_)) => Some(FAST_MATH.into()),
        }
    }

    /// The value a flag list gives this kind.
    fn value_in(self, flags: &[String]) -> Option<String> {
        flags.iter().find_map(|f| match self {
            FlagKind::RegisterCap => f.strip_prefix("-maxrregcount=").map(str::to_string),
            FlagKind::Vectorize => (f == VECTORIZE_FLAG).then(|| "on".to_string()),
            FlagKind::FastMath => (f == FAST_MATH).then(|| "on".to_string()),
        })
    }

    fn is_mine(self, flag: &str) -> bool {
        match self {
            FlagKind::RegisterCap => flag.starts_with("-maxrregcount="),
            FlagKind::Vectorize => flag == VECTORIZE_FLAG,
            FlagKind::FastMath => flag == FAST_MATH,
        }
    }
}

impl Move {
    /// The technique name recorded for the node (and in the search memory).
    fn technique(&self) -> String {
        match self {
            Move::Recipe { app, .. } => app.to_string(),
            Move::Knob { name, to, .. } => format!("knob:{name}={}", to.as_deref().unwrap_or("default")),
            Move::Flag { kind, to, .. } => format!("flag:{}={}", kind.name(), to.as_deref().unwrap_or("off")),
            Move::Shape { x, y } => format!("shape:{}={},{}={}", x.name, x.to, y.name, y.to),
        }
    }

    /// Which way a knob move goes from its parent's value, for a numeric knob.
    fn way(&self) -> Option<Way> {
        match self {
            Move::Knob { from: Some(from), value, .. } => Way::of(from, value),
            _ => None,
        }
    }

    fn family(&self) -> Family {
        match self {
            Move::Recipe { app, .. } => Family::Recipe(app.recipe),
            Move::Knob { name, .. } => Family::Knob(name.clone()),
            Move::Flag { kind, .. } => Family::Flag(*kind),
            Move::Shape { x, y } => Family::Shape(format!("{},{}", x.name, y.name)),
        }
    }
}

/// A family of moves: every application of one recipe, every value of one knob or flag,
/// every shape of one block of two knobs.
/// What the search memory sums a move's history over, and what its lineage finds stale.
/// Written as its techniques begin: the recipe id, `knob:NAME`, `flag:NAME`,
/// `shape:X,Y`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Family {
    Recipe(RecipeId),
    Knob(String),
    Flag(FlagKind),
    /// A block's shape, by its x and y knobs' names joined with `,`: a family of its own,
    /// since what single steps of either knob did (each also changes the thread count)
    /// says little of what a shape at the same count does.
    Shape(String),
}

impl Family {
    /// Whether its moves make a new kernel (a structural recipe) rather than tune the one
    /// they are given (knobs, flags, tuning recipes).
    pub fn structural(&self) -> bool {
        matches!(self, Family::Recipe(id) if rewrite::recipes::get(*id).kind == RecipeKind::Structural)
    }
}

impl fmt::Display for Family {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Family::Recipe(id) => write!(f, "{id}"),
            Family::Knob(name) => write!(f, "knob:{name}"),
            Family::Flag(kind) => write!(f, "flag:{}", kind.name()),
            Family::Shape(names) => write!(f, "shape:{names}"),
        }
    }
}

impl FromStr for Family {
    type Err = String;

    /// The family of a technique as the tuner names it (`vectorize:width=8`,
    /// `knob:BLOCK=128`, `flag:maxrregcount=32`, `shape:BX=32,BY=8`), or of a family's
    /// own name.
    fn from_str(technique: &str) -> Result<Family, String> {
        let (head, rest) = technique.split_once(':').unwrap_or((technique, ""));
        let name = rest.split('=').next().unwrap_or_default();
        match head {
            "knob" if !name.is_empty() => Ok(Family::Knob(name.to_string())),
            "shape" => {
                let names: Vec<&str> = rest.split(',').map(|s| s.split('=').next().unwrap_or_default()).collect();
                if names.len() != 2 || names.iter().any(|n| n.is_empty()) {
                    return Err(format!("`{technique}`: expected shape:X=VALUE,Y=VALUE"));
                }
                Ok(Family::Shape(names.join(",")))
            }
            "flag" => FlagKind::ALL
                .into_iter()
                .find(|k| k.name() == name)
                .map(Family::Flag)
                .ok_or_else(|| format!("`{technique}`: no flag the tuner moves")),
            _ => head.parse().map(Family::Recipe),
        }
    }
}

/// Whether the parent is near its floor: at the share of the physical floor at which the
/// diagnoses call DRAM at the roofline. What is left there is polish, which knobs and
/// flags are for.
fn near_floor(parent: &NodeSummary) -> bool {
    parent.pct_of_floor.is_some_and(|p| p >= heuristics::roofline::AT_ROOFLINE_DRAM_PCT)
}

pub struct Tuner {
    facts: rewrite::Facts,
    /// The kernel the run starts from, to rebuild a parent along its path
    /// ([`super::reorder`]).
    baseline: String,
    /// The task's `[tune]` knobs and their values.
    task_knobs: BTreeMap<String, Vec<String>>,
    flags: Vec<(FlagKind, Vec<Option<String>>)>,
    tried: Mutex<HashSet<String>>,
    /// The moves of the parents proposed from last, newest first: the search proposes
    /// from one parent several times, and its moves take the recipes hundreds of
    /// milliseconds to find (a causal convolution under `coarsen`: 0.42 s).
    recent_moves: Mutex<VecDeque<(String, Arc<Vec<Move>>)>>,
    /// Each node's knob values, for the nodes proposed from (and, after a resume, every
    /// node proposed whose source the log gave back): which way each try of a knob stepped,
    /// for its score ([`Steps`]) and for leaving it out ([`never_pays`]).
    knobs_at: Mutex<HashMap<NodeId, KnobsAt>>,
    seed: u64,
    guidance: Guidance,
    /// Libraries the baseline may link and candidates may not (`baseline_libs` beyond
    /// `libs`): a parent that calls one has only children that cannot build.
    baseline_only_libs: Vec<String>,
    /// A library-free kernel of the task (its reference) to start from where the kernel
    /// to improve calls one of those libraries.
    start: Option<StartKernel>,
}

/// A library-free kernel the tuner proposes as the one child of a kernel it cannot
/// rewrite: the search then improves that kernel instead, and the wall still measures
/// every descendant against the library baseline.
struct StartKernel {
    /// Its file name, for the node's technique (`start:reference.cu`).
    name: String,
    source: String,
}

/// The first call in `source` into one of `libs`, by the libraries' naming convention
/// (`cublasGemmEx` is cuBLAS's: the library's name, then an upper-case letter or `_`).
fn library_call<'s>(source: &'s Source, libs: &[String]) -> Option<(&'s str, String)> {
    source.called_functions().into_iter().find_map(|f| {
        libs.iter()
            .find(|lib| {
                f.strip_prefix(lib.as_str())
                    .and_then(|rest| rest.chars().next())
                    .is_some_and(|c| c.is_ascii_uppercase() || c == '_')
            })
            .map(|lib| (f, lib.clone()))
    })
}

/// The identity of a kernel: its source and its build configuration.
fn content_key(source: &str, defines: &BTreeMap<String, String>, flags: &[String]) -> String {
    let mut flags = flags.to_vec();
    flags.sort();
    let mut h = Sha256::new();
    h.update(source.as_bytes());
    h.update([0]);
    h.update(Candidate { source: String::new(), defines: defines.clone(), flags }.config_label());
    h.finalize().iter().take(16).map(|b| format!("{b:02x}")).collect()
}

impl Tuner {
    pub fn new(task: &Task, baseline_source: &str, seed: u64, guidance: Guidance) -> Tuner {
        let mut flags = vec![
            (
                FlagKind::RegisterCap,
                std::iter::once(None).chain(REGISTER_CAPS.iter().map(|c| Some(c.to_string()))).collect(),
            ),
            (FlagKind::Vectorize, vec![None, Some("on".to_string())]),
        ];
        if fast_math_allowed(task) {
            flags.push((FlagKind::FastMath, vec![None, Some("on".to_string())]));
        }
        let t = Tuner {
            facts: crate::task::facts::rewrite_facts(task),
            baseline: baseline_source.to_string(),
            task_knobs: task.tune.clone(),
            flags,
            tried: Mutex::new(HashSet::new()),
            recent_moves: Mutex::new(VecDeque::new()),
            knobs_at: Mutex::new(HashMap::new()),
            seed,
            guidance,
            baseline_only_libs: task
                .build
                .baseline_libs
                .iter()
                .filter(|l| !task.build.libs.contains(l))
                .cloned()
                .collect(),
            start: None,
        };
        t.tried.lock().unwrap().insert(content_key(baseline_source, &BTreeMap::new(), &[]));
        t.remember_knobs(
            0,
            &Source::parse(baseline_source),
            &Candidate { source: String::new(), defines: BTreeMap::new(), flags: Vec::new() },
        );
        t
    }

    /// Offers `source` (file `name`, the task's reference) as the start where the kernel
    /// to improve calls a library only the baseline may link; ignored when it calls one
    /// itself.
    pub fn starting_from(mut self, name: &str, source: String) -> Tuner {
        if library_call(&Source::parse(&source), &self.baseline_only_libs).is_none() {
            self.start = Some(StartKernel { name: name.to_string(), source });
        }
        self
    }

    /// Marks node `id`'s kernel, proposed before a resume, as tried, and notes its knob
    /// values (a source the log could not give back, empty, says none).
    pub fn remember(&self, id: NodeId, cand: &Candidate, source: &str) {
        self.tried.lock().unwrap().insert(content_key(source, &cand.defines, &cand.flags));
        if !source.is_empty() {
            self.remember_knobs(id, &Source::parse(source), cand);
        }
    }

    /// Notes node `id`'s knob values, once.
    fn remember_knobs(&self, id: NodeId, parsed: &Source, cand: &Candidate) {
        if self.knobs_at.lock().unwrap().contains_key(&id) {
            return;
        }
        let values: KnobsAt = self
            .knob_specs(parsed)
            .into_iter()
            .map(|k| {
                let value = cand.defines.get(&k.name).cloned().or(k.default.clone());
                (k.name, KnobAt { value, default: k.default })
            })
            .collect();
        self.knobs_at.lock().unwrap().insert(id, values);
    }

    /// What the steps of each knob did across the run, by the way they went from the
    /// value their parent had (`at`: every node's knobs the tuner noted).
    fn steps(memory: &search::Memory, at: &HashMap<NodeId, KnobsAt>) -> Steps {
        let mut steps = Steps::default();
        for technique in memory.techniques.keys() {
            let Ok(Family::Knob(name)) = technique.parse::<Family>() else { continue };
            for t in memory.lineage.tries(technique) {
                let (Some(delta), Some(way)) = (t.delta, way_of_try(technique, t.parent, at)) else { continue };
                steps.by_knob.entry((name.clone(), way)).or_default().add(delta);
                steps.by_move.entry((technique.clone(), way)).or_default().add(delta);
            }
        }
        steps
    }

    /// The knobs of a source: the task's, then those the source offers.
    fn knob_specs(&self, parsed: &Source) -> Vec<KnobSpec> {
        // Every macro a launch's block size is made of (through constants, arithmetic or
        // a `dim3`'s components), and the block as written, for a knob of the task's.
        let mut block_knobs: HashSet<String> = HashSet::new();
        for l in parsed.launches() {
            if let Some(dims) = rewrite::launch::block(parsed, &l) {
                block_knobs.extend(dims.macros().into_iter().map(str::to_string));
            }
            block_knobs.extend(l.config.get(1).map(|b| b.trim().to_string()));
        }
        let mut knobs: Vec<KnobSpec> = self
            .task_knobs
            .iter()
            .map(|(name, values)| KnobSpec {
                name: name.clone(),
                values: values.clone(),
                // The default a task knob has when unset: the source's `#define NAME VALUE`.
                default: rewrite::knobs::macro_value(parsed, name),
                block_size: false,
                sizes_a_block: block_knobs.contains(name),
            })
            .collect();
        for k in rewrite::knobs(parsed) {
            let block_size = block_knobs.contains(&k.name);
            if let Some(existing) = knobs.iter_mut().find(|x| x.name == k.name) {
                existing.block_size = block_size;
                continue;
            }
            knobs.push(KnobSpec {
                name: k.name,
                values: k.values,
                default: k.default,
                block_size,
                sizes_a_block: block_size,
            });
        }
        knobs
    }

    /// [`Tuner::moves`], from the parents proposed from last where it is one of them.
    fn moves_of(&self, parsed: &Source, parent: &Candidate, path: &[String]) -> Arc<Vec<Move>> {
        let key = format!("{}\n{}", content_key(parsed.text(), &parent.defines, &parent.flags), path.join("\n"));
        if let Some((_, moves)) = self.recent_moves.lock().unwrap().iter().find(|(k, _)| *k == key) {
            return moves.clone();
        }
        let moves = Arc::new(self.moves(parsed, parent, path));
        let mut recent = self.recent_moves.lock().unwrap();
        recent.push_front((key, moves.clone()));
        recent.truncate(RECENT_PARENTS);
        moves
    }

    /// Every move from a parent (at the end of `path`), unscored.
    fn moves(&self, parsed: &Source, parent: &Candidate, path: &[String]) -> Vec<Move> {
        let mut out = Vec::new();
        let source = parsed.text();
        let mut offered = HashSet::new();
        for r in rewrite::recipes::ALL {
            for params in r.variants() {
                let app = Application { recipe: r.id, params };
                if let Ok(rw) = r.run(parsed, &self.facts, &app.params) {
                    if rw.source != source {
                        offered.insert(app.to_string());
                        let budget = Budget::of(app.recipe, &rw.source);
                        out.push(Move::Recipe { app, source: rw.source, budget });
                    }
                }
            }
        }
        if let Some(rebuilt) = super::reorder::rebuild(&self.facts, &self.baseline, path, source) {
            for (app, source) in super::reorder::under_reshaping(&self.facts, &rebuilt, source, &offered) {
                let budget = Budget::of(app.recipe, &source);
                out.push(Move::Recipe { app, source, budget });
            }
        }
        let knobs = self.knob_specs(parsed);
        out.extend(shapes(parsed, parent, &knobs));
        for k in knobs {
            let current = parent.defines.get(&k.name).cloned().or(k.default.clone());
            // A block size's range is the hardware's (a task knob that sizes a block may
            // not be a source knob of its own, so the launches decide, not `block_size`);
            // any other ladder is the author's guess, and a parent at its end has not found
            // the knob's best yet.
            let mut values = k.values;
            let listed = values.len();
            if !k.sizes_a_block {
                values.extend(past_the_range(&values, current.as_deref()));
            }
            for (i, v) in values.into_iter().enumerate() {
                if Some(&v) == current.as_ref() {
                    continue;
                }
                let to = if Some(&v) == k.default.as_ref() { None } else { Some(v.clone()) };
                let past_the_range = i >= listed;
                let (from, name) = (current.clone(), k.name.clone());
                out.push(Move::Knob { name, from, to, value: v, block_size: k.block_size, past_the_range });
            }
        }
        // Where every kernel has launch bounds with blocks per SM, ptxas takes its register
        // budget from them and ignores `-maxrregcount`: a cap would build the same kernel.
        let bounded = register_cap_ignored(parsed);
        for (kind, values) in &self.flags {
            if *kind == FlagKind::RegisterCap && bounded {
                continue;
            }
            let current = kind.value_in(&parent.flags);
            for v in values {
                if *v != current {
                    out.push(Move::Flag { kind: *kind, from: current.clone(), to: v.clone() });
                }
            }
        }
        out
    }

    /// The child a move makes.
    fn child(
        &self,
        parent_source: &str,
        parent: &Candidate,
        m: &Move,
    ) -> (String, BTreeMap<String, String>, Vec<String>) {
        let mut defines = parent.defines.clone();
        let mut flags = parent.flags.clone();
        let source = match m {
            Move::Recipe { source, budget, .. } => {
                budget.apply(&mut defines, &mut flags);
                source.clone()
            }
            Move::Knob { name, to, .. } => {
                match to {
                    Some(v) => defines.insert(name.clone(), v.clone()),
                    None => defines.remove(name),
                };
                parent_source.to_string()
            }
            Move::Shape { x, y } => {
                for step in [x, y] {
                    if step.default.as_deref().and_then(|d| d.trim().parse::<i64>().ok()) == Some(step.to) {
                        defines.remove(&step.name);
                    } else {
                        defines.insert(step.name.clone(), step.to.to_string());
                    }
                }
                parent_source.to_string()
            }
            Move::Flag { kind, to, .. } => {
                flags.retain(|f| !kind.is_mine(f));
                if let Some(f) = kind.flag(to.as_deref()) {
                    flags.push(f);
                }
                parent_source.to_string()
            }
        };
        // One order for one set of flags, so the same build has one key.
        flags.sort();
        (source, defines, flags)
    }

    /// How much the diagnoses favour a move, and the tool that favours it most.
    /// `capped`: the parent builds under `-maxrregcount`.
    fn vote(m: &Move, diagnoses: &BTreeMap<ToolId, f64>, capped: bool) -> (f64, Option<ToolId>) {
        let mut total = 0.0;
        let mut best: Option<(f64, ToolId)> = None;
        let mut add = |tool: ToolId, weight: f64| {
            if let Some(score) = diagnoses.get(&tool) {
                let v = weight * score;
                total += v;
                if v > 0.0 && best.as_ref().is_none_or(|(b, _)| v > *b) {
                    best = Some((v, tool));
                }
            }
        };
        match m {
            Move::Recipe { app, .. } if app.recipe == RecipeId::LaunchBounds => {
                // One block per SM frees the registers to the block's share (the bound
                // overrides `-maxrregcount`) and never caps below what the launch needs;
                // two or more cap them, tighter than no cap, but against a parent's cap
                // the direction depends on the block size.
                let tighter = match app.params.0.get("min_blocks").and_then(|v| numeric(v)) {
                    Some(b) if b <= 1.0 => -1.0,
                    _ if capped => 0.0,
                    _ => 1.0,
                };
                register_budget_vote(tighter, &mut add);
            }
            Move::Recipe { app, .. } => {
                let r = rewrite::recipes::get(app.recipe);
                // The first two tools are what the recipe is for; the rest it helps with.
                for (i, tool) in r.answers.iter().enumerate() {
                    add(*tool, if i < 2 { 1.0 } else { 0.6 });
                }
            }
            Move::Knob { name, from, value, .. } if name == rewrite::recipes::launch_bounds::KNOB => {
                // More resident blocks per SM: a tighter register budget.
                let tighter = match (from.as_deref().and_then(numeric), numeric(value)) {
                    (Some(a), Some(b)) => (b - a).signum(),
                    _ => 0.0,
                };
                register_budget_vote(tighter, &mut add);
            }
            Move::Knob { name, from, value, block_size, .. } => {
                // A recipe's knob is voted as the recipe (`NS_COARSEN` as `coarsen`), a
                // little below it: the parent has the recipe's change already, and how
                // much of it pays is what the knob finds out. Without this vote it waited
                // behind every voted move: a 5-minute causal_conv1d run made 66 nodes,
                // 29 of them within their parent's interval, and never moved it.
                if let Some(r) = rewrite::recipes::ALL.iter().find(|r| r.knobs.contains(&name.as_str())) {
                    for (i, tool) in r.answers.iter().enumerate() {
                        add(*tool, if i < 2 { 0.9 } else { 0.5 });
                    }
                }
                // Back to the default counts too: `to` is None there, `value` the default.
                let dir = match (from.as_deref().and_then(numeric), numeric(value)) {
                    (Some(a), Some(b)) => (b - a).signum(),
                    _ => 0.0,
                };
                if *block_size {
                    for t in [
                        ToolId::LowOccupancy,
                        ToolId::UnderFilledGrid,
                        ToolId::BarrierStalls,
                        ToolId::SharedBankConflicts,
                    ] {
                        add(t, -dir);
                    }
                    for t in [ToolId::RegisterPressure, ToolId::LocalMemory] {
                        add(t, -0.5 * dir);
                    }
                }
                // Only a block size has a known direction for memory access.
                let dir = if *block_size { dir } else { 0.0 };
                for t in [
                    ToolId::MemoryLatencyBound,
                    ToolId::LaunchOverhead,
                    ToolId::ScalarGlobalAccess,
                    ToolId::NarrowGlobalAccess,
                    ToolId::UncoalescedGlobal,
                    ToolId::RedundantDramTraffic,
                    ToolId::RedundantL2Traffic,
                ] {
                    // Larger blocks put more loads in flight per SM; a weaker fix than the
                    // rewrites that answer these tools.
                    add(t, 0.5 * dir);
                }
            }
            Move::Shape { x, .. } => {
                // The thread count stays: only the tools of how a warp's accesses fall
                // along a row vote, for the wider block.
                let wider = (x.to - x.from).signum() as f64;
                for t in [ToolId::UncoalescedGlobal, ToolId::RedundantL2Traffic, ToolId::RedundantDramTraffic] {
                    add(t, 0.5 * wider);
                }
            }
            Move::Flag { kind, from, to } => match kind {
                FlagKind::RegisterCap => {
                    // Any cap, or a tighter one, limits registers; removing it frees them.
                    let tighter = match (from.as_deref().and_then(numeric), to.as_deref().and_then(numeric)) {
                        (None, Some(_)) => 1.0,
                        (Some(_), None) => -1.0,
                        (Some(a), Some(b)) => (a - b).signum(),
                        _ => 0.0,
                    };
                    register_budget_vote(tighter, &mut add);
                }
                FlagKind::Vectorize => {
                    let on = if to.is_some() { 1.0 } else { -1.0 };
                    for t in [
                        ToolId::ScalarGlobalAccess,
                        ToolId::NarrowGlobalAccess,
                        ToolId::MemoryLatencyBound,
                        ToolId::UncoalescedGlobal,
                    ] {
                        add(t, 0.5 * on);
                    }
                }
                FlagKind::FastMath => {
                    let on = if to.is_some() { 1.0 } else { -1.0 };
                    for t in [
                        ToolId::SpecialFunctionBound,
                        ToolId::AccurateMath,
                        ToolId::ConversionOverhead,
                        ToolId::Fp64InFp32,
                    ] {
                        add(t, on);
                    }
                }
            },
        }
        (total, best.map(|(_, t)| t))
    }

    /// What this move and its family did elsewhere in the tree: the move's own mean gain
    /// over its parents (log2), shrunk by [`PRIOR_TRIES`] toward the mean of its family's
    /// other moves, which is shrunk toward none alike; plus an exploration term that
    /// shrinks as the family is tried (UCB1 over the families, [`EXPLORE`]); less a
    /// penalty for the family's failures. `records` is every family's record, `all` the
    /// run's count of tries of them. A step of a numeric knob counts only the tries that
    /// went its way ([`Steps`]): its own, those of the same technique (a value, or the
    /// default) stepped the same way, up or down; its family's, every step of the knob
    /// that way. A knob's values move a kernel different ways (a larger tile gains where a
    /// smaller one loses): a 10-minute linear_splitk_f32 run, whose `BT` moves had gained,
    /// went back to `BT`'s default on 5 parents and lost 40% each time.
    fn memory_bonus(
        m: &Move,
        memory: &BTreeMap<String, Stats>,
        records: &BTreeMap<Family, Record>,
        steps: &Steps,
        all: u32,
    ) -> f64 {
        let family = records.get(&m.family()).copied().unwrap_or_default();
        let (own, group) = match (m, m.way()) {
            (Move::Knob { name, .. }, Some(way)) => {
                let of = |map: &BTreeMap<(String, Way), Gains>, key: String| map.get(&(key, way)).copied();
                (of(&steps.by_move, m.technique()), of(&steps.by_knob, name.clone()))
            }
            _ => {
                let own = memory.get(&m.technique()).map(|s| Gains { sum: s.delta_sum, n: s.deltas });
                (own, Some(Gains { sum: family.gain_sum, n: family.measured }))
            }
        };
        let (own, group) = (own.unwrap_or_default(), group.unwrap_or_default());
        // Every try of a move is one of its group's, so the group's record holds its own.
        debug_assert!(group.n >= own.n, "{} outside its group's record", m.technique());
        // The group without this move: its own record is counted once, in its own mean.
        let others = (group.sum - own.sum) / (group.n.saturating_sub(own.n) as f64 + PRIOR_TRIES);
        let mean = (own.sum + PRIOR_TRIES * others) / (own.n as f64 + PRIOR_TRIES);
        let mut bonus = 0.5 * mean.clamp(-0.5, 0.5);
        if all > 0 {
            bonus += EXPLORE * ((1.0 + all as f64).ln() / (1.0 + family.tries as f64)).sqrt();
        }
        if family.tries >= 2 {
            bonus -= 0.2 * (1.0 - family.correct as f64 / family.tries as f64);
        }
        bonus
    }

    /// A small preference when nothing else decides: rewrites that change the work, then
    /// those that tune it, then knobs, then flags.
    fn prior(m: &Move) -> f64 {
        match m {
            // Of two rewrites that answer a finding alike, the one that answers more kinds
            // of finding goes first: it changes more of the kernel's structure, and the
            // narrower one can still follow it (dividing once per run of V subsumes a
            // faster division per element; the other order leaves no division to split).
            Move::Recipe { app, .. } => {
                let r = rewrite::recipes::get(app.recipe);
                let kind = match r.kind {
                    RecipeKind::Structural => 0.03,
                    RecipeKind::Tuning => 0.02,
                };
                kind + 0.002 * r.answers.len() as f64
            }
            Move::Knob { .. } | Move::Shape { .. } => 0.01,
            Move::Flag { .. } => 0.0,
        }
    }

    /// The one child of a kernel that calls a baseline-only library: the library-free
    /// start, once; without one the tuner has nothing it could build.
    fn start_instead(&self, call: &str, lib: &str) -> Proposal {
        let Some(start) = &self.start else {
            return Proposal::Stop(format!(
                "the kernel to improve calls {call} from lib{lib}, which only the baseline may link; the tuner \
                 rewrites kernel source and keeps every call, so no child of it could build; give the task a \
                 library-free reference to start from, or let an LLM generator (--generator llm) write one"
            ));
        };
        let fresh = self.tried.lock().unwrap().insert(content_key(&start.source, &BTreeMap::new(), &[]));
        if !fresh {
            return Proposal::Nothing(format!(
                "the kernel to improve calls {call} from lib{lib}, which no child may call; its library-free start \
                 ({}) is already in the tree",
                start.name
            ));
        }
        Proposal::Kernel(Kernel {
            source: start.source.clone(),
            defines: BTreeMap::new(),
            flags: Vec::new(),
            technique: format!("start:{}", start.name),
            tool: None,
        })
    }

    pub fn propose(&self, req: &Request) -> Proposal {
        if req.kind == Expansion::Repair {
            return Proposal::Nothing("the tuner does not repair failed kernels".into());
        }
        // Every move keeps the parent's calls, so each child would fail the import check.
        let parsed = Source::parse(&req.parent_source);
        if let Some((call, lib)) = library_call(&parsed, &self.baseline_only_libs) {
            return self.start_instead(call, &lib);
        }
        let diagnoses: BTreeMap<ToolId, f64> = match (self.guidance, &req.profile.diagnoses) {
            (Guidance::Tools, Some(report)) => {
                // A finding on a kernel that takes a tenth of the time can gain at most a
                // tenth: each score is weighed by its kernel's share of the measured time
                // (all alike where a duration is missing).
                let total: f64 = report.kernels.iter().filter_map(|k| k.roofline.duration_us).sum();
                let share = |k: &heuristics::diagnosis::KernelDiagnosis| match k.roofline.duration_us {
                    Some(us) if total > 0.0 && report.kernels.iter().all(|k| k.roofline.duration_us.is_some()) => {
                        us / total
                    }
                    _ => 1.0,
                };
                let mut by_tool: BTreeMap<ToolId, f64> = BTreeMap::new();
                for k in &report.kernels {
                    for d in &k.diagnoses {
                        let e = by_tool.entry(d.tool).or_default();
                        *e = e.max(d.score * share(k));
                    }
                }
                by_tool
            }
            _ => BTreeMap::new(),
        };
        let mut rng =
            SplitMix64::new(self.seed ^ (req.parent as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ req.node as u64);
        let parent = &req.parent_candidate;
        let lineage = &req.memory.lineage;
        let stale: BTreeSet<Family> =
            lineage.stale_families(req.parent).iter().filter_map(|f| f.parse().ok()).collect();
        // Idle families go last rather than out: one of their children moving a kernel
        // brings them back, and a kernel that answered "nothing left" is never expanded
        // again. `block-knob`'s child is its parent with the block size spelled as a knob,
        // at its parent's speed by construction: what it is worth shows in the sizes tried
        // below it, so the run's count of its landings in the noise says nothing.
        let idle: BTreeSet<Family> = lineage
            .idle_families()
            .iter()
            .filter_map(|f| f.parse().ok())
            .filter(|f| *f != Family::Recipe(rewrite::RecipeId::BlockKnob))
            .collect();
        // Away from the floor a structural rewrite goes before any tuning of the kernel.
        let structure_first = !near_floor(&req.parent_summary);
        // A kernel `block-knob` just made is its parent with the block size offered as a
        // knob: the sizes are that step's point, so they go first, before the rewrites
        // (else the step is one more node at its parent's speed).
        let block_opened = req.path.last().and_then(|t| t.parse::<Family>().ok())
            == Some(Family::Recipe(rewrite::RecipeId::BlockKnob));
        let moves = self.moves_of(&parsed, parent, &req.path);
        self.remember_knobs(req.parent, &parsed, parent);
        let knobs_at = self.knobs_at.lock().unwrap();
        let records = Record::of_families(&req.memory.techniques);
        let steps = Self::steps(&req.memory, &knobs_at);
        let all_tries = records.values().map(|r| r.tries).sum();
        let capped = FlagKind::RegisterCap.value_in(&parent.flags).is_some();
        let mut scored: Vec<(u8, f64, Option<ToolId>, &Move)> = moves
            .iter()
            .filter(|m| !stale.contains(&m.family()) && !never_pays(m, lineage, req.parent, &knobs_at))
            .map(|m| {
                let (vote, tool) = Self::vote(m, &diagnoses, capped);
                // Defaults first: each parameter moved off its default costs a little.
                let distance = match m {
                    Move::Knob { past_the_range: true, .. } => 0.005 + PAST_THE_RANGE_COST,
                    Move::Knob { .. } | Move::Flag { .. } | Move::Shape { .. } => 0.005,
                    Move::Recipe { app, .. } => {
                        let spec = rewrite::recipes::get(app.recipe).params;
                        let moved = spec
                            .iter()
                            .filter(|p| app.params.0.get(p.name).is_some_and(|v| Some(&v.as_str()) != p.values.first()))
                            .count();
                        0.004 * moved as f64
                    }
                };
                let score =
                    vote + Self::prior(m) + Self::memory_bonus(m, &req.memory.techniques, &records, &steps, all_tries)
                        - distance
                        + 0.001 * rng.unit();
                let rank = match m {
                    _ if idle.contains(&m.family()) => 0,
                    Move::Knob { block_size: true, .. } | Move::Shape { .. } if block_opened => 3,
                    _ if structure_first && m.family().structural() => 2,
                    _ => 1,
                };
                (rank, score, tool, m)
            })
            .collect();
        drop(knobs_at);
        scored.sort_by(|a, b| b.0.cmp(&a.0).then(b.1.total_cmp(&a.1)));
        let mut tried = self.tried.lock().unwrap();
        for (_, _, tool, m) in scored {
            let (source, defines, flags) = self.child(&req.parent_source, parent, m);
            let key = content_key(&source, &defines, &flags);
            if !tried.insert(key) {
                continue;
            }
            return Proposal::Kernel(Kernel {
                source,
                defines,
                flags,
                technique: m.technique(),
                tool: tool.map(|t| t.to_string()),
            });
        }
        if stale.is_empty() {
            return Proposal::Nothing("every recipe, knob, shape and flag move from this kernel has been tried".into());
        }
        let stale: Vec<String> = stale.iter().map(Family::to_string).collect();
        Proposal::Nothing(format!(
            "every recipe, knob, shape and flag move from this kernel has been tried, but for those of {}: {} or more of \
             each one's children landed within their parent's interval on this kernel's lineage",
            stale.join(", "),
            search::memory::STALE_AFTER
        ))
    }
}

/// The block reshaped at its thread count, for each launch whose block's x and y sizes
/// are two knobs, `#define`s of their own written directly or through a constant (what
/// `block-knob` makes of `dim3 block(16, 16)`): x doubled and y halved, and the reverse,
/// where both values are in their knobs' lists. A single knob's step changes the thread
/// count too, and with it the occupancy, which hides what the shape does: in a 10-minute
/// run on a 3x3 stencil the steps to 32 x 16 and 16 x 32 threads both lost (0.0958 and
/// 0.0996 ms against 0.0859) and 32 x 8 was never tried, where a hand variant of an
/// earlier strip had gained 6% from it (0.0888 -> 0.0831 ms). A warp of a wider block
/// spans more of an image row, so fewer of the sectors it reads at a row's ends are its
/// neighbours' (a stencil's halo, a misaligned row).
fn shapes(parsed: &Source, parent: &Candidate, knobs: &[KnobSpec]) -> Vec<Move> {
    let value = |name: &str| -> Option<(i64, &[String], Option<String>)> {
        let k = knobs.iter().find(|k| k.name == name)?;
        let now = parent.defines.get(name).or(k.default.as_ref())?.trim().parse().ok()?;
        Some((now, k.values.as_slice(), k.default.clone()))
    };
    let listed = |values: &[String], v: i64| values.iter().any(|s| s.trim().parse::<i64>().ok() == Some(v));
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    for l in parsed.launches() {
        let Some(dims) = rewrite::launch::block(parsed, &l) else { continue };
        // A component written as the macro, or as a constant that is one
        // (`const int bx = NS_BLOCK_X;`, what `block-knob` makes of `const int bx = 16;`).
        let name =
            |axis| dims.component(axis).and_then(|c| rewrite::knobs::block_macro(&c.size)).map(|m| m.name.clone());
        let (Some(xn), Some(yn)) = (name(0), name(1)) else { continue };
        // One pair one family, whichever axis a launch gives each knob.
        if xn == yn || !seen.insert((xn.clone().min(yn.clone()), xn.clone().max(yn.clone()))) {
            continue;
        }
        let (Some((x, xs, xd)), Some((y, ys, yd))) = (value(&xn), value(&yn)) else { continue };
        for (nx, ny) in
            [(x.checked_mul(2), (y % 2 == 0).then_some(y / 2)), ((x % 2 == 0).then_some(x / 2), y.checked_mul(2))]
        {
            let (Some(nx), Some(ny)) = (nx, ny) else { continue };
            if nx < 1 || ny < 1 || !listed(xs, nx) || !listed(ys, ny) {
                continue;
            }
            out.push(Move::Shape {
                x: Step { name: xn.clone(), from: x, to: nx, default: xd.clone() },
                y: Step { name: yn.clone(), from: y, to: ny, default: yd.clone() },
            });
        }
    }
    out
}

/// Which way a try of knob move `technique` (`knob:NAME=VALUE`, or `=default`: the
/// source's default at the parent) went from the value its parent had, where the tuner
/// noted that parent's knobs (`at`) and both values are numbers.
fn way_of_try(technique: &str, parent: NodeId, at: &HashMap<NodeId, KnobsAt>) -> Option<Way> {
    let (head, value) = technique.split_once('=')?;
    let k = at.get(&parent)?.get(head.strip_prefix("knob:")?)?;
    let to = if value == "default" { k.default.as_deref()? } else { value };
    Way::of(k.value.as_deref()?, to)
}

/// How many parents a move must have lost on before it is not proposed again: failed to
/// build on any, or on parents running one code ([`Lineage::code_of`]) failed to launch
/// or ran slower than the parent beyond the noise; and done nothing else there. A block
/// size the kernel's registers cannot hold (1024 threads at 92 registers) fails alike on
/// every parent of that kernel, and one that starves it (512 threads there, 7% slower)
/// loses alike: a 3-minute run on rowwise_quant_int8 spent 6 of its 61 nodes on the first,
/// and with that one left out, another 6 of 72 on the second, never reaching the 64-thread
/// blocks that paid 8%.
pub const DEAD_AFTER: usize = 2;

/// Whether this exact move (technique and value) is not worth proposing on `parent`: of its
/// tries that count for `parent`, there are [`DEAD_AFTER`] or more and every one lost. A
/// try on a parent with nothing to compare with (failed or untimed) never counts. A build
/// error counts on any parent while the move has built on none: a knob value past a
/// kernel's range (`BT=8` where the tile needs 16 rows) fails to build alike everywhere.
/// Any other try counts only on parents running `parent`'s code: new code (a rewrite that
/// gained) gets the move tried again, since what it lost to may be gone (a 10-minute
/// causal_conv1d run had `fast-divmod` lose 4% twice early, and never tried it on the
/// coarse-block kernels where it paid); and what it gained on other code says as little of
/// this one (in a 10-minute linear_splitk_f32 run `NS_MIN_BLOCKS=4` gained once on a 2.1x
/// kernel, then lost 18-40% on seven parents, five of them running the code of one
/// `launch-bounds` rewrite). A knob's timed try counts only where it stepped the way the
/// move does, up or down from the parent's value (`BT=32` that lost from 64 is a smaller
/// tile, from 16 a larger one), or where the tuner did not note its parent's knobs; its
/// failures count whichever way it was reached.
fn never_pays(m: &Move, lineage: &Lineage, parent: NodeId, knobs_at: &HashMap<NodeId, KnobsAt>) -> bool {
    let build = NodeFailure::Kernel(FailureClass::BuildError).name();
    let launch = NodeFailure::Kernel(FailureClass::LaunchError).name();
    let technique = m.technique();
    let tries = lineage.tries(&technique);
    // A knob's value that fails to build or launch fails whichever way it was reached; a
    // timing is of the step: `BT=32` lost from 64 says nothing of `BT=32` from 16.
    let other_way = |t: &Try| {
        matches!(t.result, TryResult::Faster | TryResult::Same | TryResult::Slower)
            && m.way().is_some_and(|way| way_of_try(&technique, t.parent, knobs_at).is_some_and(|w| w != way))
    };
    let lost = |t: &Try| match &t.result {
        TryResult::Slower => true,
        TryResult::Failed(class) => class == build || class == launch,
        TryResult::Faster | TryResult::Same | TryResult::Unknown => false,
    };
    let code = lineage.code_of(parent);
    let unbuilt = |t: &Try| matches!(&t.result, TryResult::Failed(c) if c == build);
    // A build error speaks for every code only while the move has built nowhere.
    let never_built = tries.iter().all(unbuilt);
    let counts = |t: &&Try| {
        t.result != TryResult::Unknown
            && !other_way(t)
            && (lineage.code_of(t.parent) == code || (never_built && unbuilt(t)))
    };
    let counted: Vec<&Try> = tries.iter().filter(counts).collect();
    counted.len() >= DEAD_AFTER && counted.into_iter().all(lost)
}

/// How many steps past either end of its listed values a knob is taken.
pub const PAST_THE_RANGE: u32 = 2;

/// What a knob value past the listed ones costs in a move's score, against one in the
/// list: the list is the author's range, and a step past it the tuner's guess, so of two
/// values of a knob that the search memory and the votes score alike, the listed one goes
/// first (as many as a vote of a hundredth tips).
/// Without it the two drew on the seed and the timing alone: a 3-minute linear_splitk_f32 run took
/// `BN=16`, below the list, three times and never `BN=64`, in it, ending at 2.287x where
/// the run before had reached 3.347x.
const PAST_THE_RANGE_COST: f64 = 0.01;

/// How many tries at no gain a family's record starts from: its mean gain is its gains' sum
/// over their count plus these (and a move's own, these tries at its family's other moves'
/// mean; for a knob's step, at the knob's other steps the same way). One try is not the
/// family: a 10-minute linear_splitk_f32 run tried `BT=64` once, on a 512-wide tile past
/// `BN`'s list, where it lost (2.77x -> 1.90x); the plain mean put
/// every `BT` move behind every other knob's on every kernel for the next 72 nodes, and at
/// node 91 the first `BT=64` on a listed tile took the best from 3.0x to 5.2x.
const PRIOR_TRIES: f64 = 2.0;

/// The weight of the exploration term in a move's score, `EXPLORE * sqrt(ln(1 + N) / (1 +
/// n))` for a family tried n times of the run's N tries: a family tried less is worth a try
/// more, as a tree search weighs a node visited less (UCB1). At N = 40 it is 0.14 for a
/// family tried once against 0.04 for one tried 21 times, which outweighs a lost try's
/// shrunk mean (0.5 x -0.54 / 3 = -0.09, for the move and its sibling values alike; for a
/// knob, its values stepped the same way) by 0.005 against a level family tried 21 times:
/// one loss worse than about -0.57 (a third slower) still puts a family behind such a one
/// at that N; a family that keeps losing stays behind (four tries at -0.5 score -0.17 +
/// 0.09), and so does one that keeps failing (ten failures: -0.2 + 0.06). Within a rank
/// group it outweighs a weak diagnosis vote for a family not yet tried (0.19 at N = 40),
/// and the cost of a knob value past its list: trying each family once is worth more than a
/// weak finding's order.
const EXPLORE: f64 = 0.1;

/// One family's history in the search memory, summed over its techniques.
#[derive(Debug, Clone, Copy, Default)]
struct Record {
    tries: u32,
    correct: u32,
    /// Sum and count of its correct children's reward changes against their parents,
    /// gains and losses.
    gain_sum: f64,
    measured: u32,
}

impl Record {
    fn of_families(memory: &BTreeMap<String, Stats>) -> BTreeMap<Family, Record> {
        let mut out: BTreeMap<Family, Record> = BTreeMap::new();
        for (technique, s) in memory {
            let Ok(family) = technique.parse::<Family>() else { continue };
            let r = out.entry(family).or_default();
            r.tries += s.tries;
            r.correct += s.correct;
            r.gain_sum += s.delta_sum;
            r.measured += s.deltas;
        }
        out
    }
}

/// The next value of a knob's ladder past the end its parent sits at, if any: for values
/// that are a geometric ladder of positive integers (`32 64 128`, `1 2 4 8`), and a
/// parent at an end of it or already up to [`PAST_THE_RANGE`] - 1 steps past it. The
/// best of a linear layer's tile knobs sat at the top of both lists (`BN=128 BT=64`):
/// one step on, `BT=128` ran 1.24x faster than its parent, the step after it slower. Values past the
/// range may not build or be right for the kernel; the wall judges them like any child.
fn past_the_range(values: &[String], current: Option<&str>) -> Option<String> {
    let mut ladder: Vec<i64> =
        values.iter().map(|v| v.trim().parse::<i64>().ok().filter(|v| *v > 0)).collect::<Option<_>>()?;
    ladder.sort_unstable();
    ladder.dedup();
    let (&lo, &hi) = (ladder.first()?, ladder.last()?);
    let ratio = *ladder.get(1)? / lo;
    if ratio < 2 || ladder.windows(2).any(|w| w[0].checked_mul(ratio) != Some(w[1])) {
        return None;
    }
    let current: i64 = current?.trim().parse().ok()?;
    let walk = |mut edge: i64, step: &dyn Fn(i64) -> Option<i64>| {
        for _ in 0..PAST_THE_RANGE {
            let next = step(edge);
            if current == edge {
                return next.map(|v| v.to_string());
            }
            edge = next?;
        }
        None
    };
    walk(hi, &|v| v.checked_mul(ratio).filter(|v| *v <= i64::from(i32::MAX)))
        .or_else(|| walk(lo, &|v| (v % ratio == 0).then_some(v / ratio)))
}

/// The recipe applications named on a path of techniques (for prompts and reports).
pub fn recipes_on_path(path: &[String]) -> Vec<String> {
    path.iter().filter(|t| matches!(t.parse::<Family>(), Ok(Family::Recipe(_)))).cloned().collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::generate::ParentProfile;
    use crate::run::events::NodeSummary;
    use std::sync::Arc;

    fn task(name: &str) -> Task {
        Task::load(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tasks").join(name)).unwrap()
    }

    fn example(name: &str) -> Task {
        Task::load(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples").join(name)).unwrap()
    }

    fn request(
        t: &Task,
        parent: Candidate,
        source: &str,
        report: Option<heuristics::Report>,
        guidance: Guidance,
    ) -> Request {
        Request {
            node: 5,
            parent: 0,
            kind: Expansion::Improve,
            task: Arc::new(t.clone()),
            parent_candidate: parent,
            parent_source: source.to_string(),
            parent_summary: NodeSummary::default(),
            baseline_summary: NodeSummary::default(),
            failure_detail: None,
            profile: ParentProfile { diagnoses: report, ..Default::default() },
            guidance,
            memory: Default::default(),
            path: Vec::new(),
            floor_ms: None,
            seed: 1,
        }
    }

    fn report(tool: ToolId, score: f64) -> heuristics::Report {
        let mut k: heuristics::KernelDiagnosis = serde_json::from_value(serde_json::json!({
            "name": "k", "roofline": {"class": "latency-bound", "limiter": "", "reason": "", "duration_us": null,
            "dram_pct": null, "memory_pct": null, "compute_pct": null}, "diagnoses": [], "tools": []
        }))
        .unwrap_or_else(|e| panic!("{e}"));
        k.diagnoses.push(heuristics::Diagnosis::new(tool, score));
        heuristics::Report { kernels: vec![k] }
    }

    fn kernel(p: Proposal) -> Kernel {
        match p {
            Proposal::Kernel(k) => k,
            other => panic!("expected a kernel, got {other:?}"),
        }
    }

    fn base() -> Candidate {
        Candidate { source: "baseline.cu".into(), defines: BTreeMap::new(), flags: vec![] }
    }

    /// The family a technique belongs to, as the memory names it ("" for none).
    fn family(technique: &str) -> String {
        technique.parse::<Family>().map(|f| f.to_string()).unwrap_or_default()
    }

    fn structural(technique: &str) -> bool {
        technique.parse::<Family>().is_ok_and(|f| f.structural())
    }

    /// Everything the tuner offers from one parent, in the order it offers it.
    fn drain(tuner: &Tuner, req: &Request) -> Vec<Kernel> {
        let mut out = Vec::new();
        loop {
            match tuner.propose(req) {
                Proposal::Kernel(k) => out.push(k),
                Proposal::Nothing(_) => return out,
                other => panic!("{other:?}"),
            }
            assert!(out.len() < 1000, "the tuner never runs out");
        }
    }

    /// The techniques `tuner` offers from `req`'s parent that begin with `prefix`, in order.
    fn order_of(tuner: &Tuner, req: &Request, prefix: &str) -> Vec<String> {
        drain(tuner, req).into_iter().map(|k| k.technique).filter(|k| k.starts_with(prefix)).collect()
    }

    /// The techniques of everything a tuner for `req`'s task (baseline `baseline`, seed 1)
    /// offers from `req`'s parent, in order.
    fn techniques(baseline: &str, req: &Request) -> Vec<String> {
        drain(&Tuner::new(&req.task, baseline, 1, req.guidance), req).into_iter().map(|k| k.technique).collect()
    }

    /// Records a child of `parent` made by `technique` and judged `outcome`, as the search
    /// does; its id.
    fn judged(
        tree: &mut search::Tree<()>,
        parent: search::NodeId,
        technique: &str,
        outcome: search::Outcome,
    ) -> search::NodeId {
        let sel = search::Selection { parent, kind: Expansion::Improve };
        let id = tree.add_pending(&sel, (), search::Intent::default());
        tree.set_intent(id, crate::generate::intent(technique.into(), None));
        tree.record(id, outcome);
        id
    }

    /// A correct parent at `speedup` and `pct_of_floor`.
    fn passed(speedup: f64, pct_of_floor: f64) -> NodeSummary {
        NodeSummary { passed: true, speedup: Some(speedup), pct_of_floor: Some(pct_of_floor), ..Default::default() }
    }

    #[test]
    fn a_parent_calling_a_baseline_only_library_stops_the_tuner_with_the_reason() {
        let t = task("gemm_bf16");
        let src = std::fs::read_to_string(&t.baseline).unwrap();
        let tuner = Tuner::new(&t, &src, 1, Guidance::None);
        match tuner.propose(&request(&t, base(), &src, None, Guidance::None)) {
            Proposal::Stop(why) => assert!(why.contains("cublasCreate from libcublas"), "{why}"),
            other => panic!("expected a stop, got {other:?}"),
        }
        // A task that lets every kernel link the library keeps proposing.
        let mut open = t.clone();
        open.build.libs.push("cublas".into());
        let tuner = Tuner::new(&open, &src, 1, Guidance::None);
        assert!(matches!(tuner.propose(&request(&open, base(), &src, None, Guidance::None)), Proposal::Kernel(_)));
    }

    #[test]
    fn a_library_baseline_gets_the_library_free_reference_as_its_one_child() {
        let t = task("gemm_bf16");
        let src = std::fs::read_to_string(&t.baseline).unwrap();
        let reference = std::fs::read_to_string(&t.reference).unwrap();
        let tuner = Tuner::new(&t, &src, 1, Guidance::None).starting_from("reference.cu", reference.clone());
        let start = kernel(tuner.propose(&request(&t, base(), &src, None, Guidance::None)));
        assert_eq!(start.source, reference);
        assert_eq!(start.technique, "start:reference.cu");
        assert!(start.defines.is_empty() && start.flags.is_empty());
        // Once: the root then has nothing more to offer, and the search goes on below.
        match tuner.propose(&request(&t, base(), &src, None, Guidance::None)) {
            Proposal::Nothing(why) => assert!(why.contains("already in the tree"), "{why}"),
            other => panic!("expected nothing more, got {other:?}"),
        }
        let child = kernel(tuner.propose(&request(&t, base(), &reference, None, Guidance::None)));
        let unchanged = child.source == reference && child.defines.is_empty() && child.flags.is_empty();
        assert!(!unchanged, "the start is improved like any kernel: {}", child.technique);
        // A start that calls the library itself is no start.
        let tuner = Tuner::new(&t, &src, 1, Guidance::None).starting_from("baseline.cu", src.clone());
        assert!(matches!(tuner.propose(&request(&t, base(), &src, None, Guidance::None)), Proposal::Stop(_)));
    }

    #[test]
    fn diagnoses_choose_the_recipe_that_answers_them() {
        let t = task("softmax");
        let src = std::fs::read_to_string(&t.baseline).unwrap();
        let tuner = Tuner::new(&t, &src, 1, Guidance::Tools);
        let k = kernel(tuner.propose(&request(
            &t,
            base(),
            &src,
            Some(report(ToolId::BarrierStalls, 0.4)),
            Guidance::Tools,
        )));
        assert_eq!(family(&k.technique), "shuffle-reduce", "{}", k.technique);
        assert_eq!(k.tool.as_deref(), Some("barrier-stalls"));
        assert!(k.source.contains("__shfl_xor_sync"));
        let tuner = Tuner::new(&t, &src, 1, Guidance::Tools);
        let k = kernel(tuner.propose(&request(
            &t,
            base(),
            &src,
            Some(report(ToolId::ScalarGlobalAccess, 0.4)),
            Guidance::Tools,
        )));
        assert_eq!(family(&k.technique), "vectorize", "{}", k.technique);
        // Near its floor the knobs and flags compete with the rewrites on their votes.
        let tuner = Tuner::new(&t, &src, 1, Guidance::Tools);
        let mut req = request(&t, base(), &src, Some(report(ToolId::RegisterPressure, 0.5)), Guidance::Tools);
        req.parent_summary = passed(1.0, 85.0);
        let k = kernel(tuner.propose(&req));
        assert!(
            k.flags.iter().any(|f| f.starts_with("-maxrregcount")) || family(&k.technique) == "launch-bounds",
            "{k:?}"
        );
    }

    #[test]
    fn integer_overhead_goes_to_the_rewrite_that_divides_once_per_run_first() {
        // A convolution whose index math dominates: coarsening (which divides once per
        // run) goes before a faster division per element, which would leave it nothing
        // to split.
        let t = Task::load(&std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/causal_conv1d")).unwrap();
        let src = std::fs::read_to_string(&t.baseline).unwrap();
        let tuner = Tuner::new(&t, &src, 1, Guidance::Tools);
        let req = request(&t, base(), &src, Some(report(ToolId::IntegerOverhead, 0.57)), Guidance::Tools);
        let first = kernel(tuner.propose(&req));
        assert_eq!(family(&first.technique), "vectorize", "{}", first.technique);
        assert!(first.source.contains("ns_r0 + ns_k"), "the split: {}", first.source);
        let next: Vec<String> = drain(&tuner, &req).iter().take(3).map(|k| family(&k.technique)).collect();
        assert!(next.iter().any(|f| f == "fast-divmod" || f == "index-width"), "{next:?}");
    }

    #[test]
    fn a_finding_weighs_as_much_as_its_kernels_share_of_the_time() {
        let t = task("softmax");
        let src = std::fs::read_to_string(&t.baseline).unwrap();
        // A strong finding on a kernel of 14 us beside a weaker one on a kernel of 100 us
        // (a one-block scan before the main kernel): the main kernel's finding leads.
        let mut two = report(ToolId::BarrierStalls, 0.9);
        let mut main = report(ToolId::ScalarGlobalAccess, 0.25).kernels.remove(0);
        two.kernels[0].roofline.duration_us = Some(14.0);
        main.roofline.duration_us = Some(100.0);
        two.kernels.push(main);
        let tuner = Tuner::new(&t, &src, 1, Guidance::Tools);
        let k = kernel(tuner.propose(&request(&t, base(), &src, Some(two.clone()), Guidance::Tools)));
        assert_eq!(family(&k.technique), "vectorize", "{}", k.technique);
        // Without the durations both count whole, and the stronger finding leads.
        for k in &mut two.kernels {
            k.roofline.duration_us = None;
        }
        let tuner = Tuner::new(&t, &src, 1, Guidance::Tools);
        let k = kernel(tuner.propose(&request(&t, base(), &src, Some(two), Guidance::Tools)));
        assert_eq!(family(&k.technique), "shuffle-reduce", "{}", k.technique);
    }

    #[test]
    fn structural_rewrites_go_on_a_structural_win_before_any_knob_and_knobs_come_near_the_floor() {
        let t = task("softmax");
        let src = std::fs::read_to_string(&t.baseline).unwrap();
        let win =
            kernel(Tuner::new(&t, &src, 1, Guidance::Tools).propose(&request(&t, base(), &src, None, Guidance::Tools)));
        assert!(structural(&win.technique), "the baseline's first child is a rewrite: {}", win.technique);
        // The win, at 2x and 40% of its floor, diagnosed with low occupancy: a vote for
        // smaller blocks, a register cap and launch bounds, and for no structural recipe.
        let parent = Candidate { source: "nodes/0001/kernel.cu".into(), defines: win.defines, flags: win.flags };
        let mut req = request(&t, parent, &win.source, Some(report(ToolId::LowOccupancy, 0.9)), Guidance::Tools);
        (req.parent, req.node, req.path) = (1, 7, vec![win.technique.clone()]);
        req.parent_summary = passed(2.0, 40.0);
        let order = techniques(&src, &req);
        let first_tuning = order.iter().position(|t| !structural(t)).expect("knobs and flags come in the end");
        assert!(first_tuning > 0, "no rewrite applies on top of {}: {order:?}", win.technique);
        assert!(order[first_tuning..].iter().all(|t| !structural(t)), "a rewrite after a knob: {order:?}");
        // At 90% of its floor the vote decides: a move that tunes the kernel goes first.
        req.parent_summary = passed(2.0, 90.0);
        let first = kernel(Tuner::new(&t, &src, 1, Guidance::Tools).propose(&req));
        assert!(!structural(&first.technique), "near the floor: {}", first.technique);
    }

    #[test]
    fn the_block_sizes_block_knob_just_offered_go_before_the_rewrites() {
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples").join("rowwise_quant_int8");
        let t = Task::load(&dir).unwrap();
        let src = std::fs::read_to_string(&t.baseline).unwrap();
        let mut req = request(&t, base(), &src, None, Guidance::Tools);
        req.parent_summary = passed(1.0, 2.0);
        let offered = drain(&Tuner::new(&t, &src, 1, Guidance::Tools), &req);
        let opened = offered.into_iter().find(|k| family(&k.technique) == "block-knob").expect("block-knob applies");
        // Its child, far from the floor, where rewrites otherwise go first.
        let parent = Candidate { source: "nodes/0001/kernel.cu".into(), defines: opened.defines, flags: opened.flags };
        let mut req = request(&t, parent, &opened.source, None, Guidance::Tools);
        (req.parent, req.node, req.path) = (1, 7, vec![opened.technique.clone()]);
        req.parent_summary = passed(1.0, 2.0);
        let order = techniques(&src, &req);
        let first_rewrite = order.iter().position(|t| structural(t)).expect("rewrites still come");
        assert!(first_rewrite > 0 && order[..first_rewrite].iter().all(|t| t.starts_with("knob:")), "{order:?}");
        // The same kernel reached by another step gets a rewrite first.
        req.path = vec!["vectorize:width=16".into()];
        let first = kernel(Tuner::new(&t, &src, 1, Guidance::Tools).propose(&req));
        assert!(structural(&first.technique), "{}", first.technique);
    }

    #[test]
    fn a_move_that_failed_to_launch_or_ran_slower_on_two_parents_is_not_proposed_again() {
        let t = task("softmax");
        let src = std::fs::read_to_string(&t.baseline).unwrap();
        let mut tree = search::Tree::new((), search::Config::default(), 1);
        let child = |tree: &mut search::Tree<()>, technique: &str, o: search::Outcome| {
            judged(tree, 0, technique, o);
        };
        let offered = |memory: &search::Memory| {
            let mut req = request(&t, base(), &src, None, Guidance::None);
            (req.node, req.memory) = (9, memory.clone());
            req.parent_summary = passed(1.0, 90.0);
            techniques(&src, &req)
        };
        let sizes: Vec<String> = offered(&tree.memory).into_iter().filter(|k| k.starts_with("knob:BLOCK=")).collect();
        assert!(sizes.len() >= 3, "{sizes:?}");
        let (big, slow, level) = (&sizes[0], &sizes[1], &sizes[2]);
        child(&mut tree, big, search::Outcome::failed("launch-error"));
        child(&mut tree, slow, search::Outcome::correct(0.8).within_parent(false));
        child(&mut tree, level, search::Outcome::correct(0.999).within_parent(true));
        let now = offered(&tree.memory);
        assert!(now.contains(big) && now.contains(slow), "one failure is not enough: {now:?}");
        // Another class of failure says nothing of launching; a level child is no loss.
        child(&mut tree, big, search::Outcome::failed("wrong-answer"));
        child(&mut tree, level, search::Outcome::correct(1.05).within_parent(false));
        assert!(offered(&tree.memory).contains(big));
        child(&mut tree, big, search::Outcome::failed("launch-error"));
        child(&mut tree, slow, search::Outcome::failed("launch-error"));
        let now = offered(&tree.memory);
        assert!(now.contains(big), "a wrong answer is no launch error: {now:?}");
        assert!(!now.contains(slow), "{slow} ran slower, then failed to launch: {now:?}");
        assert!(now.contains(level), "{now:?}");
        let mut tree2 = search::Tree::new((), search::Config::default(), 1);
        child(&mut tree2, big, search::Outcome::failed("launch-error"));
        child(&mut tree2, big, search::Outcome::failed("launch-error"));
        assert!(!offered(&tree2.memory).contains(big), "{big} failed to launch twice");
    }

    /// What a tuner for `t` offers from node `parent`'s code (the baseline's source, far
    /// from the floor), given `memory`.
    fn offered_from(t: &Task, src: &str, memory: &search::Memory, parent: search::NodeId) -> Vec<String> {
        let mut req = request(t, base(), src, None, Guidance::None);
        (req.node, req.parent, req.memory) = (99, parent, memory.clone());
        req.parent_summary = passed(1.0, 90.0);
        techniques(src, &req)
    }

    /// A correct child slower than its parent beyond the noise.
    fn slower() -> search::Outcome {
        search::Outcome::correct(0.8).within_parent(false)
    }

    #[test]
    fn a_move_that_lost_twice_on_one_code_is_tried_again_on_new_code() {
        let t = task("softmax");
        let src = std::fs::read_to_string(&t.baseline).unwrap();
        let mut tree = search::Tree::new((), search::Config::default(), 1);
        let offered = |memory: &search::Memory, parent| offered_from(&t, &src, memory, parent);
        let sizes: Vec<String> =
            offered(&tree.memory, 0).into_iter().filter(|k| k.starts_with("knob:BLOCK=")).collect();
        let slow = &sizes[1];
        // A register cap in the noise, then a gain from a knob: the same code, tuned.
        let capped = judged(&mut tree, 0, "flag:maxrregcount=64", search::Outcome::correct(1.0).within_parent(true));
        let tuned = judged(&mut tree, capped, "knob:OTHER=2", search::Outcome::correct(1.2).within_parent(false));
        judged(&mut tree, 0, slow, slower());
        judged(&mut tree, capped, slow, slower());
        for parent in [0, capped, tuned] {
            assert!(!offered(&tree.memory, parent).contains(slow), "{slow} lost twice on node {parent}'s code");
        }
        // A rewrite that gained is new code: what the move lost to may be gone.
        let rewritten = judged(&mut tree, tuned, "unroll:factor=4", search::Outcome::correct(1.5).within_parent(false));
        assert!(offered(&tree.memory, rewritten).contains(slow), "new code gets {slow} again");
        // Where it loses twice again, it is out there too.
        judged(&mut tree, rewritten, slow, slower());
        assert!(offered(&tree.memory, rewritten).contains(slow), "one loss on new code is not enough");
        judged(&mut tree, rewritten, slow, search::Outcome::failed("launch-error"));
        assert!(!offered(&tree.memory, rewritten).contains(slow));
        // A launch error once on each of two codes is not enough; a build error once on
        // each of them is: a value that does not build fails alike on any code.
        let (unlaunched, unbuilt) = (&"flag:maxrregcount=32".to_string(), &"flag:maxrregcount=128".to_string());
        assert!(offered(&tree.memory, 0).contains(unlaunched) && offered(&tree.memory, 0).contains(unbuilt));
        for parent in [0, rewritten] {
            judged(&mut tree, parent, unlaunched, search::Outcome::failed("launch-error"));
            judged(&mut tree, parent, unbuilt, search::Outcome::failed("build-error"));
        }
        for parent in [0, rewritten] {
            let now = offered(&tree.memory, parent);
            assert!(now.contains(unlaunched) && !now.contains(unbuilt), "node {parent}: {now:?}");
        }
        // What a move did on other code does not keep it here: level on the rewritten
        // code, it lost twice on the root's and is out there, and still offered where it
        // was level.
        let (big, level) = (&sizes[0], &sizes[2]);
        judged(&mut tree, rewritten, big, search::Outcome::correct(1.5).within_parent(true));
        judged(&mut tree, 0, big, slower());
        assert!(offered(&tree.memory, 0).contains(big), "one loss on this code is not enough");
        judged(&mut tree, 0, big, slower());
        assert!(!offered(&tree.memory, 0).contains(big), "{big} lost twice on the root's code");
        assert!(offered(&tree.memory, rewritten).contains(big), "{big} was level on this code");
        // On one code, anything but a loss (a wrong answer is no loss) keeps it.
        judged(&mut tree, 0, level, slower());
        judged(&mut tree, 0, level, search::Outcome::failed("wrong-answer"));
        judged(&mut tree, 0, level, slower());
        assert!(offered(&tree.memory, 0).contains(level));
    }

    #[test]
    fn only_verdicts_on_the_parents_code_count_and_a_build_error_everywhere_only_while_nothing_built() {
        let t = task("softmax");
        let src = std::fs::read_to_string(&t.baseline).unwrap();
        let mut tree = search::Tree::new((), search::Config::default(), 1);
        let offered = |memory: &search::Memory, parent| offered_from(&t, &src, memory, parent);
        let sizes: Vec<String> =
            offered(&tree.memory, 0).into_iter().filter(|k| k.starts_with("knob:BLOCK=")).collect();
        let (a, b, c) = (&sizes[0], &sizes[1], &sizes[2]);
        let rewritten = judged(&mut tree, 0, "unroll:factor=4", search::Outcome::correct(1.5).within_parent(false));
        let again = judged(&mut tree, rewritten, "unroll:factor=2", search::Outcome::correct(2.0).within_parent(false));
        // A level child between two losses keeps the move; a try with nothing to compare
        // with (no parent timing) is no loss and no verdict.
        judged(&mut tree, 0, a, slower());
        judged(&mut tree, 0, a, search::Outcome::correct(1.0).within_parent(true));
        judged(&mut tree, 0, a, slower());
        judged(&mut tree, 0, b, search::Outcome::correct(0.8));
        judged(&mut tree, 0, b, slower());
        let now = offered(&tree.memory, 0);
        assert!(now.contains(a) && now.contains(b), "{now:?}");
        judged(&mut tree, 0, b, slower());
        let now = offered(&tree.memory, 0);
        assert!(now.contains(a) && !now.contains(b), "the untimed try does not keep {b}: {now:?}");
        // A build error elsewhere and one loss here: the move builds, so only the loss counts.
        judged(&mut tree, rewritten, c, search::Outcome::correct(1.2).within_parent(false));
        judged(&mut tree, 0, c, search::Outcome::failed("build-error"));
        judged(&mut tree, again, c, slower());
        assert!(offered(&tree.memory, again).contains(c), "one loss on this code");
        // Failing to build twice on one code leaves it out there, not on code it built on.
        judged(&mut tree, 0, c, search::Outcome::failed("build-error"));
        assert!(!offered(&tree.memory, 0).contains(c), "{c} failed to build twice on the root's code");
        assert!(offered(&tree.memory, rewritten).contains(c), "{c} gained on this code");
    }

    /// Where in `offered` the first kernel `pick` accepts sits.
    fn first(offered: &[Kernel], pick: impl Fn(&Kernel) -> bool) -> usize {
        offered.iter().position(pick).unwrap_or_else(|| panic!("never offered: {offered:?}"))
    }

    #[test]
    fn register_budget_moves_are_voted_by_their_direction() {
        let t = example("linear_splitk_f32");
        let baseline = std::fs::read_to_string(&t.baseline).unwrap();
        let facts = crate::task::facts::rewrite_facts(&t);
        let at =
            |blocks: &'static str| move |k: &Kernel| k.source.contains(&format!("#define NS_MIN_BLOCKS {blocks}\n"));
        let offered = |parent: &str, flags: &[&str], tool: ToolId| {
            let parent_candidate = Candidate { flags: flags.iter().map(|f| f.to_string()).collect(), ..base() };
            let mut req = request(&t, parent_candidate, parent, Some(report(tool, 0.5)), Guidance::Tools);
            // Near the floor, where the tuning moves compete on their votes.
            req.parent_summary = passed(3.0, 85.0);
            drain(&Tuner::new(&t, &baseline, 1, Guidance::Tools), &req)
        };
        // Spilling: one block per SM (freeing the registers) before two or four.
        let spilling = offered(&baseline, &["-maxrregcount=64"], ToolId::LocalMemory);
        assert!(first(&spilling, at("1")) < first(&spilling, at("2")), "{spilling:?}");
        assert!(first(&spilling, at("1")) < first(&spilling, at("4")), "{spilling:?}");
        // Starved of warps: the tighter bounds first.
        let starved = offered(&baseline, &[], ToolId::LowOccupancy);
        assert!(first(&starved, at("2")) < first(&starved, at("1")), "{starved:?}");
        // Once bound, the knob moves the same way.
        let bound = rewrite::apply(&"launch-bounds:min_blocks=2".parse().unwrap(), &baseline, &facts).unwrap().source;
        let knob = |v: &'static str| move |k: &Kernel| k.technique == format!("knob:NS_MIN_BLOCKS={v}");
        let spilling = offered(&bound, &[], ToolId::LocalMemory);
        assert!(first(&spilling, knob("1")) < first(&spilling, knob("4")), "{spilling:?}");
        let starved = offered(&bound, &[], ToolId::LowOccupancy);
        assert!(first(&starved, knob("4")) < first(&starved, knob("1")), "{starved:?}");
    }

    #[test]
    fn a_rewrite_that_holds_more_in_registers_starts_from_a_free_budget_and_a_tuning_move_keeps_it() {
        let t = example("linear_splitk_f32");
        let baseline = std::fs::read_to_string(&t.baseline).unwrap();
        let facts = crate::task::facts::rewrite_facts(&t);
        let hungry = |k: &Kernel| matches!(k.technique.parse::<Family>(), Ok(Family::Recipe(id)) if rewrite::recipes::get(id).more_registers);
        let bound = rewrite::apply(&"launch-bounds:min_blocks=2".parse().unwrap(), &baseline, &facts).unwrap().source;
        let capped = || Candidate { flags: vec!["-maxrregcount=64".into()], ..base() };
        let offered =
            drain(&Tuner::new(&t, &baseline, 1, Guidance::None), &request(&t, capped(), &bound, None, Guidance::None));
        assert!(offered.iter().any(|k| family(&k.technique) == "tensor-tile"), "{offered:?}");
        assert!(offered.iter().any(|k| family(&k.technique) == "prefetch"), "{offered:?}");
        for k in offered.iter().filter(|k| hungry(k)) {
            assert!(k.flags.is_empty(), "{}: {:?}", k.technique, k.flags);
            assert_eq!(k.defines.get("NS_MIN_BLOCKS").map(String::as_str), Some("1"), "{}", k.technique);
        }
        let knob = offered.iter().find(|k| k.technique.starts_with("knob:BN=")).expect("a block-tile knob");
        assert_eq!(knob.flags, ["-maxrregcount=64"]);
        assert!(!knob.defines.contains_key("NS_MIN_BLOCKS"), "{:?}", knob.defines);
        // With every kernel bounded, ptxas ignores a cap: none is offered.
        assert!(!offered.iter().any(|k| family(&k.technique) == "flag:maxrregcount"), "{offered:?}");
        // Unbounded, caps are offered; bounding drops the parent's, which it overrides; a
        // rewrite that holds more in registers drops it too, with no knob to loosen.
        let offered = drain(
            &Tuner::new(&t, &baseline, 1, Guidance::None),
            &request(&t, capped(), &baseline, None, Guidance::None),
        );
        assert!(offered.iter().any(|k| family(&k.technique) == "flag:maxrregcount"), "{offered:?}");
        let bounding = offered.iter().find(|k| family(&k.technique) == "launch-bounds").expect("launch bounds");
        assert!(bounding.flags.is_empty(), "{bounding:?}");
        let rewrite = offered.iter().find(|k| hungry(k)).expect("a rewrite that holds more in registers");
        assert!(rewrite.flags.is_empty() && rewrite.defines.is_empty(), "{rewrite:?}");
        // A rewrite that holds no more keeps the budget its parent was tuned to.
        let t = task("vector_add");
        let src = std::fs::read_to_string(&t.baseline).unwrap();
        let offered =
            drain(&Tuner::new(&t, &src, 1, Guidance::None), &request(&t, capped(), &src, None, Guidance::None));
        let strided = offered.iter().find(|k| family(&k.technique) == "grid-stride").expect("grid-stride");
        assert!(!hungry(strided) && structural(&strided.technique));
        assert_eq!(strided.flags, ["-maxrregcount=64"]);
    }

    #[test]
    fn a_rewrite_that_declines_on_coarse_blocks_is_offered_under_them_before_the_knobs() {
        let t = example("causal_conv1d");
        let baseline = std::fs::read_to_string(&t.baseline).unwrap();
        let facts = crate::task::facts::rewrite_facts(&t);
        let path: Vec<String> = ["vectorize:width=16", "intrinsics:fn=div", "index-width:type=int", "coarsen:blocks=2"]
            .map(String::from)
            .to_vec();
        let parent = path.iter().fold(baseline.clone(), |s, t| {
            rewrite::apply(&t.parse().unwrap(), &s, &facts).unwrap_or_else(|e| panic!("{t}: {e}")).source
        });
        let mut req = request(&t, base(), &parent, None, Guidance::None);
        req.parent_summary = passed(4.9, 73.0);
        req.path = path;
        // A structural rewrite goes before the knobs away from the floor.
        let tuner = Tuner::new(&t, &baseline, 1, Guidance::None);
        let divmod = loop {
            let k = kernel(tuner.propose(&req));
            assert!(!k.technique.starts_with("knob:"), "a knob before fast-divmod: {}", k.technique);
            if k.technique == "fast-divmod" {
                break k;
            }
        };
        assert!(divmod.source.contains("ns_make_divisor(") && divmod.source.contains("NS_COARSEN"));
        // Without the path the tuner cannot rebuild the parent, and offers it nowhere.
        let alone = tuner.moves(&Source::parse(&parent), &base(), &[]);
        assert!(!alone.iter().any(|m| m.technique() == "fast-divmod"));
        assert!(tuner
            .moves(&Source::parse(&parent), &base(), &req.path)
            .iter()
            .any(|m| m.technique() == "fast-divmod"));
    }

    #[test]
    fn a_parents_moves_are_found_once_while_it_is_among_the_last_parents() {
        let t = task("softmax");
        let src = std::fs::read_to_string(&t.baseline).unwrap();
        let tuner = Tuner::new(&t, &src, 1, Guidance::None);
        let parsed = Source::parse(&src);
        let first = tuner.moves_of(&parsed, &base(), &[]);
        assert!(Arc::ptr_eq(&first, &tuner.moves_of(&parsed, &base(), &[])), "the same parent's moves again");
        let capped = Candidate { flags: vec!["-maxrregcount=64".into()], ..base() };
        let other = tuner.moves_of(&parsed, &capped, &[]);
        assert!(!Arc::ptr_eq(&first, &other), "another configuration has moves of its own");
        assert!(other.iter().any(|m| m.technique() == "flag:maxrregcount=off"), "from the capped parent");
        assert!(!first.iter().any(|m| m.technique() == "flag:maxrregcount=off"));
        for n in 0..RECENT_PARENTS {
            tuner.moves_of(&parsed, &Candidate { flags: vec![format!("-DX={n}")], ..base() }, &[]);
        }
        assert!(!Arc::ptr_eq(&first, &tuner.moves_of(&parsed, &base(), &[])), "only the last parents are kept");
    }

    #[test]
    fn a_knob_value_that_failed_to_build_on_two_parents_is_not_proposed_again() {
        let t = example("linear_splitk_f32");
        let src = std::fs::read_to_string(&t.baseline).unwrap();
        let mut tree = search::Tree::new((), search::Config::default(), 1);
        let offered = |memory: &search::Memory| {
            let mut req = request(&t, base(), &src, None, Guidance::None);
            (req.node, req.memory) = (9, memory.clone());
            techniques(&src, &req)
        };
        let small = "knob:BT=8".to_string();
        assert!(offered(&tree.memory).contains(&small), "BT's default 16 is the bottom of 16 32 64");
        for _ in 0..DEAD_AFTER {
            judged(&mut tree, 0, &small, search::Outcome::failed("build-error"));
        }
        assert!(!offered(&tree.memory).contains(&small), "{small} failed to build twice");
    }

    #[test]
    fn a_recipes_knob_is_voted_as_its_recipe_and_goes_before_moves_the_diagnoses_favour_less() {
        let t = example("causal_conv1d");
        let src = std::fs::read_to_string(&t.baseline).unwrap();
        let facts = crate::task::facts::rewrite_facts(&t);
        let app = |s: &str, r: RecipeId| {
            rewrite::recipes::get(r).run(&Source::parse(s), &facts, &Default::default()).unwrap().source
        };
        let coarse = app(&app(&src, RecipeId::Vectorize), RecipeId::Coarsen);
        assert!(coarse.contains("// nightshift: knob NS_COARSEN = 2 4 8"), "{coarse}");
        // Integer overhead is what `coarsen` answers second and `unroll` third.
        let mut req = request(&t, base(), &coarse, Some(report(ToolId::IntegerOverhead, 0.38)), Guidance::Tools);
        req.parent_summary = passed(4.5, 68.0);
        let order = techniques(&src, &req);
        let at = |t: &str| order.iter().position(|x| x == t).unwrap_or_else(|| panic!("{t} not in {order:?}"));
        assert!(at("knob:NS_COARSEN=4") < at("unroll:factor=4"), "{order:?}");
        assert!(at("knob:NS_COARSEN=4") < at("flag:extra-device-vectorization=on"), "{order:?}");
        // A task knob no recipe introduced has no such vote: it still waits behind them.
        let t = example("linear_splitk_f32");
        let src = std::fs::read_to_string(&t.baseline).unwrap();
        let req = request(&t, base(), &src, Some(report(ToolId::IntegerOverhead, 0.38)), Guidance::Tools);
        let order = techniques(&src, &req);
        let first_knob = order.iter().position(|x| x.starts_with("knob:")).unwrap();
        let unroll = order.iter().position(|x| x.starts_with("unroll:")).unwrap();
        assert!(unroll < first_knob, "{order:?}");
    }

    #[test]
    fn a_ladder_is_followed_past_the_end_its_parent_sits_at_for_two_steps() {
        let ladder = |v: &str| v.split_whitespace().map(str::to_string).collect::<Vec<_>>();
        let past = |v: &str, at: &str| past_the_range(&ladder(v), Some(at));
        assert_eq!(past("16 32 64", "64").as_deref(), Some("128"));
        assert_eq!(past("16 32 64", "128").as_deref(), Some("256"));
        assert_eq!(past("16 32 64", "256"), None, "two steps past the range at most");
        assert_eq!(past("16 32 64", "16").as_deref(), Some("8"));
        assert_eq!(past("16 32 64", "8").as_deref(), Some("4"));
        assert_eq!(past("16 32 64", "32"), None, "inside the range the list is the author's");
        assert_eq!(past("64 32 16", "64").as_deref(), Some("128"), "the listed order does not matter");
        assert_eq!(past("1 2 4 8", "1"), None, "no integer below 1");
        assert_eq!(past("1 2 4 8", "8").as_deref(), Some("16"));
        assert_eq!(past("3 9 27", "27").as_deref(), Some("81"));
        assert_eq!(past("6 3", "3"), None, "3 / 2 is no integer");
        for not_a_ladder in ["16 24 32", "1 2 3", "64", "a b", "0 1 2", "-2 -4", "2 4 8.0"] {
            assert_eq!(past(not_a_ladder, not_a_ladder.split(' ').next().unwrap()), None, "{not_a_ladder}");
        }
        assert_eq!(past("16 32 64", "x"), None);
        assert_eq!(past_the_range(&ladder("16 32 64"), None), None);
        assert_eq!(past("1073741824 2147483647", "2147483647"), None);
        assert_eq!(past("536870912 1073741824", "1073741824"), None, "past i32::MAX");
    }

    #[test]
    fn a_parent_at_the_top_of_a_tasks_knob_ranges_gets_the_next_step_of_each_and_block_sizes_do_not() {
        let t = example("linear_splitk_f32");
        let src = std::fs::read_to_string(&t.baseline).unwrap();
        let at_top = Candidate {
            defines: [("BN", "128"), ("BT", "64"), ("SPLIT_K", "8")].map(|(k, v)| (k.into(), v.into())).into(),
            ..base()
        };
        let req = request(&t, at_top, &src, None, Guidance::None);
        let knobs: BTreeSet<String> = techniques(&src, &req).into_iter().filter(|k| k.starts_with("knob:")).collect();
        for want in ["knob:BN=256", "knob:BT=128", "knob:SPLIT_K=16", "knob:BN=default", "knob:SPLIT_K=1"] {
            assert!(knobs.contains(want), "{want} missing from {knobs:?}");
        }
        assert!(!knobs.iter().any(|k| k == "knob:BN=512" || k == "knob:BT=256"), "one step at a time: {knobs:?}");
        // A block size stops where the hardware does: nothing past 1024 threads.
        let t = task("softmax");
        let src = std::fs::read_to_string(&t.baseline).unwrap();
        let at_1024 = Candidate { defines: [("BLOCK".to_string(), "1024".to_string())].into(), ..base() };
        let req = request(&t, at_1024, &src, None, Guidance::None);
        let sizes: Vec<String> = techniques(&src, &req).into_iter().filter(|k| k.starts_with("knob:BLOCK=")).collect();
        assert!(sizes.contains(&"knob:BLOCK=512".to_string()), "{sizes:?}");
        assert!(!sizes.iter().any(|k| k == "knob:BLOCK=2048"), "{sizes:?}");
    }

    #[test]
    fn a_knobs_listed_values_go_before_the_steps_past_its_list_whatever_the_seed() {
        let t = example("linear_splitk_f32");
        let src = std::fs::read_to_string(&t.baseline).unwrap();
        // The baseline sits at the bottom of BN's list (32) and of BT's (16).
        for seed in 1..=8 {
            let req = request(&t, base(), &src, None, Guidance::None);
            let order: Vec<String> =
                drain(&Tuner::new(&t, &src, seed, Guidance::None), &req).into_iter().map(|k| k.technique).collect();
            let at = |want: &str| order.iter().position(|k| k == want).unwrap_or_else(|| panic!("{want}: {order:?}"));
            for (listed, past) in
                [("knob:BN=64", "knob:BN=16"), ("knob:BN=128", "knob:BN=16"), ("knob:BT=32", "knob:BT=8")]
            {
                assert!(at(listed) < at(past), "seed {seed}: {listed} after {past}: {order:?}");
            }
        }
    }

    #[test]
    fn a_family_stale_on_a_kernels_lineage_is_not_proposed_there_and_one_that_gained_still_is() {
        let t = task("softmax");
        let src = std::fs::read_to_string(&t.baseline).unwrap();
        // Register caps landed within the baseline's interval twice; a block size gained.
        let mut tree = search::Tree::new((), search::Config::default(), 1);
        let child = |tree: &mut search::Tree<()>, parent, technique: &str, speedup, within| {
            judged(tree, parent, technique, search::Outcome::correct(speedup).within_parent(within))
        };
        child(&mut tree, 0, "flag:maxrregcount=32", 1.002, true);
        child(&mut tree, 0, "flag:maxrregcount=64", 0.998, true);
        let bigger = child(&mut tree, 0, "knob:BLOCK=512", 1.2, false);
        let families = |parent: search::NodeId, candidate: Candidate, source: &str, memory: &search::Memory| {
            let mut req = request(&t, candidate, source, None, Guidance::None);
            (req.parent, req.node, req.memory) = (parent, 9, memory.clone());
            req.parent_summary = passed(1.2, 90.0);
            let offered = drain(&Tuner::new(&t, &src, 1, Guidance::None), &req);
            offered.iter().map(|k| family(&k.technique)).collect::<BTreeSet<String>>()
        };
        let fresh = families(0, base(), &src, &Default::default());
        assert!(fresh.contains("flag:maxrregcount") && fresh.contains("knob:BLOCK"), "{fresh:?}");
        let at_root = families(0, base(), &src, &tree.memory);
        assert!(!at_root.contains("flag:maxrregcount"), "stale on the kernel: {at_root:?}");
        assert!(at_root.contains("knob:BLOCK"), "the family that gained: {at_root:?}");
        let tuned = Candidate { defines: [("BLOCK".to_string(), "512".to_string())].into(), ..base() };
        let below = families(bigger, tuned.clone(), &src, &tree.memory);
        assert!(!below.contains("flag:maxrregcount"), "stale on its descendants: {below:?}");
        assert!(below.contains("knob:BLOCK"), "{below:?}");
        // A rewrite of the tuned kernel is a new kernel: the register cap is back.
        let mut req = request(&t, tuned.clone(), &src, None, Guidance::None);
        req.parent = bigger;
        let rewrite = kernel(Tuner::new(&t, &src, 1, Guidance::None).propose(&req));
        assert!(structural(&rewrite.technique), "{}", rewrite.technique);
        // One in the noise runs alike: the cap stays stale on it.
        let alike = child(&mut tree, bigger, &rewrite.technique, 1.2, true);
        let same = families(alike, tuned.clone(), &rewrite.source, &tree.memory);
        assert!(!same.contains("flag:maxrregcount"), "{same:?}");
        let rewritten = child(&mut tree, bigger, &rewrite.technique, 1.5, false);
        let renewed = families(rewritten, tuned, &rewrite.source, &tree.memory);
        assert!(renewed.contains("flag:maxrregcount"), "{renewed:?}");
    }

    #[test]
    fn a_family_idle_across_the_run_goes_after_every_other_move_on_any_kernel_but_block_knob_does_not() {
        let t = task("reduce_sum");
        let src = std::fs::read_to_string(&t.baseline).unwrap();
        let tuner = |seed| Tuner::new(&t, &src, seed, Guidance::None);
        // The families of every move offered, in the order offered.
        let offered = |parent: search::NodeId, memory: &search::Memory| {
            let mut req = request(&t, base(), &src, None, Guidance::None);
            (req.parent, req.node, req.memory) = (parent, 99, memory.clone());
            req.parent_summary = passed(1.2, 90.0);
            drain(&tuner(1), &req).iter().map(|k| family(&k.technique).to_string()).collect::<Vec<String>>()
        };
        // Whether every move of `f` comes after every move of another family.
        let last = |order: &[String], f: &str| {
            let first = order.iter().position(|x| x == f).unwrap_or_else(|| panic!("{f} not offered: {order:?}"));
            order[first..].iter().all(|x| x == f)
        };
        let mut tree = search::Tree::new((), search::Config::default(), 1);
        let child = |tree: &mut search::Tree<()>, parent, technique: &str, speedup: f64, within| {
            judged(tree, parent, technique, search::Outcome::correct(speedup).within_parent(within))
        };
        // Sibling kernels of their own speed, each with one unroll and one block-knob child
        // in the noise: stale on no lineage, idle across the run.
        let mut kernels = Vec::new();
        for i in 0..search::memory::IDLE_AFTER {
            let k = child(&mut tree, 0, &format!("vectorize:width={}", 4 << i), 1.5 + f64::from(i) / 10.0, false);
            child(&mut tree, k, "unroll:factor=4", 1.5, true);
            child(&mut tree, k, "block-knob", 1.5, true);
            kernels.push(k);
        }
        let sibling = child(&mut tree, 0, "cooperative", 2.0, false);
        let memory = tree.memory.clone();
        assert!(memory.lineage.stale_families(sibling).is_empty());
        let fresh = offered(sibling, &Default::default());
        assert!(!last(&fresh, "unroll") && fresh.iter().any(|f| f == "block-knob"), "{fresh:?}");
        let now = offered(sibling, &memory);
        assert!(last(&now, "unroll"), "the idle family goes last: {now:?}");
        let at = |order: &[String], f: &str| order.iter().position(|x| x == f);
        assert!(at(&now, "block-knob") < at(&now, "unroll"), "its worth is in the sizes below it: {now:?}");
        // Once one of its children moves a kernel, the family is back among the others.
        child(&mut tree, kernels[0], "unroll:factor=4", 1.7, false);
        let back = offered(sibling, &tree.memory);
        assert!(!last(&back, "unroll"), "{back:?}");
    }

    #[test]
    fn the_space_is_far_larger_than_the_knobs_and_nothing_is_proposed_twice() {
        let t = task("vector_add");
        let src = std::fs::read_to_string(&t.baseline).unwrap();
        let tuner = Tuner::new(&t, &src, 3, Guidance::None);
        let mut seen = HashSet::new();
        let mut kinds = HashSet::new();
        // Walk breadth-first from the baseline through each child.
        let mut frontier = vec![(base(), src.clone())];
        let mut proposals = 0;
        while let Some((parent, psrc)) = frontier.pop() {
            for _ in 0..6 {
                match tuner.propose(&request(&t, parent.clone(), &psrc, None, Guidance::None)) {
                    Proposal::Kernel(k) => {
                        let key = content_key(&k.source, &k.defines, &k.flags);
                        assert!(seen.insert(key), "proposed twice: {}", k.technique);
                        kinds.insert(family(&k.technique).to_string());
                        proposals += 1;
                        if proposals < 60 {
                            frontier.push((
                                Candidate { source: "x.cu".into(), defines: k.defines.clone(), flags: k.flags.clone() },
                                k.source.clone(),
                            ));
                        }
                    }
                    Proposal::Nothing(_) => break,
                    other => panic!("{other:?}"),
                }
            }
            if proposals > 200 {
                break;
            }
        }
        // The old tuner had 8 configurations for vector_add; recipes compose far beyond.
        assert!(proposals > 100, "only {proposals} distinct kernels");
        // Register budgets: blocks per SM on bounded kernels (where ptxas ignores a cap).
        for k in ["vectorize", "grid-stride", "launch-bounds", "knob:BLOCK", "knob:NS_MIN_BLOCKS"] {
            assert!(kinds.contains(k), "{k} never proposed: {kinds:?}");
        }
        let all = drain(&Tuner::new(&t, &src, 3, Guidance::None), &request(&t, base(), &src, None, Guidance::None));
        assert!(all.iter().any(|k| family(&k.technique) == "flag:maxrregcount"), "{all:?}");
    }

    /// A 2-D kernel whose block is two knobs, `BX = 8 16 32 64` by `BY = 4 8 16 32 64`.
    const TWO_KNOB_BLOCK: &str = "#ifndef BX\n#define BX 16\n#endif\n// nightshift: knob BX = 8 16 32 64\n\
        #ifndef BY\n#define BY 16\n#endif\n// nightshift: knob BY = 4 8 16 32 64\n\
        __global__ void copy2d(const float* a, float* b, int w, int h) {\n\
        int x = blockIdx.x * blockDim.x + threadIdx.x; int y = blockIdx.y * blockDim.y + threadIdx.y;\n\
        if (x < w && y < h) b[y * w + x] = a[y * w + x]; }\n\
        extern \"C\" void run(const float* a, float* b, int w, int h, cudaStream_t s) {\n\
        const dim3 block(BX, BY);\n\
        const dim3 grid((w + BX - 1) / BX, (h + BY - 1) / BY);\n\
        copy2d<<<grid, block, 0, s>>>(a, b, w, h); }\n";

    fn shape_moves(tuner: &Tuner, src: &str, parent: &Candidate) -> Vec<String> {
        let mut out: Vec<String> = tuner
            .moves(&Source::parse(src), parent, &[])
            .into_iter()
            .filter(|m| matches!(m, Move::Shape { .. }))
            .map(|m| m.technique())
            .collect();
        out.sort();
        out
    }

    #[test]
    fn a_block_of_two_knobs_is_reshaped_at_its_thread_count_within_both_lists() {
        let t = task("vector_add");
        let tuner = Tuner::new(&t, TWO_KNOB_BLOCK, 1, Guidance::None);
        assert_eq!(shape_moves(&tuner, TWO_KNOB_BLOCK, &base()), ["shape:BX=32,BY=8", "shape:BX=8,BY=32"]);
        // At 64 x 4 neither 128 nor 2 is listed: only the way back.
        let wide =
            Candidate { defines: [("BX", "64"), ("BY", "4")].map(|(k, v)| (k.into(), v.into())).into(), ..base() };
        assert_eq!(shape_moves(&tuner, TWO_KNOB_BLOCK, &wide), ["shape:BX=32,BY=8"]);
        // The child sets both knobs, and a knob back at its default goes from the defines.
        let moves = tuner.moves(&Source::parse(TWO_KNOB_BLOCK), &base(), &[]);
        let to_32x8 = moves.iter().find(|m| m.technique() == "shape:BX=32,BY=8").unwrap();
        let (source, defines, _) = tuner.child(TWO_KNOB_BLOCK, &base(), to_32x8);
        assert_eq!(source, TWO_KNOB_BLOCK);
        assert_eq!(defines, [("BX", "32"), ("BY", "8")].map(|(k, v)| (k.to_string(), v.to_string())).into());
        let at_32x8 = Candidate { defines, ..base() };
        let back = tuner.moves(&Source::parse(TWO_KNOB_BLOCK), &at_32x8, &[]);
        let to_16x16 = back.iter().find(|m| m.technique() == "shape:BX=16,BY=16").unwrap();
        assert!(tuner.child(TWO_KNOB_BLOCK, &at_32x8, to_16x16).1.is_empty());
        // One knob on both axes, or a block of literals: no shape to move.
        let square = TWO_KNOB_BLOCK.replace("const dim3 block(BX, BY);", "const dim3 block(BX, BX);");
        assert!(shape_moves(&tuner, &square, &base()).is_empty());
        let literal = TWO_KNOB_BLOCK.replace("const dim3 block(BX, BY);", "const dim3 block(16, 16);");
        assert!(shape_moves(&tuner, &literal, &base()).is_empty());
        // Through `const int` constants, as `block-knob` leaves them.
        let constants = TWO_KNOB_BLOCK
            .replace("const dim3 block(BX, BY);", "const int bx = BX;\nconst int by = BY;\nconst dim3 block(bx, by);");
        assert_eq!(shape_moves(&tuner, &constants, &base()), ["shape:BX=32,BY=8", "shape:BX=8,BY=32"]);
        // A second launch with the axes swapped is the same family's moves, not a second family.
        let swapped = TWO_KNOB_BLOCK.replace(
            "copy2d<<<grid, block, 0, s>>>(a, b, w, h); }",
            "copy2d<<<grid, block, 0, s>>>(a, b, w, h);\ncopy2d<<<grid, dim3(BY, BX), 0, s>>>(a, b, w, h); }",
        );
        assert_eq!(shape_moves(&tuner, &swapped, &base()).len(), 2);
        // What the memory sums a move under is the family its technique names.
        for m in tuner.moves(&Source::parse(TWO_KNOB_BLOCK), &base(), &[]) {
            assert_eq!(m.technique().parse::<Family>(), Ok(m.family()), "{}", m.technique());
        }
    }

    #[test]
    fn block_knob_on_the_stencil_gives_shapes_and_they_go_first_after_it_wider_rows_first() {
        let t = example("stencil2d_3x3");
        let src = std::fs::read_to_string(&t.baseline).unwrap();
        let facts = crate::task::facts::rewrite_facts(&t);
        let knobbed = rewrite::recipes::get(RecipeId::BlockKnob)
            .run(&Source::parse(&src), &facts, &Default::default())
            .unwrap()
            .source;
        // Re-reads through L2 (a stencil's halo sectors): the wider shape is voted for.
        let mut req = request(&t, base(), &knobbed, Some(report(ToolId::RedundantL2Traffic, 0.3)), Guidance::Tools);
        req.path = vec!["block-knob".into()];
        let order = techniques(&src, &req);
        let shapes: Vec<&String> = order.iter().filter(|t| t.starts_with("shape:")).collect();
        assert_eq!(shapes.len(), 2, "{order:?}");
        assert!(shapes[0].contains("_X_STENCIL2D_3X3_KERNEL=32,") && shapes[0].ends_with("=8"), "{shapes:?}");
        let at = |t: &str| order.iter().position(|x| x == t).unwrap();
        let first_recipe = order.iter().position(|t| structural(t)).unwrap();
        assert!(at(shapes[1]) < first_recipe, "a shape after a rewrite: {order:?}");
    }

    #[test]
    fn a_gemm_without_tensor_cores_gets_its_product_moved_onto_them_first() {
        // The linear layer's tiles at fp32 tolerance: with `no-tensor-cores` found, the first
        // children are `tensor-tile` (3xTF32, which the tolerance admits; plain TF32 is not offered).
        let t = example("linear_splitk_f32");
        let src = std::fs::read_to_string(&t.baseline).unwrap();
        let req = request(&t, base(), &src, Some(report(ToolId::NoTensorCores, 0.5)), Guidance::Tools);
        let order = techniques(&src, &req);
        // Both row layouts, the padded one first, before any other move.
        assert_eq!(
            order[..2],
            ["tensor-tile:pad=banks,precision=3xtf32", "tensor-tile:pad=keep,precision=3xtf32"],
            "{order:?}"
        );
        assert!(!order.iter().any(|t| t.contains("precision=tf32")), "{order:?}");
    }

    #[test]
    fn a_shape_is_a_family_of_its_own_that_tunes() {
        assert_eq!("shape:BX=32,BY=8".parse(), Ok(Family::Shape("BX,BY".into())));
        assert_eq!(Family::Shape("BX,BY".into()).to_string(), "shape:BX,BY");
        assert_eq!("shape:BX,BY".parse(), Ok(Family::Shape("BX,BY".into())));
        assert!("shape:BX=32".parse::<Family>().is_err());
        let i = crate::generate::intent("shape:BX=32,BY=8".into(), None);
        assert_eq!((i.family.as_str(), i.structural, i.rewrites), ("shape:BX,BY", false, false));
    }

    #[test]
    fn a_knob_a_block_size_is_made_of_moves_as_a_block_size() {
        // After block-knob, a `const int` block reads a macro: its moves are block-size
        // moves (directions for occupancy), not anonymous ones.
        let t = task("vector_add");
        let src = "#ifndef NS_BLOCK\n#define NS_BLOCK 256\n#endif\n// nightshift: knob NS_BLOCK = 128 256 512\n\
                   __global__ void add(const float* a, const float* b, float* c, int n) {\n\
                   int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) c[i] = a[i] + b[i]; }\n\
                   extern \"C\" void vector_add(const float* a, const float* b, float* c, int n, cudaStream_t s) {\n\
                   const int threads = NS_BLOCK;\n\
                   add<<<(n + threads - 1) / threads, threads, 0, s>>>(a, b, c, n); }\n";
        let tuner = Tuner::new(&t, src, 1, Guidance::None);
        let knobs: Vec<(String, bool)> = tuner
            .moves(&Source::parse(src), &base(), &[])
            .into_iter()
            .filter_map(|m| match m {
                Move::Knob { name, block_size, .. } => Some((name, block_size)),
                _ => None,
            })
            .collect();
        assert!(knobs.iter().any(|(n, _)| n == "NS_BLOCK"), "no NS_BLOCK knob: {knobs:?}");
        assert!(knobs.iter().filter(|(n, _)| n == "NS_BLOCK").all(|(_, b)| *b), "{knobs:?}");
    }

    #[test]
    fn same_seed_same_moves_and_remembered_kernels_are_skipped() {
        let t = task("softmax");
        let src = std::fs::read_to_string(&t.baseline).unwrap();
        let run = || {
            let tuner = Tuner::new(&t, &src, 7, Guidance::None);
            (0..5)
                .map(|_| kernel(tuner.propose(&request(&t, base(), &src, None, Guidance::None))).technique)
                .collect::<Vec<_>>()
        };
        assert_eq!(run(), run());
        let first =
            kernel(Tuner::new(&t, &src, 3, Guidance::None).propose(&request(&t, base(), &src, None, Guidance::None)));
        let tuner = Tuner::new(&t, &src, 3, Guidance::None);
        tuner.remember(
            1,
            &Candidate { source: "x".into(), defines: first.defines.clone(), flags: first.flags.clone() },
            &first.source,
        );
        let second = kernel(tuner.propose(&request(&t, base(), &src, None, Guidance::None)));
        assert_ne!(second.technique, first.technique);
    }

    #[test]
    fn memory_of_failures_and_gains_reorders_moves() {
        let t = task("vector_add");
        let src = std::fs::read_to_string(&t.baseline).unwrap();
        let mut req = request(&t, base(), &src, None, Guidance::None);
        let first = kernel(Tuner::new(&t, &src, 1, Guidance::None).propose(&req));
        // That family failed every time elsewhere in the tree: something else goes first.
        let bad = Stats { tries: 4, failures: [("wrong-answer".to_string(), 4)].into(), ..Default::default() };
        req.memory.techniques.insert(first.technique.clone(), bad);
        let second = kernel(Tuner::new(&t, &src, 1, Guidance::None).propose(&req));
        assert_ne!(family(&second.technique), family(&first.technique));
    }

    /// A parent with these knob values.
    fn at(defines: &[(&str, &str)]) -> Candidate {
        Candidate { defines: defines.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect(), ..base() }
    }

    /// A correct child at `speedup` over the baseline, apart from its parent's interval.
    fn apart(speedup: f64) -> search::Outcome {
        search::Outcome::correct(speedup).within_parent(false)
    }

    /// A child of `parent` (knob values `values`, which the tuner learns as it learns
    /// those of each parent it proposes from) made by `technique`, judged `outcome`.
    fn stepped(
        tree: &mut search::Tree<()>,
        tuner: &Tuner,
        src: &str,
        parent: (search::NodeId, &Candidate),
        technique: &str,
        outcome: search::Outcome,
    ) -> search::NodeId {
        tuner.remember_knobs(parent.0, &Source::parse(src), parent.1);
        judged(tree, parent.0, technique, outcome)
    }

    #[test]
    fn one_lost_step_does_not_bury_a_knob_but_a_knob_that_keeps_losing_that_way_goes_last() {
        let t = example("linear_splitk_f32");
        let src = std::fs::read_to_string(&t.baseline).unwrap();
        let knobs = |bt_steps: &[f64]| {
            let tuner = Tuner::new(&t, &src, 1, Guidance::None);
            let mut tree = search::Tree::new((), search::Config::default(), 1);
            // Other code at the knobs' defaults: what lost there is still tried here.
            let other = judged(&mut tree, 0, "unroll:factor=4", apart(1.5));
            // Two knobs stepped 20 times each, a little slower on average (a knob whose
            // children all land within their parents' interval is idle, and goes last).
            for i in 0..20 {
                let (bn, split) = if i % 2 == 0 { (1.02, 1.02) } else { (0.953, 0.973) };
                stepped(&mut tree, &tuner, &src, (other, &base()), "knob:BN=128", apart(1.5 * bn));
                stepped(&mut tree, &tuner, &src, (other, &base()), "knob:SPLIT_K=2", apart(1.5 * split));
            }
            for ratio in bt_steps {
                stepped(&mut tree, &tuner, &src, (other, &base()), "knob:BT=64", apart(1.5 * ratio));
            }
            let mut req = request(&t, base(), &src, None, Guidance::None);
            (req.node, req.memory) = (99, tree.memory.clone());
            order_of(&tuner, &req, "knob:")
        };
        // The 10-minute run's case: BT=64 once, on a tile past BN's list, 2.77x -> 1.90x.
        // That step and the other step up BT's list go before every move of the knobs
        // tried often.
        let once = knobs(&[1.90 / 2.77]);
        let last_listed_bt = once.iter().rposition(|k| k == "knob:BT=32" || k == "knob:BT=64").unwrap();
        let first_other = once.iter().position(|k| !k.starts_with("knob:BT=")).unwrap();
        assert!(last_listed_bt < first_other, "{once:?}");
        // Four losses of half a doubling each are what a larger BT does, not one tile:
        // both steps up go last, and the step down, never tried, does not.
        let often = knobs(&[0.5f64.sqrt(); 4]);
        let first_up = often.iter().position(|k| k == "knob:BT=32" || k == "knob:BT=64").unwrap();
        assert!(often[..first_up].iter().any(|k| k.starts_with("knob:BN=")), "{often:?}");
        assert!(often[..first_up].iter().any(|k| k.starts_with("knob:SPLIT_K=")), "{often:?}");
        assert!(often[first_up..].iter().all(|k| k == "knob:BT=32" || k == "knob:BT=64"), "{often:?}");
        assert!(often[..first_up].contains(&"knob:BT=8".to_string()), "{often:?}");
    }

    #[test]
    fn a_family_that_keeps_failing_goes_after_one_that_keeps_losing_a_little() {
        let t = example("linear_splitk_f32");
        let src = std::fs::read_to_string(&t.baseline).unwrap();
        let tuner = Tuner::new(&t, &src, 1, Guidance::None);
        let mut tree = search::Tree::new((), search::Config::default(), 1);
        // On other code, so that no loss there leaves a move out on the root's.
        let other = judged(&mut tree, 0, "unroll:factor=4", apart(1.5));
        for _ in 0..10 {
            // Ten wrong answers: no gain measured, so only the failures and the tries speak.
            stepped(
                &mut tree,
                &tuner,
                &src,
                (other, &base()),
                "knob:SPLIT_K=2",
                search::Outcome::failed("wrong-answer"),
            );
            // Ten steps up of BN, 13% slower each.
            stepped(&mut tree, &tuner, &src, (other, &base()), "knob:BN=128", apart(1.5 * 0.87));
        }
        // A long run: a hundred level tries elsewhere.
        for _ in 0..100 {
            judged(
                &mut tree,
                other,
                "flag:extra-device-vectorization=on",
                search::Outcome::correct(1.5).within_parent(true),
            );
        }
        let mut req = request(&t, base(), &src, None, Guidance::None);
        (req.node, req.memory) = (999, tree.memory.clone());
        let knobs = order_of(&tuner, &req, "knob:");
        let last_bn = knobs.iter().rposition(|k| k.starts_with("knob:BN=")).unwrap();
        let first_split = knobs.iter().position(|k| k.starts_with("knob:SPLIT_K=")).unwrap();
        assert!(last_bn < first_split, "{knobs:?}");
        // BN's steps up lost, its step down was never tried.
        let at = |k: &str| knobs.iter().position(|b| b == k).unwrap_or_else(|| panic!("{k} in {knobs:?}"));
        assert!(at("knob:BN=16") < at("knob:BN=64") && at("knob:BN=16") < at("knob:BN=128"), "{knobs:?}");
    }

    #[test]
    fn a_step_back_that_lost_goes_after_the_step_on_that_gained_whatever_the_seed() {
        let t = example("linear_splitk_f32");
        let src = std::fs::read_to_string(&t.baseline).unwrap();
        // BT's larger tiles gained; going back to its default lost, once: the step on from
        // 32 scores the steps up, the step back the one step down.
        let mut tree = search::Tree::new((), search::Config::default(), 1);
        let tuner = Tuner::new(&t, &src, 1, Guidance::None);
        let bt32 = at(&[("BT", "32")]);
        let n32 = stepped(&mut tree, &tuner, &src, (0, &base()), "knob:BT=32", apart(2f64.powf(0.6)));
        stepped(&mut tree, &tuner, &src, (0, &base()), "knob:BT=32", apart(2f64.powf(0.6)));
        for _ in 0..2 {
            stepped(&mut tree, &tuner, &src, (n32, &bt32), "knob:BT=64", apart(2f64.powf(1.4)));
        }
        stepped(&mut tree, &tuner, &src, (n32, &bt32), "knob:BT=default", apart(2f64.powf(-0.2)));
        // At BN=128, so that BT's default is not the baseline, which is never proposed.
        let mut req = request(&t, at(&[("BN", "128"), ("BT", "32")]), &src, None, Guidance::None);
        (req.node, req.parent, req.memory) = (99, 98, tree.memory.clone());
        // Whatever the seed: the family alike for both, only the seed's draw would order them.
        for seed in 1..=8 {
            let tuner = Tuner::new(&t, &src, seed, Guidance::None);
            tuner.remember(n32, &bt32, &src);
            let bt = order_of(&tuner, &req, "knob:BT=");
            let at = |k: &str| bt.iter().position(|b| b == k).unwrap_or_else(|| panic!("{k} in {bt:?}"));
            assert!(at("knob:BT=64") < at("knob:BT=default"), "seed {seed}: {bt:?}");
        }
    }

    #[test]
    fn a_knobs_tries_count_by_the_way_they_stepped_not_by_the_value_they_reached() {
        let t = example("linear_splitk_f32");
        let src = std::fs::read_to_string(&t.baseline).unwrap();
        let mut tree = search::Tree::new((), search::Config::default(), 1);
        let tuner = Tuner::new(&t, &src, 1, Guidance::None);
        // Larger BT tiles gained from 16 and from 32: BT=32 three times, BT=64 twice.
        let (bt32, bt64) = (at(&[("BT", "32")]), at(&[("BT", "64")]));
        let mut n32 = 0;
        for _ in 0..3 {
            n32 = stepped(&mut tree, &tuner, &src, (0, &base()), "knob:BT=32", apart(2f64.powf(0.6)));
        }
        let mut n64 = 0;
        for _ in 0..2 {
            n64 = stepped(&mut tree, &tuner, &src, (n32, &bt32), "knob:BT=64", apart(2f64.powf(1.4)));
        }
        // From 64, on new code: BT=128 lost once, the steps back to the default twice.
        let other = judged(&mut tree, n64, "unroll:factor=4", apart(2f64.powf(1.6)));
        let slower = |log2: f64| apart(2f64.powf(1.6 + log2));
        stepped(&mut tree, &tuner, &src, (other, &bt64), "knob:BT=128", slower(-0.3));
        for _ in 0..2 {
            stepped(&mut tree, &tuner, &src, (other, &bt64), "knob:BT=default", slower(-0.8));
        }
        // From a parent at 64 on the first code: BT=32 there is a step down, and steps down
        // lost; its gains were steps up, as BT=128 is. By the value alone, BT=32 went first.
        let mut req = request(&t, at(&[("BN", "128"), ("BT", "64")]), &src, None, Guidance::None);
        (req.node, req.parent, req.memory) = (99, n64, tree.memory.clone());
        let bt = order_of(&tuner, &req, "knob:BT=");
        assert_eq!(bt.first().map(String::as_str), Some("knob:BT=128"), "{bt:?}");
        // A resumed run's tuner learns each node's knobs from the proposals in its log.
        let resumed = Tuner::new(&t, &src, 1, Guidance::None);
        for (id, cand) in [(n32, &bt32), (n64, &bt64), (other, &bt64)] {
            resumed.remember(id, cand, &src);
        }
        let again = order_of(&resumed, &req, "knob:BT=");
        assert_eq!(again, bt);
    }

    #[test]
    fn each_try_steps_from_the_knobs_its_parent_had_as_the_tuner_saw_them_proposing_or_resuming() {
        let t = example("linear_splitk_f32");
        let src = std::fs::read_to_string(&t.baseline).unwrap();
        let mut tree = search::Tree::new((), search::Config::default(), 1);
        let bt32 = at(&[("BT", "32")]);
        let (live, unaware) = (Tuner::new(&t, &src, 1, Guidance::None), Tuner::new(&t, &src, 1, Guidance::None));
        let n32 = judged(&mut tree, 0, "knob:BT=32", apart(2.0));
        // The live tuner proposes from node n32, and so notes its knobs; the root's it
        // noted when it was made.
        let mut req = request(&t, bt32.clone(), &src, None, Guidance::None);
        (req.node, req.parent) = (2, n32);
        kernel(live.propose(&req));
        judged(&mut tree, n32, "knob:BT=64", apart(8.0));
        judged(&mut tree, n32, "knob:BT=default", apart(1.0));
        judged(&mut tree, n32, "knob:BT=default", apart(0.5));
        let record = |tuner: &Tuner| {
            let steps = Tuner::steps(&tree.memory, &tuner.knobs_at.lock().unwrap());
            let gains = |map: &BTreeMap<(String, Way), Gains>, key: &str, way| {
                map.get(&(key.to_string(), way)).map(|g| (g.n, g.sum))
            };
            (
                gains(&steps.by_knob, "BT", Way::Up),
                gains(&steps.by_knob, "BT", Way::Down),
                gains(&steps.by_move, "knob:BT=32", Way::Up),
                gains(&steps.by_move, "knob:BT=default", Way::Down),
            )
        };
        // Up: 16 -> 32 (+1) and 32 -> 64 (+2); down: twice 32 -> the default, 16 (-1, -2).
        let expected = (Some((2, 3.0)), Some((2, -3.0)), Some((1, 1.0)), Some((2, -3.0)));
        assert_eq!(record(&live), expected);
        // A resumed run's tuner learns each node's knobs from the proposals in its log.
        let resumed = Tuner::new(&t, &src, 1, Guidance::None);
        resumed.remember(n32, &bt32, &src);
        assert_eq!(record(&resumed), expected);
        // One that never saw node n32 knows only the step from the root.
        assert_eq!(record(&unaware), (Some((1, 1.0)), None, Some((1, 1.0)), None));
        // A source the log could not give back notes nothing: the step stays unknown.
        let unreadable = Tuner::new(&t, &src, 1, Guidance::None);
        unreadable.remember(n32, &bt32, "");
        assert_eq!(record(&unreadable), record(&unaware));
    }

    #[test]
    fn a_knob_value_that_lost_twice_one_way_is_still_tried_the_other_way() {
        let t = example("linear_splitk_f32");
        let src = std::fs::read_to_string(&t.baseline).unwrap();
        let mut tree = search::Tree::new((), search::Config::default(), 1);
        let tuner = Tuner::new(&t, &src, 1, Guidance::None);
        let bt64 = at(&[("BT", "64")]);
        // A knob move keeps the code: both parents below run the root's.
        let n64 = judged(&mut tree, 0, "knob:BT=64", apart(2.0));
        for _ in 0..2 {
            stepped(&mut tree, &tuner, &src, (n64, &bt64), "knob:BT=32", slower());
        }
        // Everything a fresh tuner that noted the same knobs offers from `parent`.
        let offered = |memory: &search::Memory, parent, cand: Candidate| {
            let mut req = request(&t, cand, &src, None, Guidance::None);
            (req.node, req.parent, req.memory) = (99, parent, memory.clone());
            let noted = Mutex::new(tuner.knobs_at.lock().unwrap().clone());
            let fresh = Tuner { knobs_at: noted, ..Tuner::new(&t, &src, 1, Guidance::None) };
            order_of(&fresh, &req, "")
        };
        let bt32 = "knob:BT=32".to_string();
        assert!(!offered(&tree.memory, n64, bt64.clone()).contains(&bt32), "lost twice stepping down from 64");
        assert!(offered(&tree.memory, 0, base()).contains(&bt32), "from 16 it is a step up");
        // A value that fails to launch fails whichever way it was reached: twice stepping
        // down from 64, and out from 16 too, where it is a step up.
        for _ in 0..2 {
            stepped(&mut tree, &tuner, &src, (n64, &bt64), "knob:BT=32", search::Outcome::failed("launch-error"));
        }
        assert!(!offered(&tree.memory, 0, base()).contains(&bt32), "failed to launch twice on this code");
    }

    #[test]
    fn fast_math_only_where_the_tolerance_admits_it() {
        assert!(!fast_math_allowed(&task("softmax")));
        assert_eq!("knob:BLOCK=128".parse(), Ok(Family::Knob("BLOCK".into())));
        assert_eq!("vectorize:width=8".parse(), Ok(Family::Recipe(RecipeId::Vectorize)));
        assert_eq!("flag:maxrregcount=off".parse(), Ok(Family::Flag(FlagKind::RegisterCap)));
        assert!("warp-per-row".parse::<Family>().is_err() && "flag:O9=on".parse::<Family>().is_err());
        for f in [Family::Knob("BLOCK".into()), Family::Recipe(RecipeId::Unroll), Family::Flag(FlagKind::FastMath)] {
            assert_eq!(f.to_string().parse(), Ok(f.clone()), "a family's name reads back as the family");
            assert!(!f.structural());
        }
        assert!(Family::Recipe(RecipeId::Cooperative).structural());
        assert_eq!(
            recipes_on_path(&["".into(), "vectorize:width=8".into(), "knob:BLOCK=64".into(), "unroll".into()]),
            ["vectorize:width=8", "unroll"]
        );
    }
}
