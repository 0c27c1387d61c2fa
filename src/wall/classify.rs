//! Classification: what a worker run amounts to against its request; tampering first,
//! then a sealed report that fits, then the deadline, signals and exit codes by phase.

use crate::toolkit::process;
use crate::wall::client::WorkerRun;
use crate::wall::protocol::{Failure, FailureClass, Phase, WorkerReport, WorkerRequest};
use std::os::unix::process::ExitStatusExt;
use std::time::Duration;

/// What a worker run amounts to.
#[derive(Debug, Clone)]
pub enum Classified {
    Report(Box<WorkerReport>),
    Rejected(Failure),
    TaskError(String),
    Internal(String),
}

/// Classifies a worker run against its request. Tampering with the report channel
/// decides first (whatever else happened, candidate code spoke for the worker); then a
/// sealed report that fits the request; without one, the deadline, a signal or an exit
/// code is the candidate's doing only if the last announced phase ran untrusted code.
pub fn classify(run: &WorkerRun, request: &WorkerRequest, timeout: Duration) -> Classified {
    let (phase, detail) = match &run.last_phase {
        Some((p, d)) => (Some(*p), d.clone()),
        None => (None, String::new()),
    };
    let where_ = match phase {
        Some(p) if detail.is_empty() => format!("during {}", p.name()),
        Some(p) => format!("during {} ({detail})", p.name()),
        None => "before it said anything".into(),
    };
    let untrusted = phase.is_some_and(Phase::runs_untrusted_code);
    if let Some(t) = &run.tampering {
        return Classified::Rejected(Failure::new(
            FailureClass::ForgedReport,
            format!("something other than the worker wrote on its report channel {where_}: {t}; candidate code must not touch file descriptors it did not open"),
        ));
    }
    if let Some(report) = &run.report {
        return match crate::wall::report_check::check(request, run, report) {
            Ok(()) => Classified::Report(report.clone()),
            Err(why) => Classified::Rejected(Failure::new(
                FailureClass::ForgedReport,
                format!("the worker's report does not fit the request: {why}"),
            )),
        };
    }
    if let Some(u) = &run.unreadable {
        return Classified::Internal(format!("the worker sent a report that does not parse (a nightshift bug): {u}"));
    }
    if run.timed_out {
        if untrusted {
            return Classified::Rejected(Failure::new(
                FailureClass::Timeout,
                format!(
                    "killed after the {:.0} s timeout {where_}: an endless loop or a deadlock?",
                    timeout.as_secs_f64()
                ),
            ));
        }
        return Classified::TaskError(format!(
            "the worker ran past the {:.0} s timeout {where_}, before any candidate code ran",
            timeout.as_secs_f64()
        ));
    }
    let Some(status) = run.status else {
        return Classified::Internal(format!("the worker vanished {where_}"));
    };
    if let Some(sig) = status.signal() {
        let what = format!("signal {sig} ({})", process::signal_name(sig));
        let cpu = if sig == libc::SIGXCPU { ": the CPU-time limit of the sandbox" } else { "" };
        return if untrusted {
            Classified::Rejected(Failure::new(FailureClass::Crash, format!("the worker died by {what}{cpu} {where_}")))
        } else {
            Classified::Internal(format!("the worker died by {what} {where_}"))
        };
    }
    let code = status.code().unwrap_or(-1);
    if untrusted && code == crate::wall::protocol::CHANNEL_LOST_EXIT {
        return Classified::Rejected(Failure::new(
            FailureClass::ForgedReport,
            format!("the worker's report channel was closed or replaced under it {where_}: candidate code must not touch file descriptors it did not open"),
        ));
    }
    if untrusted {
        return Classified::Rejected(Failure::new(
            FailureClass::ProcessExit,
            format!("candidate code ended the process with exit code {code} {where_}, before the worker could report: kernels and launchers must return, never exit"),
        ));
    }
    Classified::Internal(format!("the worker exited with code {code} {where_} without a report"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::Task;
    use crate::wall::client::{follow_channel, unconfined_refusal, WorkerRun, MAX_CHANNEL_LINE};
    use crate::wall::protocol::{
        CheckSummary, ColdCheck, DeviceInfo, Failure, FailureClass, HostCheck, Mode, Outcome, Phase, SideTiming,
        TimingPlan, TimingReport, WorkerMessage, WorkerReport, WorkerRequest,
    };
    use std::path::Path;
    use std::process::ExitStatus;
    use std::time::{Duration, Instant};

    fn run(phase: Option<Phase>, status: Option<ExitStatus>, timed_out: bool) -> WorkerRun {
        WorkerRun { last_phase: phase.map(|p| (p, "size n=3 seed 1".into())), status, timed_out, ..Default::default() }
    }

    fn exit(code: i32) -> Option<ExitStatus> {
        Some(ExitStatus::from_raw(code << 8))
    }

    fn signal(sig: i32) -> Option<ExitStatus> {
        Some(ExitStatus::from_raw(sig))
    }

    fn rejected_class(c: Classified) -> FailureClass {
        match c {
            Classified::Rejected(f) => f.class,
            other => panic!("expected a rejection, got {other:?}"),
        }
    }

    const T: Duration = Duration::from_secs(10);

    fn request() -> WorkerRequest {
        let task = Task::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tasks/vector_add")).unwrap();
        WorkerRequest {
            task,
            reference: "r.so".into(),
            baseline: "b.so".into(),
            candidate: "c.so".into(),
            mode: Mode::Evaluate { time: true, energy: false, check_baseline: false },
            device: 0,
            timing: TimingPlan::default(),
            threads: 1,
            seed_base: 7,
            deadline_s: 10.0,
            sandbox: true,
            sandbox_skip: Vec::new(),
            achievable_dram_gbs: None,
            host_outputs: Vec::new(),
        }
    }

    /// A run that went through every phase and sent a report that fits `request()`.
    fn honest_run() -> WorkerRun {
        let req = request();
        let cases = req.task.checks.len() * req.task.seeds as usize;
        let side = |ms: f64| SideTiming { median_ms: ms, samples: 100, ..Default::default() };
        let mut report = WorkerReport::of(Outcome::Passed);
        report.check = Some(CheckSummary {
            cases,
            calls: 2 * cases + crate::wall::protocol::REPEAT_CALLS,
            repeat_calls: crate::wall::protocol::REPEAT_CALLS,
            elements_compared: 1000,
            ..Default::default()
        });
        report.timing = Some(TimingReport {
            baseline: side(2.0),
            candidate: side(1.0),
            speedup: 2.0,
            host_check: HostCheck { calls: 10, ok: true, ..Default::default() },
            cold: Some(ColdCheck::new(&[vec![2.0, 2.0], vec![1.0, 1.0]], &[vec![2.0, 2.0], vec![1.0, 1.0]])),
            reliable: true,
            ..Default::default()
        });
        WorkerRun {
            phases_seen: vec![
                Phase::Init,
                Phase::LoadReference,
                Phase::Reference,
                Phase::LoadCandidate,
                Phase::Check,
                Phase::Time,
            ],
            last_phase: Some((Phase::Time, String::new())),
            device: Some(DeviceInfo::default()),
            sandbox: vec![crate::wall::sandbox::Layer { name: "seccomp".into(), active: true, detail: String::new() }],
            sandbox_requested: true,
            report: Some(Box::new(report)),
            status: exit(0),
            ..Default::default()
        }
    }

    #[test]
    fn an_honest_report_fits_its_request() {
        assert!(matches!(classify(&honest_run(), &request(), T), Classified::Report(_)));
    }

    #[test]
    fn tampering_outranks_any_report() {
        let mut r = honest_run();
        r.tampering = Some("line 0 with a MAC that does not match".into());
        assert_eq!(rejected_class(classify(&r, &request(), T)), FailureClass::ForgedReport);
        let mut r = run(Some(Phase::Check), exit(0), false);
        r.tampering = Some("a line that is not a sealed report line".into());
        assert_eq!(rejected_class(classify(&r, &request(), T)), FailureClass::ForgedReport);
    }

    #[test]
    fn reports_that_do_not_fit_the_request_are_forgeries() {
        type Edit = Box<dyn Fn(&mut WorkerRun)>;
        let edits: Vec<(&str, Edit)> = vec![
            ("too few cases", Box::new(|r| r.report.as_mut().unwrap().check.as_mut().unwrap().cases = 1)),
            ("no timing", Box::new(|r| r.report.as_mut().unwrap().timing = None)),
            ("no check phase", Box::new(|r| r.phases_seen.retain(|p| *p != Phase::Check))),
            ("no sandbox", Box::new(|r| r.sandbox.clear())),
            (
                "speedup not from medians",
                Box::new(|r| r.report.as_mut().unwrap().timing.as_mut().unwrap().speedup = 9.0),
            ),
            ("no cold check", Box::new(|r| r.report.as_mut().unwrap().timing.as_mut().unwrap().cold = None)),
            ("one sample", Box::new(|r| r.report.as_mut().unwrap().timing.as_mut().unwrap().candidate.samples = 1)),
        ];
        for (what, edit) in edits {
            let mut r = honest_run();
            edit(&mut r);
            let Classified::Rejected(f) = classify(&r, &request(), T) else { panic!("{what}: accepted") };
            assert_eq!(f.class, FailureClass::ForgedReport, "{what}");
        }
    }

    #[test]
    fn a_broken_channel_and_an_unparseable_report_are_told_apart() {
        let r = run(Some(Phase::Check), exit(crate::wall::protocol::CHANNEL_LOST_EXIT), false);
        assert_eq!(rejected_class(classify(&r, &request(), T)), FailureClass::ForgedReport);
        let mut r = run(Some(Phase::Time), exit(0), false);
        r.unreadable = Some("invalid type: null, expected f64".into());
        assert!(matches!(classify(&r, &request(), T), Classified::Internal(_)), "a worker bug, not the candidate's");
    }

    #[test]
    fn the_channel_follower_reads_sealed_lines_and_flags_the_rest() {
        let key = crate::wall::channel::Key::fresh();
        let mut sealer = crate::wall::channel::Sealer::new(key.clone());
        let mut text = String::new();
        let msg = |m: &WorkerMessage| serde_json::to_string(m).unwrap();
        text += &sealer.seal(&msg(&WorkerMessage::Phase { phase: Phase::Check, detail: String::new() }));
        text += r#"{"event":"done","report":{"outcome":{"outcome":"passed"}}}"#;
        text += "\n";
        let got = follow_channel(text.as_bytes(), key.clone(), false, Instant::now());
        assert!(got.tampering.is_some());
        assert!(got.report.is_none(), "the forged report was not taken");
        assert_eq!(got.phases_seen, vec![Phase::Check]);
        // Under a tool, its own chatter is not tampering.
        let mut sealer = crate::wall::channel::Sealer::new(key.clone());
        let text = format!(
            "==PROF== Connected to process 12\n{}",
            sealer.seal(&msg(&WorkerMessage::Phase { phase: Phase::Profile, detail: String::new() }))
        );
        let spawned = Instant::now() - Duration::from_secs(2);
        let got = follow_channel(text.as_bytes(), key, true, spawned);
        assert!(got.tampering.is_none());
        assert_eq!(got.phases_seen, vec![Phase::Profile]);
        // ncu's start is timed from the spawn to the first phase.
        assert!(got.first_phase_s.is_some_and(|s| (2.0..60.0).contains(&s)), "{:?}", got.first_phase_s);
    }

    #[test]
    fn an_endless_line_on_the_channel_is_cut_and_counted_as_tampering() {
        let key = crate::wall::channel::Key::fresh();
        let mut sealer = crate::wall::channel::Sealer::new(key.clone());
        let mut text = vec![b'x'; 3 * MAX_CHANNEL_LINE];
        text.push(b'\n');
        let phase =
            serde_json::to_string(&WorkerMessage::Phase { phase: Phase::Check, detail: String::new() }).unwrap();
        text.extend_from_slice(sealer.seal(&phase).as_bytes());
        let got = follow_channel(&text[..], key, false, Instant::now());
        assert!(got.tampering.as_deref().is_some_and(|t| t.contains("longer than")), "{:?}", got.tampering);
        assert_eq!(got.phases_seen, vec![Phase::Check], "the channel is read on after the cut");
    }

    #[test]
    fn reports_with_nan_errors_survive_the_channel() {
        let mut f = Failure::new(FailureClass::WrongAnswer, "NaN everywhere");
        f.comparison = Some(Box::new(crate::wall::verify::Comparison {
            elements: 4,
            mismatches: 4,
            first_mismatch: Some(crate::wall::verify::Mismatch { index: 0, got: f64::NAN, expected: 1.0 }),
            max_abs_err: f64::INFINITY,
            max_rel_err: f64::NAN,
        }));
        let report = WorkerReport::of(Outcome::Rejected { failure: f });
        let line = serde_json::to_string(&WorkerMessage::Done { report: Box::new(report) }).unwrap();
        let back: WorkerMessage = serde_json::from_str(&line).expect("NaN and infinities read back");
        let WorkerMessage::Done { report } = back else { panic!() };
        let Outcome::Rejected { failure } = report.outcome else { panic!() };
        assert!(failure.comparison.unwrap().max_rel_err.is_nan());
    }

    #[test]
    fn a_sealed_rejection_is_believed() {
        let mut r = run(Some(Phase::Check), exit(0), false);
        let f = Failure::new(FailureClass::WrongAnswer, "off by one");
        r.report = Some(Box::new(WorkerReport::of(Outcome::Rejected { failure: f })));
        assert!(matches!(classify(&r, &request(), T), Classified::Report(_)));
        r.report = Some(Box::new(WorkerReport::of(Outcome::Passed)));
        assert!(matches!(classify(&r, &request(), T), Classified::Rejected(_)), "a bare pass fits no request");
    }

    #[test]
    fn deaths_in_candidate_phases_are_the_candidates() {
        assert_eq!(
            rejected_class(classify(&run(Some(Phase::Check), None, true), &request(), T)),
            FailureClass::Timeout
        );
        assert_eq!(
            rejected_class(classify(&run(Some(Phase::Check), signal(11), false), &request(), T)),
            FailureClass::Crash
        );
        assert_eq!(
            rejected_class(classify(&run(Some(Phase::Time), exit(3), false), &request(), T)),
            FailureClass::ProcessExit
        );
        assert_eq!(
            rejected_class(classify(&run(Some(Phase::LoadCandidate), signal(6), false), &request(), T)),
            FailureClass::Crash
        );
        assert_eq!(
            rejected_class(classify(&run(Some(Phase::Check), exit(0), false), &request(), T)),
            FailureClass::ProcessExit
        );
    }

    #[test]
    fn messages_say_where_and_why() {
        let Classified::Rejected(f) = classify(&run(Some(Phase::Check), exit(3), false), &request(), T) else {
            panic!()
        };
        assert!(f.message.contains("exit code 3"), "{}", f.message);
        assert!(f.message.contains("during check (size n=3 seed 1)"), "{}", f.message);
        let Classified::Rejected(f) = classify(&run(Some(Phase::Check), signal(11), false), &request(), T) else {
            panic!()
        };
        assert!(f.message.contains("SIGSEGV"), "{}", f.message);
        let Classified::Rejected(f) = classify(&run(Some(Phase::Check), None, true), &request(), T) else { panic!() };
        assert!(f.message.contains("10 s timeout"), "{}", f.message);
    }

    #[test]
    fn deaths_before_candidate_code_are_not_blamed_on_it() {
        assert!(matches!(
            classify(&run(Some(Phase::Reference), signal(11), false), &request(), T),
            Classified::Internal(_)
        ));
        assert!(matches!(classify(&run(Some(Phase::Init), exit(1), false), &request(), T), Classified::Internal(_)));
        assert!(matches!(classify(&run(Some(Phase::Reference), None, true), &request(), T), Classified::TaskError(_)));
        assert!(matches!(classify(&run(None, exit(101), false), &request(), T), Classified::Internal(_)));
    }

    #[test]
    fn a_refused_hosted_run_names_what_is_missing_and_the_waiver() {
        use crate::wall::sandbox::{hosted, Layer};
        let why =
            "cannot be made (unshare: No space left on device) (user.max_user_namespaces = 0 forbids user namespaces)";
        let layers = [hosted::USER, hosted::MOUNT, hosted::NETWORK, hosted::PID]
            .map(|name| Layer { name: name.into(), active: false, detail: why.into() })
            .to_vec();
        let refused = hosted::Arrangement { layers, confined: false, kept_root_capabilities: false, started: false };
        let message = unconfined_refusal(&refused).to_string();
        for must in ["max_user_namespaces", "--allow-unconfined-profiling", "mount namespace", "/tmp"] {
            assert!(message.contains(must), "`{must}` missing: {message}");
        }
        let run = WorkerRun { hosting: Some(refused.clone()), sandbox: honest_run().sandbox, ..Default::default() };
        let names: Vec<String> = run.hosted_layers().into_iter().map(|l| l.name).collect();
        assert_eq!(names, ["user namespace", "mount namespace", "network namespace", "pid namespace", "seccomp"]);
        assert!(WorkerRun::default().hosted_layers().is_empty(), "a run that was not hosted records none");
    }
}
