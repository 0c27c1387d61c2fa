//! Checks of one library against the reference outputs: the reference's own runs (it
//! must complete and write every output), each case called twice, the repeat check with
//! its leak measure, and the words of a mismatch.

use super::buffers::{device_failure, DeviceCase};
use super::inputs::{CaseData, HostCase};
use super::{tolerance_of, Entry, Stop, Worker};
use crate::task::types::ParamType;
use crate::task::ArgRole;
use crate::wall::protocol::{CheckSummary, Failure, FailureClass, Outcome, REPEAT_CALLS};
use crate::wall::verify::{self, Comparison};

/// Runs the trusted reference on one case; it must complete and write every output.
pub(crate) fn run_reference(w: &Worker, reference: &Entry, host: &HostCase) -> Result<Vec<Option<Vec<u8>>>, Stop> {
    let mut dev = DeviceCase::upload(w, host).map_err(super::gpu_stop)?;
    run_reference_on(w, reference, host, &mut dev, true)
}

/// The reference on a case already on the device (kept by the caller for timing).
/// `inputs`: also verify that the reference left its inputs alone; the bench sets skip
/// that transfer, the check sizes having verified it already.
pub(crate) fn run_reference_on(
    w: &Worker,
    reference: &Entry,
    host: &HostCase,
    dev: &mut DeviceCase,
    inputs: bool,
) -> Result<Vec<Option<Vec<u8>>>, Stop> {
    let task_err =
        |f: Failure| Outcome::TaskError { message: format!("the reference fails at {}: {}", host.label(), f.message) };
    let out1 = dev.run_checking(w, reference, host, false, inputs).map_err(task_err)?;
    let mut suspicious = false;
    for (i, o) in out1.iter().enumerate() {
        if let (Some(bytes), Some(elem), ArgRole::Output { .. }) = (o, dev.elems[i], &dev.roles[i]) {
            suspicious |= verify::count_poison(elem, bytes, false) > 0;
        }
    }
    if suspicious {
        // Poison A can be a legitimate value for small integer outputs: a second run
        // with poison B tells unwritten from coincidence.
        let out2 = dev.run_checking(w, reference, host, true, inputs).map_err(task_err)?;
        for (i, (a, b)) in out1.iter().zip(&out2).enumerate() {
            if let (Some(a), Some(b), Some(elem)) = (a, b, dev.elems[i]) {
                if let Some(u) = verify::find_unwritten(elem, a, b) {
                    return Err(Outcome::TaskError {
                        message: format!(
                            "the reference leaves {} elements of `{}` unwritten (first: {}) at {}",
                            u.count,
                            w.task.args[i].name,
                            u.first_index,
                            host.label()
                        ),
                    });
                }
            }
        }
    }
    Ok(out1)
}

/// Checks `entry` on every case against the cached reference outputs; a failure names
/// the call that produced it.
pub(crate) fn check_library(w: &Worker, entry: &Entry, cases: &[CaseData]) -> Result<CheckSummary, Failure> {
    let mut summary = check_cases(w, entry, cases).map_err(|f| f.at_call(entry.calls.get()))?;
    let repeats = repeat_check(w, entry, cases)?;
    summary.calls += repeats;
    summary.repeat_calls = repeats;
    Ok(summary)
}

/// GPU memory that may go missing over the repeat calls before it counts as a leak.
const LEAK_ALLOWANCE: usize = 32 << 20;

/// [`REPEAT_CALLS`] calls on the largest case up to 4 MiB (a flaky call is no likelier
/// on a big case, and each call is verified), with device memory measured around them.
fn repeat_check(w: &Worker, entry: &Entry, cases: &[CaseData]) -> Result<usize, Failure> {
    let Some(case) = cases
        .iter()
        .filter(|c| w.task.total_bytes(&c.host.size) <= 4 << 20)
        .max_by_key(|c| w.task.total_bytes(&c.host.size))
        .or(cases.first())
    else {
        return Ok(0);
    };
    let host = &case.host;
    let reference = case.reference.as_ref().expect("reference computed before checks");
    // This process's own GPU memory where NVML sees it: free memory is device-wide, and
    // another process allocating meanwhile must not look like our leak.
    let nvml = crate::wall::nvml::NvmlDevice::open(&w.gpu.info.uuid).ok();
    let held = |w: &Worker| -> Result<(u64, bool), Failure> {
        if let Some(b) = nvml.as_ref().and_then(|n| n.own_memory_bytes()) {
            return Ok((b, true));
        }
        let free = w.gpu.free_memory().map_err(|e| device_failure(entry.role, e, host))? as u64;
        Ok((u64::MAX - free, nvml.as_ref().is_none_or(|n| n.other_processes().is_empty())))
    };
    let before = held(w)?;
    let mut wrong: Vec<(u64, Failure)> = Vec::new();
    {
        let mut dev = DeviceCase::upload(w, host).map_err(|e| device_failure(entry.role, e, host))?;
        for k in 0..REPEAT_CALLS {
            let second = k % 2 == 1;
            let outs = dev.run(w, entry, host, second)?;
            if let Some(f) = output_mismatch(w, entry.role, &outs, reference, host, second) {
                wrong.push((entry.calls.get(), f));
            }
        }
    }
    if let Some((first_call, first)) = wrong.first().cloned() {
        let last_call = entry.calls.get();
        let every_call_since = wrong.len() as u64 == last_call - first_call + 1;
        let (class, what) = if every_call_since {
            (FailureClass::CallDependent, format!("right on the same inputs until call {}, wrong on every call from {first_call} on: its results change with the call count", first_call - 1))
        } else {
            (
                FailureClass::Nondeterminism,
                format!(
                    "wrong on {} of {REPEAT_CALLS} repeated calls with the same inputs (first: call {first_call})",
                    wrong.len()
                ),
            )
        };
        let mut f = Failure::new(class, format!("{} at {}; {}", what, host.label(), first.message));
        f.at = first.at;
        f.comparison = first.comparison;
        return Err(f.at_call(first_call));
    }
    let after = held(w)?;
    let lost = after.0.saturating_sub(before.0) as usize;
    // Free memory alone is only evidence when nothing else was on the GPU.
    let trustworthy = before.1 && after.1;
    if trustworthy && lost > LEAK_ALLOWANCE {
        let mut f = Failure::new(
            FailureClass::ResourceLeak,
            format!(
                "{} MiB of GPU memory went missing over {REPEAT_CALLS} calls at {} ({:.1} MiB a call): an allocation per call that is never freed will exhaust the GPU",
                lost >> 20,
                host.label(),
                lost as f64 / REPEAT_CALLS as f64 / (1 << 20) as f64
            ),
        );
        f.at = Some(host.case_ref(None));
        return Err(f);
    }
    Ok(REPEAT_CALLS)
}

/// The first output of one call that disagrees with the reference: `unwritten-output` if
/// it still holds the poison written before the call (`second`: which poison), else
/// `wrong-answer`, with the case and the comparison.
pub(crate) fn output_mismatch(
    w: &Worker,
    role: &str,
    outs: &[Option<Vec<u8>>],
    refs: &[Option<Vec<u8>>],
    host: &HostCase,
    second: bool,
) -> Option<Failure> {
    for (i, arg) in w.task.args.iter().enumerate() {
        let (Some(got), Some(expected)) = (&outs[i], &refs[i]) else {
            continue;
        };
        let ParamType::Pointer { elem, .. } = arg.ty else {
            continue;
        };
        let tol = tolerance_of(&w.task, &arg.role);
        let cmp = verify::compare(elem, got, expected, tol, w.threads);
        if cmp.ok() {
            continue;
        }
        let unwritten = verify::count_poison(elem, got, second);
        let mut f = if unwritten > 0 && matches!(arg.role, ArgRole::Output { .. }) {
            Failure::new(
                FailureClass::UnwrittenOutput,
                format!(
                    "{role} left {unwritten} of {} elements of `{}` unwritten at {}",
                    got.len() / elem.size(),
                    arg.name,
                    host.label()
                ),
            )
        } else {
            Failure::new(FailureClass::WrongAnswer, wrong_answer_message(role, &arg.name, &cmp, host, tol))
        };
        f.at = Some(host.case_ref(Some(&arg.name)));
        f.comparison = Some(Box::new(cmp));
        return Some(f);
    }
    None
}

fn check_cases(w: &Worker, entry: &Entry, cases: &[CaseData]) -> Result<CheckSummary, Failure> {
    let task = &w.task;
    let mut summary = CheckSummary::default();
    for (ci, case) in cases.iter().enumerate() {
        let host = &case.host;
        let reference = case.reference.as_ref().expect("reference computed before checks");
        let mut dev = DeviceCase::upload(w, host).map_err(|e| device_failure(entry.role, e, host))?;
        let out1 = dev.run(w, entry, host, false)?;
        let out2 = dev.run(w, entry, host, true)?;
        summary.cases += 1;
        summary.calls += 2;
        for (i, arg) in task.args.iter().enumerate() {
            let (Some(got), Some(_), Some(elem)) = (&out1[i], &out2[i], dev.elems[i]) else {
                continue;
            };
            if !matches!(arg.role, ArgRole::Output { .. }) {
                continue;
            }
            if let Some(u) = verify::find_unwritten(elem, got, out2[i].as_ref().unwrap()) {
                let total = got.len() / elem.size();
                let mut f = Failure::new(
                    FailureClass::UnwrittenOutput,
                    format!(
                        "{} left {} of {total} elements of `{}` unwritten (first: element {}) at {}",
                        entry.role,
                        u.count,
                        arg.name,
                        u.first_index,
                        host.label()
                    ),
                );
                f.at = Some(host.case_ref(Some(&arg.name)));
                return Err(f);
            }
        }
        for (i, arg) in task.args.iter().enumerate() {
            let (Some(got), Some(again), Some(expected), Some(elem)) =
                (&out1[i], &out2[i], &reference[i], dev.elems[i])
            else {
                continue;
            };
            let tol = tolerance_of(task, &arg.role);
            let cmp = verify::compare(elem, got, expected, tol, w.threads);
            summary.elements_compared += cmp.elements;
            summary.max_abs_err = summary.max_abs_err.max(cmp.max_abs_err);
            summary.max_rel_err = summary.max_rel_err.max(cmp.max_rel_err);
            if !cmp.ok() {
                let stale = cases[..ci].iter().any(|earlier| {
                    earlier.host.size == host.size
                        && earlier
                            .reference
                            .as_ref()
                            .and_then(|r| r[i].as_ref())
                            .is_some_and(|old| verify::compare(elem, got, old, tol, w.threads).ok())
                });
                let mut f = if stale {
                    Failure::new(
                        FailureClass::StaleOutput,
                        format!(
                            "{} returned the result of earlier inputs for `{}` at {}: results are cached across calls",
                            entry.role,
                            arg.name,
                            host.label()
                        ),
                    )
                } else {
                    Failure::new(
                        FailureClass::WrongAnswer,
                        wrong_answer_message(entry.role, &arg.name, &cmp, host, tol),
                    )
                };
                f.at = Some(host.case_ref(Some(&arg.name)));
                f.comparison = Some(Box::new(cmp));
                return Err(f);
            }
            let repeat_ok = if task.deterministic {
                got == again
            } else {
                verify::compare(elem, again, expected, tol, w.threads).ok()
            };
            if !repeat_ok {
                let skipped = verify::count_poison(elem, again, true);
                let mut f = if skipped > 0 {
                    Failure::new(
                        FailureClass::StaleOutput,
                        format!("a second call with the same inputs left {skipped} elements of `{}` unwritten at {}: {} skips work on repeated calls", arg.name, host.label(), entry.role),
                    )
                } else {
                    let first = (0..got.len() / elem.size())
                        .find(|&k| {
                            got[k * elem.size()..(k + 1) * elem.size()] != again[k * elem.size()..(k + 1) * elem.size()]
                        })
                        .unwrap_or(0);
                    Failure::new(
                        FailureClass::Nondeterminism,
                        format!(
                            "two calls with the same inputs disagree on `{}` at {}: element {first} is {} then {}{}",
                            arg.name,
                            host.label(),
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
                f.at = Some(host.case_ref(Some(&arg.name)));
                return Err(f);
            }
        }
    }
    Ok(summary)
}

pub(crate) fn wrong_answer_message(
    role: &str,
    arg: &str,
    cmp: &Comparison,
    host: &HostCase,
    tol: crate::task::Tolerance,
) -> String {
    let first = cmp
        .first_mismatch
        .as_ref()
        .map(|m| format!("first at element {}: got {} expected {}", m.index, m.got, m.expected))
        .unwrap_or_default();
    format!(
        "{role} output `{arg}` differs from the reference at {}: {} of {} elements outside atol {} + rtol {} x |ref|; {first}; max abs err {:.3e}, max rel err {:.3e}",
        host.label(),
        cmp.mismatches,
        cmp.elements,
        tol.atol,
        tol.rtol,
        cmp.max_abs_err,
        cmp.max_rel_err
    )
}
