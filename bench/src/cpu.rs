//! CPU time beside wall time: on a loaded machine it shows what waiting hides.

use std::time::Instant;

/// CPU seconds (user + system) this process has used, all its threads.
pub fn process_secs() -> f64 {
    rusage_secs(libc::RUSAGE_SELF)
}

/// CPU seconds (user + system) of this process's children waited for so far.
pub fn children_secs() -> f64 {
    rusage_secs(libc::RUSAGE_CHILDREN)
}

/// CPU seconds the calling thread has used.
pub fn thread_secs() -> f64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a valid timespec to write into.
    unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut t) };
    t.tv_sec as f64 + t.tv_nsec as f64 / 1e9
}

/// The CPU the calling thread runs on now, when the system says.
pub fn current_cpu() -> Option<usize> {
    // SAFETY: sched_getcpu takes nothing and only reads.
    usize::try_from(unsafe { libc::sched_getcpu() }).ok()
}

/// Keeps the calling thread on `cpu` (threads it starts later inherit it).
pub fn pin_this_thread(cpu: usize) -> anyhow::Result<()> {
    // SAFETY: an all-zero `cpu_set_t` is the empty set.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    anyhow::ensure!(
        cpu < libc::CPU_SETSIZE as usize,
        "CPU {cpu} is past the {} a CPU set holds",
        libc::CPU_SETSIZE
    );
    // SAFETY: `cpu` is within the set's size, checked above.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: pid 0 is the calling thread; the set is valid and its size is given.
    let r = unsafe { libc::sched_setaffinity(0, std::mem::size_of_val(&set), &set) };
    anyhow::ensure!(
        r == 0,
        "cannot keep the calling thread on CPU {cpu}: {} (--pin-caller takes a CPU of this machine)",
        std::io::Error::last_os_error()
    );
    Ok(())
}

/// Interrupts each CPU has taken since boot, all kinds together (Linux's
/// `/proc/interrupts`), or `None` where it cannot be read.
pub fn interrupts_by_cpu() -> Option<Vec<u64>> {
    interrupts_of(&std::fs::read_to_string("/proc/interrupts").ok()?)
}

/// [`interrupts_by_cpu`] of the text of `/proc/interrupts`: a header naming the CPUs,
/// then a line per source with a count per CPU after its name (a line with fewer
/// counts, such as `ERR:`, is a total and is left out).
fn interrupts_of(text: &str) -> Option<Vec<u64>> {
    let mut lines = text.lines();
    let cpus = lines.next()?.split_whitespace().count();
    let mut sums = vec![0u64; cpus];
    for line in lines {
        let counts: Vec<u64> = line
            .split_whitespace()
            .skip(1)
            .take(cpus)
            .map_while(|w| w.parse().ok())
            .collect();
        if counts.len() == cpus {
            for (sum, c) in sums.iter_mut().zip(counts) {
                *sum += c;
            }
        }
    }
    (cpus > 0).then_some(sums)
}

fn rusage_secs(who: libc::c_int) -> f64 {
    // SAFETY: an all-zero `rusage` is a valid value of this plain C struct.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage only writes the struct it is given.
    let r = unsafe { libc::getrusage(who, &mut u) };
    assert_eq!(r, 0, "getrusage failed");
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(u.ru_utime) + tv(u.ru_stime)
}

/// Rounds of [`spin`] that take a core about half a second on this machine.
const CEILING_SPIN_ROUNDS: u64 = 600_000_000;

/// A fixed amount of integer work, the same every call, that the compiler cannot skip.
fn spin(rounds: u64) -> u64 {
    let mut x = std::hint::black_box(1u64);
    for i in 0..rounds {
        x = x.wrapping_mul(6364136223846793005).wrapping_add(i);
    }
    std::hint::black_box(x)
}

/// What two cores give this machine over one for pure CPU work: the same work done by
/// one thread, then by two at once, as 2 × the first time ÷ the second. The ceiling of
/// any 2 ÷ 1 speed-up measured beside it (2.0 on two whole cores; less where the two
/// are hyperthreads of one core, or the host shares them).
pub fn two_core_ceiling() -> f64 {
    let t = Instant::now();
    spin(CEILING_SPIN_ROUNDS);
    let one = t.elapsed().as_secs_f64();
    let t = Instant::now();
    std::thread::scope(|s| {
        let a = s.spawn(|| spin(CEILING_SPIN_ROUNDS));
        spin(CEILING_SPIN_ROUNDS);
        let _ = a.join();
    });
    2.0 * one / t.elapsed().as_secs_f64()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn interrupts_are_summed_per_cpu_leaving_totals_out() {
        let text = "           CPU0       CPU1
  1:          9          0   IO-APIC   1-edge      i8042
 36:          0       1842   PCI-MSI 49153-edge      virtio1-req.0
LOC:        258        463   Local timer interrupts
ERR:          7
MIS:          0
";
        assert_eq!(interrupts_of(text), Some(vec![267, 2305]));
        assert_eq!(interrupts_of(""), None);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn a_pinned_thread_stays_on_its_cpu_and_a_cpu_past_the_set_is_refused() {
        std::thread::spawn(|| {
            let cpu = current_cpu().unwrap();
            pin_this_thread(cpu).unwrap();
            for _ in 0..100 {
                std::thread::yield_now();
                assert_eq!(current_cpu(), Some(cpu));
            }
            let e = pin_this_thread(libc::CPU_SETSIZE as usize).unwrap_err();
            assert!(e.to_string().contains("past the"), "{e}");
        })
        .join()
        .unwrap();
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn this_thread_runs_on_a_cpu_that_takes_interrupts() {
        let cpu = current_cpu().expect("sched_getcpu works on Linux");
        let counts = interrupts_by_cpu().expect("/proc/interrupts reads on Linux");
        assert!(cpu < counts.len(), "CPU {cpu} of {}", counts.len());
        assert!(counts.iter().sum::<u64>() > 0, "{counts:?}");
    }
}
