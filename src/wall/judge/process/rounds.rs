//! Timing at the bench size, in rounds. A round is `slots` calls back to back, each on an
//! input set the judge has just generated from a seed no process has seen (in two copies:
//! the reference's and the timed library's), after the reference computed every set's
//! outputs in its own process and the judge flushed L2. The round's window runs on the
//! judge's clock from its command to the end of its own comparison of every output with
//! the reference's: work a worker leaves running past its answer lands inside it, since
//! the judge's comparison cannot finish before that work has (contexts of different
//! processes take turns on the GPU). Guard zones and inputs are checked after the window.
//!
//! The number of slots comes from the baseline's first calls: enough that a window holds
//! `round_ms` of calls, as GPU memory allows (two copies of every set).

use super::checks::{self, label, output_mismatch};
use super::pools::{Layout, Pool};
use super::workers::Worker;
use super::{energy, Halt, Judge, SeedKind, Team};
use crate::wall::protocol::{Failure, Outcome};
use std::time::{Duration, Instant};

/// Which side a phase times.
pub(crate) enum Side<'a> {
    /// The baseline, before any candidate process has loaded its library.
    BaselineBefore,
    Candidate(&'a mut Worker),
    /// The baseline, after the candidate's worker is gone.
    BaselineAfter,
}

/// One timed round.
#[derive(Debug, Clone)]
pub(crate) struct Round {
    /// The judge's window, in milliseconds.
    pub window_ms: f64,
    /// The worker's event time of each call.
    pub events_ms: Vec<f64>,
}

/// A phase's rounds and its energy reading.
#[derive(Debug, Clone, Default)]
pub(crate) struct PhaseResult {
    pub rounds: Vec<Round>,
    pub energy: Option<energy::Loop>,
}

/// The buffers of one timed size (the bench size, or one served shape) and what the
/// judgment has learned about the calls there.
pub(crate) struct Bench {
    /// The size these buffers hold: every method first makes it the judge's bench size,
    /// so labels, layouts and floors all speak of the shape being timed.
    pub size: crate::task::Size,
    /// Which served shape, in the task's order: its input sets draw seeds no other
    /// shape's do (a decode set must not be the first rows of a prefill set).
    shape: u64,
    pub slots: usize,
    reference: Pool,
    side: Pool,
    /// How long one call takes, about (the baseline's warm-up): for commands' deadlines.
    pub per_call: Duration,
    /// Bench sets made so far: every one gets a seed of its own.
    sets: u64,
    /// What the baseline's timed outputs said against the reference, if not right.
    pub baseline_wrong: Option<String>,
    /// The candidate's calls at the bench size found right so far.
    candidate_right: u64,
}

/// Slots for the first calls that size the rounds.
const PROBE_SLOTS: usize = 2;
/// Of the GPU memory free after the judge's own buffers, what the bench sets may take.
const MEMORY_SHARE: f64 = 0.25;
/// A set smaller than this may have up to `SMALL_SET_CALLS` calls in a round.
const SMALL_SET_BYTES: u64 = 16 << 20;
const SMALL_SET_CALLS: usize = 1024;
/// Slots of a warm-up round: enough calls for lazy loading and the clocks.
const WARM_UP_SLOTS: usize = 8;

impl Bench {
    /// Sizes the rounds at `size` from the baseline's first calls and makes the buffers.
    /// `shape` is its index among `shapes` served shapes, all held at once: they share
    /// the memory the sets may take.
    pub fn prepare(
        j: &mut Judge,
        team: &mut Team,
        size: &crate::task::Size,
        shape: usize,
        shapes: usize,
    ) -> Result<Bench, Halt> {
        j.task.bench.clone_from(size);
        let task_error = |m: String| Halt::Outcome(Outcome::TaskError { message: m });
        let slot_bytes = Layout::case_bytes(&j.task, &j.task.bench).map_err(|e| task_error(e.to_string()))?;
        let free = j.gpu.free_memory().map_err(|e| j.gpu_stop(e))? as f64;
        let share = MEMORY_SHARE / shapes.max(1) as f64;
        let fits = ((share * free) / (2.0 * slot_bytes as f64)).floor() as usize;
        if fits == 0 {
            return Err(task_error(format!(
                "the bench size {} needs {:.2} GB on the GPU for one input set (the reference's copy and the kernel's); {:.2} GB are free",
                j.task.bench,
                2.0 * slot_bytes as f64 / 1e9,
                free / 1e9
            )));
        }
        let probe = PROBE_SLOTS.min(fits);
        if shape == 0 {
            j.sm_mhz_at_start =
                crate::wall::nvml::NvmlDevice::open(&j.gpu.info.uuid).ok().and_then(|n| n.sm_clock_mhz());
        }
        let mut bench = Bench::with_slots(j, team, probe, shape as u64)?;
        j.phase(crate::wall::protocol::Phase::Time, format!("the baseline's first calls at {size}"));
        // Twice: the first round pays for lazy module loading and clock ramps.
        bench.round(j, team, &mut Side::BaselineBefore, probe)?;
        let warm = bench.round(j, team, &mut Side::BaselineBefore, probe)?;
        let per_call_ms = crate::wall::protocol::median(&warm.events_ms)
            .max(warm.window_ms / warm.events_ms.len().max(1) as f64 * 0.1);
        let per_call_ms = if per_call_ms.is_finite() && per_call_ms > 0.0 { per_call_ms } else { 1.0 };
        let wanted = (j.req.timing.round_ms / per_call_ms).ceil() as usize;
        // Calls of a few microseconds (a decode shape) need more of them in a round for a
        // round median that holds still: small sets may fill the round past the plan's cap.
        let cap = if slot_bytes < SMALL_SET_BYTES {
            SMALL_SET_CALLS.max(j.req.timing.max_calls)
        } else {
            j.req.timing.max_calls
        };
        let slots = wanted.clamp(1, cap.max(1)).min(fits).max(1);
        bench.per_call = Duration::from_secs_f64(per_call_ms / 1e3);
        j.notes.push(format!(
            "timed in rounds of {slots} calls, each on an input set of its own ({:.1} MB a set, two copies: the reference's and the timed library's){}",
            slot_bytes as f64 / 1e6,
            if slots < wanted { format!("; {wanted} would have filled a {} ms round, GPU memory allowed {slots}", j.req.timing.round_ms) } else { String::new() }
        ));
        if slots != bench.slots {
            let within = j.within(1, Duration::from_secs(5));
            for w in [Some(&mut team.reference), team.baseline.as_mut()].into_iter().flatten() {
                for id in [bench.reference.id, bench.side.id] {
                    // The probe's buffers: freed where the worker lets go (ours do).
                    let _ = w.release(id, within);
                }
            }
            let sets = bench.sets;
            let per_call = bench.per_call;
            bench = Bench::with_slots(j, team, slots, shape as u64)?;
            bench.sets = sets;
            bench.per_call = per_call;
        }
        Ok(bench)
    }

    fn with_slots(j: &mut Judge, team: &mut Team, slots: usize, shape: u64) -> Result<Bench, Halt> {
        let started = Instant::now();
        let layout = Layout::slots(&j.task, &j.task.bench, slots)
            .map_err(|e| Halt::Outcome(Outcome::TaskError { message: e.to_string() }))?;
        let reference = j.new_pool(layout.clone())?;
        let side = j.new_pool(layout)?;
        let within = j.within(1, Duration::from_secs(5));
        let r = &mut team.reference;
        r.import(reference.id, &reference.mem, within).map_err(|f| Halt::Outcome(r.blame(&f, "")))?;
        let b = team.baseline();
        b.import(side.id, &side.mem, within).map_err(|f| Halt::Outcome(b.blame(&f, "")))?;
        j.spent("time.buffers", started);
        Ok(Bench {
            size: j.task.bench.clone(),
            shape,
            slots,
            reference,
            side,
            per_call: Duration::from_millis(1),
            sets: 0,
            baseline_wrong: None,
            candidate_right: 0,
        })
    }

    /// Lends the bench buffers to another worker (the candidate's).
    pub fn lend(&self, j: &Judge, w: &mut Worker) -> Result<(), Halt> {
        let within = j.within(1, Duration::from_secs(5));
        w.import(self.side.id, &self.side.mem, within).map_err(|f| Halt::Outcome(w.blame(&f, "")))
    }

    fn fresh_seed(&mut self, j: &Judge) -> u64 {
        self.sets += 1;
        j.seed(SeedKind::Bench, (self.shape << 48) | self.sets)
    }

    /// A phase: one warm-up round, `rounds` timed rounds, then the energy loop if asked.
    pub fn phase(
        &mut self,
        j: &mut Judge,
        team: &mut Team,
        mut side: Side<'_>,
        energy: bool,
    ) -> Result<PhaseResult, Halt> {
        j.task.bench.clone_from(&self.size);
        // The baseline's first phase follows its probe calls at this size, warm, unless
        // other served shapes were sized since: then it warms up like the others.
        if !matches!(side, Side::BaselineBefore) || j.task.serves_shapes() {
            self.round(j, team, &mut side, WARM_UP_SLOTS.min(self.slots))?;
        }
        let mut result = PhaseResult::default();
        for _ in 0..j.req.timing.rounds.max(2) {
            result.rounds.push(self.round(j, team, &mut side, self.slots)?);
        }
        if energy {
            j.phase(crate::wall::protocol::Phase::Energy, "NVML energy counter");
            let per_call_ms = crate::wall::protocol::median(
                &result.rounds.iter().flat_map(|r| r.events_ms.iter().copied()).collect::<Vec<_>>(),
            );
            let candidate = matches!(side, Side::Candidate(_));
            let w = match &mut side {
                Side::Candidate(w) => &mut **w,
                _ => team.baseline(),
            };
            let reading = energy::measure(j, w, &self.side, &self.reference, self.slots, per_call_ms).map_err(|h| {
                if candidate {
                    h
                } else {
                    as_task_error(h)
                }
            })?;
            result.energy = Some(reading);
        }
        Ok(result)
    }

    /// One round of `s` calls (at most the bench's slots) on fresh input sets. The
    /// reference computes its outputs first, on its own copy; the timed library's copy is
    /// written only once the window is open, so nothing can be worked out before it.
    pub fn round(&mut self, j: &mut Judge, team: &mut Team, side: &mut Side<'_>, s: usize) -> Result<Round, Halt> {
        j.task.bench.clone_from(&self.size);
        let s = s.clamp(1, self.slots);
        let step = Instant::now();
        let seeds: Vec<u64> = (0..s).map(|_| self.fresh_seed(j)).collect();
        for (k, seed) in seeds.iter().enumerate() {
            j.prepare(&self.reference, k, *seed, false)?;
            j.poison(&self.side, k, false)?;
        }
        j.sync()?;
        j.spent("time.inputs", step);
        let step = Instant::now();
        let at = format!("at the bench size {}", j.task.bench);
        let r = &mut team.reference;
        let ref_calls = (0..s).map(|k| self.reference.call(k)).collect();
        r.run(ref_calls, 1, j.within(s, self.per_call * 4)).map_err(|f| Halt::Outcome(r.blame(&f, &at)))?;
        j.sync()?;
        j.spent("time.reference", step);

        let calls = (0..s).map(|k| self.side.call(k)).collect();
        let all: Vec<usize> = (0..s).collect();
        let per_call = self.per_call;
        let worker: &mut Worker = match side {
            Side::Candidate(w) => w,
            _ => team.baseline(),
        };
        // The window opens before the inputs exist where the library can see them: a
        // watcher that computes as they appear works inside it.
        let started = Instant::now();
        for (k, seed) in seeds.iter().enumerate() {
            j.generate_inputs(&self.side, k, *seed)?;
        }
        if j.task.flush_l2 {
            j.gpu.flush_l2_async().map_err(|e| j.gpu_stop(e))?;
        }
        j.sync()?;
        let ran = worker.run(calls, 1, j.within(s, per_call));
        let events_ms = match ran {
            Ok(e) => e,
            Err(f) => return Err(self.fault(worker, &f, &at)),
        };
        let results = j.compare(&self.side, &self.reference, &all)?;
        let window_ms = started.elapsed().as_secs_f64() * 1e3;
        j.spent("time.windows", started);
        let step = Instant::now();

        if !j.task.allow_nonfinite {
            if let Some((k, arg, r)) = results.iter().find(|(_, _, r)| r.expected_nonfinite > 0) {
                return Err(Halt::Outcome(Outcome::TaskError {
                    message: format!(
                        "the reference wrote {} non-finite values (NaN or infinite; the first at element {}) into `{}` at {}, and the task allows none: a kernel that never wrote them would compare equal. Fix the reference or its inputs, or set `nonfinite = true` under [check] if such outputs are intended",
                        r.expected_nonfinite,
                        r.first_expected_nonfinite,
                        j.task.args[*arg].name,
                        label(&j.task.bench, seeds[*k])
                    ),
                }));
            }
        }
        let wrong = results.iter().find(|(_, _, r)| r.mismatches > 0).map(|(k, _, _)| *k);
        let damaged = match j.intact(&self.side, &seeds.iter().copied().enumerate().collect::<Vec<_>>(), false)? {
            Some(d) => Some(d),
            None => {
                j.same_inputs(&self.side, &self.reference, &all)?.map(|(k, arg, i)| (k, arg, super::Damage::Input(i)))
            }
        };
        let candidate = matches!(side, Side::Candidate(_));
        if let Some(k) = wrong {
            let worker_role = if candidate { "candidate" } else { "baseline" };
            let outs = j.outputs(&self.side, k)?;
            let refs = j.outputs(&self.reference, k)?;
            let f = output_mismatch(&j.task, worker_role, &outs, &refs, &j.task.bench, seeds[k], false)
                .unwrap_or_else(|| {
                    Failure::new(
                        crate::wall::protocol::FailureClass::WrongAnswer,
                        format!("{worker_role} output differs from the reference at {} (the judge's device comparison; the host's found nothing: a nightshift bug?)", label(&j.task.bench, seeds[k])),
                    )
                });
            if candidate {
                return Err(Halt::Failure(self.at_bench(f, k)));
            }
            self.baseline_wrong.get_or_insert(f.message);
        }
        if let Some((k, arg, d)) = damaged {
            let role = if candidate { "candidate" } else { "baseline" };
            let f = checks::damage(j, &self.side, role, k, seeds[k], arg, d)?;
            if candidate {
                return Err(Halt::Failure(self.at_bench(f, k)));
            }
            return Err(Halt::Outcome(Outcome::TaskError { message: format!("at the bench size: {}", f.message) }));
        }
        if candidate {
            self.candidate_right += s as u64;
        }
        j.spent("time.checks", step);
        Ok(Round { window_ms, events_ms })
    }

    /// A candidate's failure at the bench size, named by how many calls there were right.
    fn at_bench(&self, mut f: Failure, k: usize) -> Failure {
        f.message = if self.candidate_right == 0 {
            format!("at {}, within its first {} calls there: {}", self.size, self.slots, f.message)
        } else {
            format!(
                "at {}, after {} right calls there (each on inputs of its own), wrong on call {}: {}",
                self.size,
                self.candidate_right,
                self.candidate_right + k as u64 + 1,
                f.message
            )
        };
        f
    }

    fn fault(&self, w: &Worker, f: &super::workers::Fault, at: &str) -> Halt {
        match w.blame(f, at) {
            Outcome::Rejected { failure } => Halt::Failure(self.at_bench(failure, 0)),
            other => Halt::Outcome(other),
        }
    }
}

/// A baseline's failure is the task's problem, not a rejection.
fn as_task_error(h: Halt) -> Halt {
    match h {
        Halt::Failure(f) => Halt::Outcome(Outcome::TaskError { message: format!("the baseline: {}", f.message) }),
        other => other,
    }
}
