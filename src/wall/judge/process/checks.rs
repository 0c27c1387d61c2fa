//! The check at the task's check sizes: the reference's outputs (it must write every
//! output, leave its inputs alone and, unless the task allows it, produce finite values),
//! then a library checked against them case by case, each case called twice (two poison
//! patterns tell an unwritten element from a coincidence; the second call must agree with
//! the first), and one case called [`REPEAT_CALLS`] times more, each call verified, with
//! the process's GPU memory measured around them.
//!
//! Every call is one command to the worker; the judge writes the inputs and the poison
//! before it and reads the guard zones, the inputs and the outputs after it, all from its
//! own mapping of the buffers.

use super::pools::{Layout, Pool};
use super::workers::Worker;
use super::{Damage, Halt, Judge, SeedKind, Team};
use crate::task::types::{ElemType, ParamType};
use crate::task::{ArgRole, Size, Task, Tolerance};
use crate::wall::judge::verify;
use crate::wall::protocol::{CaseRef, CheckSummary, Comparison, Failure, FailureClass, Outcome, REPEAT_CALLS};
use std::time::Duration;

/// Arguments the judge compares after a call: outputs and in-out buffers.
pub(crate) fn is_output(task: &Task, arg: usize) -> bool {
    matches!(task.args[arg].role, ArgRole::Output { .. } | ArgRole::InOut { .. })
}

/// Arguments that must be unchanged after a call.
pub(crate) fn is_input(task: &Task, arg: usize) -> bool {
    matches!(task.args[arg].role, ArgRole::Input { .. })
}

pub(crate) fn tolerance_of(task: &Task, arg: usize) -> Tolerance {
    match &task.args[arg].role {
        ArgRole::Output { tolerance, .. } | ArgRole::InOut { tolerance, .. } => *tolerance,
        _ => task.tolerance,
    }
}

pub(crate) fn elem_of(task: &Task, arg: usize) -> Option<ElemType> {
    match task.args[arg].ty {
        ParamType::Pointer { elem, .. } => Some(elem),
        ParamType::Scalar { .. } => None,
    }
}

/// A case's words: "size n=3 seed 12".
pub(crate) fn label(size: &Size, seed: u64) -> String {
    format!("size {size} seed {seed}")
}

pub(crate) fn case_ref(size: &Size, seed: u64, arg: Option<&str>) -> CaseRef {
    CaseRef { size: size.to_string(), seed, arg: arg.map(str::to_string), call: None }
}

/// GPU memory that may go missing over the repeat calls before it counts as a leak.
const LEAK_ALLOWANCE: u64 = 32 << 20;

/// The check cases, their buffers (the reference's pool and the one lent to the baseline
/// and the candidate) and the reference's outputs, read back once.
pub(crate) struct CheckSet {
    seeds: Vec<u64>,
    reference: Pool,
    side: Pool,
    refs: Vec<Vec<Option<Vec<u8>>>>,
}

impl CheckSet {
    pub fn cases(&self) -> usize {
        self.seeds.len()
    }

    fn size(&self, k: usize) -> &Size {
        &self.side.layout.cases[k].size
    }

    /// Every check size with every seed; the reference run on all of them.
    pub fn prepare(j: &mut Judge, team: &mut Team) -> Result<CheckSet, Halt> {
        let mut sizes = Vec::new();
        let mut seeds = Vec::new();
        for (si, size) in j.task.checks.iter().enumerate() {
            for s in 0..j.task.seeds as u64 {
                sizes.push(size.clone());
                seeds.push(j.seed(SeedKind::Check, 1000 * si as u64 + s));
            }
        }
        let layout = Layout::new(&j.task, &sizes).map_err(|e| Outcome::TaskError { message: e.to_string() })?;
        let reference = j.new_pool(layout.clone())?;
        let side = j.new_pool(layout)?;
        let within = j.within(1, Duration::from_secs(5));
        let r = &mut team.reference;
        r.import(reference.id, &reference.mem, within).map_err(|f| Halt::Outcome(r.blame(&f, "")))?;
        let b = team.baseline();
        b.import(side.id, &side.mem, within).map_err(|f| Halt::Outcome(b.blame(&f, "")))?;
        let mut set = CheckSet { seeds, reference, side, refs: Vec::new() };
        set.refs = set.reference_outputs(j, &mut team.reference)?;
        Ok(set)
    }

    /// Lends check buffers to another worker (the candidate's): a pool of its own, made
    /// now. The baseline's pool still holds the baseline's inputs and outputs of every
    /// case (only the case about to run is rewritten before a call), right answers a
    /// candidate could copy on its first call and hand back on later ones.
    pub fn lend(&mut self, j: &mut Judge, w: &mut Worker) -> Result<(), Halt> {
        self.side = j.new_pool(self.side.layout.clone())?;
        let within = j.within(1, Duration::from_secs(5));
        w.import(self.side.id, &self.side.mem, within).map_err(|f| Halt::Outcome(w.blame(&f, "")))
    }

    /// The reference on every case, twice where an output still holds poison A (poison B
    /// tells an unwritten element from a value that happens to equal A).
    fn reference_outputs(&self, j: &Judge, r: &mut Worker) -> Result<Vec<Vec<Option<Vec<u8>>>>, Halt> {
        let task_error = |m: String| Halt::Outcome(Outcome::TaskError { message: m });
        let run = |j: &Judge, r: &mut Worker, second: bool| -> Result<Vec<Vec<Option<Vec<u8>>>>, Halt> {
            for (k, seed) in self.seeds.iter().enumerate() {
                j.prepare(&self.reference, k, *seed, second)?;
            }
            j.sync()?;
            let calls = (0..self.cases()).map(|k| self.reference.call(k)).collect();
            r.run(calls, 1, j.within(self.cases(), Duration::from_millis(100)))
                .map_err(|f| Halt::Outcome(r.blame(&f, "on the check sizes")))?;
            let cases: Vec<(usize, u64)> = self.seeds.iter().copied().enumerate().collect();
            if let Some((k, arg, d)) = j.intact(&self.reference, &cases, true)? {
                let f = damage(j, &self.reference, "the reference", k, self.seeds[k], arg, d)?;
                return Err(task_error(format!("the reference fails: {}", f.message)));
            }
            (0..self.cases()).map(|k| j.outputs(&self.reference, k)).collect()
        };
        let first = run(j, r, false)?;
        let suspicious = first.iter().any(|outs| {
            outs.iter().enumerate().any(|(arg, o)| match (o, elem_of(&j.task, arg), &j.task.args[arg].role) {
                (Some(bytes), Some(elem), ArgRole::Output { .. }) => verify::count_poison(elem, bytes, false) > 0,
                _ => false,
            })
        });
        if suspicious {
            let second = run(j, r, true)?;
            for (k, (a, b)) in first.iter().zip(&second).enumerate() {
                for (arg, (a, b)) in a.iter().zip(b).enumerate() {
                    let (Some(a), Some(b), Some(elem)) = (a, b, elem_of(&j.task, arg)) else { continue };
                    if let Some(u) = verify::find_unwritten(elem, a, b) {
                        return Err(task_error(format!(
                            "the reference leaves {} elements of `{}` unwritten (first: {}) at {}",
                            u.count,
                            j.task.args[arg].name,
                            u.first_index,
                            label(self.size(k), self.seeds[k])
                        )));
                    }
                }
            }
        }
        if !j.task.allow_nonfinite {
            for (k, outs) in first.iter().enumerate() {
                for (arg, o) in outs.iter().enumerate() {
                    let (Some(bytes), Some(elem)) = (o, elem_of(&j.task, arg)) else { continue };
                    if let Some(message) =
                        nonfinite(elem, bytes, &j.task.args[arg].name, &label(self.size(k), self.seeds[k]))
                    {
                        return Err(task_error(message));
                    }
                }
            }
        }
        Ok(first)
    }

    /// One checked call of case `k` on the lent buffers: inputs and poison written, the
    /// call, then guard zones and inputs, and the outputs read back.
    fn call(&self, j: &Judge, w: &mut Worker, k: usize, second: bool) -> Result<Vec<Option<Vec<u8>>>, Halt> {
        let seed = self.seeds[k];
        j.prepare(&self.side, k, seed, second)?;
        j.sync()?;
        let at = format!("at {}", label(self.size(k), seed));
        if let Err(f) = w.run(vec![self.side.call(k)], 1, j.within(1, Duration::from_millis(100))) {
            return Err(with_case(w.blame(&f, &at), case_ref(self.size(k), seed, None)));
        }
        if let Some((k, arg, d)) = j.intact(&self.side, &[(k, seed)], true)? {
            return Err(Halt::Failure(damage(j, &self.side, w.role.name(), k, seed, arg, d)?));
        }
        j.outputs(&self.side, k)
    }

    /// Checks `w`'s library on every case, then the repeat calls; a failure names the
    /// call that produced it.
    pub fn check(&self, j: &Judge, w: &mut Worker) -> Result<CheckSummary, Halt> {
        let mut summary = self.check_cases(j, w).map_err(|h| at_call(h, w.calls))?;
        let repeats = self.repeat_check(j, w)?;
        summary.calls += repeats;
        summary.repeat_calls = repeats;
        Ok(summary)
    }

    fn check_cases(&self, j: &Judge, w: &mut Worker) -> Result<CheckSummary, Halt> {
        let task = &j.task;
        let role = w.role.name();
        let mut summary = CheckSummary::default();
        for k in 0..self.cases() {
            let (size, seed) = (self.size(k), self.seeds[k]);
            let out1 = self.call(j, w, k, false)?;
            let out2 = self.call(j, w, k, true)?;
            summary.cases += 1;
            summary.calls += 2;
            for (arg, a) in task.args.iter().enumerate() {
                let (Some(got), Some(again), Some(elem)) = (&out1[arg], &out2[arg], elem_of(task, arg)) else {
                    continue;
                };
                if !matches!(a.role, ArgRole::Output { .. }) {
                    continue;
                }
                if let Some(u) = verify::find_unwritten(elem, got, again) {
                    let total = got.len() / elem.size();
                    let mut f = Failure::new(
                        FailureClass::UnwrittenOutput,
                        format!(
                            "{role} left {} of {total} elements of `{}` unwritten (first: element {}) at {}",
                            u.count,
                            a.name,
                            u.first_index,
                            label(size, seed)
                        ),
                    );
                    f.at = Some(case_ref(size, seed, Some(&a.name)));
                    return Err(f.into());
                }
            }
            for (arg, a) in task.args.iter().enumerate() {
                let (Some(got), Some(again), Some(expected), Some(elem)) =
                    (&out1[arg], &out2[arg], &self.refs[k][arg], elem_of(task, arg))
                else {
                    continue;
                };
                let tol = tolerance_of(task, arg);
                let cmp = verify::compare(elem, got, expected, tol, threads());
                summary.elements_compared += cmp.elements;
                summary.max_abs_err = summary.max_abs_err.max(cmp.max_abs_err);
                summary.max_rel_err = summary.max_rel_err.max(cmp.max_rel_err);
                if !cmp.ok() {
                    let stale = (0..k).any(|earlier| {
                        self.size(earlier) == size
                            && self.refs[earlier][arg]
                                .as_ref()
                                .is_some_and(|old| verify::compare(elem, got, old, tol, threads()).ok())
                    });
                    let mut f = if stale {
                        Failure::new(
                            FailureClass::StaleOutput,
                            format!(
                                "{role} returned the result of earlier inputs for `{}` at {}: results are cached across calls",
                                a.name,
                                label(size, seed)
                            ),
                        )
                    } else {
                        Failure::new(
                            FailureClass::WrongAnswer,
                            wrong_answer_message(role, &a.name, &cmp, &label(size, seed), tol),
                        )
                    };
                    f.at = Some(case_ref(size, seed, Some(&a.name)));
                    f.comparison = Some(Box::new(cmp));
                    return Err(f.into());
                }
                let repeat_ok = if task.deterministic {
                    got == again
                } else {
                    verify::compare(elem, again, expected, tol, threads()).ok()
                };
                if !repeat_ok {
                    let skipped = verify::count_poison(elem, again, true);
                    let mut f = if skipped > 0 {
                        Failure::new(
                            FailureClass::StaleOutput,
                            format!(
                                "a second call with the same inputs left {skipped} elements of `{}` unwritten at {}: {role} skips work on repeated calls",
                                a.name,
                                label(size, seed)
                            ),
                        )
                    } else {
                        let n = elem.size();
                        let first = (0..got.len() / n)
                            .find(|&i| got[i * n..(i + 1) * n] != again[i * n..(i + 1) * n])
                            .unwrap_or(0);
                        Failure::new(
                            FailureClass::Nondeterminism,
                            format!(
                                "two calls with the same inputs disagree on `{}` at {}: element {first} is {} then {}{}",
                                a.name,
                                label(size, seed),
                                elem.read_f64(got, first),
                                elem.read_f64(again, first),
                                if task.deterministic {
                                    " (the task requires bitwise-identical results: set check.deterministic = false if atomics make the order vary)"
                                } else {
                                    ""
                                }
                            ),
                        )
                    };
                    f.at = Some(case_ref(size, seed, Some(&a.name)));
                    return Err(f.into());
                }
            }
        }
        Ok(summary)
    }

    /// [`REPEAT_CALLS`] verified calls on the largest case up to 4 MiB (a flaky call is
    /// no likelier on a big case), with the process's GPU memory measured around them.
    fn repeat_check(&self, j: &Judge, w: &mut Worker) -> Result<usize, Halt> {
        let Some(k) = (0..self.cases())
            .filter(|&k| j.task.total_bytes(self.size(k)) <= 4 << 20)
            .max_by_key(|&k| j.task.total_bytes(self.size(k)))
            .or((self.cases() > 0).then_some(0))
        else {
            return Ok(0);
        };
        let (size, seed) = (self.size(k), self.seeds[k]);
        let nvml = crate::wall::nvml::NvmlDevice::open(&j.gpu.info.uuid).ok();
        let held = |pid: u32| nvml.as_ref().and_then(|n| n.process_memory_bytes(pid));
        let before = held(w.pid);
        let mut wrong: Vec<(u64, Failure)> = Vec::new();
        for r in 0..REPEAT_CALLS {
            let second = r % 2 == 1;
            let outs = self.call(j, w, k, second).map_err(|h| at_call(h, w.calls))?;
            if let Some(f) = output_mismatch(&j.task, w.role.name(), &outs, &self.refs[k], size, seed, second) {
                wrong.push((w.calls, f));
            }
        }
        if let Some((first_call, first)) = wrong.first().cloned() {
            let last_call = w.calls;
            let every_call_since = wrong.len() as u64 == last_call - first_call + 1;
            let (class, what) = if every_call_since {
                (
                    FailureClass::CallDependent,
                    format!(
                        "right on the same inputs until call {}, wrong on every call from {first_call} on: its results change with the call count",
                        first_call - 1
                    ),
                )
            } else {
                (
                    FailureClass::Nondeterminism,
                    format!(
                        "wrong on {} of {REPEAT_CALLS} repeated calls with the same inputs (first: call {first_call})",
                        wrong.len()
                    ),
                )
            };
            let mut f = Failure::new(class, format!("{what} at {}; {}", label(size, seed), first.message));
            f.at = first.at;
            f.comparison = first.comparison;
            return Err(Halt::Failure(f.at_call(first_call)));
        }
        if let (Some(b), Some(a)) = (before, held(w.pid)) {
            let lost = a.saturating_sub(b);
            if lost > LEAK_ALLOWANCE {
                let mut f = Failure::new(
                    FailureClass::ResourceLeak,
                    format!(
                        "{} MiB of GPU memory went missing over {REPEAT_CALLS} calls at {} ({:.1} MiB a call): an allocation per call that is never freed will exhaust the GPU",
                        lost >> 20,
                        label(size, seed),
                        lost as f64 / REPEAT_CALLS as f64 / (1 << 20) as f64
                    ),
                );
                f.at = Some(case_ref(size, seed, None));
                return Err(f.into());
            }
        }
        Ok(REPEAT_CALLS)
    }
}

fn threads() -> usize {
    std::thread::available_parallelism().map(|n| n.get()).unwrap_or(4).min(16)
}

/// A failure's case, where a worker's fault names none.
fn with_case(o: Outcome, at: CaseRef) -> Halt {
    match o {
        Outcome::Rejected { mut failure } => {
            failure.at.get_or_insert(at);
            Halt::Failure(failure)
        }
        other => Halt::Outcome(other),
    }
}

fn at_call(h: Halt, call: u64) -> Halt {
    match h {
        Halt::Failure(f) => Halt::Failure(f.at_call(call)),
        other => other,
    }
}

/// The words of a damaged guard zone or a changed input.
pub(crate) fn damage(
    j: &Judge,
    pool: &Pool,
    role: &str,
    k: usize,
    seed: u64,
    arg: usize,
    d: Damage,
) -> Result<Failure, Halt> {
    let size = &pool.layout.cases[k].size;
    let place = pool.layout.cases[k].places[arg].expect("damage is found in buffers");
    let name = &j.task.args[arg].name;
    let n = place.elem.size() as u64;
    let (class, message) = match d {
        Damage::After(off) => (
            FailureClass::OutOfBoundsWrite,
            format!(
                "{role} wrote past the end of `{name}` ({} elements): element {} (byte {off} after the end) at {}",
                place.count,
                place.count + off / n,
                label(size, seed)
            ),
        ),
        Damage::Before(off) => (
            FailureClass::OutOfBoundsWrite,
            format!(
                "{role} wrote before the start of `{name}`: {} bytes before element 0 at {}",
                verify::GUARD_BYTES as u64 - off,
                label(size, seed)
            ),
        ),
        Damage::Input(i) => {
            let now = j.read(pool, &place)?;
            (
                FailureClass::InputMutation,
                format!(
                    "{role} modified input `{name}`: element {i} is now {}, not what the judge wrote there, after the call at {}",
                    place.elem.read_f64(&now, i as usize),
                    label(size, seed)
                ),
            )
        }
    };
    let mut f = Failure::new(class, message);
    f.at = Some(case_ref(size, seed, Some(name)));
    Ok(f)
}

/// Whether a reference output holds NaN or infinities: the words of the task error.
pub(crate) fn nonfinite(elem: ElemType, bytes: &[u8], arg: &str, at: &str) -> Option<String> {
    if !elem.is_float() {
        return None;
    }
    let count = (0..bytes.len() / elem.size()).filter(|&i| !elem.read_f64(bytes, i).is_finite()).count();
    (count > 0).then(|| {
        format!(
            "the reference wrote {count} non-finite values (NaN or infinite) into `{arg}` at {at}, and the task allows none: a kernel that never wrote them would compare equal. Fix the reference or its inputs, or set `nonfinite = true` under [check] if such outputs are intended"
        )
    })
}

/// The first output of one call that disagrees with the reference: `unwritten-output` if
/// it still holds the poison written before the call (`second`: which poison), else
/// `wrong-answer`, with the case and the comparison.
pub(crate) fn output_mismatch(
    task: &Task,
    role: &str,
    outs: &[Option<Vec<u8>>],
    refs: &[Option<Vec<u8>>],
    size: &Size,
    seed: u64,
    second: bool,
) -> Option<Failure> {
    for (arg, a) in task.args.iter().enumerate() {
        let (Some(got), Some(expected), Some(elem)) = (&outs[arg], &refs[arg], elem_of(task, arg)) else {
            continue;
        };
        let tol = tolerance_of(task, arg);
        let cmp = verify::compare(elem, got, expected, tol, threads());
        if cmp.ok() {
            continue;
        }
        let unwritten = verify::count_poison(elem, got, second);
        let mut f = if unwritten > 0 && matches!(a.role, ArgRole::Output { .. }) {
            Failure::new(
                FailureClass::UnwrittenOutput,
                format!(
                    "{role} left {unwritten} of {} elements of `{}` unwritten at {}",
                    got.len() / elem.size(),
                    a.name,
                    label(size, seed)
                ),
            )
        } else {
            Failure::new(FailureClass::WrongAnswer, wrong_answer_message(role, &a.name, &cmp, &label(size, seed), tol))
        };
        f.at = Some(case_ref(size, seed, Some(&a.name)));
        f.comparison = Some(Box::new(cmp));
        return Some(f);
    }
    None
}

pub(crate) fn wrong_answer_message(role: &str, arg: &str, cmp: &Comparison, at: &str, tol: Tolerance) -> String {
    let first = cmp
        .first_mismatch
        .as_ref()
        .map(|m| format!("first at element {}: got {} expected {}", m.index, m.got, m.expected))
        .unwrap_or_default();
    format!(
        "{role} output `{arg}` differs from the reference at {at}: {} of {} elements outside atol {} + rtol {} x |ref|; {first}; max abs err {:.3e}, max rel err {:.3e}",
        cmp.mismatches, cmp.elements, tol.atol, tol.rtol, cmp.max_abs_err, cmp.max_rel_err
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reference_with_nan_outputs_is_named_with_its_count() {
        let bytes: Vec<u8> = [1.0f32, f32::NAN, f32::INFINITY, 2.0].iter().flat_map(|x| x.to_le_bytes()).collect();
        let m = nonfinite(ElemType::F32, &bytes, "y", "size n=4 seed 1").unwrap();
        assert!(m.contains("2 non-finite values") && m.contains("`y`") && m.contains("nonfinite = true"), "{m}");
        let fine: Vec<u8> = [1.0f32, 2.0].iter().flat_map(|x| x.to_le_bytes()).collect();
        assert_eq!(nonfinite(ElemType::F32, &fine, "y", ""), None);
        assert_eq!(nonfinite(ElemType::I32, &[0xff; 8], "y", ""), None, "integers have no NaN");
    }
}
