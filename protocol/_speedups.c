/*
 * protocol._speedups: the two per-message loops of the data path, in C.
 *
 * Optional: protocol.record and protocol.batch hold the reference implementations in Python
 * and use these only when the module was built (and AIOROCKETMQ_NO_EXTENSIONS is not set).
 * The tests run both and compare their output byte for byte.
 *
 * Each function handles the well-formed, common case and answers None for anything else (a
 * malformed batch, a property set the Python side must look at, a record that fails a check):
 * the caller then runs the Python implementation, which raises the precise error or takes the
 * general path. So the rules and the error messages live in one place, the Python code.
 *
 * - build_records: a send's batch body (RocketMQ's MessageBatch encoding, one
 *   MessageDecoder.encodeMessage after the other) into commit-log records and consume-queue
 *   units, as CommitLog's MessageExtEncoder does for a batch.
 * - decode_records: a pull's records into MessageExt objects.
 * - decode_columns: a pull's records into the buffers of Arrow columns (the Spark reader's
 *   batches), with no object per message.
 * - select_units: which consume-queue entries a pull answers, and the runs of records to read.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <structmember.h> /* PyMemberDef, T_OBJECT_EX */
#include <stdint.h>
#include <string.h>

#define MESSAGE_MAGIC_CODE ((int32_t)0xDAA320ABu)
#define BATCH_ITEM_FIXED 22 /* TOTALSIZE MAGICCODE BODYCRC FLAG BODYLEN ... PROPERTIESLEN */
#define HEAD_FIXED 36       /* TOTALSIZE MAGICCODE BODYCRC QUEUEID FLAG QUEUEOFFSET PHYSICALOFFSET */
#define SYSFLAG_POS 36
#define BORNHOST_V6_FLAG (1 << 4)
#define STOREHOST_V6_FLAG (1 << 5)
#define CQ_UNIT_SIZE 20
#define PROPERTY_CACHE_MAX 1024

/* ---- CRC32 (zlib's polynomial), slicing by eight ------------------------------------------ */
static uint32_t crc_table[8][256];

static void crc_init(void) {
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = n;
        for (int k = 0; k < 8; k++) c = c & 1 ? 0xEDB88320u ^ (c >> 1) : c >> 1;
        crc_table[0][n] = c;
    }
    for (uint32_t n = 0; n < 256; n++) {
        uint32_t c = crc_table[0][n];
        for (int t = 1; t < 8; t++) {
            c = crc_table[0][c & 0xFF] ^ (c >> 8);
            crc_table[t][n] = c;
        }
    }
}

static uint32_t crc32_table(uint32_t c, const unsigned char *p, Py_ssize_t n) {
    while (n >= 8) {
        uint32_t lo = c ^ ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                           (uint32_t)p[3] << 24);
        c = crc_table[7][lo & 0xFF] ^ crc_table[6][(lo >> 8) & 0xFF] ^
            crc_table[5][(lo >> 16) & 0xFF] ^ crc_table[4][lo >> 24] ^ crc_table[3][p[4]] ^
            crc_table[2][p[5]] ^ crc_table[1][p[6]] ^ crc_table[0][p[7]];
        p += 8;
        n -= 8;
    }
    while (n--) c = crc_table[0][(c ^ *p++) & 0xFF] ^ (c >> 8);
    return c;
}

#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
/* The same CRC by carry-less multiplication (PCLMULQDQ), where the CPU has it: Intel's "Fast
 * CRC Computation for Generic Polynomials Using PCLMULQDQ", for the bit-reflected polynomial
 * 0xEDB88320. Four 128-bit lanes fold 64 bytes at a time, then fold into one lane, which a
 * Barrett reduction brings down to 32 bits. It takes n >= 64 and a multiple of 16; the caller
 * runs the table for the rest. c is the running CRC (not inverted). */
#include <immintrin.h>
#define HAVE_CLMUL 1

__attribute__((target("pclmul,sse2"))) static uint32_t crc32_clmul(uint32_t c,
                                                                    const unsigned char *p,
                                                                    Py_ssize_t n) {
    const __m128i k1k2 = _mm_set_epi64x(0x1c6e41596LL, 0x154442bd4LL); /* x^(512+-32) */
    const __m128i k3k4 = _mm_set_epi64x(0x0ccaa009eLL, 0x1751997d0LL); /* x^(128+-32) */
    const __m128i k5 = _mm_set_epi64x(0, 0x163cd6124LL);
    const __m128i poly_mu = _mm_set_epi64x(0x1f7011641LL, 0x1db710641LL);
    const __m128i mask32 = _mm_set_epi32(0, 0, 0, -1);
    __m128i x1 = _mm_loadu_si128((const __m128i *)p);
    __m128i x2 = _mm_loadu_si128((const __m128i *)(p + 16));
    __m128i x3 = _mm_loadu_si128((const __m128i *)(p + 32));
    __m128i x4 = _mm_loadu_si128((const __m128i *)(p + 48));
    x1 = _mm_xor_si128(x1, _mm_cvtsi32_si128((int)c));
    p += 64;
    n -= 64;
#define FOLD(x, k, next)                                                                        \
    x = _mm_xor_si128(_mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00),                          \
                                    _mm_clmulepi64_si128(x, k, 0x11)),                         \
                      next)
    while (n >= 64) {
        FOLD(x1, k1k2, _mm_loadu_si128((const __m128i *)p));
        FOLD(x2, k1k2, _mm_loadu_si128((const __m128i *)(p + 16)));
        FOLD(x3, k1k2, _mm_loadu_si128((const __m128i *)(p + 32)));
        FOLD(x4, k1k2, _mm_loadu_si128((const __m128i *)(p + 48)));
        p += 64;
        n -= 64;
    }
    FOLD(x1, k3k4, x2);
    FOLD(x1, k3k4, x3);
    FOLD(x1, k3k4, x4);
    while (n >= 16) {
        FOLD(x1, k3k4, _mm_loadu_si128((const __m128i *)p));
        p += 16;
        n -= 16;
    }
#undef FOLD
    /* 128 -> 64 bits (appending 32 zero bits), then 64 -> 32 with k5. */
    x1 = _mm_xor_si128(_mm_clmulepi64_si128(x1, k3k4, 0x10), _mm_srli_si128(x1, 8));
    x1 = _mm_xor_si128(_mm_clmulepi64_si128(_mm_and_si128(x1, mask32), k5, 0x00),
                       _mm_srli_si128(x1, 4));
    /* Barrett reduction: the remainder is in bits 32..63. */
    __m128i t = _mm_clmulepi64_si128(_mm_and_si128(x1, mask32), poly_mu, 0x10);
    t = _mm_clmulepi64_si128(_mm_and_si128(t, mask32), poly_mu, 0x00);
    x1 = _mm_xor_si128(x1, t);
    return (uint32_t)_mm_cvtsi128_si32(_mm_srli_si128(x1, 4));
}
#endif

static int use_clmul = 0; /* set at import when the CPU has PCLMULQDQ */

static uint32_t crc32_of(const unsigned char *p, Py_ssize_t n) {
    uint32_t c = 0xFFFFFFFFu;
#ifdef HAVE_CLMUL
    if (use_clmul && n >= 64) {
        Py_ssize_t bulk = n & ~(Py_ssize_t)15;
        c = crc32_clmul(c, p, bulk);
        p += bulk;
        n -= bulk;
    }
#endif
    return crc32_table(c, p, n) ^ 0xFFFFFFFFu;
}

/* ---- big-endian fields -------------------------------------------------------------------- */
static inline int32_t rd32(const unsigned char *p) {
    return (int32_t)((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3]);
}
static inline int16_t rd16(const unsigned char *p) { return (int16_t)((uint16_t)p[0] << 8 | p[1]); }
static inline int64_t rd64(const unsigned char *p) {
    return (int64_t)((uint64_t)(uint32_t)rd32(p) << 32 | (uint32_t)rd32(p + 4));
}
static inline void wr32(unsigned char *p, int32_t v) {
    uint32_t u = (uint32_t)v;
    p[0] = (unsigned char)(u >> 24);
    p[1] = (unsigned char)(u >> 16);
    p[2] = (unsigned char)(u >> 8);
    p[3] = (unsigned char)u;
}
static inline void wr16(unsigned char *p, int16_t v) {
    p[0] = (unsigned char)((uint16_t)v >> 8);
    p[1] = (unsigned char)v;
}
static inline void wr64(unsigned char *p, int64_t v) {
    wr32(p, (int32_t)((uint64_t)v >> 32));
    wr32(p + 4, (int32_t)(uint64_t)v);
}

/* The cached answer of `fn(raw)` for the raw bytes at p (a new reference), or NULL with an
 * error set. The cache keeps at most PROPERTY_CACHE_MAX entries. */
static const char HEX[] = "0123456789ABCDEF";

static PyObject *cached_call(PyObject *cache, PyObject *fn, const unsigned char *p, Py_ssize_t n) {
    PyObject *key = PyBytes_FromStringAndSize((const char *)p, n);
    if (key == NULL) return NULL;
    PyObject *value = PyDict_GetItemWithError(cache, key);
    if (value != NULL) {
        Py_INCREF(value);
        Py_DECREF(key);
        return value;
    }
    if (PyErr_Occurred()) {
        Py_DECREF(key);
        return NULL;
    }
    value = PyObject_CallOneArg(fn, key);
    if (value != NULL && PyDict_GET_SIZE(cache) < PROPERTY_CACHE_MAX &&
        PyDict_SetItem(cache, key, value) < 0) {
        Py_CLEAR(value);
    }
    Py_DECREF(key);
    return value;
}

/* ---- build_records ------------------------------------------------------------------------ */
PyDoc_STRVAR(build_records_doc,
"build_records(batch, queue_id, queue_offset, position, middle, topic_part, max_body,\n"
"              property_code, cache)\n"
"--\n\n"
"The commit-log records and consume-queue units of a batch body, or None.\n\n"
"(end position, records, units, record positions, distinct tags codes, whether a record\n"
"has a KEYS or UNIQ_KEY property); None when an item\n"
"is malformed, its body is empty or over max_body, or property_code answers None for its\n"
"properties (then the Python implementation decides).");

/* Whether properties ("name\x01value\x02" pairs) name KEYS or UNIQ_KEY: what the key index
 * reads (the log keeps the ranges of such records; the rest it passes over). */
static int names_a_key(const unsigned char *p, Py_ssize_t n) {
    const unsigned char *end = p + n;
    while (p < end) {
        const unsigned char *sep = memchr(p, 1, (size_t)(end - p));
        if (sep == NULL) return 0;
        Py_ssize_t len = sep - p;
        if ((len == 4 && memcmp(p, "KEYS", 4) == 0) || (len == 8 && memcmp(p, "UNIQ_KEY", 8) == 0))
            return 1;
        const unsigned char *next = memchr(sep, 2, (size_t)(end - sep));
        if (next == NULL) return 0;
        p = next + 1;
    }
    return 0;
}

static PyObject *build_records(PyObject *self, PyObject *args) {
    Py_buffer batch, middle, topic_part;
    int queue_id, max_body;
    long long queue_offset, position;
    PyObject *property_code, *cache;
    if (!PyArg_ParseTuple(args, "y*iLLy*y*iOO!", &batch, &queue_id, &queue_offset, &position,
                          &middle, &topic_part, &max_body, &property_code, &PyDict_Type,
                          &cache))
        return NULL;
    PyObject *result = NULL, *records = NULL, *units = NULL, *placed = NULL, *codes = NULL;
    int64_t *item_codes = NULL;
    const unsigned char *in = batch.buf;
    const Py_ssize_t n_in = batch.len;
    const Py_ssize_t head_size = HEAD_FIXED + middle.len + 4;
    const Py_ssize_t tail_fixed = topic_part.len + 2;

    /* First pass: check every item, count them and the output size. */
    Py_ssize_t count = 0, out_size = 0, pos = 0;
    while (pos < n_in) {
        if (n_in - pos < BATCH_ITEM_FIXED) goto fallback;
        const unsigned char *p = in + pos;
        int32_t total = rd32(p), body_len = rd32(p + 16);
        if (total < BATCH_ITEM_FIXED || total > n_in - pos || body_len < 1 || body_len > max_body ||
            body_len > total - BATCH_ITEM_FIXED)
            goto fallback;
        int16_t props_len = rd16(p + 20 + body_len);
        if (props_len < 0 || props_len != total - BATCH_ITEM_FIXED - body_len) goto fallback;
        out_size += head_size + body_len + tail_fixed + props_len;
        count++;
        pos += total;
    }
    if (count == 0) goto fallback;
    item_codes = PyMem_Malloc(sizeof(int64_t) * (size_t)count);
    if (item_codes == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    codes = PyList_New(0);
    if (codes == NULL) goto done;
    /* The tags code of each item, from its properties (Python decides, once per distinct set). */
    int keyed = 0;
    {
        int64_t last = 0;
        int have_last = 0;
        pos = 0;
        for (Py_ssize_t i = 0; i < count; i++) {
            const unsigned char *p = in + pos;
            int32_t total = rd32(p), body_len = rd32(p + 16);
            Py_ssize_t props_len = total - BATCH_ITEM_FIXED - body_len;
            int64_t code = 0;
            if (props_len > 0) {
                if (!keyed) keyed = names_a_key(p + BATCH_ITEM_FIXED + body_len, props_len);
                PyObject *answer =
                    cached_call(cache, property_code, p + BATCH_ITEM_FIXED + body_len, props_len);
                if (answer == NULL) goto done;
                if (answer == Py_None) {
                    Py_DECREF(answer);
                    goto fallback;
                }
                code = PyLong_AsLongLong(answer);
                Py_DECREF(answer);
                if (code == -1 && PyErr_Occurred()) goto done;
            }
            item_codes[i] = code;
            if (!have_last || code != last) {
                PyObject *boxed = PyLong_FromLongLong(code);
                if (boxed == NULL) goto done;
                int seen = PySequence_Contains(codes, boxed);
                if (seen == 0 && PyList_Append(codes, boxed) < 0) seen = -1;
                Py_DECREF(boxed);
                if (seen < 0) goto done;
                last = code;
                have_last = 1;
            }
            pos += total;
        }
    }

    /* Second pass: write the records and the units. */
    records = PyBytes_FromStringAndSize(NULL, out_size);
    units = PyBytes_FromStringAndSize(NULL, count * CQ_UNIT_SIZE);
    placed = PyList_New(count);
    if (records == NULL || units == NULL || placed == NULL) goto done;
    {
        unsigned char *out = (unsigned char *)PyBytes_AS_STRING(records);
        unsigned char *unit = (unsigned char *)PyBytes_AS_STRING(units);
        int64_t qoff = queue_offset, phys = position;
        pos = 0;
        for (Py_ssize_t i = 0; i < count; i++) {
            const unsigned char *p = in + pos;
            int32_t total = rd32(p), flag = rd32(p + 12), body_len = rd32(p + 16);
            int32_t props_len = total - BATCH_ITEM_FIXED - body_len;
            const unsigned char *body = p + 20;
            int32_t size = (int32_t)(head_size + body_len + tail_fixed + props_len);
            wr32(out, size);
            wr32(out + 4, MESSAGE_MAGIC_CODE);
            wr32(out + 8, (int32_t)(crc32_of(body, body_len) & 0x7FFFFFFFu));
            wr32(out + 12, queue_id);
            wr32(out + 16, flag);
            wr64(out + 20, qoff);
            wr64(out + 28, phys);
            memcpy(out + HEAD_FIXED, middle.buf, (size_t)middle.len);
            wr32(out + HEAD_FIXED + middle.len, body_len);
            unsigned char *q = out + head_size;
            memcpy(q, body, (size_t)body_len);
            q += body_len;
            memcpy(q, topic_part.buf, (size_t)topic_part.len);
            q += topic_part.len;
            wr16(q, (int16_t)props_len);
            memcpy(q + 2, body + body_len + 2, (size_t)props_len);
            wr64(unit, phys);
            wr32(unit + 8, size);
            wr64(unit + 12, item_codes[i]);
            PyObject *at = PyLong_FromLongLong(phys);
            if (at == NULL) goto done;
            PyList_SET_ITEM(placed, i, at);
            out += size;
            unit += CQ_UNIT_SIZE;
            phys += size;
            qoff++;
            pos += total;
        }
        result = Py_BuildValue("(LOOOOO)", (long long)phys, records, units, placed, codes,
                               keyed ? Py_True : Py_False);
    }
    goto done;
fallback:
    result = Py_NewRef(Py_None);
done:
    PyMem_Free(item_codes);
    Py_XDECREF(records);
    Py_XDECREF(units);
    Py_XDECREF(placed);
    Py_XDECREF(codes);
    PyBuffer_Release(&batch);
    PyBuffer_Release(&middle);
    PyBuffer_Release(&topic_part);
    return result;
}

/* ---- the producer's side: batch bodies and message ids ------------------------------------- */
PyDoc_STRVAR(encode_batch_doc,
"encode_batch(messages, properties_of, max_properties)\n"
"--\n\n"
"The batch body of messages (protocol.batch.encode_batch), or None when a message is not\n"
"what it expects (a body not bytes, a flag out of int32, properties over max_properties),\n"
"for the Python implementation to answer or name. properties_of(message) gives the encoded\n"
"properties of a message with tags, keys, properties or a delay level.");

/* The attribute names encode_batch reads of each message, made once: PyObject_GetAttrString
 * makes a new string per call, and six such calls a message were most of the encoder's time
 * (40 us for a batch of 100 bodies of 256 B). */
enum { ATTR_BODY, ATTR_FLAG, ATTR_PROPERTIES, ATTR_TAGS, ATTR_KEYS, ATTR_DELAY, ATTR_COUNT };
static PyObject *message_attrs[ATTR_COUNT];

static int intern_message_attrs(void) {
    static const char *const names[ATTR_COUNT] = {
        "body", "flag", "properties", "tags", "keys", "delay_time_level",
    };
    for (int i = 0; i < ATTR_COUNT; i++)
        if ((message_attrs[i] = PyUnicode_InternFromString(names[i])) == NULL) return -1;
    return 0;
}

/* Whether the message has anything that goes in its properties (a truthy attribute). */
static int has_properties(PyObject *m) {
    for (int i = ATTR_PROPERTIES; i <= ATTR_DELAY; i++) {
        PyObject *v = PyObject_GetAttr(m, message_attrs[i]);
        if (v == NULL) return -1;
        int truth = PyObject_IsTrue(v);
        Py_DECREF(v);
        if (truth != 0) return truth;
    }
    return 0;
}

static PyObject *encode_batch_c(PyObject *self, PyObject *args) {
    PyObject *messages, *properties_of;
    Py_ssize_t max_props;
    if (!PyArg_ParseTuple(args, "OOn", &messages, &properties_of, &max_props)) return NULL;
    PyObject *seq = PySequence_Fast(messages, "messages must be a sequence");
    if (seq == NULL) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    PyObject **items = PySequence_Fast_ITEMS(seq);
    PyObject *result = NULL;
    /* Per message: its body and properties (new references) and its flag. */
    PyObject **parts = PyMem_Calloc((size_t)(2 * n + 1), sizeof(PyObject *));
    int32_t *flags = PyMem_Malloc(sizeof(int32_t) * (size_t)(n + 1));
    if (parts == NULL || flags == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    Py_ssize_t total = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *m = items[i];
        PyObject *body = PyObject_GetAttr(m, message_attrs[ATTR_BODY]);
        if (body == NULL) goto done;
        parts[2 * i] = body;
        PyObject *flag = PyObject_GetAttr(m, message_attrs[ATTR_FLAG]);
        if (flag == NULL) goto done;
        int overflow = 0;
        long long f = PyLong_Check(flag) ? PyLong_AsLongLongAndOverflow(flag, &overflow) : 0;
        int flag_ok = PyLong_Check(flag) && !overflow && f >= INT32_MIN && f <= INT32_MAX;
        Py_DECREF(flag);
        if (!flag_ok || !PyBytes_Check(body) || PyBytes_GET_SIZE(body) > INT32_MAX / 2) goto fallback;
        flags[i] = (int32_t)f;
        int has = has_properties(m);
        if (has < 0) goto done;
        PyObject *props = has ? PyObject_CallOneArg(properties_of, m) : PyBytes_FromStringAndSize(NULL, 0);
        if (props == NULL) goto done;
        parts[2 * i + 1] = props;
        if (!PyBytes_Check(props) || PyBytes_GET_SIZE(props) > max_props) goto fallback;
        total += BATCH_ITEM_FIXED + PyBytes_GET_SIZE(body) + PyBytes_GET_SIZE(props);
    }
    result = PyBytes_FromStringAndSize(NULL, total);
    if (result == NULL) goto done;
    {
        unsigned char *out = (unsigned char *)PyBytes_AS_STRING(result);
        for (Py_ssize_t i = 0; i < n; i++) {
            Py_ssize_t body_len = PyBytes_GET_SIZE(parts[2 * i]);
            Py_ssize_t props_len = PyBytes_GET_SIZE(parts[2 * i + 1]);
            wr32(out, (int32_t)(BATCH_ITEM_FIXED + body_len + props_len));
            wr32(out + 4, 0);
            wr32(out + 8, 0);
            wr32(out + 12, flags[i]);
            wr32(out + 16, (int32_t)body_len);
            memcpy(out + 20, PyBytes_AS_STRING(parts[2 * i]), (size_t)body_len);
            out += 20 + body_len;
            wr16(out, (int16_t)props_len);
            memcpy(out + 2, PyBytes_AS_STRING(parts[2 * i + 1]), (size_t)props_len);
            out += 2 + props_len;
        }
    }
    goto done;
fallback:
    result = Py_NewRef(Py_None);
done:
    if (parts != NULL)
        for (Py_ssize_t i = 0; i < 2 * n; i++) Py_XDECREF(parts[i]);
    PyMem_Free(parts);
    PyMem_Free(flags);
    Py_DECREF(seq);
    return result;
}

PyDoc_STRVAR(message_ids_doc,
"message_ids(prefix, offsets)\n"
"--\n\n"
"prefix (the store host's 16 or 40 upper-case hex digits) followed by each offset as 16\n"
"upper-case hex digits: the offset message ids of one send's answer.");

static PyObject *message_ids(PyObject *self, PyObject *args) {
    PyObject *prefix, *offsets;
    if (!PyArg_ParseTuple(args, "UO", &prefix, &offsets)) return NULL;
    if (!PyUnicode_IS_ASCII(prefix)) {
        PyErr_SetString(PyExc_ValueError, "prefix must be ASCII hex digits");
        return NULL;
    }
    PyObject *seq = PySequence_Fast(offsets, "offsets must be a sequence");
    if (seq == NULL) return NULL;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq), plen = PyUnicode_GET_LENGTH(prefix);
    const char *p = (const char *)PyUnicode_DATA(prefix);
    PyObject *ids = PyList_New(n);
    if (ids == NULL) goto fail;
    for (Py_ssize_t i = 0; i < n; i++) {
        unsigned long long v = PyLong_AsUnsignedLongLong(PySequence_Fast_GET_ITEM(seq, i));
        if (v == (unsigned long long)-1 && PyErr_Occurred()) goto fail;
        PyObject *id = PyUnicode_New(plen + 16, 127);
        if (id == NULL) goto fail;
        char *d = (char *)PyUnicode_DATA(id);
        memcpy(d, p, (size_t)plen);
        for (int k = 15; k >= 0; k--) {
            d[plen + k] = HEX[v & 0xF];
            v >>= 4;
        }
        PyList_SET_ITEM(ids, i, id);
    }
    Py_DECREF(seq);
    return ids;
fail:
    Py_XDECREF(ids);
    Py_DECREF(seq);
    return NULL;
}

/* ---- MessageExt without its __init__ ------------------------------------------------------ */
/* decode_records makes one MessageExt per record. Calling the dataclass's __init__ (18
 * arguments, in Python) was half of the decode's time, so when MessageExt is what we expect,
 * a slotted class of exactly these 18 writable object slots and no __dict__, the object is
 * allocated and its slots filled directly, as __init__ would (every field is given: no
 * default applies). Anything else falls back to calling the class. */
#define EXT_FIELDS 18
static const char *const ext_names[EXT_FIELDS] = {
    "topic",         "body",           "broker_name", "queue_id",        "queue_offset",
    "commit_log_offset", "msg_id",     "tags",        "keys",            "flag",
    "properties",    "born_timestamp", "born_host",   "store_timestamp", "store_host",
    "reconsume_times", "store_size",   "body_crc",
};
static PyObject *ext_type = NULL; /* the class ext_offsets describe (a strong reference) */
static Py_ssize_t ext_offsets[EXT_FIELDS];
static int ext_direct = 0; /* whether ext_type can be filled directly */

/* Learn how to fill cls directly: 1 if it can be, 0 if not; -1 with an error set. */
static int learn_slots(PyObject *cls) {
    Py_XSETREF(ext_type, Py_NewRef(cls));
    ext_direct = 0;
    if (!PyType_Check(cls)) return 0;
    PyTypeObject *type = (PyTypeObject *)cls;
    if (type->tp_dictoffset != 0 || type->tp_alloc == NULL ||
        type->tp_basicsize != (Py_ssize_t)(sizeof(PyObject) + EXT_FIELDS * sizeof(PyObject *)))
        return 0;
    for (int i = 0; i < EXT_FIELDS; i++) {
        PyObject *descr = PyObject_GetAttrString(cls, ext_names[i]);
        if (descr == NULL) {
            if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return -1;
            PyErr_Clear();
            return 0;
        }
        int usable = 0;
        if (Py_IS_TYPE(descr, &PyMemberDescr_Type) &&
            ((PyDescrObject *)descr)->d_type == type) {
            PyMemberDef *member = ((PyMemberDescrObject *)descr)->d_member;
            usable = member->type == T_OBJECT_EX && !(member->flags & READONLY);
            ext_offsets[i] = member->offset;
        }
        Py_DECREF(descr);
        if (!usable) return 0;
    }
    ext_direct = 1;
    return 1;
}

/* A new ext_type from values (EXT_FIELDS references, stolen), or NULL with an error set. */
static PyObject *fill_ext(PyObject **values) {
    PyTypeObject *type = (PyTypeObject *)ext_type;
    PyObject *obj = type->tp_alloc(type, 0);
    if (obj == NULL) {
        for (int i = 0; i < EXT_FIELDS; i++) Py_DECREF(values[i]);
        return NULL;
    }
    for (int i = 0; i < EXT_FIELDS; i++) *(PyObject **)((char *)obj + ext_offsets[i]) = values[i];
    /* It holds only strings, bytes, ints, None and a dict of strings: no cycle runs through
     * it, so, as CPython does for such tuples and dicts, the cyclic GC is spared it (a pull
     * makes a thousand at a time, a consumer holds many more; the GC's passes over them were a
     * third of the decode's time). Like msgspec's gc=False structs: a cycle made through one
     * later is not collected (see MessageExt). */
    if (PyObject_GC_IsTracked(obj)) PyObject_GC_UnTrack(obj);
    return obj;
}


/* ---- one pull record's layout ------------------------------------------------------------ */
/* Where the fields of the record at p are (avail bytes from p on), after the checks that make
 * reading them safe: the magic, the sizes, the body, topic and properties lengths. The two
 * decoders below share it. */
typedef struct {
    int32_t total;
    const unsigned char *born, *store_ts, *store, *rest, *body, *topic, *props;
    Py_ssize_t born_ip_len, store_ip_len, topic_len, props_len;
    int32_t body_len;
} Record;

#define MIN_RECORD_SIZE 93 /* protocol.record.MIN_RECORD_SIZE */

/* 1 and r filled when the record at p is well formed, else 0. */
static int parse_record(const unsigned char *p, Py_ssize_t avail, Record *r) {
    if (avail < MIN_RECORD_SIZE) return 0;
    int32_t total = rd32(p);
    if (rd32(p + 4) != MESSAGE_MAGIC_CODE || total < MIN_RECORD_SIZE || total > avail) return 0;
    int sysflag = p[SYSFLAG_POS + 3];
    r->total = total;
    r->born_ip_len = sysflag & BORNHOST_V6_FLAG ? 16 : 4;
    r->store_ip_len = sysflag & STOREHOST_V6_FLAG ? 16 : 4;
    r->born = p + 48;                                   /* ip, then port */
    r->store_ts = r->born + r->born_ip_len + 4;         /* STORETIMESTAMP */
    r->store = r->store_ts + 8;                         /* ip, then port */
    r->rest = r->store + r->store_ip_len + 4;           /* RECONSUMETIMES */
    Py_ssize_t head_size = (r->rest + 16) - p;          /* up to the body */
    if (head_size + 2 > total) return 0;
    r->body_len = rd32(r->rest + 12);
    if (r->body_len < 0 || r->body_len > total - head_size - 2) return 0;
    r->body = p + head_size;
    const unsigned char *topic_at = r->body + r->body_len;
    const unsigned char *end = p + total;
    r->topic_len = (topic_at[0] << 8) | topic_at[1];
    Py_ssize_t after_topic = (end - topic_at) - 2 - r->topic_len; /* properties, with length */
    if (after_topic < 2) return 0;
    r->topic = topic_at + 2;
    const unsigned char *props_at = r->topic + r->topic_len;
    if (((props_at[0] << 8) | props_at[1]) != after_topic - 2) return 0;
    r->props = props_at + 2;
    r->props_len = after_topic - 2;
    return 1;
}

/* The offset message id of the record at p (store host ip + port + commit log offset, upper
 * case hex) into id (2 * (16 + 4 + 8) bytes at most); its length. */
static Py_ssize_t offset_msg_id(const unsigned char *p, const Record *r, char *id) {
    Py_ssize_t id_len = 0, store_len = r->store_ip_len + 4;
    for (Py_ssize_t i = 0; i < store_len; i++) {
        id[id_len++] = HEX[r->store[i] >> 4];
        id[id_len++] = HEX[r->store[i] & 0xF];
    }
    for (int i = 0; i < 8; i++) {
        id[id_len++] = HEX[p[28 + i] >> 4];
        id[id_len++] = HEX[p[28 + i] & 0xF];
    }
    return id_len;
}

/* ---- decode_records ----------------------------------------------------------------------- */
PyDoc_STRVAR(decode_records_doc,
"decode_records(data, broker_name, message_ext, split, cache, format_host, check_crc)\n"
"--\n\n"
"The MessageExt of every record of data (records back to back), or None.\n\n"
"None when a record fails a check (magic, sizes, UTF-8, the body CRC with check_crc): the\n"
"Python implementation then names the problem. split(raw properties) -> (tags, keys,\n"
"properties) is called once per distinct properties (kept in cache); format_host(ip, port)\n"
"once per distinct host.");

static PyObject *decode_records(PyObject *self, PyObject *args) {
    Py_buffer data;
    PyObject *broker_name, *message_ext, *split, *cache, *format_host;
    int check_crc;
    if (!PyArg_ParseTuple(args, "y*UOOO!Op", &data, &broker_name, &message_ext, &split,
                          &PyDict_Type, &cache, &format_host, &check_crc))
        return NULL;
    const unsigned char *buf = data.buf;
    const Py_ssize_t n = data.len;
    PyObject *out = PyList_New(0);
    PyObject *topic = NULL, *born_host = NULL, *store_host = NULL;
    const unsigned char *topic_raw = NULL;
    Py_ssize_t topic_raw_len = -1;
    unsigned char born_key[20], store_key[20]; /* ip + port of the cached host strings */
    Py_ssize_t born_key_len = -1, store_key_len = -1;
    if (out == NULL) goto error;
    if (message_ext != ext_type && learn_slots(message_ext) < 0) goto error;
    Py_ssize_t pos = 0;
    while (pos < n) {
        const unsigned char *p = buf + pos;
        Record r;
        if (!parse_record(p, n - pos, &r)) goto fallback;
        int32_t total = r.total, body_len = r.body_len;
        const unsigned char *born = r.born, *store = r.store, *body = r.body;
        Py_ssize_t born_ip_len = r.born_ip_len, store_ip_len = r.store_ip_len;
        Py_ssize_t topic_len = r.topic_len;
        int32_t body_crc = rd32(p + 8);
        if (check_crc && (int32_t)(crc32_of(body, body_len) & 0x7FFFFFFFu) != body_crc)
            goto fallback;

        if (topic_len != topic_raw_len || memcmp(topic_raw, r.topic, (size_t)topic_len)) {
            Py_XSETREF(topic, PyUnicode_DecodeUTF8((const char *)r.topic, topic_len, NULL));
            if (topic == NULL) goto fallback_clear;
            topic_raw = r.topic;
            topic_raw_len = topic_len;
        }
        Py_ssize_t born_len = born_ip_len + 4, store_len = store_ip_len + 4;
        if (born_len != born_key_len || memcmp(born_key, born, (size_t)born_len)) {
            Py_XSETREF(born_host, PyObject_CallFunction(format_host, "y#i", born, born_ip_len,
                                                        (int)rd32(born + born_ip_len)));
            if (born_host == NULL) goto error;
            memcpy(born_key, born, (size_t)born_len);
            born_key_len = born_len;
        }
        if (store_len != store_key_len || memcmp(store_key, store, (size_t)store_len)) {
            Py_XSETREF(store_host, PyObject_CallFunction(format_host, "y#i", store, store_ip_len,
                                                         (int)rd32(store + store_ip_len)));
            if (store_host == NULL) goto error;
            memcpy(store_key, store, (size_t)store_len);
            store_key_len = store_len;
        }
        char id[2 * (16 + 4 + 8)];
        Py_ssize_t id_len = offset_msg_id(p, &r, id);

        PyObject *tags = Py_None, *keys = Py_None, *props, *split_answer = NULL;
        if (r.props_len > 0) {
            split_answer = cached_call(cache, split, r.props, r.props_len);
            if (split_answer == NULL) {
                if (PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) goto fallback_clear;
                goto error;
            }
            if (!PyTuple_Check(split_answer) || PyTuple_GET_SIZE(split_answer) != 3) {
                Py_DECREF(split_answer);
                PyErr_SetString(PyExc_TypeError, "split must answer (tags, keys, properties)");
                goto error;
            }
            tags = PyTuple_GET_ITEM(split_answer, 0);
            keys = PyTuple_GET_ITEM(split_answer, 1);
            props = PyDict_Copy(PyTuple_GET_ITEM(split_answer, 2));
        } else {
            props = PyDict_New();
        }
        PyObject *values[EXT_FIELDS] = {
            topic,
            PyBytes_FromStringAndSize((const char *)body, body_len),
            broker_name,
            PyLong_FromLong(rd32(p + 12)),
            PyLong_FromLongLong(rd64(p + 20)),
            PyLong_FromLongLong(rd64(p + 28)),
            PyUnicode_FromStringAndSize(id, id_len),
            tags,
            keys,
            PyLong_FromLong(rd32(p + 16)),
            props,
            PyLong_FromLongLong(rd64(p + 40)),
            born_host,
            PyLong_FromLongLong(rd64(r.store_ts)),
            store_host,
            PyLong_FromLong(rd32(r.rest)),
            PyLong_FromLong(total),
            PyLong_FromLong(body_crc),
        };
        static const int borrowed[] = {0, 2, 7, 8, 12, 14};
        PyObject *message = NULL;
        int ok = 1;
        for (int i = 0; i < EXT_FIELDS; i++)
            if (values[i] == NULL) ok = 0;
        for (size_t i = 0; i < sizeof(borrowed) / sizeof(borrowed[0]); i++)
            Py_INCREF(values[borrowed[i]]);
        if (ok && ext_direct) {
            message = fill_ext(values);
        } else {
            if (ok) message = PyObject_Vectorcall(message_ext, values, EXT_FIELDS, NULL);
            for (int i = 0; i < EXT_FIELDS; i++) Py_XDECREF(values[i]);
        }
        Py_XDECREF(split_answer);
        if (message == NULL) goto error;
        int appended = PyList_Append(out, message);
        Py_DECREF(message);
        if (appended < 0) goto error;
        pos += total;
    }
    goto done;
fallback_clear:
    PyErr_Clear();
fallback:
    Py_XSETREF(out, Py_NewRef(Py_None));
    goto done;
error:
    Py_CLEAR(out);
done:
    Py_XDECREF(topic);
    Py_XDECREF(born_host);
    Py_XDECREF(store_host);
    PyBuffer_Release(&data);
    return out;
}


/* ---- decode_columns ----------------------------------------------------------------------- */
/* A growable byte buffer (PyMem). */
typedef struct {
    char *data;
    Py_ssize_t len, cap;
} Buf;

static int buf_put(Buf *b, const void *src, Py_ssize_t n) {
    if (b->len + n > b->cap) {
        Py_ssize_t cap = b->cap ? b->cap : 4096;
        while (cap < b->len + n) cap *= 2;
        char *grown = PyMem_Realloc(b->data, (size_t)cap);
        if (grown == NULL) {
            PyErr_NoMemory();
            return -1;
        }
        b->data = grown;
        b->cap = cap;
    }
    if (n) memcpy(b->data + b->len, src, (size_t)n);
    b->len += n;
    return 0;
}
static int buf_i32(Buf *b, int32_t v) { return buf_put(b, &v, 4); }
static int buf_i64(Buf *b, int64_t v) { return buf_put(b, &v, 8); }

/* The buffer as bytes (a new reference, or NULL with an error set); the buffer is emptied. */
static PyObject *buf_bytes(Buf *b) {
    PyObject *out = PyBytes_FromStringAndSize(b->data ? b->data : "", b->len);
    PyMem_Free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
    return out;
}

/* A string column being built: Arrow's validity bitmap (one bit a row), int32 offsets, data. */
typedef struct {
    Buf valid, offsets, data;
} Strings;

static int strings_add(Strings *c, Py_ssize_t row, const unsigned char *p, Py_ssize_t n) {
    if (row % 8 == 0) {
        char zero = 0;
        if (buf_put(&c->valid, &zero, 1) < 0) return -1;
    }
    if (p != NULL) {
        c->valid.data[row / 8] |= (char)(1 << (row % 8));
        if (buf_put(&c->data, p, n) < 0) return -1;
    }
    return buf_i32(&c->offsets, (int32_t)c->data.len);
}

/* (validity, offsets, data) as bytes, or NULL with an error set; the buffers are emptied. */
static PyObject *strings_take(Strings *c) {
    PyObject *valid = buf_bytes(&c->valid), *offsets = buf_bytes(&c->offsets);
    PyObject *data = buf_bytes(&c->data);
    if (valid == NULL || offsets == NULL || data == NULL) {
        Py_XDECREF(valid);
        Py_XDECREF(offsets);
        Py_XDECREF(data);
        return NULL;
    }
    return Py_BuildValue("(NNN)", valid, offsets, data);
}

static void strings_free(Strings *c) {
    PyMem_Free(c->valid.data);
    PyMem_Free(c->offsets.data);
    PyMem_Free(c->data.data);
}

#define COLUMN_STRINGS 6 /* msg id, tags, keys, body, property names, property values */
#define MAX_PROPERTIES 64

PyDoc_STRVAR(decode_columns_doc,
"decode_columns(data, end)\n"
"--\n\n"
"The records of data (back to back) whose queue offset is below end, as Arrow buffers, or\n"
"None.\n\n"
"(count, topic, queue id, queue offsets, msg ids, tags, keys, bodies, born us, store us,\n"
"property entry offsets, property names, property values): int64 columns as bytes in the\n"
"machine's order, in microseconds for the times; each string or binary column as (validity\n"
"bitmap, int32 offsets, data); the properties without TAGS and KEYS, as decode_records\n"
"leaves them. None when a record fails a check, the records are not all of one topic and\n"
"queue, a property is not ASCII or named twice, or the machine is big-endian: the caller then\n"
"decodes MessageExt objects (decode_records), which say what is wrong.");

static PyObject *decode_columns(PyObject *self, PyObject *args) {
    Py_buffer data;
    long long end_offset;
    if (!PyArg_ParseTuple(args, "y*L", &data, &end_offset)) return NULL;
    const uint16_t one = 1;
    const unsigned char *buf = data.buf;
    const Py_ssize_t n = data.len;
    PyObject *out = NULL;
    Buf queue_offsets = {0}, born = {0}, stored = {0}, entries = {0};
    Strings cols[COLUMN_STRINGS];
    memset(cols, 0, sizeof cols);
    Strings *ids = &cols[0], *tags = &cols[1], *keys = &cols[2], *bodies = &cols[3];
    Strings *names = &cols[4], *values = &cols[5];
    const unsigned char *topic = NULL;
    Py_ssize_t topic_len = 0, count = 0, entry_count = 0;
    int32_t queue_id = 0;
    if (*(const unsigned char *)&one != 1) goto fallback; /* Arrow's buffers: little-endian */
    for (int i = 0; i < COLUMN_STRINGS; i++)
        if (buf_i32(&cols[i].offsets, 0) < 0) goto error;
    if (buf_i32(&entries, 0) < 0) goto error;
    Py_ssize_t pos = 0;
    while (pos < n) {
        const unsigned char *p = buf + pos;
        Record r;
        if (!parse_record(p, n - pos, &r)) goto fallback;
        int64_t queue_offset = rd64(p + 20);
        if (queue_offset >= end_offset) break; /* a pull's offsets ascend */
        if (count == 0) {
            topic = r.topic;
            topic_len = r.topic_len;
            queue_id = rd32(p + 12);
        } else if (r.topic_len != topic_len || memcmp(r.topic, topic, (size_t)topic_len) ||
                   rd32(p + 12) != queue_id) {
            goto fallback;
        }
        char id[2 * (16 + 4 + 8)];
        Py_ssize_t id_len = offset_msg_id(p, &r, id);
        /* The properties: key \x01 value \x02 ..., ASCII only here. */
        const unsigned char *tag = NULL, *key = NULL;
        Py_ssize_t tag_len = 0, key_len = 0, own = 0;
        const unsigned char *own_name[MAX_PROPERTIES], *own_value[MAX_PROPERTIES];
        Py_ssize_t own_name_len[MAX_PROPERTIES], own_value_len[MAX_PROPERTIES];
        const unsigned char *q = r.props, *props_end = r.props + r.props_len;
        for (const unsigned char *c = q; c < props_end; c++)
            if (*c >= 0x80) goto fallback;
        while (q < props_end) {
            const unsigned char *item_end = memchr(q, 2, (size_t)(props_end - q));
            if (item_end == NULL) item_end = props_end;
            if (item_end > q) {
                const unsigned char *sep = memchr(q, 1, (size_t)(item_end - q));
                const unsigned char *value = sep ? sep + 1 : item_end;
                Py_ssize_t name_len = (sep ? sep : item_end) - q;
                Py_ssize_t value_len = item_end - value;
                if (name_len == 4 && !memcmp(q, "TAGS", 4)) {
                    tag = value;
                    tag_len = value_len;
                } else if (name_len == 4 && !memcmp(q, "KEYS", 4)) {
                    key = value;
                    key_len = value_len;
                } else {
                    if (own == MAX_PROPERTIES) goto fallback;
                    for (Py_ssize_t i = 0; i < own; i++)
                        if (own_name_len[i] == name_len && !memcmp(own_name[i], q, (size_t)name_len))
                            goto fallback; /* named twice: the dict keeps the last value */
                    own_name[own] = q;
                    own_name_len[own] = name_len;
                    own_value[own] = value;
                    own_value_len[own++] = value_len;
                }
            }
            q = item_end + 1;
        }
        if (buf_i64(&queue_offsets, queue_offset) < 0 ||
            buf_i64(&born, rd64(p + 40) * 1000) < 0 ||
            buf_i64(&stored, rd64(r.store_ts) * 1000) < 0 ||
            strings_add(ids, count, (const unsigned char *)id, id_len) < 0 ||
            strings_add(tags, count, tag, tag_len) < 0 ||
            strings_add(keys, count, key, key_len) < 0 ||
            strings_add(bodies, count, r.body, r.body_len) < 0)
            goto error;
        for (Py_ssize_t i = 0; i < own; i++) {
            if (strings_add(names, entry_count, own_name[i], own_name_len[i]) < 0 ||
                strings_add(values, entry_count, own_value[i], own_value_len[i]) < 0)
                goto error;
            entry_count++;
        }
        if (buf_i32(&entries, (int32_t)entry_count) < 0) goto error;
        count++;
        pos += r.total;
    }
    {
        PyObject *topic_str = PyUnicode_DecodeASCII((const char *)(topic ? topic : buf),
                                                    topic ? topic_len : 0, NULL);
        if (topic_str == NULL) {
            PyErr_Clear();
            goto fallback;
        }
        PyObject *fields[13] = {
            PyLong_FromSsize_t(count), topic_str, PyLong_FromLong(queue_id),
            buf_bytes(&queue_offsets), strings_take(ids), strings_take(tags),
            strings_take(keys), strings_take(bodies), buf_bytes(&born), buf_bytes(&stored),
            buf_bytes(&entries), strings_take(names), strings_take(values),
        };
        int ok = 1;
        for (int i = 0; i < 13; i++)
            if (fields[i] == NULL) ok = 0;
        if (ok) out = PyTuple_New(13);
        if (out != NULL)
            for (int i = 0; i < 13; i++) PyTuple_SET_ITEM(out, i, fields[i]);
        else
            for (int i = 0; i < 13; i++) Py_XDECREF(fields[i]);
        goto done;
    }
fallback:
    out = Py_NewRef(Py_None);
    goto done;
error:
    out = NULL;
done:
    PyMem_Free(queue_offsets.data);
    PyMem_Free(born.data);
    PyMem_Free(stored.data);
    PyMem_Free(entries.data);
    for (int i = 0; i < COLUMN_STRINGS; i++) strings_free(&cols[i]);
    PyBuffer_Release(&data);
    return out;
}

/* ---- select_units ------------------------------------------------------------------------- */
PyDoc_STRVAR(select_units_doc,
"select_units(units, max_nums, max_bytes, physical_min, code_set)\n"
"--\n\n"
"A pull's pick from consume-queue units: (scanned, chosen, runs).\n\n"
"See broker.store.consume_queue.select_units_py, the reference.");

/* Append the run (start, bytes, records) to runs; -1 with an error set on failure. */
static int append_run(PyObject *runs, long long start, long long end, Py_ssize_t count) {
    PyObject *run = Py_BuildValue("(LLn)", start, end - start, count);
    if (run == NULL) return -1;
    int appended = PyList_Append(runs, run);
    Py_DECREF(run);
    return appended;
}

static PyObject *select_units(PyObject *self, PyObject *args) {
    Py_buffer units;
    Py_ssize_t max_nums;
    long long max_bytes, physical_min;
    PyObject *code_set;
    if (!PyArg_ParseTuple(args, "y*nLLO", &units, &max_nums, &max_bytes, &physical_min,
                          &code_set))
        return NULL;
    PyObject *chosen = PyList_New(0), *runs = PyList_New(0), *result = NULL;
    if (chosen == NULL || runs == NULL) goto done;
    const unsigned char *u = units.buf;
    Py_ssize_t n = units.len / CQ_UNIT_SIZE, scanned = 0, picked = 0, run_count = 0;
    long long total = 0, run_start = 0, run_end = 0;
    for (Py_ssize_t i = 0; i < n; i++, u += CQ_UNIT_SIZE) {
        int64_t physical = rd64(u), code = rd64(u + 12);
        int32_t size = rd32(u + 8);
        if (picked >= max_nums || (max_bytes >= 0 && picked && total + size > max_bytes)) break;
        scanned++;
        if (size <= 0 || physical < physical_min) continue;
        if (code_set != Py_None) {
            PyObject *boxed = PyLong_FromLongLong(code);
            if (boxed == NULL) goto done;
            int in = PySet_Contains(code_set, boxed);
            Py_DECREF(boxed);
            if (in < 0) goto done;
            if (!in) continue;
        }
        PyObject *item = Py_BuildValue("(Li)", (long long)physical, (int)size);
        if (item == NULL) goto done;
        int appended = PyList_Append(chosen, item);
        Py_DECREF(item);
        if (appended < 0) goto done;
        if (run_count && physical == run_end) {
            run_end += size;
            run_count++;
        } else {
            if (run_count && append_run(runs, run_start, run_end, run_count) < 0) goto done;
            run_start = physical;
            run_end = physical + size;
            run_count = 1;
        }
        picked++;
        total += size;
    }
    if (run_count && append_run(runs, run_start, run_end, run_count) < 0) goto done;
    result = Py_BuildValue("(nOO)", scanned, chosen, runs);
done:
    Py_XDECREF(chosen);
    Py_XDECREF(runs);
    PyBuffer_Release(&units);
    return result;
}

PyDoc_STRVAR(crc32_doc,
"crc32(data, table=False) -> int\n--\n\n"
"zlib's CRC32 of data, as the records' BODYCRC is computed (a check of this module's):\n"
"by carry-less multiplication where the CPU has it, or with table=True by the table.");

static PyObject *crc32_py(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *kwlist[] = {"", "table", NULL};
    Py_buffer data;
    int table = 0;
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "y*|p", kwlist, &data, &table)) return NULL;
    uint32_t c = table ? crc32_table(0xFFFFFFFFu, data.buf, data.len) ^ 0xFFFFFFFFu
                       : crc32_of(data.buf, data.len);
    PyBuffer_Release(&data);
    return PyLong_FromUnsignedLong(c);
}

static PyMethodDef methods[] = {
    {"build_records", build_records, METH_VARARGS, build_records_doc},
    {"encode_batch", encode_batch_c, METH_VARARGS, encode_batch_doc},
    {"message_ids", message_ids, METH_VARARGS, message_ids_doc},
    {"decode_records", decode_records, METH_VARARGS, decode_records_doc},
    {"decode_columns", decode_columns, METH_VARARGS, decode_columns_doc},
    {"select_units", select_units, METH_VARARGS, select_units_doc},
    {"crc32", (PyCFunction)(void (*)(void))crc32_py, METH_VARARGS | METH_KEYWORDS, crc32_doc},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "protocol._speedups",
    "The data path's per-message loops in C (optional; see protocol.record).", -1, methods,
};

PyMODINIT_FUNC PyInit__speedups(void) {
    crc_init();
#ifdef HAVE_CLMUL
    __builtin_cpu_init();
    use_clmul = __builtin_cpu_supports("pclmul") != 0;
#endif
    if (intern_message_attrs() < 0) return NULL;
    return PyModule_Create(&module);
}
