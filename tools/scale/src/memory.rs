//! The process's resident memory, for the report's "peak memory" and the load measurement.

/// Resident set size now, from `/proc/self/status` (0 where there is no procfs).
pub fn resident_bytes() -> u64 {
    status_kib("VmRSS:") * 1024
}

/// The peak resident set size so far.
pub fn peak_resident_bytes() -> u64 {
    status_kib("VmHWM:") * 1024
}

fn status_kib(field: &str) -> u64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|line| line.strip_prefix(field))
                .and_then(|rest| rest.split_whitespace().next())
                .and_then(|kib| kib.parse().ok())
        })
        .unwrap_or(0)
}
