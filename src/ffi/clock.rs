//! The clock a SQLite journal's leases go by (`journal/sqlite.rs`): `CLOCK_BOOTTIME`, read here
//! because reading it takes `unsafe`. It counts from the host's boot, goes on through a suspend
//! (a claim's worker that slept through its lease lost it), and no step of the wall clock (NTP,
//! `date -s`, a virtual machine resumed with its clock put right) moves it. It starts again at
//! each boot, which is why the journal keeps the boot's identity beside every lease.
//!
//! No C function: nothing here is exported.

/// `CLOCK_BOOTTIME` on Linux; elsewhere `CLOCK_MONOTONIC`, which is what counts through a
/// suspend there (macOS).
#[cfg(any(target_os = "linux", target_os = "android"))]
const LEASE_CLOCK: libc::clockid_t = libc::CLOCK_BOOTTIME;
#[cfg(not(any(target_os = "linux", target_os = "android")))]
const LEASE_CLOCK: libc::clockid_t = libc::CLOCK_MONOTONIC;

/// Milliseconds since this host booted, on `CLOCK_BOOTTIME`: monotonic, counting a suspend, never
/// moved by a step of the wall clock. `None` when the kernel refuses the clock (Linux has had it
/// since 2.6.39).
pub fn boot_time_ms() -> Option<i64> {
    let mut now = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `now` is a valid, writable `timespec` for the length of the call, which writes
    // nothing else.
    if unsafe { libc::clock_gettime(LEASE_CLOCK, &mut now) } != 0 {
        return None;
    }
    let since_boot = std::time::Duration::new(u64::try_from(now.tv_sec).ok()?, u32::try_from(now.tv_nsec).ok()?);
    i64::try_from(since_boot.as_millis()).ok()
}

#[cfg(test)]
mod tests {
    use super::boot_time_ms;

    #[test]
    fn goes_on_and_never_back() {
        let first = boot_time_ms().expect("the boot clock");
        std::thread::sleep(std::time::Duration::from_millis(20));
        let second = boot_time_ms().expect("the boot clock");
        assert!(first > 0 && second >= first + 20 && second - first < 5_000, "{first} then {second}");
    }

    /// It counts since the boot, not since 1970.
    #[cfg(target_os = "linux")]
    #[test]
    fn counts_since_the_boot() {
        let uptime: f64 = std::fs::read_to_string("/proc/uptime").unwrap().split(' ').next().unwrap().parse().unwrap();
        let ms = boot_time_ms().unwrap() as f64;
        // `/proc/uptime` leaves out time suspended, the boot clock counts it.
        assert!(ms >= uptime * 1000.0 - 1000.0 && ms < 4.0e12, "{ms} ms since boot, uptime {uptime} s");
    }
}
