//! A case's inputs on the host: one (size, seed) drawn from the task's distributions, the
//! scalars evaluated at the size, and beside them the reference outputs once computed.
//! Bench sets are generated one after another into the buffers of the set before.

use super::{Stop, Worker};
use crate::task::types::{ParamType, ScalarType};
use crate::task::{ArgRole, ScalarValue, Size, Task};
use crate::wall::protocol::{CaseRef, Outcome};

/// Why a case's inputs cannot be made from the task (the task's fault, not a candidate's).
#[derive(Debug, thiserror::Error)]
pub(crate) enum InputError {
    #[error(transparent)]
    Len(#[from] crate::task::LenError),
    /// A scalar's value expression does not evaluate at the size.
    #[error(transparent)]
    Scalar(#[from] crate::task::expr::ExprError),
    #[error("a float value for an integer parameter")]
    FloatForInteger,
    #[error("argument {arg} has a role that does not fit its type")]
    RoleMismatch { arg: String },
}

/// Inputs of one (size, seed), generated on the host.
pub(crate) struct HostCase {
    pub size: Size,
    pub seed: u64,
    /// Initial contents of Input and InOut buffers, by argument index.
    pub inputs: Vec<Option<Vec<u8>>>,
    /// Byte length of every pointer argument (0 for scalars).
    pub lens: Vec<usize>,
    /// Argument values for scalars (pointer slots are filled per device case).
    pub scalars: Vec<[u8; 8]>,
}

impl HostCase {
    pub fn new(size: Size, seed: u64) -> HostCase {
        HostCase { size, seed, inputs: Vec::new(), lens: Vec::new(), scalars: Vec::new() }
    }

    pub fn label(&self) -> String {
        format!("size {} seed {}", self.size, self.seed)
    }

    pub fn case_ref(&self, arg: Option<&str>) -> CaseRef {
        CaseRef { size: self.size.to_string(), seed: self.seed, arg: arg.map(str::to_string), call: None }
    }

    /// Generates the inputs. `spare`: input buffers of an earlier case of this task, by
    /// argument index, overwritten where their length fits (bench sets are generated one
    /// after another, each uploaded before the next).
    fn fill(&mut self, task: &Task, threads: usize, mut spare: Vec<Option<Vec<u8>>>) -> Result<(), InputError> {
        let n = task.args.len();
        spare.resize(n, None);
        self.inputs = vec![None; n];
        self.lens = vec![0; n];
        self.scalars = vec![[0u8; 8]; n];
        for (i, arg) in task.args.iter().enumerate() {
            match (&arg.role, arg.ty) {
                (ArgRole::Scalar { value }, ParamType::Scalar { scalar }) => {
                    self.scalars[i] = scalar_bytes(value, scalar, &self.size)?;
                }
                (ArgRole::Input { len, init } | ArgRole::InOut { len, init, .. }, ParamType::Pointer { elem, .. }) => {
                    let count = Task::buffer_len(len, &self.size)?;
                    self.lens[i] = count * elem.size();
                    self.inputs[i] = Some(match spare[i].take() {
                        Some(mut buf) if buf.len() == self.lens[i] => {
                            crate::task::init::generate_into(*init, elem, &mut buf, self.seed, i as u64, threads);
                            buf
                        }
                        _ => crate::task::init::generate(*init, elem, count, self.seed, i as u64, threads),
                    });
                }
                (ArgRole::Output { len, .. }, ParamType::Pointer { elem, .. }) => {
                    self.lens[i] = Task::buffer_len(len, &self.size)? * elem.size();
                }
                _ => return Err(InputError::RoleMismatch { arg: arg.name.clone() }),
            }
        }
        Ok(())
    }
}

fn scalar_bytes(value: &ScalarValue, scalar: ScalarType, size: &Size) -> Result<[u8; 8], InputError> {
    let mut b = [0u8; 8];
    match value {
        ScalarValue::Int(src) => {
            let v = crate::task::expr::Expr::parse(src)?.eval(&size.vars)?;
            match scalar {
                ScalarType::I32 | ScalarType::U32 => b[..4].copy_from_slice(&(v as i32).to_le_bytes()),
                ScalarType::I64 | ScalarType::U64 => b.copy_from_slice(&v.to_le_bytes()),
                ScalarType::F32 => b[..4].copy_from_slice(&(v as f32).to_le_bytes()),
                ScalarType::F64 => b.copy_from_slice(&(v as f64).to_le_bytes()),
            }
        }
        ScalarValue::Float(x) => match scalar {
            ScalarType::F32 => b[..4].copy_from_slice(&(*x as f32).to_le_bytes()),
            ScalarType::F64 => b.copy_from_slice(&x.to_le_bytes()),
            _ => return Err(InputError::FloatForInteger),
        },
    }
    Ok(b)
}

/// Host inputs plus the reference outputs for them.
pub(crate) struct CaseData {
    pub host: HostCase,
    /// Reference outputs by argument index (Some for Output and InOut arguments).
    pub reference: Option<Vec<Option<Vec<u8>>>>,
}

impl CaseData {
    pub fn generate(w: &Worker, host: HostCase) -> Result<CaseData, Stop> {
        CaseData::generate_reusing(w, host, Vec::new())
    }

    /// [`CaseData::generate`] into the input buffers of an earlier case where they fit.
    pub fn generate_reusing(w: &Worker, mut host: HostCase, spare: Vec<Option<Vec<u8>>>) -> Result<CaseData, Stop> {
        host.fill(&w.task, w.threads, spare)
            .map_err(|m| Outcome::TaskError { message: format!("{}: {m}", host.label()) })?;
        Ok(CaseData { host, reference: None })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::task::types::ElemType;
    use crate::wall::verify;
    use std::path::Path;
    use std::time::Instant;

    /// `cargo test --release --lib fill_seconds -- --ignored --nocapture`: the host side of
    /// a judgment's reference phase for softmax (33.5M floats of normal(0, 2) a bench set):
    /// generating a bench set fresh and into the buffers of the set before, the check
    /// sizes, and the scan of a reference output for unwritten elements; on one thread and
    /// on as many as eval gives a worker on this machine. Best of three.
    #[test]
    #[ignore = "bench: prints figures"]
    fn fill_seconds() {
        let task = Task::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tasks/softmax")).unwrap();
        let worker_threads = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(4).min(16);
        // Wall seconds, and CPU seconds over all threads: on a shared machine the second
        // is the steadier of the two.
        let cpu = || {
            let mut t = libc::timespec { tv_sec: 0, tv_nsec: 0 };
            // SAFETY: writes the timespec it is given.
            unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut t) };
            t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9
        };
        let best = |mut f: Box<dyn FnMut(u64)>| {
            let (mut wall, mut used) = (f64::INFINITY, f64::INFINITY);
            for rep in 0..3 {
                let (t, c) = (Instant::now(), cpu());
                f(rep);
                wall = wall.min(t.elapsed().as_secs_f64());
                used = used.min(cpu() - c);
            }
            format!("{wall:.4} s ({used:.4} s CPU)")
        };
        for threads in [1, worker_threads] {
            let task = &task;
            let fresh = best(Box::new(move |rep| {
                let mut host = HostCase::new(task.bench.clone(), 42 + rep);
                host.fill(task, threads, Vec::new()).unwrap();
                std::hint::black_box(&host.inputs);
            }));
            let mut spare = Vec::new();
            let reused = best(Box::new(move |rep| {
                let mut host = HostCase::new(task.bench.clone(), 42 + rep);
                host.fill(task, threads, std::mem::take(&mut spare)).unwrap();
                spare = std::mem::take(&mut host.inputs);
            }));
            let checks = best(Box::new(move |rep| {
                for size in &task.checks {
                    for seed in 0..task.seeds as u64 {
                        let mut host = HostCase::new(size.clone(), 1000 * rep + seed);
                        host.fill(task, threads, Vec::new()).unwrap();
                        std::hint::black_box(&host.inputs);
                    }
                }
            }));
            println!(
                "{threads:2} thread(s): bench {} {fresh} fresh, {reused} into the last set's buffers; {} check cases {checks}",
                task.bench,
                task.checks.len() * task.seeds as usize
            );
        }
        let mut host = HostCase::new(task.bench.clone(), 7);
        host.fill(&task, worker_threads, Vec::new()).unwrap();
        let output = host.inputs[0].take().unwrap();
        // The worker knows the element type only at run time; so must the scan here.
        let scan = best(Box::new(|_| {
            std::hint::black_box(verify::count_poison(std::hint::black_box(ElemType::F32), &output, false));
        }));
        println!("unwritten-element scan of one bench-size reference output: {scan}");
        let fault = best(Box::new(|_| {
            let mut v = crate::hostmem::zeroed(output.len());
            v.iter_mut().step_by(4096).for_each(|b| *b = 1);
            std::hint::black_box(&v);
        }));
        println!("a fresh bench-size output buffer (a download's), faulted in: {fault}");
        let (output, tol) = (&output, task.tolerance);
        for threads in [1, worker_threads] {
            let compare = best(Box::new(move |_| {
                std::hint::black_box(verify::compare(ElemType::F32, output, output, tol, threads));
            }));
            println!("{threads:2} thread(s): comparing one bench-size output with its reference: {compare}");
        }
    }
}
