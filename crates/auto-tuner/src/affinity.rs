//! Pinning the calling thread: the pool pins its workers 1.., and worker 0 is whoever calls,
//! so a configuration "pinned to the performance cores" must pin the caller too.

use crate::error::TunerError;

/// Restores the calling thread's CPU affinity when dropped.
#[derive(Debug)]
pub(crate) struct CallerPin {
    #[cfg(target_os = "linux")]
    previous: Option<nix::sched::CpuSet>,
}

/// Pins the calling thread to `cpu` until the returned guard is dropped. Where pinning is
/// unsupported or fails, the thread stays where it was (the pin is a placement hint).
pub(crate) fn pin_caller(cpu: usize) -> CallerPin {
    #[cfg(target_os = "linux")]
    {
        use nix::sched::{CpuSet, sched_getaffinity, sched_setaffinity};
        use nix::unistd::Pid;
        let previous = sched_getaffinity(Pid::from_raw(0)).ok();
        let mut set = CpuSet::new();
        if previous.is_some() && set.set(cpu).is_ok() {
            let _ = sched_setaffinity(Pid::from_raw(0), &set);
        }
        CallerPin { previous }
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = cpu;
        CallerPin {}
    }
}

impl Drop for CallerPin {
    fn drop(&mut self) {
        #[cfg(target_os = "linux")]
        if let Some(previous) = &self.previous {
            let _ = nix::sched::sched_setaffinity(nix::unistd::Pid::from_raw(0), previous);
        }
    }
}

/// Pins the calling thread to `cpu` for good (the runtime's worker 0).
pub(crate) fn pin_caller_permanently(cpu: usize) -> Result<(), TunerError> {
    #[cfg(target_os = "linux")]
    {
        use nix::sched::{CpuSet, sched_setaffinity};
        let mut set = CpuSet::new();
        set.set(cpu)
            .and_then(|()| sched_setaffinity(nix::unistd::Pid::from_raw(0), &set))
            .map_err(|e| {
                TunerError::Pool(format!("cannot pin the calling thread to CPU {cpu}: {e}"))
            })
    }
    #[cfg(not(target_os = "linux"))]
    {
        Err(TunerError::Pool(format!(
            "cannot pin the calling thread to CPU {cpu}: unsupported on this system"
        )))
    }
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;
    use nix::sched::sched_getaffinity;
    use nix::unistd::Pid;

    #[test]
    fn the_pin_holds_while_the_guard_lives_and_is_undone_after() {
        let before = sched_getaffinity(Pid::from_raw(0)).unwrap();
        let Some(cpu) =
            (0..nix::sched::CpuSet::count()).find(|&c| before.is_set(c).unwrap_or(false))
        else {
            return;
        };
        {
            let _pin = pin_caller(cpu);
            let now = sched_getaffinity(Pid::from_raw(0)).unwrap();
            let pinned: Vec<usize> = (0..nix::sched::CpuSet::count())
                .filter(|&c| now.is_set(c).unwrap_or(false))
                .collect();
            assert_eq!(pinned, [cpu]);
        }
        assert_eq!(sched_getaffinity(Pid::from_raw(0)).unwrap(), before);
    }
}
