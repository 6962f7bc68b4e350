//! A program the sandbox tests run as a command, to try what a command should not be
//! able to do and say what the kernel answered.
//!
//! ```text
//! sandbox_probe io-uring          io_uring_setup(2): prints "io_uring: ok" (exit 0) or
//!                                 "io_uring: errno N" (exit 1)
//! sandbox_probe int80-socket      a 32-bit socket(AF_INET, SOCK_DGRAM) through
//!                                 `int 0x80` (x86-64): "int80 socket: ok" or "…: errno N"
//! sandbox_probe int80-socketcall  the same through the 32-bit socketcall(2)
//! ```
//!
//! A program killed by seccomp prints nothing: its shell reports the signal.

use std::process::ExitCode;

fn report(what: &str, ret: i64) -> ExitCode {
    if ret >= 0 {
        println!("{what}: ok");
        ExitCode::SUCCESS
    } else {
        println!("{what}: errno {}", -ret);
        ExitCode::FAILURE
    }
}

/// io_uring_setup with a ring of 4 entries; the descriptor on success, else -errno.
fn io_uring_setup() -> i64 {
    // struct io_uring_params is 120 bytes; zeroed asks for nothing special.
    let mut params = [0u8; 120];
    // SAFETY: io_uring_setup writes into the params buffer of ours.
    let ret = unsafe { libc::syscall(libc::SYS_io_uring_setup, 4u32, params.as_mut_ptr()) };
    if ret < 0 {
        return -i64::from(std::io::Error::last_os_error().raw_os_error().unwrap_or(0));
    }
    // SAFETY: closing the ring just made.
    unsafe { libc::close(ret as libc::c_int) };
    ret
}

/// A 32-bit system call from this 64-bit process (`int 0x80`): the i386 ABI's number
/// and arguments; its return value (-errno on failure).
#[cfg(target_arch = "x86_64")]
fn int80(nr: u32, a: u32, b: u32, c: u32) -> i64 {
    let ret: i32;
    // SAFETY: `int 0x80` makes the 32-bit system call; rbx (which LLVM reserves) is
    // swapped in and out around it, and the registers the kernel clears are clobbered.
    unsafe {
        std::arch::asm!(
            "xchg {a}, rbx",
            "int 0x80",
            "xchg {a}, rbx",
            a = inout(reg) u64::from(a) => _,
            inlateout("eax") nr as i32 => ret,
            in("ecx") b,
            in("edx") c,
            out("r8") _,
            out("r9") _,
            out("r10") _,
            out("r11") _,
        );
    }
    i64::from(ret)
}

#[cfg(target_arch = "x86_64")]
fn int80_socket() -> i64 {
    // i386: socket is 359.
    int80(359, libc::AF_INET as u32, libc::SOCK_DGRAM as u32, 0)
}

#[cfg(target_arch = "x86_64")]
fn int80_socketcall() -> i64 {
    // i386: socketcall is 102, SYS_SOCKET 1; its arguments are 32-bit words in memory
    // a 32-bit pointer reaches.
    // SAFETY: a fresh anonymous page below 4 GiB (MAP_32BIT).
    let page = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            4096,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_32BIT,
            -1,
            0,
        )
    };
    if page == libc::MAP_FAILED {
        return -i64::from(std::io::Error::last_os_error().raw_os_error().unwrap_or(0));
    }
    let args = page.cast::<u32>();
    // SAFETY: three words inside the page just mapped.
    unsafe {
        *args = libc::AF_INET as u32;
        *args.add(1) = libc::SOCK_DGRAM as u32;
        *args.add(2) = 0;
    }
    int80(102, 1, page as u64 as u32, 0)
}

#[cfg(not(target_arch = "x86_64"))]
fn int80_socket() -> i64 {
    -i64::from(libc::ENOSYS)
}

#[cfg(not(target_arch = "x86_64"))]
fn int80_socketcall() -> i64 {
    -i64::from(libc::ENOSYS)
}

fn main() -> ExitCode {
    match std::env::args().nth(1).as_deref() {
        Some("io-uring") => report("io_uring", io_uring_setup()),
        Some("int80-socket") => report("int80 socket", int80_socket()),
        Some("int80-socketcall") => report("int80 socketcall", int80_socketcall()),
        _ => {
            eprintln!("usage: sandbox_probe io-uring|int80-socket|int80-socketcall");
            ExitCode::from(2)
        }
    }
}
