/* fuzz_gguf.c: libFuzzer target for the GGUF reader and what reads its
 * metadata next (the tokenizer and the model's hyper-parameters).
 *
 * The reader only opens paths (it mmaps), so each input is written to a
 * memfd and opened through /proc/self/fd: no runtime API is added for the
 * fuzzer, and nothing touches the disk. A path under /proc never matches the
 * split-shard file name pattern, so an input claiming split.count > 1 must be
 * rejected with a message, not followed to other files. Every accessor is
 * then walked, because a validated-but-inconsistent header (an array length
 * past its data, a string past the end) shows up only when read. A model
 * that loads is run for a few tokens on the reference backend: the loader's
 * shape checks are what stands between a crafted file and the graph, so a
 * file that passes them must also evaluate (with whatever numbers) without
 * touching memory it does not own. Only small models are run, to keep the
 * fuzzer fast; the KV cache is 8 positions whatever the file says. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "gt/backend.h"
#include "gt/gguf.h"
#include "gt/model.h"
#include "gt/session.h"
#include "gt/tokenizer.h"

/* Touch every byte an accessor hands out, so ASan sees an out-of-bounds
 * pointer even when the caller would only have looked at part of it. */
static volatile unsigned sink;
static void touch(const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; p && i < n; i++)
        sink += b[i];
}

static void walk(const gt_gguf *g)
{
    for (int64_t i = 0; i < gt_gguf_n_kv(g); i++) {
        const char *k = gt_gguf_key(g, i);
        touch(k, strlen(k));
        int64_t iv;
        double dv;
        bool bv;
        size_t len;
        gt_gguf_kv_int(g, i, &iv);
        gt_gguf_kv_float(g, i, &dv);
        gt_gguf_kv_bool(g, i, &bv);
        /* Pointer first, then its length: as two arguments of one call their
         * order of evaluation is unspecified. */
        const char *str = gt_gguf_kv_str(g, i, &len);
        touch(str, str ? len : 0);
        const void *raw = gt_gguf_kv_raw(g, i, &len);
        touch(raw, raw ? len : 0);
        if (gt_gguf_kv_type(g, i) != GT_GGUF_ARRAY)
            continue;
        uint64_t n = gt_gguf_arr_len(g, i);
        gt_gguf_vtype et = gt_gguf_arr_type(g, i);
        if (et == GT_GGUF_STRING) {
            for (uint64_t j = 0; j < n && j < 4096; j++) {
                const char *e = gt_gguf_arr_str(g, i, j, &len);
                touch(e, e ? len : 0);
            }
        } else if (et != GT_GGUF_ARRAY) {
            touch(gt_gguf_arr_data(g, i), (size_t)n * gt_gguf_vtype_size(et));
        }
    }
    for (int64_t i = 0; i < gt_gguf_n_tensors(g); i++) {
        const gt_gguf_tensor *t = gt_gguf_tensor_at(g, i);
        touch(t->name, strlen(t->name) + 1);
        if (gt_gguf_find_tensor(g, t->name) == NULL)
            __builtin_trap(); /* a tensor the reader listed must be found by name */
        /* First and last byte only: tensors can be large, and the bounds are
         * what the reader promises. */
        if (t->nbytes) {
            touch(t->data, 1);
            touch((const char *)t->data + t->nbytes - 1, 1);
        }
    }
}

static void eval(const gt_model *m)
{
    static gt_backend *ref;
    gt_err err;
    const gt_hparams *hp = gt_model_hparams(m);
    /* Weight bytes scale with n_layer x n_embd x n_ff: a bound on those keeps
     * a run in milliseconds. */
    if ((uint64_t)hp->n_layer * hp->n_embd * (hp->n_ff + 4 * hp->n_embd) > (1u << 22) ||
        (uint64_t)hp->n_vocab * hp->n_embd > (1u << 22))
        return;
    gt_backend_config cfg = {.device = 0, .n_threads = 1, .driver = NULL};
    if (!ref && gt_backend_open("reference", &cfg, &ref, &err) != 0)
        __builtin_trap(); /* the built-in reference always opens */
    gt_session_params p = {.n_ctx = 8, .n_batch = 4};
    gt_session *s = NULL;
    if (gt_session_new(m, ref, &p, &s, &err) != 0)
        return;
    int32_t toks[6];
    for (int i = 0; i < 6; i++)
        toks[i] = (int32_t)((i * 7 + 1) % (hp->n_vocab > 0 ? hp->n_vocab : 1));
    float *logits = malloc(sizeof *logits * (size_t)hp->n_vocab * 6);
    if (logits && gt_session_eval(s, toks, 6, true, logits, &err) == 0)
        gt_session_eval(s, toks, 1, false, logits, &err);
    /* Past the cache: must fail with a message, not write past it. */
    if (logits && gt_session_eval(s, toks, 6, false, logits, &err) == 0)
        __builtin_trap();
    free(logits);
    gt_session_free(s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int fd = memfd_create("fuzz.gguf", MFD_CLOEXEC);
    if (fd < 0)
        return 0;
    size_t off = 0;
    while (off < size) {
        ssize_t w = write(fd, data + off, size - off);
        if (w <= 0) {
            close(fd);
            return 0;
        }
        off += (size_t)w;
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);

    gt_err err = {{0}};
    gt_gguf *g = NULL;
    if (gt_gguf_open(path, &g, &err) == 0) {
        walk(g);
        gt_tokenizer *t = NULL;
        if (gt_tokenizer_from_gguf(g, &t, &err) == 0) {
            int32_t ids[64];
            static const char text[] = "Once upon a time, \xc3\xa9t\xc3\xa9 <s> 42";
            int n = gt_tokenize(t, text, sizeof text - 1, true, ids, 64, &err);
            char out[512];
            if (n > 0)
                gt_detokenize(t, ids, n < 64 ? n : 64, out, sizeof out);
            for (int32_t id = 0; id < gt_tokenizer_n_vocab(t) && id < 1024; id++)
                gt_token_to_bytes(t, id, out, sizeof out);
            gt_tokenizer_free(t);
        }
        gt_gguf_close(g);
        gt_model *m = NULL;
        if (gt_model_load(path, &m, &err) == 0) {
            eval(m);
            gt_model_free(m);
        }
    } else if (err.msg[0] == '\0') {
        __builtin_trap(); /* a failure must say why */
    }
    close(fd);
    return 0;
}
