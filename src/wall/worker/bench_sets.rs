//! The input sets timing runs on, at the bench size: enough warm sets to cover twice the
//! L2 (fewer where GPU memory is short), each with a device copy per side and its
//! reference outputs, and the cold sets used once each after the timing.

use super::buffers::DeviceCase;
use super::cases;
use super::inputs::{CaseData, HostCase};
use super::{gpu_stop, Entry, Stop, Worker};
use crate::wall::protocol::Outcome;

/// Input sets at the bench size, one device copy per side, with their reference outputs:
/// `warm` sets rotate through the timing; `cold` sets are each used once, after it, to
/// catch a candidate that is fast only on inputs it has seen.
pub(crate) struct BenchSets {
    pub(super) warm: Sets,
    pub(super) cold: Sets,
}

#[derive(Default)]
pub(super) struct Sets {
    /// dev[side][k]
    pub(super) dev: [Vec<DeviceCase>; 2],
    pub(super) hosts: Vec<HostCase>,
    pub(super) refs: Vec<Vec<Option<Vec<u8>>>>,
}

impl Sets {
    pub(super) fn len(&self) -> usize {
        self.hosts.len()
    }

    /// `count` cold sets, seeded `offset` past the worker's seed base.
    fn cold(
        w: &mut Worker,
        reference: &Entry,
        offset: u64,
        count: usize,
        spare: &mut Vec<Option<Vec<u8>>>,
    ) -> Result<Sets, Stop> {
        let base = w.seed_base;
        let seeds = (0..count as u64).map(move |j| base.wrapping_add(offset + j));
        Sets::generate(w, reference, seeds, false, spare)
    }

    /// `per_side`: a device copy for each side (warm sets, reused hundreds of times), or
    /// one that both sides take turns on (cold sets, used once a side; outputs are
    /// poisoned before every call and the inputs are never written).
    fn generate(
        w: &mut Worker,
        reference: &Entry,
        seeds: impl Iterator<Item = u64>,
        per_side: bool,
        spare: &mut Vec<Option<Vec<u8>>>,
    ) -> Result<Sets, Stop> {
        let task = w.task.clone();
        let mut sets = Sets::default();
        for seed in seeds {
            let data = CaseData::generate_reusing(w, HostCase::new(task.bench.clone(), seed), std::mem::take(spare))?;
            // One host upload: the reference runs on the copy the baseline side keeps,
            // and the candidate's copy is made on the device.
            let mut dev = DeviceCase::upload(w, &data.host).map_err(gpu_stop)?;
            sets.refs.push(cases::run_reference_on(w, reference, &data.host, &mut dev, false)?);
            if per_side {
                sets.dev[1].push(dev.duplicate(w).map_err(gpu_stop)?);
            }
            sets.dev[0].push(dev);
            // Keep sizes and seeds only: the inputs now live on the device.
            let mut host = data.host;
            *spare = std::mem::take(&mut host.inputs);
            sets.hosts.push(host);
        }
        Ok(sets)
    }
}

/// Cold input sets: enough to see a cache miss twice, few enough to keep setup short.
const COLD_SETS: usize = 2;

impl BenchSets {
    pub fn prepare(w: &mut Worker, reference: &Entry) -> Result<BenchSets, Stop> {
        let task = w.task.clone();
        let footprint = task.total_bytes(&task.bench).max(1) as f64;
        let l2 = w.gpu.info.l2_bytes.max(1) as f64;
        let mut k = ((2.0 * l2 / footprint).ceil() as usize).clamp(2, 8);
        let free = w.gpu.free_memory().map_err(gpu_stop)? as f64;
        let flush = 3.0 * l2;
        let need = |k: usize, c: usize| (2 * k + c) as f64 * footprint + flush;
        let mut c = COLD_SETS;
        while k > 1 && need(k, c) > 0.85 * free {
            k -= 1;
        }
        while c > 1 && need(k, c) > 0.85 * free {
            c -= 1;
        }
        if need(k, c) > 0.85 * free {
            return Err(Outcome::TaskError {
                message: format!(
                    "the bench size {} needs {:.1} GB on the GPU ({} input sets a side); {:.1} GB are free",
                    task.bench,
                    need(k, c) / 1e9,
                    k + c,
                    free / 1e9
                ),
            });
        }
        let base = w.seed_base;
        // Each set's host inputs are on the device before the next set is generated, so
        // one set of host buffers serves them all: a fresh one per set would cost its
        // page faults again.
        let mut spare = Vec::new();
        let warm = (0..k as u64).map(|j| base.wrapping_add(1_000_000 + j));
        let warm = Sets::generate(w, reference, warm, true, &mut spare)?;
        let cold = Sets::cold(w, reference, 2_000_000, c, &mut spare)?;
        Ok(BenchSets { warm, cold })
    }

    pub(super) fn len(&self) -> usize {
        self.warm.len()
    }

    /// Replaces the cold sets, once each side has used them, with as many never seen.
    pub(super) fn renew_cold(&mut self, w: &mut Worker, reference: &Entry) -> Result<(), Stop> {
        // Freed first: the new sets take the old ones' place in GPU memory.
        let count = std::mem::take(&mut self.cold).len();
        self.cold = Sets::cold(w, reference, 3_000_000, count, &mut Vec::new())?;
        Ok(())
    }
}
