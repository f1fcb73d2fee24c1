/* cmd_logits.c: `gauntlet logits`: the logits at every prompt position, for
 * a person chasing a numerical difference between two backends. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "commands.h"
#include "gt/sampler.h"

static void help(FILE *f)
{
    fprintf(f, "usage: gauntlet logits -m MODEL [-b BACKEND] (-p PROMPT | --ids I,J,..) [--json] [--top K]\n"
               "      --ids I,J,..    evaluate these token ids as given (no tokenizer, no BOS):\n"
               "                      to compare with another runtime position by position\n"
               "  -b, --backend NAME  reference (default), cpu, opencl, cuda\n"
               "  -t, --threads N     backend threads\n"
               "      --driver D      driver profile setting\n"
               "      --no-bos        do not prepend BOS\n"
               "      --json          {\"tokens\": [...], \"logits\": [[...], ...]} (all logits)\n"
               "      --top K         text mode: show the K largest logits per position (default 5)\n");
}

/* "1,2,3" -> ids (each < n_vocab); NULL with a message when malformed. */
static int32_t *parse_ids(const char *list, int n_vocab, int *n)
{
    *n = 0;
    int32_t *ids = malloc((strlen(list) / 2 + 1) * sizeof *ids);
    if (!ids)
        return NULL;
    for (const char *p = list; *p;) {
        char *end;
        long v = strtol(p, &end, 10);
        if (end == p || v < 0 || v >= n_vocab || (*end && *end != ',')) {
            fprintf(stderr, "gauntlet logits: --ids: '%s' is not a list of ids below %d\n", list,
                    n_vocab);
            free(ids);
            return NULL;
        }
        ids[(*n)++] = (int32_t)v;
        p = *end ? end + 1 : end;
    }
    return ids;
}

int cmd_logits(int argc, char **argv)
{
    const char *model = NULL, *backend = "reference", *prompt = NULL, *driver = NULL,
               *id_list = NULL;
    bool json = false, no_bos = false;
    long top = 5, threads = 0;
    static const struct option opts[] = {
        {"model", required_argument, 0, 'm'}, {"backend", required_argument, 0, 'b'},
        {"prompt", required_argument, 0, 'p'}, {"threads", required_argument, 0, 't'},
        {"driver", required_argument, 0, 'D'}, {"no-bos", no_argument, 0, 'B'},
        {"json", no_argument, 0, 'j'},        {"top", required_argument, 0, 'k'},
        {"ids", required_argument, 0, 'I'},
        {"help", no_argument, 0, 'h'},        {0, 0, 0, 0}};
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, "m:b:p:t:h", opts, NULL)) != -1) {
        switch (c) {
        case 'm': model = optarg; break;
        case 'b': backend = optarg; break;
        case 'p': prompt = optarg; break;
        case 't': if (gt_cli_int("logits", "-t", optarg, 0, 1024, &threads)) return GT_EXIT_USAGE; break;
        case 'D': driver = optarg; break;
        case 'B': no_bos = true; break;
        case 'j': json = true; break;
        case 'I': id_list = optarg; break;
        case 'k': if (gt_cli_int("logits", "--top", optarg, 1, 1 << 20, &top)) return GT_EXIT_USAGE; break;
        case 'h': help(stdout); return GT_EXIT_OK;
        default: help(stderr); return GT_EXIT_USAGE;
        }
    }
    if (!model || !prompt == !id_list || optind < argc) {
        fprintf(stderr, "gauntlet logits: -m MODEL and one of -p PROMPT, --ids are required\n");
        help(stderr);
        return GT_EXIT_USAGE;
    }
    gt_cli_run run;
    if (gt_cli_open("logits", model, backend, (int)threads, driver, 0, &run) != 0)
        return GT_EXIT_USAGE;
    const int n_vocab = gt_model_hparams(run.model)->n_vocab;
    const gt_tokenizer *tok = gt_model_tokenizer(run.model);
    int n = 0, rc = GT_EXIT_OK;
    gt_err err = {{0}};
    int32_t *ids = id_list ? parse_ids(id_list, n_vocab, &n)
                           : gt_cli_tokenize("logits", run.model, prompt, no_bos, &n);
    float *logits = ids && n > 0 ? malloc(sizeof(float) * (size_t)n * n_vocab) : NULL;
    if (!logits) {
        if (ids)
            fprintf(stderr, "gauntlet logits: %s\n", n == 0 ? "no tokens to evaluate" : "out of memory");
        rc = GT_EXIT_USAGE;
        goto done;
    }
    if (gt_session_eval(run.session, ids, n, true, logits, &err) != 0) {
        fprintf(stderr, "gauntlet logits: %s\n", err.msg);
        rc = GT_EXIT_FAIL;
        goto done;
    }
    if (json) {
        /* Written by hand rather than through cJSON: %.9g round-trips every
         * float exactly, and a 49152-wide row stays cheap. */
        printf("{\"tokens\": [");
        for (int i = 0; i < n; i++)
            printf("%s%d", i ? ", " : "", ids[i]);
        printf("], \"logits\": [");
        for (int i = 0; i < n; i++) {
            printf("%s[", i ? ", " : "");
            for (int j = 0; j < n_vocab; j++)
                printf("%s%.9g", j ? ", " : "", logits[(size_t)i * n_vocab + j]);
            printf("]");
        }
        printf("]}\n");
    } else {
        for (int i = 0; i < n; i++) {
            const float *row = logits + (size_t)i * n_vocab;
            printf("pos %d  token %d %s\n  first:", i, ids[i], gt_token_piece(tok, ids[i]));
            for (int j = 0; j < 5 && j < n_vocab; j++)
                printf(" %.5f", row[j]);
            printf("\n  top:");
            /* A partial selection: K passes are fine for the K a person reads. */
            char *taken = calloc((size_t)n_vocab, 1);
            for (long k = 0; k < top && k < n_vocab && taken; k++) {
                int best = -1;
                for (int j = 0; j < n_vocab; j++)
                    if (!taken[j] && (best < 0 || row[j] > row[best]))
                        best = j;
                taken[best] = 1;
                printf(" %d:%s=%.4f", best, gt_token_piece(tok, best), row[best]);
            }
            free(taken);
            printf("\n");
        }
    }
done:
    free(logits);
    free(ids);
    gt_cli_close(&run);
    return rc;
}
