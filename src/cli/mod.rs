//! The command line. Exit codes are a contract: 0 passed, 1 candidate rejected, 2 bad
//! usage or bad task, 3 something missing from the environment (GPU, driver, tool).

mod diagnose;
mod envcheck;
mod eval;
mod optimize;
mod optimize_all;
mod render;
mod report;
mod rewrite;
mod sass;
mod simulate;
mod tasks;

use crate::task::Task;
use crate::wall::EvalOptions;
use clap::{Parser, Subcommand};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;

pub const EXIT_PASSED: u8 = 0;
pub const EXIT_REJECTED: u8 = 1;
pub const EXIT_USAGE: u8 = 2;
pub const EXIT_ENV: u8 = 3;

#[derive(Parser)]
#[command(
    name = "nightshift",
    version,
    about = "Optimizes a named CUDA kernel unattended: build, verify, time, profile, diagnose."
)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Lists the GPU, driver and CUDA tools nightshift needs, found or not, and how to get them.
    CheckEnv {
        /// Print JSON instead: {"ok", "items": [{"name", "found", "hint", ...}]}.
        #[arg(long)]
        json: bool,
    },
    /// Lists the tasks in DIR (default: ./tasks).
    Tasks {
        /// The folder to look in (default: ./tasks); each task is a subfolder with a task.toml.
        dir: Option<PathBuf>,
        /// Print JSON instead: {"tasks": [...]}, with an error for each task that does not load.
        #[arg(long)]
        json: bool,
    },
    /// Writes a new task from your own kernel file: finds its extern "C" launcher, copies
    /// it and the headers it includes, reads buffer lengths from the kernels' indexing,
    /// drafts task.toml, validates it, and lists what is left (fields to fill in, lengths
    /// guessed from names, headers not found). Exit 0: ready; 1: written, with something
    /// left; 2: nothing written. Run it again on a folder it wrote to replace its files.
    Init {
        /// The task folder to create (new, empty, or written by an earlier init).
        task: PathBuf,
        /// The .cu file with the kernels and the host launcher.
        #[arg(long)]
        from: PathBuf,
        /// The launcher, when the file has several extern "C" functions.
        #[arg(long)]
        entry: Option<String>,
        /// A folder the kernel's quoted includes are found in (repeatable).
        #[arg(short = 'I', long = "include", value_name = "DIR")]
        include: Vec<PathBuf>,
        /// Write into a folder init did not write, or over its files edited since.
        #[arg(long)]
        force: bool,
        /// Print what was written, and what is left to do, as JSON.
        #[arg(long)]
        json: bool,
    },
    /// Checks a task directory: task.toml, files, expressions at every size.
    Validate {
        /// The task directory (task.toml, baseline, optional reference).
        task: PathBuf,
        /// Also build the baseline (and reference) with nvcc.
        #[arg(long)]
        build: bool,
        /// Build target when building (default: the GPU's own, which needs a GPU).
        #[arg(long)]
        arch: Option<String>,
        /// Print JSON instead: {"valid", "task", "builds"}.
        #[arg(long)]
        json: bool,
    },
    /// Builds a candidate, checks it against the reference and times it against the baseline.
    Eval(Box<eval::Args>),
    /// Reads SASS: instruction mix, access widths, local memory, fp64, loops, with source lines.
    Sass {
        /// SASS text (cuobjdump or nvdisasm), or a .cubin, .so, .o or executable.
        file: PathBuf,
        /// Only this function (mangled, demangled or short name).
        #[arg(long)]
        function: Option<String>,
        /// Print JSON instead: {"functions": [...]}, one analysis per function.
        #[arg(long)]
        json: bool,
    },
    /// Explains a kernel's profile: ranked diagnoses with evidence, prescription and source line.
    ///
    /// On a GPU: `diagnose TASK_DIR [CANDIDATE.cu]` profiles one call with ncu. Anywhere:
    /// `diagnose --ncu RAW.csv [--sass SASS] [--ptxas PTXAS]` reads a saved profile.
    Diagnose {
        /// The task directory whose kernel is profiled on the GPU (not with --ncu).
        task: Option<PathBuf>,
        /// The .cu to profile (default: the task's baseline).
        candidate: Option<PathBuf>,
        /// A saved `ncu --csv --page raw` export to diagnose instead of profiling.
        #[arg(long)]
        ncu: Option<PathBuf>,
        /// SASS text (nvdisasm -c -gi gives source lines) or a binary to disassemble.
        #[arg(long)]
        sass: Option<PathBuf>,
        /// A ptxas -v report (a build log will do).
        #[arg(long)]
        ptxas: Option<PathBuf>,
        /// Only kernels whose name contains this.
        #[arg(long)]
        kernel: Option<String>,
        /// The least bytes a correct kernel moves (default: the task's roofline).
        #[arg(long)]
        min_bytes: Option<f64>,
        /// Where to save the profile (default: the build folder).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Build target, e.g. sm_90a (default: the GPU's own).
        #[arg(long)]
        arch: Option<String>,
        /// CUDA device ordinal.
        #[arg(long, default_value_t = 0)]
        device: usize,
        /// Seconds before the profiled worker is killed (default: the task's, else 120).
        #[arg(long)]
        timeout: Option<f64>,
        /// Also show info-level findings and every tool's outcome.
        #[arg(long, short)]
        verbose: bool,
        /// Run ncu even where it cannot be confined in private namespaces (a kernel that
        /// forbids user namespaces); the tool then sees the host's /tmp, $HOME, /run and
        /// network, and only the worker's own sandbox guards them.
        #[arg(long)]
        allow_unconfined_profiling: bool,
        /// Collect ncu's full set (every section, for reading the report in Nsight
        /// Compute) instead of only the metrics the diagnoses read; several times slower.
        #[arg(long)]
        full: bool,
        /// Print how long each step took (build, ncu start, worker setup, profiled call,
        /// ncu finish, export, CSV parse, SASS, diagnose): on stderr, or as `timings` in --json.
        #[arg(long)]
        timings: bool,
        /// Print JSON instead: {"kernels": [{"name", "roofline", "diagnoses"}]}, a stable contract.
        #[arg(long)]
        json: bool,
    },
    /// Shows which rewrite recipes apply to a task's kernel and why the others do not;
    /// writes the variants (one .cu each) and builds them when asked. No GPU needed.
    Rewrite {
        /// The task directory (its task.toml tells the recipes the sizes and types).
        task: PathBuf,
        /// The kernel to rewrite (default: the task's baseline).
        candidate: Option<PathBuf>,
        /// A recipe application, ID[:NAME=VALUE,...] (repeatable; default: every recipe
        /// with its default parameters).
        #[arg(long = "recipe", value_name = "ID[:PARAMS]")]
        recipes: Vec<String>,
        /// Where to write the variants.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Build every variant with nvcc.
        #[arg(long)]
        build: bool,
        /// Build target, e.g. sm_90a (default: the GPU's own).
        #[arg(long)]
        arch: Option<String>,
        /// Print JSON instead: {"task", "source", "recipes": [...]}, one entry per recipe.
        #[arg(long)]
        json: bool,
    },
    /// Optimizes a task's kernel unattended: search, generate, build, verify, profile, report.
    ///
    /// `nightshift optimize tasks/softmax --budget 10m` uses the built-in tuner (no network);
    /// `--generator llm --model NAME` an OpenAI-compatible endpoint (OPENAI_BASE_URL,
    /// OPENAI_API_KEY). `--resume RUN_DIR` carries on a run after a kill or a Ctrl-C.
    Optimize(Box<optimize::Args>),
    /// Optimizes many tasks, one run each, and writes one summary (summary.md) linking
    /// every run's report: `nightshift optimize-all tasks/softmax tasks/rmsnorm --budget 8h`
    /// runs them one after another here; `--ray ADDRESS` as Ray tasks, one GPU each.
    OptimizeAll(Box<optimize_all::Args>),
    /// (Re)renders a run's reports: nodes/NNNN/report.md and report.json for every finished
    /// node, and report.md and a self-contained report.html for the run. Works while the
    /// run is still going.
    Report {
        /// The run directory (runs/<task>-<time>, as optimize printed it).
        run_dir: PathBuf,
        /// Print the paths written as JSON: {"run_md", "run_html", "node_reports"}.
        #[arg(long)]
        json: bool,
    },
    /// Prints a run's summary, or one node's report, in the terminal (writes nothing).
    Show {
        /// The run directory (runs/<task>-<time>, as optimize printed it).
        run_dir: PathBuf,
        /// A node's id, to print its report instead of the run's summary.
        node: Option<usize>,
        /// The run (or the node) as JSON: every node's figures, per served shape too.
        #[arg(long)]
        json: bool,
    },
    /// Compares search strategies on synthetic kernel landscapes (see README.md).
    Simulate {
        /// Synthetic kernel landscapes to run every strategy on.
        #[arg(long, default_value_t = 300)]
        landscapes: usize,
        /// Evaluations per run.
        #[arg(long, default_value_t = 150)]
        budget: usize,
        /// Seed of the landscapes and the searches (same seed, same table).
        #[arg(long, default_value_t = 20261121)]
        seed: u64,
        /// Print JSON instead: one row per strategy with its geometric mean and intervals.
        #[arg(long)]
        json: bool,
    },
    /// Internal: judges one candidate (spawned by eval and optimize): owns the buffers,
    /// the seeds and the clock, and starts one worker per library.
    #[command(hide = true)]
    Judge {
        /// The request file the orchestrator wrote (task, libraries, mode, deadline).
        request: PathBuf,
    },
    /// Internal: loads one kernel library in a sandboxed process: `--serve` for the judge
    /// (commands on fd 3), `--standalone REQUEST` under ncu or compute-sanitizer.
    #[command(hide = true)]
    Worker {
        /// Serve the judge: its commands come on fd 3.
        #[arg(long, conflicts_with = "standalone", required_unless_present = "standalone")]
        serve: bool,
        /// The request file the orchestrator wrote for a standalone run.
        #[arg(long)]
        standalone: Option<PathBuf>,
    },
    /// Internal: a remote lane's job (spawned by `optimize --ray`'s actors): reads one job on
    /// stdin, does it on this host's GPU, prints the reply as one JSON line.
    #[command(hide = true)]
    LaneJob,
    /// Internal: applies the worker's sandbox to itself and tries to break out (check-env, tests).
    #[command(hide = true)]
    SandboxProbe {
        #[command(flatten)]
        targets: crate::wall::sandbox::probe::Targets,
    },
    /// Internal: runs a hosting tool (ncu, compute-sanitizer) in private user, mount,
    /// network and PID namespaces (spawned by eval and profile).
    #[command(hide = true)]
    Hosted {
        /// Where the arrangement made is written, before the tool starts.
        #[arg(long)]
        report: PathBuf,
        /// A folder that must stay reachable at its own path (repeatable).
        #[arg(long)]
        keep: Vec<PathBuf>,
        /// Start the tool even where the namespaces cannot be made.
        #[arg(long)]
        allow_unconfined: bool,
        /// The tool and its arguments.
        #[arg(last = true, required = true)]
        command: Vec<std::ffi::OsString>,
    },
    /// Internal: applies a build's confinement to itself (Landlock, seccomp, rlimits, no
    /// capabilities, a fresh keyring, a minimal environment) and execs the program (every
    /// nvcc, cuobjdump and nvdisasm run of a build goes through it).
    #[command(hide = true)]
    Confine {
        /// The build's policy, as JSON (what it may read, run and write; its limits).
        #[arg(long)]
        policy: String,
        /// Instead of running a program, try to break out and print a JSON report (tests).
        #[arg(long)]
        probe: bool,
        /// With --probe: a file the build must not read (repeatable).
        #[arg(long)]
        secret: Vec<PathBuf>,
        /// With --probe: a file the build must be able to read (repeatable).
        #[arg(long)]
        readable: Vec<PathBuf>,
        /// With --probe: a folder the build must not write.
        #[arg(long)]
        outside: Option<PathBuf>,
        /// The program and its arguments.
        #[arg(last = true, required_unless_present = "probe")]
        command: Vec<std::ffi::OsString>,
    },
}

pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { EXIT_USAGE } else { EXIT_PASSED });
        }
    };
    if let Cmd::Confine { policy, probe, secret, readable, outside, command } = cli.command {
        // First, before anything could start a thread.
        if probe {
            return match serde_json::from_str(&policy) {
                Ok(p) => {
                    let targets = crate::wall::build::probe::Targets { secrets: secret, readable, outside };
                    print_json(&crate::wall::build::probe::run(&p, &targets));
                    ExitCode::from(EXIT_PASSED)
                }
                Err(e) => fail(EXIT_USAGE, &format!("the policy does not parse: {e}")),
            };
        }
        return crate::wall::build::confine::main(&crate::wall::build::confine::Args { policy, command });
    }
    if !matches!(cli.command, Cmd::Worker { .. } | Cmd::SandboxProbe { .. } | Cmd::Hosted { .. }) {
        // The orchestrator holds API keys: a non-dumpable process's /proc entries
        // (environ, mem) are closed to other processes of the same user, candidates
        // included, whatever else the sandbox manages. (The hosted trampoline holds none,
        // and must write its own /proc/self/uid_map, which non-dumpable makes root's.)
        // SAFETY: plain prctl on ourselves.
        unsafe {
            libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0);
        }
    }
    if matches!(
        cli.command,
        Cmd::CheckEnv { .. }
            | Cmd::Rewrite { .. }
            | Cmd::Report { .. }
            | Cmd::Show { .. }
            | Cmd::Sass { .. }
            | Cmd::Simulate { .. }
            | Cmd::Tasks { .. }
            | Cmd::Init { .. }
            | Cmd::Validate { .. }
    ) {
        // Commands that only print end quietly when their reader goes (`| head`), as Unix
        // tools do; Rust ignores SIGPIPE, so a closed stdout would make `println!` panic.
        // Not for commands that talk to a judge or workers over pipes: a write to a dead
        // peer must stay an error they report, not a signal that ends them.
        // SAFETY: plain signal(2) before any thread exists.
        unsafe {
            libc::signal(libc::SIGPIPE, libc::SIG_DFL);
        }
    }
    match cli.command {
        Cmd::Judge { request } => crate::wall::judge::process::main(&request),
        Cmd::Worker { standalone: Some(request), .. } => crate::wall::worker::standalone::main(&request),
        Cmd::Worker { .. } => crate::wall::worker::serve::main(),
        Cmd::SandboxProbe { targets } => {
            print_json(&crate::wall::sandbox::probe::run(&targets));
            ExitCode::from(EXIT_PASSED)
        }
        Cmd::Hosted { report, keep, allow_unconfined, command } => {
            crate::wall::sandbox::hosted::main(&crate::wall::sandbox::hosted::Args {
                report,
                keep,
                allow_unconfined,
                command,
            })
        }
        Cmd::Optimize(args) => optimize::run(*args),
        Cmd::LaneJob => optimize::lane_job(),
        Cmd::OptimizeAll(args) => optimize_all::run(*args),
        Cmd::CheckEnv { json } => envcheck::run(json),
        Cmd::Rewrite { task, candidate, recipes, out, build, arch, json } => {
            rewrite::run(rewrite::Args { task, candidate, recipes, out, build, arch, json })
        }
        Cmd::Report { run_dir, json } => report::report(&run_dir, json),
        Cmd::Show { run_dir, node, json } => report::show(&run_dir, node, json),
        Cmd::Sass { file, function, json } => sass::run(&file, function.as_deref(), json),
        Cmd::Simulate { landscapes, budget, seed, json } => simulate::run(landscapes, budget, seed, json),
        Cmd::Diagnose {
            task,
            candidate,
            ncu,
            sass,
            ptxas,
            kernel,
            min_bytes,
            out,
            arch,
            device,
            timeout,
            verbose,
            allow_unconfined_profiling,
            full,
            timings,
            json,
        } => {
            let mut opts = match gpu_options(arch, device, timeout) {
                Ok(o) => o,
                Err(code) => return code,
            };
            opts.allow_unconfined_profiling = allow_unconfined_profiling;
            diagnose::run(diagnose::Args {
                task,
                candidate,
                ncu,
                sass,
                ptxas,
                kernel,
                min_bytes,
                out,
                json,
                verbose,
                full,
                timings,
                opts,
            })
        }
        Cmd::Tasks { dir, json } => tasks::list(dir.as_deref().unwrap_or(Path::new("tasks")), json),
        Cmd::Init { task, from, entry, include, force, json } => {
            tasks::init(&crate::scaffold::Args { dir: task, from, entry, include_dirs: include, force }, json)
        }
        Cmd::Validate { task, build, arch, json } => tasks::validate(&task, build, arch, json),
        Cmd::Eval(args) => eval::run(*args),
        Cmd::Confine { .. } => unreachable!("handled first"),
    }
}

/// `--build-timeout`, checked.
fn build_timeout(seconds: Option<f64>) -> Result<Option<Duration>, ExitCode> {
    match seconds {
        Some(t) if !(t > 0.0 && t.is_finite()) => {
            Err(fail(EXIT_USAGE, "--build-timeout must be a positive number of seconds"))
        }
        Some(t) => Ok(Some(Duration::from_secs_f64(t))),
        None => Ok(None),
    }
}

/// Options shared by the commands that run the worker, with `--timeout` checked.
fn gpu_options(arch: Option<String>, device: usize, timeout: Option<f64>) -> Result<EvalOptions, ExitCode> {
    let exe =
        std::env::current_exe().map_err(|e| fail(EXIT_ENV, &format!("cannot find the nightshift executable: {e}")))?;
    let mut opts = EvalOptions::new(exe);
    opts.arch = arch;
    opts.device = device;
    if let Some(t) = timeout {
        if !(t > 0.0 && t.is_finite()) {
            return Err(fail(EXIT_USAGE, "--timeout must be a positive number of seconds"));
        }
        opts.timeout = Some(Duration::from_secs_f64(t));
    }
    Ok(opts)
}

pub(crate) fn fail(code: u8, message: &str) -> ExitCode {
    eprintln!("error: {message}");
    ExitCode::from(code)
}

fn load_task(dir: &Path) -> Result<Task, ExitCode> {
    Task::load(dir).map_err(|e| fail(EXIT_USAGE, &e.to_string()))
}

fn print_json<T: serde::Serialize>(value: &T) {
    println!("{}", serde_json::to_string_pretty(value).expect("outputs serialize"));
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    /// Arguments (positional or flags) and subcommands of `cmd` and everything under it
    /// that `--help` would list without a line of help; clap's own --help and --version
    /// aside. Hidden commands are walked too: they are documented like the rest.
    fn without_help(cmd: &clap::Command, path: &str, out: &mut Vec<String>) {
        for arg in cmd.get_arguments() {
            let id = arg.get_id().as_str();
            if matches!(id, "help" | "version") {
                continue;
            }
            let help = arg.get_help().or(arg.get_long_help()).map(|h| h.to_string()).unwrap_or_default();
            if help.trim().is_empty() {
                let name = arg.get_long().map(|l| format!("--{l}")).unwrap_or_else(|| format!("<{id}>"));
                out.push(format!("{path} {name}"));
            }
        }
        for sub in cmd.get_subcommands() {
            let path = format!("{path} {}", sub.get_name());
            if sub.get_about().is_none() {
                out.push(format!("{path} (the command itself)"));
            }
            without_help(sub, &path, out);
        }
    }

    #[test]
    fn every_argument_of_every_command_has_a_help_line() {
        let mut cli = Cli::command();
        cli.build();
        let mut missing = Vec::new();
        without_help(&cli, "nightshift", &mut missing);
        assert!(missing.is_empty(), "arguments without help:\n{}", missing.join("\n"));
    }

    #[test]
    fn the_command_line_definition_is_consistent() {
        Cli::command().debug_assert();
    }
}
