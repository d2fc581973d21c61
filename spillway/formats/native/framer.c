/* Record-boundary walk over channel-state payload: the C twin of record_framing.Framer, tested equal to it.
 * Built on first use by native.py with the system C compiler; the pure-Python Framer is the fallback and the
 * reference. Which tags exist and how long each element may be is not written here: Python fills a
 * framer_rules_t from the one declaration in stream_elements.py (native.framer_rules) and every framer
 * points at it. */
#include <stdint.h>
#include <string.h>

typedef struct {
    int32_t min_len[256]; /* element length bounds per tag byte; min > max: the tag is not allowed */
    int32_t max_len[256];
    int64_t limit;        /* a length field above this is a fault (the reader's own limit) */
    uint8_t is_record[256]; /* 1 for the tags of stream records (not watermarks or other events) */
} framer_rules_t;

typedef struct {
    const framer_rules_t *rules;
    int64_t total, consumed, left;
    int32_t length, need_tag, head_len, dead;
    uint8_t head[4];
    int64_t records;
    int64_t *tag_counts;  /* elements per tag byte (256 of them), or NULL: not counted */
    int64_t record_tags;  /* elements begun with a stream record's tag */
    int64_t start_piece, start_pos;
    int32_t fault_kind, fault_tag;
    int64_t fault_value, fault_piece, fault_pos, fault_remaining;
    int32_t tag;          /* tag of the element in progress (once read) */
    int64_t max_end;      /* where the last element begun ends, counted from the channel's first byte: a framer
                           * run before its channel's length is known (total at INT64_MAX) would have stopped
                           * at a length past the end exactly when this exceeds the length (spw_walk_frame) */
} framer_t;

enum { F_NONE = 0, F_LENGTH = 1, F_ELEMENT = 2 };

static int64_t fault(framer_t *st, int kind, int64_t value, int64_t ret) {
    st->fault_kind = kind;
    st->fault_value = value;
    st->fault_piece = st->start_piece;
    st->fault_pos = st->start_pos;
    return ret;
}

/* Consume buf[from..n). Returns where it stopped: n, or just past a fault (fault_kind set). The caller
 * adds n to `consumed` after the final call for a piece. */
int64_t spw_feed(framer_t *st, const uint8_t *buf, int64_t n, int64_t piece, int64_t from) {
    int64_t i = from;
    const framer_rules_t *rules = st->rules;
    if (st->dead) return n;
    while (i < n) {
        if (st->left == 0 && !st->need_tag) {
            int32_t length;
            if (st->head_len || n - i < 4) {
                if (!st->head_len) { st->start_piece = piece; st->start_pos = i; }
                while (st->head_len < 4 && i < n) st->head[st->head_len++] = buf[i++];
                if (st->head_len < 4) break;
                length = (int32_t)(((uint32_t)st->head[0] << 24) | ((uint32_t)st->head[1] << 16) |
                                   ((uint32_t)st->head[2] << 8) | st->head[3]);
                st->head_len = 0;
            } else {
                st->start_piece = piece; st->start_pos = i;
                length = (int32_t)(((uint32_t)buf[i] << 24) | ((uint32_t)buf[i + 1] << 16) |
                                   ((uint32_t)buf[i + 2] << 8) | buf[i + 3]);
                i += 4;
            }
            int64_t remaining = st->total - (st->consumed + i);
            if (length <= 0 || length > remaining || length > rules->limit) {
                st->dead = 1;
                st->fault_remaining = remaining;
                return fault(st, F_LENGTH, length, n);
            }
            st->max_end = st->consumed + i + length;
            st->length = length;
            st->left = length;
            st->need_tag = 1;
        }
        if (st->need_tag) {
            if (i >= n) break;
            uint8_t tag = buf[i];
            st->need_tag = 0;
            st->tag = tag;
            if (st->tag_counts) st->tag_counts[tag]++;
            st->record_tags += rules->is_record[tag];
            if (st->length < rules->min_len[tag] || st->length > rules->max_len[tag]) {
                st->fault_tag = tag;
                int64_t take = st->left < n - i ? st->left : n - i;
                i += take; st->left -= take;
                if (st->left == 0) st->records++;
                return fault(st, F_ELEMENT, st->length, i);
            }
        }
        int64_t take = st->left < n - i ? st->left : n - i;
        i += take;
        st->left -= take;
        if (st->left == 0) st->records++;
    }
    return n;
}

#include <unistd.h>

/* Walk the [i32 length][payload] chain of a channel-state blob: bytes [base+4, base+size) of file fd.
 * Writes up to cap (offset, length) pairs (blob-relative offsets of the length fields). Returns the
 * number of chunks; on a break sets *err_offset (blob-relative) and *err_kind (1 short header,
 * 2 negative length, 3 runs past the end, 4 I/O error) and returns the chunks found before it.
 * Returns -(count) - 1 when cap was too small (call again with a larger buffer). */
int64_t spw_walk(int fd, int64_t base, int64_t size, int64_t *offsets, int32_t *lengths, int64_t cap,
                 int64_t *err_offset, int32_t *err_kind) {
    int64_t pos = 4, count = 0;
    uint8_t h[4];
    *err_kind = 0;
    while (pos < size) {
        if (pos + 4 > size) { *err_kind = 1; *err_offset = pos; return count; }
        if (pread(fd, h, 4, base + pos) != 4) { *err_kind = 4; *err_offset = pos; return count; }
        int32_t len = (int32_t)(((uint32_t)h[0] << 24) | ((uint32_t)h[1] << 16) | ((uint32_t)h[2] << 8) | h[3]);
        if (len < 0) { *err_kind = 2; *err_offset = pos; return count; }
        if (pos + 4 + (int64_t)len > size) { *err_kind = 3; *err_offset = pos; return count; }
        if (count >= cap) return -count - 1;
        offsets[count] = pos;
        lengths[count] = len;
        count++;
        pos += 4 + (int64_t)len;
    }
    return count;
}

/* Where each of m chunk offsets is among the n increasing offsets of a blob's chunks: its index, or -1 where no
 * chunk starts there. Returns how many were not found. */
int64_t spw_locate(const int64_t *sorted, int64_t n, const int64_t *query, int64_t m, int64_t *out) {
    int64_t missing = 0, prev = 0;
    for (int64_t k = 0; k < m; k++) {
        int64_t lo = 0, hi = n, q = query[k];
        if (k > 0 && q >= query[k - 1]) { /* increasing queries (a handle's chunks): gallop on from the last */
            int64_t step = 1;
            lo = hi = prev;
            while (hi < n && sorted[hi] < q) { lo = hi + 1; hi = prev + step; step <<= 1; }
            if (hi > n) hi = n;
        }
        while (lo < hi) {
            int64_t mid = lo + (hi - lo) / 2;
            if (sorted[mid] < q) lo = mid + 1; else hi = mid;
        }
        prev = lo;
        if (lo < n && sorted[lo] == q) out[k] = lo; else { out[k] = -1; missing++; }
    }
    return missing;
}

/* Claim the chunks at n positions of a blob's chunk map for handle `who` (owner[i]: the claiming handle, -1 none):
 * when every one is unclaimed and no position repeats, mark them all and return their payload bytes; else change
 * nothing and return -1 (the caller then checks offset by offset, to say which). */
int64_t spw_claim(int32_t *owner, const int64_t *positions, int64_t n, int32_t who, const int32_t *lengths) {
    int64_t total = 0;
    for (int64_t k = 0; k < n; k++) {
        int64_t p = positions[k];
        if (owner[p] >= 0) {  /* claimed before, or earlier in this list: undo this call's marks */
            for (int64_t j = 0; j < k; j++) owner[positions[j]] = -1;
            return -1;
        }
        owner[p] = who;
        total += lengths[p];
    }
    return total;
}

/* The payload lengths of the chunks at n positions (into out) and their sum. */
int64_t spw_gather(const int32_t *lengths, const int64_t *positions, int64_t n, int32_t *out) {
    int64_t total = 0;
    for (int64_t k = 0; k < n; k++) total += out[k] = lengths[positions[k]];
    return total;
}

/* Feed n chunks of one blob (payload at base + offsets[k] + 4, lengths[k] bytes) to the framer,
 * reading through buf. Returns 0 when all were fed cleanly, 1 at the first fault (the caller then
 * re-frames the channel piece by piece to locate it), -1 on a read error. */
int spw_frame_chunks(framer_t *st, int fd, int64_t base, const int64_t *offsets, const int32_t *lengths,
                     int64_t n, uint8_t *buf, int64_t bufsize) {
    for (int64_t k = 0; k < n; k++) {
        int64_t pos = base + offsets[k] + 4, left = lengths[k];
        while (left > 0) {
            int64_t want = left < bufsize ? left : bufsize;
            if (pread(fd, buf, (size_t)want, pos) != want) return -1;
            int64_t at = 0;
            while (at < want) {
                at = spw_feed(st, buf, want, k, at);
                if (st->fault_kind) return 1;
            }
            st->consumed += want;
            pos += want;
            left -= want;
        }
    }
    return 0;
}

/* Whole stream records the framer has passed: elements of a record tag, less one still in progress. */
int64_t spw_stream_records(const framer_t *st) {
    int64_t n = st->record_tags;
    if (st->left > 0 && !st->need_tag && st->rules->is_record[st->tag]) n--;
    return n;
}

/* Frame many channels in one call: validate's per-channel work in C, not Python (10 000 small channels cost
 * ~70 us each in Python). Channel c has the parts [part_first[c], part_first[c + 1]); part p is the chunks
 * [chunk_first[p], chunk_first[p + 1]) of file fds[p] at bases[p], fed like spw_frame_chunks. totals[c]: the
 * channel's payload length (what a record length must fit in); complete[c]: it must end on a record boundary.
 * Writes records[c] (stream elements), stream_records[c] (of them, records) and status[c]: 0 framed cleanly, 1 a
 * fault or a record left open at the end of a complete channel (the caller frames it again piece by piece to
 * say where), -1 a read error. */
void spw_frame_batch(const framer_rules_t *rules, int64_t nchan, const int64_t *part_first, const int64_t *totals,
                     const int8_t *complete, const int32_t *fds, const int64_t *bases, const int64_t *chunk_first,
                     const int64_t *offsets, const int32_t *lengths, uint8_t *buf, int64_t bufsize,
                     int64_t *records, int32_t *status, int64_t *stream_records) {
    for (int64_t c = 0; c < nchan; c++) {
        framer_t st;
        memset(&st, 0, sizeof st);
        st.rules = rules;
        st.total = totals[c];
        int rc = 0;
        for (int64_t p = part_first[c]; p < part_first[c + 1] && rc == 0; p++) {
            int64_t first = chunk_first[p];
            rc = spw_frame_chunks(&st, fds[p], bases[p], offsets + first, lengths + first, chunk_first[p + 1] - first,
                                  buf, bufsize);
        }
        if (rc == 0 && complete[c] && (st.head_len || st.left || st.need_tag)) rc = 1;
        records[c] = st.records;
        stream_records[c] = spw_stream_records(&st);
        status[c] = rc;
    }
}

/* Frame the chunks of one file, read in file order: each chunk is fed to the framer of the channel it belongs to
 * (states[slots[k]]), so a file is read once, front to back, in reads of up to bufsize bytes that cover many chunks
 * (cat's access pattern) instead of one read per chunk. Valid only where every channel's chunks in this file come
 * in increasing offset order in its stream (the caller checks) and a channel's earlier parts were fed first (the
 * caller runs its parts' files in phases). Chunks of a channel whose status is not 0 are skipped; a fault sets it
 * to 1, a read error to -1. Reads are contiguous when the listed chunks are: a gap wider than max_gap starts a
 * new read. */
typedef struct { int64_t offset; int32_t length; int64_t slot; } listed_chunk_t;

static int by_offset(const void *a, const void *b) {
    const listed_chunk_t *x = a, *y = b;
    if (x->offset != y->offset) return x->offset < y->offset ? -1 : 1;
    return x->slot < y->slot ? -1 : x->slot > y->slot;
}

static void feed_chunk(framer_t *st, int32_t *status, const uint8_t *p, int64_t n, int64_t piece) {
    int64_t at = 0;
    while (at < n) {
        at = spw_feed(st, p, n, piece, at);
        if (st->fault_kind) { *status = 1; return; }
    }
    st->consumed += n;
}

#include <stdlib.h>

int spw_frame_file(int fd, int64_t base, int64_t n, const int64_t *offsets, const int32_t *lengths,
                   const int64_t *slots, framer_t *states, int32_t *status, uint8_t *buf, int64_t bufsize,
                   int64_t max_gap) {
    listed_chunk_t *list = malloc(sizeof *list * (size_t)(n ? n : 1));
    if (!list) return -1;
    for (int64_t k = 0; k < n; k++) { list[k].offset = offsets[k]; list[k].length = lengths[k]; list[k].slot = slots[k]; }
    qsort(list, (size_t)n, sizeof *list, by_offset);
    int64_t k = 0;
    while (k < n) {
        int64_t start = list[k].offset + 4, end = start + list[k].length;
        if (end - start > bufsize) {  /* a chunk longer than the buffer: streamed through it on its own */
            framer_t *st = &states[list[k].slot];
            int32_t *s = &status[list[k].slot];
            for (int64_t pos = start; pos < end && *s == 0;) {
                int64_t want = end - pos < bufsize ? end - pos : bufsize;
                if (pread(fd, buf, (size_t)want, base + pos) != want) { *s = -1; break; }
                feed_chunk(st, s, buf, want, k);
                pos += want;
            }
            k++;
            continue;
        }
        int64_t j = k + 1;  /* the chunks [k, j) are read together: [start, end) */
        while (j < n) {
            int64_t s2 = list[j].offset + 4, e2 = s2 + list[j].length;
            if (s2 - end > max_gap || (e2 > end ? e2 : end) - start > bufsize) break;
            if (e2 > end) end = e2;
            j++;
        }
        int ok = pread(fd, buf, (size_t)(end - start), base + start) == end - start;
        for (int64_t i = k; i < j; i++) {
            int32_t *s = &status[list[i].slot];
            if (*s != 0) continue;
            if (!ok) { *s = -1; continue; }
            feed_chunk(&states[list[i].slot], s, buf + (list[i].offset + 4 - start), list[i].length, i);
        }
        k = j;
    }
    free(list);
    return 0;
}

/* Walk the chunk chain of one file as spw_walk does and, in the same reads, feed chunks to channels as
 * spw_frame_file does: the file is read once, front to back, for both (the walk alone was one 4-byte read per
 * chunk). The n listed (offset, slot) pairs come from the handles, before the walk has said where chunks start: a
 * listed offset the chain steps over, or never reaches, sets its slot's status to 2 (the caller frames that
 * channel the ordinary way, once it knows). Chunks not listed are stepped over, their headers read on their own
 * when the next listed chunk is more than max_gap away. Returns the number of chunks (walk results as
 * spw_walk's); SPW_REDO, with every listed slot's status set to -1, when a read fails or cap is too small: the
 * caller then walks the file with spw_walk and frames its channels the ordinary way (the same outcome as if
 * this call had not been made). */
#define SPW_REDO (-1)

int64_t spw_walk_frame(int fd, int64_t base, int64_t size, int64_t *w_off, int32_t *w_len, int64_t cap,
                       int64_t *err_offset, int32_t *err_kind, int64_t n, const int64_t *offsets, const int64_t *slots,
                       framer_t *states, int32_t *status, uint8_t *buf, int64_t bufsize, int64_t max_gap) {
    listed_chunk_t *list = malloc(sizeof *list * (size_t)(n ? n : 1));
    int64_t k = 0, pos = 4, count = 0, wstart = 0, wend = 0; /* buf holds the blob's bytes [wstart, wend) */
    int redo = list == NULL;
    *err_kind = 0;
    if (!redo) {
        for (int64_t i = 0; i < n; i++) { list[i].offset = offsets[i]; list[i].length = 0; list[i].slot = slots[i]; }
        qsort(list, (size_t)n, sizeof *list, by_offset);
    }
    while (!redo && pos < size) {
        while (k < n && list[k].offset < pos) status[list[k++].slot] = 2; /* inside a chunk: no chunk starts there */
        int want = k < n && list[k].offset == pos;
        if (pos + 4 > size) { *err_kind = 1; *err_offset = pos; break; }
        if (pos < wstart || pos + 4 > wend) {
            /* read on from here: the whole buffer when this chunk or the next listed one is wanted soon */
            int64_t ahead = want || (k < n && list[k].offset - pos <= max_gap) ? bufsize : 4;
            if (ahead > size - pos) ahead = size - pos;
            if (pread(fd, buf, (size_t)ahead, base + pos) != ahead) { redo = 1; break; }
            wstart = pos;
            wend = pos + ahead;
        }
        const uint8_t *h = buf + (pos - wstart);
        int32_t len = (int32_t)(((uint32_t)h[0] << 24) | ((uint32_t)h[1] << 16) | ((uint32_t)h[2] << 8) | h[3]);
        if (len < 0) { *err_kind = 2; *err_offset = pos; break; }
        if (pos + 4 + (int64_t)len > size) { *err_kind = 3; *err_offset = pos; break; }
        if (count >= cap) { redo = 1; break; }
        w_off[count] = pos;
        w_len[count] = len;
        count++;
        int64_t start = pos + 4, end = start + len, j = k;
        while (j < n && list[j].offset == pos) j++; /* [k, j): the channels listing this chunk */
        if (want && len <= bufsize) {
            if (end > wend) { /* keep what is read of it, read the rest and on */
                int64_t kept = wend > start ? wend - start : 0, ahead = bufsize;
                if (kept) memmove(buf, buf + (start - wstart), (size_t)kept);
                if (ahead > size - start) ahead = size - start;
                if (pread(fd, buf + kept, (size_t)(ahead - kept), base + start + kept) != ahead - kept) { redo = 1; break; }
                wstart = start;
                wend = start + ahead;
            }
            for (int64_t i = k; i < j; i++)
                if (status[list[i].slot] == 0)
                    feed_chunk(&states[list[i].slot], &status[list[i].slot], buf + (start - wstart), len, i);
        } else if (want) { /* longer than the buffer: streamed through it, once per channel listing it */
            for (int64_t i = k; i < j && !redo; i++) {
                int32_t *s = &status[list[i].slot];
                for (int64_t at = start; at < end && *s == 0;) {
                    int64_t piece = end - at < bufsize ? end - at : bufsize;
                    if (pread(fd, buf, (size_t)piece, base + at) != piece) { redo = 1; break; }
                    feed_chunk(&states[list[i].slot], s, buf, piece, i);
                    at += piece;
                }
            }
            wstart = wend = 0;
        }
        k = j;
        pos = end;
    }
    if (redo) {
        for (int64_t i = 0; i < n; i++) status[slots[i]] = -1;
        free(list);
        return SPW_REDO;
    }
    while (k < n) status[list[k++].slot] = 2; /* past the end of the chain */
    free(list);
    return count;
}

/* Set up n framers for spw_frame_file: rules and each channel's payload length, the rest zero. */
void spw_init_states(framer_t *states, int64_t n, const framer_rules_t *rules, const int64_t *totals) {
    memset(states, 0, sizeof *states * (size_t)n);
    for (int64_t c = 0; c < n; c++) { states[c].rules = rules; states[c].total = totals[c]; }
}

/* Whether framer c stopped inside an element (a complete channel must not). */
int spw_in_element(const framer_t *st) { return st->head_len || st->left || st->need_tag; }

/* CRC-32 (zlib's: reflected 0xEDB88320, init and final xor ~0) of `rows` byte strings of `length`
 * bytes, the r-th at base + r * stride. Per-record fingerprints of the rescale self-check: equal to
 * zlib.crc32 of each, at slicing-by-8 speed instead of one Python call per record. */
static uint32_t crc_tab[8][256];
static int crc_ready = 0;

static void crc_init(void) {
    for (uint32_t b = 0; b < 256; b++) {
        uint32_t c = b;
        for (int k = 0; k < 8; k++) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_tab[0][b] = c;
    }
    for (uint32_t b = 0; b < 256; b++)
        for (int t = 1; t < 8; t++) crc_tab[t][b] = (crc_tab[t - 1][b] >> 8) ^ crc_tab[0][crc_tab[t - 1][b] & 0xFF];
    crc_ready = 1;
}

void spw_crc_rows(const uint8_t *base, int64_t rows, int64_t stride, int64_t length, uint32_t *out) {
    if (!crc_ready) crc_init(); /* idempotent: a racing second init writes the same values */
    for (int64_t r = 0; r < rows; r++) {
        const uint8_t *p = base + r * stride;
        int64_t n = length;
        uint32_t c = 0xFFFFFFFFu;
        while (n >= 8) {
            uint32_t lo = c ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24);
            uint32_t hi = (uint32_t)p[4] | (uint32_t)p[5] << 8 | (uint32_t)p[6] << 16 | (uint32_t)p[7] << 24;
            c = crc_tab[7][lo & 0xFF] ^ crc_tab[6][(lo >> 8) & 0xFF] ^ crc_tab[5][(lo >> 16) & 0xFF] ^
                crc_tab[4][lo >> 24] ^ crc_tab[3][hi & 0xFF] ^ crc_tab[2][(hi >> 8) & 0xFF] ^
                crc_tab[1][(hi >> 16) & 0xFF] ^ crc_tab[0][hi >> 24];
            p += 8;
            n -= 8;
        }
        while (n-- > 0) c = crc_tab[0][(c ^ *p++) & 0xFF] ^ (c >> 8);
        out[r] = c ^ 0xFFFFFFFFu;
    }
}
