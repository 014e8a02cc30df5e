/* kill_at_fsync.so: an LD_PRELOAD shim whose fsync(2) of a file whose path holds the text of
 * KILL_AT_FSYNC_OF kills the process, as a worker killed in the middle of a credit (the amount
 * written, not yet durable, nothing linked into place). Every other fsync (the journal's own)
 * is the real one. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

int fsync(int fd) {
    const char *marker = getenv("KILL_AT_FSYNC_OF");
    char link[64], path[4096];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t len = readlink(link, path, sizeof path - 1);
    if (marker != NULL && len > 0) {
        path[len] = '\0';
        if (strstr(path, marker) != NULL) raise(SIGKILL);
    }
    return (int)syscall(SYS_fsync, fd);
}
