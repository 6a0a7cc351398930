//! The CPU time this process has used, all threads, for the client's cost per operation; and
//! how busy one thread was, read from any other, for whether the client's lanes were the limit.

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

/// One thread's scheduler clock, readable from any thread of the process: the time it ran on
/// a CPU and the time it was ready to run but waited for one (`/proc/self/task/TID/schedstat`).
#[derive(Clone, Copy, Debug)]
pub struct ThreadClock {
    tid: libc::pid_t,
}

impl ThreadClock {
    /// The clock of the calling thread.
    #[allow(unsafe_code)]
    pub fn current() -> Option<ThreadClock> {
        // SAFETY: gettid takes no arguments and cannot fail.
        let tid = unsafe { libc::syscall(libc::SYS_gettid) } as libc::pid_t;
        let clock = ThreadClock { tid };
        clock.read().map(|_| clock)
    }

    /// Nanoseconds on a CPU and waiting for one, so far (`None` once the thread has exited).
    fn read(self) -> Option<(u64, u64)> {
        let text =
            std::fs::read_to_string(format!("/proc/self/task/{}/schedstat", self.tid)).ok()?;
        let mut fields = text.split_ascii_whitespace().map(str::parse::<u64>);
        Some((fields.next()?.ok()?, fields.next()?.ok()?))
    }

    /// Nanoseconds the thread has run on a CPU and, apart, waited runnable for one, so far
    /// (zeros once it exited).
    pub fn running_and_waiting_ns(self) -> (u64, u64) {
        self.read().unwrap_or((0, 0))
    }

    /// Nanoseconds the thread has run on a CPU or waited, runnable, for one (0 once it exited).
    pub fn busy_ns(self) -> u64 {
        self.read()
            .map_or(0, |(running, waiting)| running + waiting)
    }

    /// Nanoseconds the thread has run on a CPU (0 once it exited).
    pub fn running_ns(self) -> u64 {
        self.read().map_or(0, |(running, _)| running)
    }
}

/// How busy the client's threads were: their CPU time ([`ThreadClock::running_ns`]) over the
/// wall time `elapsed_ns` of as many threads as could run at once (`threads`, at most the
/// cores), as a share in 0–1.
pub fn busy_share(cpu_ns: u64, elapsed_ns: u128, threads: usize) -> Option<f64> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let running = threads.min(cores).max(1) as f64;
    (elapsed_ns > 0).then(|| (cpu_ns as f64 / (elapsed_ns as f64 * running)).min(1.0))
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

    #[test]
    fn a_thread_clock_counts_another_threads_work_and_not_its_sleep() {
        let (tx, rx) = std::sync::mpsc::channel();
        let worker = std::thread::spawn(move || {
            let clock = super::ThreadClock::current().unwrap();
            let spin_until = std::time::Instant::now() + std::time::Duration::from_millis(200);
            let mut x = 0u64;
            while std::time::Instant::now() < spin_until {
                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(1));
            }
            tx.send(clock).unwrap();
            std::thread::sleep(std::time::Duration::from_millis(300));
        });
        let clock = rx.recv().unwrap();
        let busy = clock.busy_ns();
        let (running, waiting) = clock.running_and_waiting_ns();
        assert!(
            running > 0 && running + waiting >= busy,
            "{running} + {waiting}"
        );
        // 200 ms of spinning: running or waiting for a core all along, however loaded the
        // machine (a little slack for the thread's start).
        assert!(busy > 150_000_000, "{busy}");
        std::thread::sleep(std::time::Duration::from_millis(150));
        // Sleeping is not busy: the clock barely moved while the thread slept.
        assert!(
            clock.busy_ns() < busy + 20_000_000,
            "{} vs {busy}",
            clock.busy_ns()
        );
        worker.join().unwrap();
    }

    #[test]
    fn busy_share_is_over_the_threads_that_could_run() {
        assert_eq!(super::busy_share(500, 1_000, 1), Some(0.5));
        assert_eq!(super::busy_share(5_000, 1_000, 1), Some(1.0));
        assert_eq!(super::busy_share(1, 0, 1), None);
    }
}
