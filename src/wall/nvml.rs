//! NVML, loaded at run time: clocks, throttle reasons, temperature and the total-energy
//! counter. Missing NVML is never fatal; callers get `None` and say so in reports.

use nvml_wrapper::bitmasks::device::ThrottleReasons;
use nvml_wrapper::enum_wrappers::device::{Clock, TemperatureSensor};
use nvml_wrapper::Nvml;

/// Why NVML cannot speak for a device.
#[derive(Debug, thiserror::Error)]
pub enum NvmlError {
    #[error("NVML unavailable: {0}")]
    Unavailable(#[source] nvml_wrapper::error::NvmlError),
    #[error("NVML does not know device {uuid}: {source}")]
    UnknownDevice { uuid: String, source: nvml_wrapper::error::NvmlError },
}

pub struct NvmlDevice {
    nvml: Nvml,
    uuid: String,
}

impl NvmlDevice {
    /// Opens NVML and finds the device with CUDA UUID `uuid` ("GPU-...").
    pub fn open(uuid: &str) -> Result<NvmlDevice, NvmlError> {
        let nvml = Nvml::init().map_err(NvmlError::Unavailable)?;
        nvml.device_by_uuid(uuid).map_err(|source| NvmlError::UnknownDevice { uuid: uuid.into(), source })?;
        Ok(NvmlDevice { nvml, uuid: uuid.to_string() })
    }

    /// The device handle; look it up once for hot loops (a lookup costs milliseconds).
    pub fn device(&self) -> Option<nvml_wrapper::Device<'_>> {
        self.nvml.device_by_uuid(self.uuid.as_str()).ok()
    }

    /// Total energy since driver load, in millijoules.
    pub fn energy_mj(&self) -> Option<u64> {
        self.device()?.total_energy_consumption().ok()
    }

    pub fn sm_clock_mhz(&self) -> Option<u32> {
        self.device()?.clock_info(Clock::SM).ok()
    }

    pub fn memory_clock_mhz(&self) -> Option<u32> {
        self.device()?.clock_info(Clock::Memory).ok()
    }

    pub fn temperature_c(&self) -> Option<u32> {
        self.device()?.temperature(TemperatureSensor::Gpu).ok()
    }

    /// Active throttle reasons by name; idle and application-clock settings are not throttling.
    pub fn throttle_reasons(&self) -> Option<Vec<String>> {
        let r = self.device()?.current_throttle_reasons().ok()?;
        Some(throttle_names(r))
    }

    /// Processes other than this one with a context on the device (pids), as far as this
    /// PID namespace lets NVML see them.
    pub fn other_processes(&self) -> Vec<u32> {
        let me = std::process::id();
        let Some(d) = self.device() else { return Vec::new() };
        let mut pids: Vec<u32> = d
            .running_compute_processes()
            .unwrap_or_default()
            .into_iter()
            .chain(d.running_graphics_processes().unwrap_or_default())
            .map(|p| p.pid)
            .filter(|&p| p != me)
            .collect();
        pids.sort_unstable();
        pids.dedup();
        pids
    }

    /// GPU memory this process holds on the device, as the driver accounts it (None where
    /// NVML cannot see this process, e.g. from another PID namespace).
    pub fn own_memory_bytes(&self) -> Option<u64> {
        let me = std::process::id();
        let d = self.device()?;
        d.running_compute_processes().ok()?.into_iter().find(|p| p.pid == me).and_then(|p| match p.used_gpu_memory {
            nvml_wrapper::enums::device::UsedGpuMemory::Used(b) => Some(b),
            nvml_wrapper::enums::device::UsedGpuMemory::Unavailable => None,
        })
    }

    /// GPU memory process `pid` holds on the device, as the driver accounts it (None where
    /// NVML cannot see it).
    pub fn process_memory_bytes(&self, pid: u32) -> Option<u64> {
        let d = self.device()?;
        d.running_compute_processes().ok()?.into_iter().find(|p| p.pid == pid).and_then(|p| match p.used_gpu_memory {
            nvml_wrapper::enums::device::UsedGpuMemory::Used(b) => Some(b),
            nvml_wrapper::enums::device::UsedGpuMemory::Unavailable => None,
        })
    }

    pub fn driver_version(&self) -> Option<String> {
        self.nvml.sys_driver_version().ok()
    }
}

pub fn throttle_names(r: ThrottleReasons) -> Vec<String> {
    let table = [
        (ThrottleReasons::SW_POWER_CAP, "sw-power-cap"),
        (ThrottleReasons::HW_SLOWDOWN, "hw-slowdown"),
        (ThrottleReasons::SYNC_BOOST, "sync-boost"),
        (ThrottleReasons::SW_THERMAL_SLOWDOWN, "sw-thermal-slowdown"),
        (ThrottleReasons::HW_THERMAL_SLOWDOWN, "hw-thermal-slowdown"),
        (ThrottleReasons::HW_POWER_BRAKE_SLOWDOWN, "hw-power-brake"),
        (ThrottleReasons::DISPLAY_CLOCK_SETTING, "display-clock-setting"),
    ];
    table.iter().filter(|(flag, _)| r.contains(*flag)).map(|(_, n)| n.to_string()).collect()
}
