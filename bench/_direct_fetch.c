/*
 * The record batch parser of bench/_direct_source.py: Kafka's v2 record batches (as a Fetch
 * response carries them) straight into Arrow column buffers, no allocation or object per record.
 * A bound for the benchmarks, not a client: uncompressed batches of non-null keys and values
 * only; anything else is reported, never skipped.
 *
 * parse(buf, len, hi, ptrs, caps, state) -> 0, or
 *   -1  out of room (state stops at a whole record: the caller hands the batch over, again),
 *   -2  a compressed or control batch, -3 a null key or value (not handled here).
 * ptrs:  key bytes, key offsets (int32, n + 1), value bytes, value offsets, offsets (int64),
 *        timestamps (int64 us), timestamp types (int32)
 * caps:  key bytes, value bytes, rows
 * state: rows, key bytes, value bytes, next offset (records below it are skipped), done
 *        (a record at or past hi was met)
 */
#include <stdint.h>
#include <string.h>

static inline int64_t varint(const uint8_t **p, const uint8_t *end) {
    uint64_t v = 0;
    int shift = 0;
    while (*p < end && shift < 64) {
        uint8_t b = *(*p)++;
        v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80))
            break;
        shift += 7;
    }
    return (int64_t)((v >> 1) ^ -(v & 1)); /* zigzag */
}

static inline uint32_t be32(const uint8_t *p) {
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static inline int64_t be64(const uint8_t *p) { return (int64_t)(((uint64_t)be32(p) << 32) | be32(p + 4)); }

enum { ROWS, KLEN, VLEN, NEXT, DONE };

int parse(const uint8_t *buf, long len, int64_t hi, void **ptrs, const int64_t *caps, int64_t *st) {
    uint8_t *kv = ptrs[0], *vv = ptrs[2];
    int32_t *ko = ptrs[1], *vo = ptrs[3], *types = ptrs[6];
    int64_t *offs = ptrs[4], *ts = ptrs[5];
    const uint8_t *p = buf, *end = buf + len;
    /* baseOffset 8, batchLength 4, then 49 bytes of header up to the record count */
    while (end - p >= 61 && !st[DONE]) {
        int64_t base = be64(p);
        uint32_t blen = be32(p + 8);
        if (end - p < 12 + (long)blen)
            break; /* a partial batch ends a response */
        const uint8_t *h = p + 21; /* partitionLeaderEpoch 4, magic 1, crc 4 */
        int16_t attrs = (int16_t)((h[0] << 8) | h[1]);
        int64_t base_ts = be64(h + 6), max_ts = be64(h + 14);
        const uint8_t *b = h + 40, *bend = p + 12 + blen;
        uint32_t n = be32(b - 4);
        if (attrs & 0x27)
            return -2;
        int32_t log_append = (attrs & 8) ? 1 : 0;
        for (uint32_t i = 0; i < n; i++) {
            int64_t rlen = varint(&b, bend);
            const uint8_t *rend = b + rlen;
            b += 1; /* attributes */
            int64_t ts_delta = varint(&b, rend), off = base + varint(&b, rend);
            if (off < st[NEXT]) {
                b = rend;
                continue;
            }
            if (off >= hi) {
                st[DONE] = 1;
                break;
            }
            int64_t kl = varint(&b, rend);
            const uint8_t *k = b;
            b += kl > 0 ? kl : 0;
            int64_t vl = varint(&b, rend);
            if (kl < 0 || vl < 0)
                return -3;
            if (st[ROWS] >= caps[2] || st[KLEN] + kl > caps[0] || st[VLEN] + vl > caps[1])
                return -1;
            memcpy(kv + st[KLEN], k, kl);
            memcpy(vv + st[VLEN], b, vl);
            st[KLEN] += kl;
            st[VLEN] += vl;
            int64_t r = st[ROWS]++;
            ko[r + 1] = (int32_t)st[KLEN];
            vo[r + 1] = (int32_t)st[VLEN];
            offs[r] = off;
            ts[r] = (log_append ? max_ts : base_ts + ts_delta) * 1000;
            types[r] = log_append;
            st[NEXT] = off + 1;
            b = rend;
        }
        p = bend;
    }
    return 0;
}
