//! What a standalone worker's run amounts to (a profile or a sanitizer run). The one fact
//! the orchestrator trusts is where the worker said it was before it loaded the library:
//! a failure before `Loading` is ours (or the machine's), any end after it is the
//! library's, whatever the library made the worker say.

use super::hosted::StandaloneRun;
use crate::toolkit::process;
use crate::wall::protocol::{Failure, FailureClass};
use std::os::unix::process::ExitStatusExt;
use std::time::Duration;

/// What a standalone run amounts to.
#[derive(Debug, Clone)]
pub enum Classified {
    /// The call returned and the process ended cleanly.
    Ran,
    Rejected(Failure),
    /// The machine lacks something (no GPU, no driver).
    Env(String),
    /// Our worker or the tool failed before the library loaded.
    Internal(String),
}

pub fn classify(run: &StandaloneRun, timeout: Duration) -> Classified {
    let where_ = match &run.last_phase {
        Some((p, d)) if d.is_empty() => format!("during {}", p.name()),
        Some((p, d)) => format!("during {} ({d})", p.name()),
        None => "before it said anything".into(),
    };
    if !run.loaded {
        return match &run.done {
            Some((Some(e), _)) if e.contains("GPU") || e.contains("driver") => Classified::Env(e.clone()),
            Some((Some(e), _)) => Classified::Internal(format!("the worker failed {where_}: {e}")),
            _ if run.timed_out => Classified::Internal(format!(
                "the worker ran past the {:.0} s timeout {where_}, before it loaded the library",
                timeout.as_secs_f64()
            )),
            _ => Classified::Internal(format!(
                "the worker ended with {} {where_}, before it loaded the library: {}",
                run.status.map(process::describe_status).unwrap_or_else(|| "no status".into()),
                crate::wall::tail(&run.stderr, 1500)
            )),
        };
    }
    if run.timed_out {
        return Classified::Rejected(Failure::new(
            FailureClass::Timeout,
            format!("killed after the {:.0} s timeout {where_}: an endless loop or a deadlock?", timeout.as_secs_f64()),
        ));
    }
    let Some(status) = run.status else {
        return Classified::Rejected(Failure::new(FailureClass::Crash, format!("the worker vanished {where_}")));
    };
    if let Some(sig) = status.signal() {
        let cpu = if sig == libc::SIGXCPU { ": the CPU-time limit of the sandbox" } else { "" };
        return Classified::Rejected(Failure::new(
            FailureClass::Crash,
            format!("the worker died by signal {sig} ({}){cpu} {where_}", process::signal_name(sig)),
        ));
    }
    match (&run.done, status.code()) {
        (Some((None, _)), Some(0)) => Classified::Ran,
        (Some((Some(e), _)), _) => {
            let class = if e.contains("ILLEGAL_ADDRESS") || e.contains("IllegalAddress") {
                FailureClass::IllegalAddress
            } else {
                FailureClass::LaunchError
            };
            Classified::Rejected(Failure::new(class, format!("{e} {where_}")))
        }
        (_, code) => Classified::Rejected(Failure::new(
            FailureClass::ProcessExit,
            format!(
                "the library ended the process with exit code {} {where_}, before the worker finished: kernels and launchers must return, never exit",
                code.unwrap_or(-1)
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wall::judge::hosted::follow;
    use crate::wall::protocol::{StandaloneMessage, StandalonePhase};
    use std::process::ExitStatus;
    use std::time::Instant;

    const T: Duration = Duration::from_secs(10);

    fn lines(msgs: &[StandaloneMessage]) -> String {
        msgs.iter().map(|m| serde_json::to_string(m).unwrap() + "\n").collect()
    }

    fn phase(p: StandalonePhase) -> StandaloneMessage {
        StandaloneMessage::Phase { phase: p, detail: String::new() }
    }

    fn ended(text: &str, status: ExitStatus, timed_out: bool) -> StandaloneRun {
        let mut run = follow(text.as_bytes(), Instant::now());
        run.status = Some(status);
        run.timed_out = timed_out;
        run
    }

    #[test]
    fn before_loading_a_failure_is_ours_after_it_the_librarys() {
        let early = lines(&[phase(StandalonePhase::Init), phase(StandalonePhase::Setup)]);
        assert!(matches!(classify(&ended(&early, ExitStatus::from_raw(9), false), T), Classified::Internal(_)));
        let late = lines(&[phase(StandalonePhase::Setup), phase(StandalonePhase::Loading)]);
        assert!(matches!(
            classify(&ended(&late, ExitStatus::from_raw(11), false), T),
            Classified::Rejected(f) if f.class == FailureClass::Crash
        ));
        assert!(matches!(
            classify(&ended(&late, ExitStatus::from_raw(3 << 8), false), T),
            Classified::Rejected(f) if f.class == FailureClass::ProcessExit
        ));
        assert!(matches!(
            classify(&ended(&late, ExitStatus::from_raw(9), true), T),
            Classified::Rejected(f) if f.class == FailureClass::Timeout
        ));
    }

    #[test]
    fn a_library_cannot_talk_its_way_back_before_the_boundary() {
        // After `Loading` the library writes a fresh `Init` and an error "of ours": the
        // boundary stays, and its word counts for nothing.
        let text = lines(&[
            phase(StandalonePhase::Loading),
            phase(StandalonePhase::Init),
            StandaloneMessage::Done { error: Some("no CUDA driver".into()), ours: true },
        ]);
        let run = ended(&text, ExitStatus::from_raw(0), false);
        assert!(run.loaded);
        assert!(matches!(classify(&run, T), Classified::Rejected(_)));
    }

    #[test]
    fn a_clean_call_is_a_run_and_a_tools_lines_are_skipped() {
        let text = format!(
            "========= COMPUTE-SANITIZER\n{}",
            lines(&[phase(StandalonePhase::Loading), StandaloneMessage::Done { error: None, ours: false }])
        );
        assert!(matches!(classify(&ended(&text, ExitStatus::from_raw(0), false), T), Classified::Ran));
    }
}
