//! [`Job`]: what the options' [`Question`] asks on one machine, derived once where the work
//! starts and passed on (the hardware id, the request, the kernel or the llama.cpp measured,
//! the cache slot, the budget).

use crate::cache::Slot;
use crate::error::TunerError;
use crate::options::Question;
use crate::profile::TuningRequest;
use crate::runtime_key::{LlamaCpp, LlamaCppKey, slot_tag};
use crate::validate::Measured;
use device_profile::HardwareInfo;
use matmul_kernel::Kernel;
use std::time::{Duration, Instant};

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
    /// The llama.cpp measured instead of our kernels, if any.
    pub(crate) runtime: Option<LlamaCppJob>,
    /// How long the search may take, if bounded.
    pub(crate) budget: Option<Duration>,
    /// When the work began: the budget counts from here, so a wait for another tuner's lock
    /// (and a llama.cpp's identification) is part of it.
    pub(crate) started: Instant,
}

/// The llama.cpp a job measures: the binary and model asked for, and their identity.
#[derive(Debug, Clone)]
pub(crate) struct LlamaCppJob {
    /// The `llama-bench` and the model file.
    pub(crate) runtime: LlamaCpp,
    /// The build and the model's identity, which key its profiles.
    pub(crate) key: LlamaCppKey,
}

impl Job {
    /// The job of `question` on `hw`.
    pub(crate) fn new(hw: &HardwareInfo, question: &Question) -> Job {
        let request = question.request(hw);
        let kernel = question.kernel();
        let slot = Slot::for_request(&request, kernel, hw);
        Job {
            hardware_id: hw.hardware_id(),
            request,
            kernel,
            slot,
            runtime: None,
            budget: question.budget,
            started: Instant::now(),
        }
    }

    /// What a profile must have been measured with to serve this job.
    pub(crate) fn measured(&self) -> Measured<'_> {
        match self.runtime.as_ref().map(|r| &r.key) {
            Some(key) => Measured::LlamaCpp {
                commit: Some(&key.build.commit),
                model: &key.model,
            },
            None => Measured::Kernel(self.kernel),
        }
    }

    /// The job of `question` on `hw`, with the llama.cpp it measures identified (its build
    /// asked of the binary, the model's header read) when `question.runtime` names one.
    pub(crate) fn resolve(hw: &HardwareInfo, question: &Question) -> Result<Job, TunerError> {
        let mut job = Job::new(hw, question);
        if let Some(runtime) = &question.runtime {
            let key = LlamaCppKey::of(runtime)?;
            job.slot = job.slot.with_runtime(Some(slot_tag(&key.model)));
            job.runtime = Some(LlamaCppJob {
                runtime: runtime.clone(),
                key,
            });
        }
        Ok(job)
    }
}
