/* clock_shim: an LD_PRELOAD shared object that puts the wall clock of the process it is loaded
 * into SLOTPARTNER_CLOCK_SHIFT_MS milliseconds off (negative: behind), as an NTP step or a
 * virtual machine resumed with a stale clock would, and leaves every other clock alone.
 *
 * It overrides clock_gettime for CLOCK_REALTIME and CLOCK_REALTIME_COARSE (what Rust's
 * SystemTime::now and most C code read), gettimeofday and time; CLOCK_MONOTONIC, CLOCK_BOOTTIME
 * and the rest are read unchanged. Every override reads the kernel through syscall(2), so it
 * never calls itself. It only works on a program that reaches these functions through the
 * dynamic linker: link the shared libslotpartner, not the static one.
 *
 * Build: cc -shared -fPIC clock_shim.c -o clock_shim.so
 * Use:   SLOTPARTNER_CLOCK_SHIFT_MS=45000 LD_PRELOAD=./clock_shim.so program ... */
#define _GNU_SOURCE /* syscall */
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

/* The shift in milliseconds (0 when unset or not a number). */
static long long shift_ms(void) {
    const char *text = getenv("SLOTPARTNER_CLOCK_SHIFT_MS");
    return text == NULL ? 0 : strtoll(text, NULL, 10);
}

static void shift(struct timespec *ts) {
    long long ms = shift_ms();
    ts->tv_sec += (time_t)(ms / 1000);
    ts->tv_nsec += (long)(ms % 1000) * 1000000L;
    if (ts->tv_nsec < 0) {
        ts->tv_nsec += 1000000000L;
        ts->tv_sec -= 1;
    } else if (ts->tv_nsec >= 1000000000L) {
        ts->tv_nsec -= 1000000000L;
        ts->tv_sec += 1;
    }
}

int clock_gettime(clockid_t clock, struct timespec *ts) {
    int rc = (int)syscall(SYS_clock_gettime, clock, ts);
    if (rc == 0 && (clock == CLOCK_REALTIME || clock == CLOCK_REALTIME_COARSE)) {
        shift(ts);
    }
    return rc;
}

int gettimeofday(struct timeval *restrict tv, void *restrict tz) {
    struct timespec ts;
    (void)tz; /* obsolete: callers get no time zone */
    if (clock_gettime(CLOCK_REALTIME, &ts) != 0) {
        return -1;
    }
    tv->tv_sec = ts.tv_sec; /* declared nonnull */
    tv->tv_usec = (suseconds_t)(ts.tv_nsec / 1000);
    return 0;
}

time_t time(time_t *out) {
    struct timespec ts;
    if (clock_gettime(CLOCK_REALTIME, &ts) != 0) {
        return (time_t)-1;
    }
    if (out != NULL) {
        *out = ts.tv_sec;
    }
    return ts.tv_sec;
}
