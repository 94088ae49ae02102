//! The crate's one error type, returned by the parse helpers of `parse.rs`.

/// A value read from the OS that could not be understood.
///
/// Detection itself never fails: [`crate::get_hardware_info`] leaves a field unknown where
/// its source is missing or malformed. The parse helpers return this error so that callers
/// and tests can tell "missing" from "garbage".
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A CPU list such as `0-3,8-11` was malformed or named an impossible CPU id.
    #[error("invalid cpu list {0:?}")]
    CpuList(String),
    /// A size such as `32K` or `24576 KB` was malformed or too large.
    #[error("invalid size {0:?}")]
    Size(String),
    /// A cgroup CPU limit (`cpu.max`, `cpu.cfs_quota_us`, `cpu.cfs_period_us`) was malformed.
    #[error("invalid cgroup cpu limit {0:?}")]
    CgroupLimit(String),
    /// A `/proc/meminfo` text had no readable `MemTotal` line.
    #[error("no readable MemTotal in meminfo")]
    MemTotal,
    /// A `/proc/meminfo` text had no readable `MemAvailable` line.
    #[error("no readable MemAvailable in meminfo")]
    MemAvailable,
    /// A `/proc/<pid>/status` text had no readable `VmSize` line.
    #[error("no readable VmSize in the process status")]
    VmSize,
}
