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
 *
 * Deadlines on the wall clock: a process computes them from the wall clock it sees and hands
 * them to the kernel, whose CLOCK_REALTIME is not stepped. Passed on as they are, every wait
 * after a step would be off by the offset for good (librdkafka's queue waits, C11 cnd_timedwait
 * on TIME_UTC: a 5 s list_topics did not return within 40 s at +480 s, finding 18), which no
 * real step does: after an NTP step the kernel agrees with what the process reads. So each wait
 * on an absolute CLOCK_REALTIME deadline gets it back on the kernel's clock (minus the offset):
 * cnd_timedwait, mtx_timedlock, pthread_cond_timedwait on a realtime condvar, the *_clockwait
 * calls given CLOCK_REALTIME, sem_timedwait, pthread_mutex_timedlock, clock_nanosleep with
 * TIMER_ABSTIME. A wait that spans the step keeps the deadline it was given (a real backward
 * step would stretch it by the step): milder than real, said in docs/chaos.md.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <threads.h>
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

/* --- absolute CLOCK_REALTIME deadlines back on the kernel's clock (see the top) --- */

static struct timespec kernel_deadline(const struct timespec *ts) {
    struct timespec r = *ts;
    r.tv_sec -= current_offset();
    return r;
}

#define REAL(name) \
    static __typeof__(&name) real_##name; \
    if (!real_##name) real_##name = (__typeof__(&name))dlsym(RTLD_NEXT, #name)

int cnd_timedwait(cnd_t *restrict c, mtx_t *restrict m, const struct timespec *restrict ts) {
    REAL(cnd_timedwait);  /* C11: always TIME_UTC, i.e. CLOCK_REALTIME */
    struct timespec k = kernel_deadline(ts);
    return real_cnd_timedwait(c, m, &k);
}

int mtx_timedlock(mtx_t *restrict m, const struct timespec *restrict ts) {
    REAL(mtx_timedlock);
    struct timespec k = kernel_deadline(ts);
    return real_mtx_timedlock(m, &k);
}

int pthread_cond_timedwait(pthread_cond_t *restrict c, pthread_mutex_t *restrict m,
                           const struct timespec *restrict ts) {
    REAL(pthread_cond_timedwait);
    /* glibc keeps the condvar's clock in bit 1 of __wrefs (1: CLOCK_MONOTONIC, the JVM's) */
    if (c->__data.__wrefs & 2) return real_pthread_cond_timedwait(c, m, ts);
    struct timespec k = kernel_deadline(ts);
    return real_pthread_cond_timedwait(c, m, &k);
}

int pthread_cond_clockwait(pthread_cond_t *restrict c, pthread_mutex_t *restrict m,
                           clockid_t id, const struct timespec *restrict ts) {
    REAL(pthread_cond_clockwait);
    if (id != CLOCK_REALTIME) return real_pthread_cond_clockwait(c, m, id, ts);
    struct timespec k = kernel_deadline(ts);
    return real_pthread_cond_clockwait(c, m, id, &k);
}

int pthread_mutex_timedlock(pthread_mutex_t *restrict m, const struct timespec *restrict ts) {
    REAL(pthread_mutex_timedlock);
    struct timespec k = kernel_deadline(ts);
    return real_pthread_mutex_timedlock(m, &k);
}

int sem_timedwait(sem_t *restrict s, const struct timespec *restrict ts) {
    REAL(sem_timedwait);
    struct timespec k = kernel_deadline(ts);
    return real_sem_timedwait(s, &k);
}

int sem_clockwait(sem_t *restrict s, clockid_t id, const struct timespec *restrict ts) {
    REAL(sem_clockwait);
    if (id != CLOCK_REALTIME) return real_sem_clockwait(s, id, ts);
    struct timespec k = kernel_deadline(ts);
    return real_sem_clockwait(s, id, &k);
}

int clock_nanosleep(clockid_t id, int flags, const struct timespec *req, struct timespec *rem) {
    REAL(clock_nanosleep);
    if (id != CLOCK_REALTIME || !(flags & TIMER_ABSTIME)) return real_clock_nanosleep(id, flags, req, rem);
    struct timespec k = kernel_deadline(req);
    return real_clock_nanosleep(id, flags, &k, rem);
}
