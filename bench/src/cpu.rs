//! CPU time beside wall time: on a loaded machine it shows what waiting hides.

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

fn rusage_secs(who: libc::c_int) -> f64 {
    // SAFETY: an all-zero `rusage` is a valid value of this plain C struct.
    let mut u: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: getrusage only writes the struct it is given.
    let r = unsafe { libc::getrusage(who, &mut u) };
    assert_eq!(r, 0, "getrusage failed");
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(u.ru_utime) + tv(u.ru_stime)
}
