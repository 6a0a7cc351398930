//! The CPU time this process has used, all threads, for the client's cost per operation.

/// User + system CPU time of the whole process, in nanoseconds.
#[allow(unsafe_code)]
pub fn process_cpu_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime only writes into the timespec we own; CLOCK_PROCESS_CPUTIME_ID is
    // supported on every Linux kernel fairbench runs on. On failure the struct stays zero.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_PROCESS_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return 0;
    }
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

#[cfg(test)]
mod tests {
    #[test]
    fn cpu_time_advances_with_work() {
        let before = super::process_cpu_ns();
        let mut x = 0u64;
        for i in 0..5_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        assert!(super::process_cpu_ns() > before);
    }
}
