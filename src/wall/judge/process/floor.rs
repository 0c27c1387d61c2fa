//! The physical floor at the bench size: the least time any correct kernel needs, from
//! the task's roofline at the datasheet peak or at the bandwidth this GPU was measured to
//! reach. A median below it is a timing anomaly; the reports give each kernel's share.

use crate::task::Task;
use crate::wall::protocol::DeviceInfo;

/// The least time any correct kernel needs at the bench size, from the task's roofline:
/// its bytes at the DRAM peak, or its flops on the fastest arithmetic path that can meet
/// the task's tolerance (3xTF32 tensor cores for an fp32 GEMM whose tolerance rejects
/// plain TF32), whichever is longer.
pub fn floor_ms(task: &Task, info: &DeviceInfo) -> Option<f64> {
    floor_ms_at(task, info, info.peak_dram_gbs)
}

/// The floor with DRAM at the bandwidth this GPU was measured to reach, where known.
pub fn achievable_floor_ms(task: &Task, info: &DeviceInfo) -> Option<f64> {
    floor_ms_at(task, info, info.achievable_dram_gbs.filter(|g| g.is_finite() && *g > 0.0)?)
}

fn floor_ms_at(task: &Task, info: &DeviceInfo, dram_gbs: f64) -> Option<f64> {
    let work = task.work(&task.bench)?;
    let device = heuristics::facts::DeviceFacts {
        sms: Some(info.sm_count as f64),
        sm_clock_hz: Some(info.max_sm_clock_mhz * 1e6),
        peak_dram_bytes_per_s: Some(dram_gbs * 1e9),
        l2_bytes: Some(info.l2_bytes as f64),
        max_warps_per_sm: None,
        compute_capability: Some((info.compute_capability.0.max(0) as u32, info.compute_capability.1.max(0) as u32)),
    };
    device.floor_seconds(Some(work.bytes), Some(work.flops), &task.accuracy()).map(|t| t * 1e3)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::Path;

    fn h100() -> DeviceInfo {
        DeviceInfo {
            name: "NVIDIA H100 80GB HBM3".into(),
            uuid: String::new(),
            compute_capability: (9, 0),
            sm_count: 132,
            l2_bytes: 50 << 20,
            memory_bytes: 80 << 30,
            max_sm_clock_mhz: 1980.0,
            memory_clock_mhz: 2619.0,
            memory_bus_bits: 5120,
            peak_dram_gbs: 3352.3,
            driver_version: 13000,
            achievable_dram_gbs: None,
        }
    }

    #[test]
    fn the_gemm_f32_floor_assumes_3xtf32_not_the_fp32_fma_peak() {
        let task = Task::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tasks/gemm_f32")).unwrap();
        let floor = floor_ms(&task, &h100()).unwrap();
        let flops = 2.0 * 4096f64.powi(3);
        let fma_floor = flops / (132.0 * 1980e6 * 256.0) * 1e3;
        assert!((fma_floor - 2.05).abs() < 0.01, "{fma_floor}");
        // 3xTF32: a third of the 2048 TF32 FLOP per SM per clock, 8/3 of the FMA rate.
        assert!((floor - fma_floor * 3.0 / 8.0).abs() < 1e-6, "{floor} vs {fma_floor}");
        // cuBLAS SGEMM's 2.67 ms at this size is above it, as any correct kernel must be.
        assert!(floor < 2.67);
    }

    #[test]
    fn a_memory_bound_task_floor_is_its_bytes_at_the_dram_peak() {
        let task = Task::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tasks/vector_add")).unwrap();
        let floor = floor_ms(&task, &h100()).unwrap();
        let bytes = task.work(&task.bench).unwrap().bytes;
        assert!((floor - bytes / 3352.3e9 * 1e3).abs() < 1e-9);
    }

    #[test]
    fn the_achievable_floor_is_the_bytes_at_the_measured_bandwidth() {
        let task = Task::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("tasks/vector_add")).unwrap();
        assert_eq!(achievable_floor_ms(&task, &h100()), None);
        let info = DeviceInfo { achievable_dram_gbs: Some(2840.0), ..h100() };
        let bytes = task.work(&task.bench).unwrap().bytes;
        let floor = achievable_floor_ms(&task, &info).unwrap();
        assert!((floor - bytes / 2840e9 * 1e3).abs() < 1e-9);
        // The datasheet floor is unchanged, and lower: a kernel's share of it is lower too.
        assert!((floor_ms(&task, &info).unwrap() - bytes / 3352.3e9 * 1e3).abs() < 1e-9);
        assert!(floor > floor_ms(&task, &info).unwrap());
        for bogus in [0.0, -1.0, f64::NAN] {
            assert_eq!(achievable_floor_ms(&task, &DeviceInfo { achievable_dram_gbs: Some(bogus), ..h100() }), None);
        }
    }
}
