/*
 * Native fetch path: a librdkafka consumer that reads a partition's range straight into
 * Arrow column buffers, with no Python object per record. Each assigned partition has a queue
 * of its own, so the partitions of a task's next ranges can be fetched while it reads one.
 *
 * Why: inside Spark's Python worker, 60-66% of a task's samples at 100 B records were in
 * confluent-kafka's consume(), which makes a Message object and two bytes objects per record
 * (py-spy, bench/steady_state.py, 2026-11-26). Here a record costs a few memcpy calls.
 *
 * librdkafka is the one confluent-kafka ships (its wheel's confluent_kafka.libs/), loaded with
 * dlopen by the path Python gives to load(): one librdkafka per process, no headers or link
 * step needed at build time. The few declarations below are librdkafka's stable public ABI
 * (rdkafka.h, unchanged since 0.9/0.11).
 *
 * The consumer is our own rd_kafka_t (not confluent-kafka's): confluent-kafka's error callback
 * expects its own per-thread call state, which a foreign poll loop does not set up. Without an
 * error callback librdkafka hands errors to the poll as error messages; they end a poll() and
 * go to Python (spark_groupsource/executor/native.py), which applies the same policies as the
 * pure-Python path.
 *
 * Partitions are read with librdkafka's partition consumer (rd_kafka_consume_start_queue), not
 * assign(): a handle without group.id has no consumer-group handler, and that handler is what
 * a fetcher never needs and what hurts in an outage: while no broker is up it asks for a
 * coordinator every 50 ms, and each ask cancels the broker's reconnect backoff. Measured on
 * Kafka 4.0.1 (2026-11-28, one node stopped under an idle consumer, 10 s, debug=broker):
 * with a group.id 205-222 connection attempts (rebootstrap on, and off in 2 of 5 runs), without
 * one 36-42 with rebootstrap, 3 without; the Java consumer about 20.
 *
 * One Fetcher is used by one task thread at a time (the pool hands it out); poll() releases
 * the GIL while it waits and copies.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <dlfcn.h>
#include <stdint.h>
#include <string.h>

/* ---- librdkafka's public ABI (rdkafka.h) --------------------------------------------------- */
typedef struct rd_kafka_s rd_kafka_t;
typedef struct rd_kafka_conf_s rd_kafka_conf_t;
typedef struct rd_kafka_topic_s rd_kafka_topic_t;
typedef struct rd_kafka_queue_s rd_kafka_queue_t;
typedef struct rd_kafka_headers_s rd_kafka_headers_t;
typedef int rd_kafka_resp_err_t;

typedef struct rd_kafka_message_s {
    rd_kafka_resp_err_t err;
    rd_kafka_topic_t *rkt;
    int32_t partition;
    void *payload;
    size_t len;
    void *key;
    size_t key_len;
    int64_t offset;
    void *_private;
} rd_kafka_message_t;

#define RD_KAFKA_CONSUMER 1
#define RD_KAFKA_CONF_OK 0
#define RD_KAFKA_RESP_ERR__FATAL (-150)

static struct {
    int loaded;
    int (*version)(void);
    rd_kafka_conf_t *(*conf_new)(void);
    int (*conf_set)(rd_kafka_conf_t *, const char *, const char *, char *, size_t);
    void (*conf_destroy)(rd_kafka_conf_t *);
    rd_kafka_t *(*new_)(int, rd_kafka_conf_t *, char *, size_t);
    void (*destroy)(rd_kafka_t *);
    rd_kafka_queue_t *(*queue_get_main)(rd_kafka_t *);
    rd_kafka_queue_t *(*queue_new)(rd_kafka_t *);
    void (*queue_destroy)(rd_kafka_queue_t *);
    rd_kafka_topic_t *(*topic_new)(rd_kafka_t *, const char *, void *);
    void (*topic_destroy)(rd_kafka_topic_t *);
    int (*consume_start_queue)(rd_kafka_topic_t *, int32_t, int64_t, rd_kafka_queue_t *);
    int (*consume_stop)(rd_kafka_topic_t *, int32_t);
    rd_kafka_resp_err_t (*last_error)(void);
    ssize_t (*consume_batch_queue)(rd_kafka_queue_t *, int, rd_kafka_message_t **, size_t);
    void (*message_destroy)(rd_kafka_message_t *);
    int64_t (*message_timestamp)(const rd_kafka_message_t *, int *);
    rd_kafka_resp_err_t (*message_headers)(const rd_kafka_message_t *, rd_kafka_headers_t **);
    rd_kafka_resp_err_t (*header_get_all)(const rd_kafka_headers_t *, size_t, const char **,
                                          const void **, size_t *);
    const char *(*topic_name)(const rd_kafka_topic_t *);
    rd_kafka_resp_err_t (*query_watermark_offsets)(rd_kafka_t *, const char *, int32_t, int64_t *,
                                                   int64_t *, int);
    const char *(*err2name)(rd_kafka_resp_err_t);
    const char *(*err2str)(rd_kafka_resp_err_t);
    rd_kafka_resp_err_t (*fatal_error)(rd_kafka_t *, char *, size_t);
} rk;

static PyObject *load(PyObject *self, PyObject *args) {
    const char *path;
    if (!PyArg_ParseTuple(args, "s", &path))
        return NULL;
    if (rk.loaded)
        return PyLong_FromLong(rk.version());
    void *lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
        PyErr_Format(PyExc_ImportError, "cannot load librdkafka from %s: %s", path, dlerror());
        return NULL;
    }
#define SYM(field, name)                                                                      \
    do {                                                                                      \
        *(void **)(&rk.field) = dlsym(lib, name);                                             \
        if (!rk.field) {                                                                      \
            PyErr_Format(PyExc_ImportError, "librdkafka at %s lacks %s", path, name);        \
            return NULL;                                                                      \
        }                                                                                     \
    } while (0)
    SYM(version, "rd_kafka_version");
    SYM(conf_new, "rd_kafka_conf_new");
    SYM(conf_set, "rd_kafka_conf_set");
    SYM(conf_destroy, "rd_kafka_conf_destroy");
    SYM(new_, "rd_kafka_new");
    SYM(destroy, "rd_kafka_destroy");
    SYM(queue_get_main, "rd_kafka_queue_get_main");
    SYM(queue_new, "rd_kafka_queue_new");
    SYM(queue_destroy, "rd_kafka_queue_destroy");
    SYM(topic_new, "rd_kafka_topic_new");
    SYM(topic_destroy, "rd_kafka_topic_destroy");
    SYM(consume_start_queue, "rd_kafka_consume_start_queue");
    SYM(consume_stop, "rd_kafka_consume_stop");
    SYM(last_error, "rd_kafka_last_error");
    SYM(consume_batch_queue, "rd_kafka_consume_batch_queue");
    SYM(message_destroy, "rd_kafka_message_destroy");
    SYM(message_timestamp, "rd_kafka_message_timestamp");
    SYM(message_headers, "rd_kafka_message_headers");
    SYM(header_get_all, "rd_kafka_header_get_all");
    SYM(topic_name, "rd_kafka_topic_name");
    SYM(query_watermark_offsets, "rd_kafka_query_watermark_offsets");
    SYM(err2name, "rd_kafka_err2name");
    SYM(err2str, "rd_kafka_err2str");
    SYM(fatal_error, "rd_kafka_fatal_error");
#undef SYM
    rk.loaded = 1;
    return PyLong_FromLong(rk.version());
}

/* ---- growable buffers ---------------------------------------------------------------------- */
typedef struct {
    char *data;
    size_t len, cap;
    size_t hint; /* the capacity the last batch handed to Python had: the next starts there */
} Buf;

static int buf_reserve(Buf *b, size_t extra) {
    if (b->len + extra <= b->cap)
        return 0;
    size_t cap = b->cap ? b->cap : (b->hint ? b->hint : 4096);
    while (cap < b->len + extra)
        cap *= 2;
    char *data = realloc(b->data, cap);
    if (!data)
        return -1;
    b->data = data;
    b->cap = cap;
    return 0;
}

static inline int buf_put(Buf *b, const void *src, size_t n) {
    if (buf_reserve(b, n))
        return -1;
    if (n)
        memcpy(b->data + b->len, src, n);
    b->len += n;
    return 0;
}

/* A nullable binary column: Arrow's validity bitmap, int32 offsets, data. */
typedef struct {
    Buf valid, offsets, data;
    int64_t nulls;
} BinCol;

static int bincol_put(BinCol *c, int64_t row, const void *src, size_t n, int is_null) {
    if ((row & 7) == 0) {
        uint8_t zero = 0;
        if (buf_put(&c->valid, &zero, 1))
            return -1;
    }
    if (is_null)
        c->nulls++;
    else
        ((uint8_t *)c->valid.data)[row >> 3] |= (uint8_t)(1u << (row & 7));
    if (!is_null && buf_put(&c->data, src, n))
        return -1;
    int32_t end = (int32_t)c->data.len;
    return buf_put(&c->offsets, &end, sizeof end);
}

static int bincol_start(BinCol *c) {
    c->valid.len = c->offsets.len = c->data.len = 0;
    c->nulls = 0;
    int32_t zero = 0;
    return buf_put(&c->offsets, &zero, sizeof zero);
}

static void bincol_free(BinCol *c) {
    free(c->valid.data);
    free(c->offsets.data);
    free(c->data.data);
    memset(c, 0, sizeof *c);
}

/* ---- the Fetcher type ---------------------------------------------------------------------- */
enum { ST_DRAINED = 0, ST_FULL = 1, ST_GAP = 2, ST_EVENT = 3 };

/* An assigned partition: consumed onto a queue of its own, so a task can have the partitions
 * of its next ranges fetched while it reads the current one, and each range reads only its own
 * partition's records and events. */
typedef struct {
    char *topic;
    int32_t partition;
    int64_t start; /* the offset it was assigned at */
    int ahead;     /* assigned by prefetch() and not read from since */
    rd_kafka_queue_t *queue;
    rd_kafka_topic_t *rkt; /* the handle its consumption was started with */
} Part;

typedef struct {
    PyObject_HEAD rd_kafka_t *rk;
    rd_kafka_queue_t *queue; /* the main queue: client-level errors (no partition's) */
    Part *parts;
    size_t nparts, parts_cap;
    /* messages polled but not yet handled (after a full batch, a gap check or an event) */
    rd_kafka_message_t **left;
    size_t left_pos, left_len, left_cap;
    int64_t max_value; /* largest value of the last poll: sizes the next request */
    /* the pending batch */
    int64_t rows;
    int64_t value_bytes;
    BinCol key, value;
    Buf offsets, stamps, types;
    /* headers: list offsets and validity, then the struct's key (string) and value columns */
    int headers;
    Buf h_valid, h_offsets;
    int64_t h_nulls, h_count;
    BinCol h_key, h_value;
} Fetcher;

static int batch_reset(Fetcher *f) {
    f->rows = f->value_bytes = 0;
    f->offsets.len = f->stamps.len = f->types.len = 0;
    f->h_valid.len = f->h_offsets.len = 0;
    f->h_nulls = f->h_count = 0;
    int32_t zero = 0;
    if (bincol_start(&f->key) || bincol_start(&f->value) || bincol_start(&f->h_key) ||
        bincol_start(&f->h_value) || buf_put(&f->h_offsets, &zero, sizeof zero))
        return -1;
    return 0;
}

/* An idle pooled fetcher keeps its buffers for the next task, unless one grew past this (a
 * large maxBytesPerArrowBatch): that memory goes back to the system between tasks. */
#define KEEP_IDLE_BYTES ((size_t)16 << 20)

static void buf_shrink(Buf *b) {
    if (b->cap > KEEP_IDLE_BYTES) {
        free(b->data);
        memset(b, 0, sizeof *b);
    }
}

static void shrink_idle(Fetcher *f) {
    BinCol *cols[] = {&f->key, &f->value, &f->h_key, &f->h_value};
    for (size_t i = 0; i < sizeof cols / sizeof *cols; i++) {
        buf_shrink(&cols[i]->valid);
        buf_shrink(&cols[i]->offsets);
        buf_shrink(&cols[i]->data);
    }
    buf_shrink(&f->offsets);
    buf_shrink(&f->stamps);
    buf_shrink(&f->types);
    buf_shrink(&f->h_valid);
    buf_shrink(&f->h_offsets);
    if (f->left_cap * sizeof *f->left > KEEP_IDLE_BYTES) {
        free(f->left);
        f->left = NULL;
        f->left_cap = 0;
    }
}

static void drop_left(Fetcher *f) {
    for (size_t i = f->left_pos; i < f->left_len; i++)
        rk.message_destroy(f->left[i]);
    f->left_pos = f->left_len = 0;
}

/* ---- assigned partitions -------------------------------------------------------------------- */
static Part *part_find(Fetcher *f, const char *topic, int32_t partition) {
    for (size_t i = 0; i < f->nparts; i++)
        if (f->parts[i].partition == partition && strcmp(f->parts[i].topic, topic) == 0)
            return &f->parts[i];
    return NULL;
}

/* Start consuming one more partition at offset onto a queue of its own. Returns -1 with a
 * Python error set (memory), else 0 with *err librdkafka's answer. */
static int part_start(Fetcher *f, const char *topic, int32_t partition, int64_t offset, int ahead,
                      rd_kafka_resp_err_t *err) {
    *err = 0;
    if (f->nparts == f->parts_cap) {
        size_t cap = f->parts_cap ? 2 * f->parts_cap : 4;
        Part *parts = realloc(f->parts, cap * sizeof *parts);
        if (!parts) {
            PyErr_NoMemory();
            return -1;
        }
        f->parts = parts;
        f->parts_cap = cap;
    }
    char *name = strdup(topic);
    if (!name) {
        PyErr_NoMemory();
        return -1;
    }
    rd_kafka_topic_t *rkt = rk.topic_new(f->rk, topic, NULL);
    if (!rkt) {
        free(name);
        *err = rk.last_error();
        return 0;
    }
    rd_kafka_queue_t *queue = rk.queue_new(f->rk);
    int started;
    Py_BEGIN_ALLOW_THREADS;
    started = rk.consume_start_queue(rkt, partition, offset, queue);
    Py_END_ALLOW_THREADS;
    if (started == -1) {
        *err = rk.last_error();
        rk.queue_destroy(queue);
        rk.topic_destroy(rkt);
        free(name);
        return 0;
    }
    f->parts[f->nparts++] = (Part){name, partition, offset, ahead, queue, rkt};
    return 0;
}

/* Stop consuming a partition: librdkafka drops what it had fetched for it, its queue and what
 * that still holds go too. */
static rd_kafka_resp_err_t part_drop(Part *part) {
    int stopped;
    Py_BEGIN_ALLOW_THREADS;
    stopped = rk.consume_stop(part->rkt, part->partition);
    Py_END_ALLOW_THREADS;
    rd_kafka_resp_err_t err = stopped == -1 ? rk.last_error() : 0;
    rk.queue_destroy(part->queue);
    rk.topic_destroy(part->rkt);
    free(part->topic);
    return err;
}

/* Stop one partition and forget it. */
static rd_kafka_resp_err_t part_stop(Fetcher *f, Part *part) {
    rd_kafka_resp_err_t err = part_drop(part);
    *part = f->parts[--f->nparts];
    return err;
}

/* Stop every partition (an unassign of all, or before the handle goes): the first error. */
static rd_kafka_resp_err_t parts_stop_all(Fetcher *f) {
    rd_kafka_resp_err_t first = 0;
    for (size_t i = 0; i < f->nparts; i++) {
        rd_kafka_resp_err_t err = part_drop(&f->parts[i]);
        if (err && !first)
            first = err;
    }
    f->nparts = 0;
    return first;
}

static void close_handle(Fetcher *f) {
    drop_left(f);
    parts_stop_all(f); /* librdkafka: every partition stopped before the handle goes */
    if (f->queue) {
        rk.queue_destroy(f->queue);
        f->queue = NULL;
    }
    if (f->rk) {
        rd_kafka_t *h = f->rk;
        f->rk = NULL;
        Py_BEGIN_ALLOW_THREADS rk.destroy(h);
        Py_END_ALLOW_THREADS
    }
}

static void Fetcher_dealloc(Fetcher *f) {
    close_handle(f);
    free(f->left);
    free(f->parts);
    bincol_free(&f->key);
    bincol_free(&f->value);
    bincol_free(&f->h_key);
    bincol_free(&f->h_value);
    free(f->offsets.data);
    free(f->stamps.data);
    free(f->types.data);
    free(f->h_valid.data);
    free(f->h_offsets.data);
    Py_TYPE(f)->tp_free((PyObject *)f);
}

/* Fetcher(config: dict[str, str], headers: bool) */
static int Fetcher_init(Fetcher *f, PyObject *args, PyObject *kwds) {
    PyObject *config;
    int headers = 0;
    if (!PyArg_ParseTuple(args, "O!p", &PyDict_Type, &config, &headers))
        return -1;
    if (!rk.loaded) {
        PyErr_SetString(PyExc_RuntimeError, "librdkafka is not loaded: call load() first");
        return -1;
    }
    if (f->rk) {
        PyErr_SetString(PyExc_RuntimeError, "Fetcher already initialised");
        return -1;
    }
    f->headers = headers;
    char errstr[512];
    rd_kafka_conf_t *conf = rk.conf_new();
    PyObject *k, *v;
    Py_ssize_t pos = 0;
    while (PyDict_Next(config, &pos, &k, &v)) {
        const char *ks = PyUnicode_AsUTF8(k), *vs = ks ? PyUnicode_AsUTF8(v) : NULL;
        if (!vs) {
            rk.conf_destroy(conf);
            if (!PyErr_Occurred())
                PyErr_SetString(PyExc_TypeError, "configuration keys and values must be str");
            return -1;
        }
        if (rk.conf_set(conf, ks, vs, errstr, sizeof errstr) != RD_KAFKA_CONF_OK) {
            rk.conf_destroy(conf);
            /* the value may be a secret: name the property only */
            PyErr_Format(PyExc_ValueError, "librdkafka refused property %s: %s", ks, errstr);
            return -1;
        }
    }
    rd_kafka_t *h = rk.new_(RD_KAFKA_CONSUMER, conf, errstr, sizeof errstr);
    if (!h) {
        rk.conf_destroy(conf);
        PyErr_Format(PyExc_ValueError, "cannot create a librdkafka consumer: %s", errstr);
        return -1;
    }
    f->rk = h;
    f->queue = rk.queue_get_main(h);
    f->max_value = 1;
    if (batch_reset(f)) {
        PyErr_NoMemory();
        return -1;
    }
    return 0;
}

static int check_open(Fetcher *f) {
    if (!f->rk) {
        PyErr_SetString(PyExc_RuntimeError, "Fetcher is closed");
        return -1;
    }
    return 0;
}

static PyObject *kafka_error(rd_kafka_resp_err_t err) {
    /* (code, name, description): Python raises confluent_kafka's KafkaException from it */
    return Py_BuildValue("(iss)", err, rk.err2name(err), rk.err2str(err));
}

/* None, or librdkafka's error as (code, name, description) */
static PyObject *assign_result(rd_kafka_resp_err_t err) {
    if (err)
        return kafka_error(err);
    Py_RETURN_NONE;
}

static PyObject *start_result(Fetcher *f, const char *topic, int32_t partition, int64_t offset,
                              int ahead) {
    rd_kafka_resp_err_t err;
    if (part_start(f, topic, partition, offset, ahead, &err))
        return NULL;
    return assign_result(err);
}

/* assign(topic, partition, offset): read this partition from offset next. A partition assigned
 * ahead at that offset and not read since keeps what was fetched for it; otherwise it is
 * (re)assigned at offset. Drops whatever was polled before. */
static PyObject *Fetcher_assign(Fetcher *f, PyObject *args) {
    const char *topic;
    int partition;
    long long offset;
    if (!PyArg_ParseTuple(args, "siL", &topic, &partition, &offset) || check_open(f))
        return NULL;
    drop_left(f);
    Part *part = part_find(f, topic, partition);
    if (part && part->ahead && part->start == offset) {
        part->ahead = 0;
        Py_RETURN_NONE;
    }
    if (part) {
        rd_kafka_resp_err_t err = part_stop(f, part);
        if (err)
            return kafka_error(err);
    }
    return start_result(f, topic, partition, offset, 0);
}

/* prefetch(topic, partition, offset): assign a partition a later range reads from offset, so
 * its records are fetched meanwhile (nothing if it is assigned already). */
static PyObject *Fetcher_prefetch(Fetcher *f, PyObject *args) {
    const char *topic;
    int partition;
    long long offset;
    if (!PyArg_ParseTuple(args, "siL", &topic, &partition, &offset) || check_open(f))
        return NULL;
    if (part_find(f, topic, partition))
        Py_RETURN_NONE;
    return start_result(f, topic, partition, offset, 1);
}

/* release(topic, partition): a range is done with its partition (nothing if not assigned). */
static PyObject *Fetcher_release(Fetcher *f, PyObject *args) {
    const char *topic;
    int partition;
    if (!PyArg_ParseTuple(args, "si", &topic, &partition) || check_open(f))
        return NULL;
    Part *part = part_find(f, topic, partition);
    return assign_result(part ? part_stop(f, part) : 0);
}

/* assigned() -> [(topic, partition, offset assigned at, assigned ahead and not read yet)] */
static PyObject *Fetcher_assigned(Fetcher *f, PyObject *unused) {
    PyObject *out = PyList_New(0);
    for (size_t i = 0; out && i < f->nparts; i++) {
        Part *p = &f->parts[i];
        PyObject *item = Py_BuildValue("(siLO)", p->topic, p->partition, (long long)p->start,
                                       p->ahead ? Py_True : Py_False);
        if (!item || PyList_Append(out, item)) {
            Py_XDECREF(item);
            Py_CLEAR(out);
            break;
        }
        Py_DECREF(item);
    }
    return out;
}

/* unassign(): nothing assigned, nothing pending (the fetcher goes back to the pool). */
static PyObject *Fetcher_unassign(Fetcher *f, PyObject *unused) {
    if (check_open(f))
        return NULL;
    drop_left(f);
    shrink_idle(f);
    if (batch_reset(f))
        return PyErr_NoMemory();
    rd_kafka_resp_err_t err = parts_stop_all(f);
    if (err)
        return kafka_error(err);
    Py_RETURN_NONE;
}

/* watermarks(topic, partition, timeout_ms) -> (low, high) or (code, name, description) */
static PyObject *Fetcher_watermarks(Fetcher *f, PyObject *args) {
    const char *topic;
    int partition, timeout_ms;
    if (!PyArg_ParseTuple(args, "sii", &topic, &partition, &timeout_ms) || check_open(f))
        return NULL;
    int64_t low = -1, high = -1;
    rd_kafka_resp_err_t err;
    Py_BEGIN_ALLOW_THREADS err = rk.query_watermark_offsets(f->rk, topic, partition, &low, &high,
                                                            timeout_ms);
    Py_END_ALLOW_THREADS
    if (err)
        return Py_BuildValue("(N)", kafka_error(err));
    return Py_BuildValue("(LL)", (long long)low, (long long)high);
}

static PyObject *Fetcher_close(Fetcher *f, PyObject *unused) {
    close_handle(f);
    Py_RETURN_NONE;
}

/* Append one record; -1 on memory or when the value column would pass 2 GiB (int32 offsets). */
static int append(Fetcher *f, const rd_kafka_message_t *m) {
    int64_t row = f->rows;
    int type = 0;
    int64_t ts = rk.message_timestamp(m, &type);
    int64_t us = ts * 1000; /* ms -> us; none: -1 ms, as the pure-Python path */
    int32_t java_type = type - 1; /* librdkafka 0 none, 1 create, 2 log append; Java one less */
    int64_t offset = m->offset;
    if (bincol_put(&f->key, row, m->key, m->key_len, m->key == NULL) ||
        bincol_put(&f->value, row, m->payload, m->len, m->payload == NULL) ||
        buf_put(&f->offsets, &offset, sizeof offset) || buf_put(&f->stamps, &us, sizeof us) ||
        buf_put(&f->types, &java_type, sizeof java_type))
        return -1;
    if (f->headers) {
        rd_kafka_headers_t *hdrs = NULL;
        if ((row & 7) == 0) {
            uint8_t zero = 0;
            if (buf_put(&f->h_valid, &zero, 1))
                return -1;
        }
        if (rk.message_headers(m, &hdrs) || hdrs == NULL) {
            f->h_nulls++; /* no headers: null, as confluent-kafka's headers() gives None */
        } else {
            ((uint8_t *)f->h_valid.data)[row >> 3] |= (uint8_t)(1u << (row & 7));
            const char *name;
            const void *val;
            size_t size;
            for (size_t i = 0; !rk.header_get_all(hdrs, i, &name, &val, &size); i++) {
                if (bincol_put(&f->h_key, f->h_count, name, strlen(name), 0) ||
                    bincol_put(&f->h_value, f->h_count, val, size, val == NULL))
                    return -1;
                f->h_count++;
            }
        }
        int32_t end = (int32_t)f->h_count;
        if (buf_put(&f->h_offsets, &end, sizeof end))
            return -1;
    }
    f->rows++;
    f->value_bytes += m->payload ? (int64_t)m->len : 0;
    return 0;
}

/*
 * poll(topic, partition, next, until, check_gap, max_rows, max_bytes, timeout_ms)
 *   -> (status, next, check_gap, done, detail)
 *
 * Handles the messages left from the last call; only when none are left does it ask
 * librdkafka for more (one batch consume of the partition's queue, waiting at most timeout_ms;
 * if that brings nothing, the client-level errors waiting in the consumer queue). Records of other
 * partitions and below ``next`` are dropped (redelivered, never data); a record at or beyond
 * ``until`` ends the range (done); the first record after (re)positioning above ``next``
 * stops with ST_GAP (detail: its offset) so Python can ask whether the gap is loss; an error
 * message stops with ST_EVENT (detail: code, name, description, topic, partition, offset,
 * fatal); a batch that reaches max_rows or max_bytes (0: none) of values stops with ST_FULL.
 * The message that stopped a call is handled first by the next call (not for ST_EVENT: the
 * event is consumed).
 */
static PyObject *Fetcher_poll(Fetcher *f, PyObject *args) {
    const char *topic;
    int partition, check_gap, timeout_ms;
    long long next, until, max_rows, max_bytes;
    if (!PyArg_ParseTuple(args, "siLLpLLi", &topic, &partition, &next, &until, &check_gap,
                          &max_rows, &max_bytes, &timeout_ms) ||
        check_open(f))
        return NULL;
    int status = ST_DRAINED, done = 0, nomem = 0;
    int64_t gap_at = -1;
    rd_kafka_message_t *event = NULL;
    Part *part = part_find(f, topic, partition);
    Py_BEGIN_ALLOW_THREADS;
    if (f->left_pos >= f->left_len) {
        f->left_pos = f->left_len = 0;
        int64_t want = max_rows - f->rows;
        if (until - next < want)
            want = until - next;
        if (max_bytes > 0) {
            int64_t room = (max_bytes - f->value_bytes) / (f->max_value > 0 ? f->max_value : 1);
            if (room < want)
                want = room;
        }
        if (want < 1)
            want = 1;
        if ((size_t)want > f->left_cap) {
            rd_kafka_message_t **left = realloc(f->left, (size_t)want * sizeof *left);
            if (left) {
                f->left = left;
                f->left_cap = (size_t)want;
            } else {
                want = (int64_t)f->left_cap;
            }
        }
        if (want >= 1) {
            ssize_t got = rk.consume_batch_queue(part ? part->queue : f->queue, timeout_ms,
                                                 f->left, (size_t)want);
            if (got <= 0 && part) /* nothing of the partition: any client-level error? */
                got = rk.consume_batch_queue(f->queue, 0, f->left, (size_t)want);
            f->left_len = got > 0 ? (size_t)got : 0;
        }
        int64_t largest = 0;
        for (size_t i = 0; i < f->left_len; i++)
            if (!f->left[i]->err && (int64_t)f->left[i]->len > largest)
                largest = (int64_t)f->left[i]->len;
        if (f->left_len)
            f->max_value = largest > 0 ? largest : 1;
    }
    const rd_kafka_topic_t *mine = NULL; /* the topic handle seen to be ours */
    while (f->left_pos < f->left_len) {
        rd_kafka_message_t *m = f->left[f->left_pos];
        if (m->err) {
            event = m;
            f->left_pos++;
            status = ST_EVENT;
            break;
        }
        if (m->partition != partition ||
            (m->rkt != mine && (!m->rkt || strcmp(rk.topic_name(m->rkt), topic) != 0))) {
            rk.message_destroy(m); /* leftovers of an earlier assignment */
            f->left_pos++;
            continue;
        }
        mine = m->rkt;
        if (m->offset < next) {
            rk.message_destroy(m);
            f->left_pos++;
            continue;
        }
        if (m->offset >= until) {
            done = 1;
            for (size_t i = f->left_pos; i < f->left_len; i++)
                rk.message_destroy(f->left[i]);
            f->left_pos = f->left_len = 0;
            break;
        }
        if (check_gap && m->offset > next) {
            gap_at = m->offset;
            status = ST_GAP;
            check_gap = 0;
            break; /* handled by the next call, after Python's look at the gap */
        }
        if (f->rows > 0 && f->value.data.len + m->len > (size_t)INT32_MAX) {
            status = ST_FULL;
            break;
        }
        if (append(f, m)) {
            nomem = 1;
            break;
        }
        check_gap = 0;
        next = m->offset + 1;
        rk.message_destroy(m);
        f->left_pos++;
        if (f->rows >= max_rows || (max_bytes > 0 && f->value_bytes >= max_bytes)) {
            status = ST_FULL;
            break;
        }
    }
    Py_END_ALLOW_THREADS;
    if (nomem) {
        if (event)
            rk.message_destroy(event);
        return PyErr_NoMemory();
    }
    PyObject *detail;
    if (event) {
        rd_kafka_resp_err_t code = event->err;
        int fatal = 0;
        char errstr[512];
        const char *text;
        if (code == RD_KAFKA_RESP_ERR__FATAL) {
            code = rk.fatal_error(f->rk, errstr, sizeof errstr);
            fatal = 1;
            text = errstr;
        } else if (event->payload) {
            /* an error message's payload is its description (rd_kafka_message_errstr) */
            size_t n = event->len < sizeof errstr - 1 ? event->len : sizeof errstr - 1;
            memcpy(errstr, event->payload, n);
            errstr[n] = 0;
            text = errstr;
        } else {
            text = rk.err2str(code);
        }
        const char *etopic = event->rkt ? rk.topic_name(event->rkt) : NULL;
        detail = Py_BuildValue("(isszLLi)", code, rk.err2name(code), text, etopic,
                               (long long)event->partition, (long long)event->offset, fatal);
        rk.message_destroy(event);
    } else if (status == ST_GAP) {
        detail = PyLong_FromLongLong(gap_at);
    } else {
        detail = Py_NewRef(Py_None);
    }
    if (!detail)
        return NULL;
    return Py_BuildValue("(iLiiN)", status, next, check_gap, done, detail);
}

/* pending() -> (rows, value bytes) of the batch being built */
static PyObject *Fetcher_pending(Fetcher *f, PyObject *unused) {
    return Py_BuildValue("(LL)", (long long)f->rows, (long long)f->value_bytes);
}

/* A column's memory handed to Python as is: the buffer protocol over it (read-only), freed
 * with the object, i.e. when Arrow lets go of the batch. Copying it into a bytes object cost a
 * second copy of every value (and a fresh allocation of the batch's size) per batch. */
typedef struct {
    PyObject_HEAD char *data;
    Py_ssize_t len;
} Block;

static int Block_getbuffer(Block *self, Py_buffer *view, int flags) {
    static char empty[1];
    return PyBuffer_FillInfo(view, (PyObject *)self, self->data ? self->data : empty, self->len, 1,
                             flags);
}

static void Block_dealloc(Block *self) {
    free(self->data);
    Py_TYPE(self)->tp_free((PyObject *)self);
}

static PyBufferProcs Block_as_buffer = {(getbufferproc)Block_getbuffer, NULL};

static PyTypeObject BlockType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "spark_groupsource.executor._rdkafka_arrow.Block",
    .tp_basicsize = sizeof(Block),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A column buffer of a batch, handed over from the fetcher (buffer protocol).",
    .tp_dealloc = (destructor)Block_dealloc,
    .tp_as_buffer = &Block_as_buffer,
};

/* The buffer's memory becomes a Block; the buffer starts empty and reserves the same
 * capacity at its first write (one allocation, no growth by doubling). */
static PyObject *hand_off(Buf *b) {
    Block *block = PyObject_New(Block, &BlockType);
    if (!block)
        return NULL;
    block->data = b->data;
    block->len = (Py_ssize_t)b->len;
    b->hint = b->cap;
    b->data = NULL;
    b->len = b->cap = 0;
    return (PyObject *)block;
}

static PyObject *bincol_take(BinCol *c) {
    /* (validity or None, null count, offsets, data) */
    PyObject *valid = c->nulls ? hand_off(&c->valid) : Py_NewRef(Py_None);
    return Py_BuildValue("(NLNN)", valid, (long long)c->nulls, hand_off(&c->offsets),
                         hand_off(&c->data));
}

/* take() -> (rows, key, value, offsets, timestamps, types, headers or None); starts a new batch */
static PyObject *Fetcher_take(Fetcher *f, PyObject *unused) {
    PyObject *headers;
    if (f->headers) {
        PyObject *valid = f->h_nulls ? hand_off(&f->h_valid) : Py_NewRef(Py_None);
        headers = Py_BuildValue("(NLNLNN)", valid, (long long)f->h_nulls, hand_off(&f->h_offsets),
                                (long long)f->h_count, bincol_take(&f->h_key),
                                bincol_take(&f->h_value));
    } else {
        headers = Py_NewRef(Py_None);
    }
    PyObject *out = Py_BuildValue("(LNNNNNN)", (long long)f->rows, bincol_take(&f->key),
                                  bincol_take(&f->value), hand_off(&f->offsets),
                                  hand_off(&f->stamps), hand_off(&f->types), headers);
    if (batch_reset(f)) {
        Py_XDECREF(out);
        return PyErr_NoMemory();
    }
    return out;
}

static PyMethodDef Fetcher_methods[] = {
    {"assign", (PyCFunction)Fetcher_assign, METH_VARARGS, "assign(topic, partition, offset)"},
    {"prefetch", (PyCFunction)Fetcher_prefetch, METH_VARARGS,
     "prefetch(topic, partition, offset): assign a later range's partition ahead"},
    {"release", (PyCFunction)Fetcher_release, METH_VARARGS, "release(topic, partition)"},
    {"assigned", (PyCFunction)Fetcher_assigned, METH_NOARGS,
     "assigned() -> [(topic, partition, offset, ahead)]"},
    {"unassign", (PyCFunction)Fetcher_unassign, METH_NOARGS, "unassign()"},
    {"watermarks", (PyCFunction)Fetcher_watermarks, METH_VARARGS,
     "watermarks(topic, partition, timeout_ms) -> (low, high) or ((code, name, text),)"},
    {"poll", (PyCFunction)Fetcher_poll, METH_VARARGS,
     "poll(topic, partition, next, until, check_gap, max_rows, max_bytes, timeout_ms)"},
    {"pending", (PyCFunction)Fetcher_pending, METH_NOARGS, "pending() -> (rows, value bytes)"},
    {"take", (PyCFunction)Fetcher_take, METH_NOARGS, "take() -> the batch's buffers"},
    {"close", (PyCFunction)Fetcher_close, METH_NOARGS, "close()"},
    {NULL},
};

static PyTypeObject FetcherType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "spark_groupsource.executor._rdkafka_arrow.Fetcher",
    .tp_basicsize = sizeof(Fetcher),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_doc = "A librdkafka consumer reading partitions' ranges into Arrow buffers.",
    .tp_new = PyType_GenericNew,
    .tp_init = (initproc)Fetcher_init,
    .tp_dealloc = (destructor)Fetcher_dealloc,
    .tp_methods = Fetcher_methods,
};

static PyMethodDef module_methods[] = {
    {"load", load, METH_VARARGS, "load(path) -> librdkafka's version: dlopen librdkafka once"},
    {NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_rdkafka_arrow",
    "librdkafka straight into Arrow buffers (see _rdkafka_arrow.c)", -1, module_methods,
};

PyMODINIT_FUNC PyInit__rdkafka_arrow(void) {
    if (PyType_Ready(&FetcherType) < 0 || PyType_Ready(&BlockType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (!m)
        return NULL;
    if (PyModule_AddObjectRef(m, "Fetcher", (PyObject *)&FetcherType) < 0) {
        Py_DECREF(m);
        return NULL;
    }
    PyModule_AddIntConstant(m, "DRAINED", ST_DRAINED);
    PyModule_AddIntConstant(m, "FULL", ST_FULL);
    PyModule_AddIntConstant(m, "GAP", ST_GAP);
    PyModule_AddIntConstant(m, "EVENT", ST_EVENT);
    return m;
}
