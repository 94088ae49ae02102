//! [`Job`]: what the options ask on one machine, derived once where the work starts and
//! passed on (the hardware id, the request, the kernel, the cache slot).

use crate::cache::Slot;
use crate::options::AutoTunerOptions;
use crate::profile::TuningRequest;
use device_profile::HardwareInfo;
use matmul_kernel::Kernel;

/// The values every step of a resolution needs, computed once from the options and the
/// machine.
#[derive(Debug, Clone)]
pub(crate) struct Job {
    /// The machine's `hardware_id`.
    pub(crate) hardware_id: String,
    /// What a tune with these options asks for on this machine.
    pub(crate) request: TuningRequest,
    /// The kernel measured and recorded.
    pub(crate) kernel: Kernel,
    /// The profile file of the request in a store.
    pub(crate) slot: Slot,
}

impl Job {
    /// The job of `opt` on `hw`.
    pub(crate) fn new(hw: &HardwareInfo, opt: &AutoTunerOptions) -> Job {
        let request = opt.request(hw);
        let kernel = opt.kernel();
        let slot = Slot::for_request(&request, kernel, hw);
        Job {
            hardware_id: hw.hardware_id(),
            request,
            kernel,
            slot,
        }
    }
}
