/* clockstep: an LD_PRELOAD shim that steps a process's wall clock as an NTP step would.
 *
 * Why not libfaketime: Debian's 0.9.10 with FAKETIME_DONT_FAKE_MONOTONIC=1 (needed: a stepped
 * monotonic clock is no real fault) fails Python's time.sleep with EINVAL, its
 * clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME) wrapper being broken (docs/chaos.md).
 *
 * What it does: CLOCK_REALTIME (and its _COARSE variant), gettimeofday() and time() return the
 * real wall clock plus an offset in seconds read from the file named by CLOCKSTEP_FILE (one
 * signed integer, "+300" or "-180"; missing or unreadable: 0). Every other clock, monotonic
 * and boottime first, and every sleep are untouched. The file is read again at most every
 * 100 ms of the real monotonic clock, so a step is seen within that by every thread (the JVM
 * calls clock_gettime far too often to read a file each time). Built by the chaos run with the
 * system cc: chaos/clockstep.py.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

typedef int (*clock_gettime_fn)(clockid_t, struct timespec *);

static clock_gettime_fn real_clock_gettime;
static const char *offset_file;
static _Atomic long long offset_s;
static _Atomic long long next_read_ns;  /* real CLOCK_MONOTONIC_COARSE ns of the next file read */

static int raw_clock_gettime(clockid_t id, struct timespec *ts) {
    if (real_clock_gettime)
        return real_clock_gettime(id, ts);
    return (int)syscall(SYS_clock_gettime, id, ts);
}

__attribute__((constructor)) static void clockstep_init(void) {
    real_clock_gettime = (clock_gettime_fn)dlsym(RTLD_NEXT, "clock_gettime");
    offset_file = getenv("CLOCKSTEP_FILE");
}

static long long parse_offset(const char *s, ssize_t n) {
    long long v = 0;
    int neg = 0, i = 0;
    while (i < n && (s[i] == ' ' || s[i] == '\t')) i++;
    if (i < n && (s[i] == '+' || s[i] == '-')) neg = s[i++] == '-';
    for (; i < n && s[i] >= '0' && s[i] <= '9'; i++) v = v * 10 + (s[i] - '0');
    return neg ? -v : v;
}

static long long current_offset(void) {
    struct timespec now;
    /* the coarse clock (the kernel's last tick, no TSC read) keeps a wall-clock read cheap */
    if (!offset_file || raw_clock_gettime(CLOCK_MONOTONIC_COARSE, &now) != 0)
        return atomic_load(&offset_s);
    long long now_ns = (long long)now.tv_sec * 1000000000LL + now.tv_nsec;
    long long due = atomic_load(&next_read_ns);
    /* one thread reads the file per period; the others keep the offset they have */
    if (now_ns >= due && atomic_compare_exchange_strong(&next_read_ns, &due, now_ns + 100000000LL)) {
        char buf[32];
        long long v = 0;
        int fd = (int)syscall(SYS_openat, AT_FDCWD, offset_file, O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
            ssize_t n = (ssize_t)syscall(SYS_read, fd, buf, sizeof buf);
            syscall(SYS_close, fd);
            if (n > 0) v = parse_offset(buf, n);
        }
        atomic_store(&offset_s, v);
    }
    return atomic_load(&offset_s);
}

int clock_gettime(clockid_t id, struct timespec *ts) {
    int rc = raw_clock_gettime(id, ts);
    if (rc == 0 && (id == CLOCK_REALTIME || id == CLOCK_REALTIME_COARSE))
        ts->tv_sec += current_offset();
    return rc;
}

int gettimeofday(struct timeval *restrict tv, void *restrict tz) {
    struct timespec ts;
    int rc = raw_clock_gettime(CLOCK_REALTIME, &ts);
    if (rc != 0) return rc;
    if (tz) {
        struct timezone *z = tz;
        z->tz_minuteswest = 0;
        z->tz_dsttime = 0;
    }
    if (tv) {
        tv->tv_sec = ts.tv_sec + current_offset();
        tv->tv_usec = ts.tv_nsec / 1000;
    }
    return 0;
}

time_t time(time_t *t) {
    struct timespec ts;
    if (raw_clock_gettime(CLOCK_REALTIME, &ts) != 0) return (time_t)-1;
    time_t v = ts.tv_sec + current_offset();
    if (t) *t = v;
    return v;
}
