//! [`Job`]: what the options ask on one machine, derived once where the work starts and
//! passed on (the hardware id, the request, the kernel or the llama.cpp measured, the cache
//! slot).

use crate::TunerError;
use crate::cache::Slot;
use crate::options::AutoTunerOptions;
use crate::profile::TuningRequest;
use crate::runtime_key::{LlamaCppKey, slot_tag};
use crate::validate::Measured;
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
    /// The llama.cpp build and model measured instead of our kernels, if any.
    pub(crate) runtime: Option<LlamaCppKey>,
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
            runtime: None,
        }
    }

    /// What a profile must have been measured with to serve this job.
    pub(crate) fn measured(&self) -> Measured<'_> {
        match &self.runtime {
            Some(key) => Measured::LlamaCpp {
                commit: Some(&key.build.commit),
                model: &key.model,
            },
            None => Measured::Kernel(self.kernel),
        }
    }

    /// The job of `opt` on `hw`, with the llama.cpp it measures identified (its build asked
    /// of the binary, the model's header read) when `opt.runtime` names one.
    pub(crate) fn resolve(hw: &HardwareInfo, opt: &AutoTunerOptions) -> Result<Job, TunerError> {
        let mut job = Job::new(hw, opt);
        if let Some(runtime) = &opt.runtime {
            let key = LlamaCppKey::of(runtime)?;
            job.slot = job.slot.with_runtime(Some(slot_tag(&key.model)));
            job.runtime = Some(key);
        }
        Ok(job)
    }
}
