/* cmd_tokenize.c: `gauntlet tokenize`: token ids and pieces of a text, for a
 * person checking what the model actually sees. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cjson/cJSON.h>

#include "commands.h"
#include "gt/gguf.h"
#include "gt/tokenizer.h"

static void help(FILE *f)
{
    fprintf(f, "usage: gauntlet tokenize -m MODEL [--no-bos] [--special] [--json] TEXT\n"
               "  prints one line per token: id, piece as stored, and the decoded bytes;\n"
               "  --json prints {\"tokens\": [...], \"pieces\": [...]}.\n"
               "  TEXT is prompt text: control tokens written in it (\"<|im_end|>\",\n"
               "  \"</s>\") stay text, as llama.cpp's parse_special=false does;\n"
               "  user-defined tokens are still matched. --special also turns the\n"
               "  control tokens' text into those tokens, as a chat template's markup.\n"
               "  Only the tokenizer is read, so a tokenizer-only GGUF works too.\n");
}

int cmd_tokenize(int argc, char **argv)
{
    const char *model = NULL;
    bool no_bos = false, json = false, special = false;
    static const struct option opts[] = {{"model", required_argument, 0, 'm'},
                                         {"no-bos", no_argument, 0, 'B'},
                                         {"json", no_argument, 0, 'j'},
                                         {"special", no_argument, 0, 'S'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, "m:h", opts, NULL)) != -1) {
        switch (c) {
        case 'm': model = optarg; break;
        case 'B': no_bos = true; break;
        case 'j': json = true; break;
        case 'S': special = true; break;
        case 'h': help(stdout); return GT_EXIT_OK;
        default: help(stderr); return GT_EXIT_USAGE;
        }
    }
    if (!model || optind != argc - 1) {
        fprintf(stderr, "gauntlet tokenize: -m MODEL and exactly one TEXT are required\n");
        help(stderr);
        return GT_EXIT_USAGE;
    }
    const char *text = argv[optind];
    gt_err err = {{0}};
    gt_gguf *g = NULL;
    gt_tokenizer *tok = NULL;
    if (gt_gguf_open(model, &g, &err) != 0 || gt_tokenizer_from_gguf(g, &tok, &err) != 0) {
        fprintf(stderr, "gauntlet tokenize: %s\n", err.msg);
        gt_gguf_close(g);
        return GT_EXIT_USAGE;
    }
    const bool bos = !no_bos && gt_tokenizer_adds_bos(tok);
    int n = gt_tokenize_special(tok, text, strlen(text), bos, special, NULL, 0, &err);
    int32_t *ids = n >= 0 ? malloc(sizeof(int32_t) * (size_t)(n + 1)) : NULL;
    int rc = GT_EXIT_OK;
    if (!ids) {
        fprintf(stderr, "gauntlet tokenize: %s\n", n < 0 ? err.msg : "out of memory");
        rc = GT_EXIT_USAGE;
        goto done;
    }
    gt_tokenize_special(tok, text, strlen(text), bos, special, ids, n, &err);
    if (json) {
        cJSON *root = cJSON_CreateObject();
        cJSON *arr = cJSON_AddArrayToObject(root, "tokens");
        cJSON *pieces = cJSON_AddArrayToObject(root, "pieces");
        for (int i = 0; i < n; i++) {
            cJSON_AddItemToArray(arr, cJSON_CreateNumber(ids[i]));
            cJSON_AddItemToArray(pieces, cJSON_CreateString(gt_token_piece(tok, ids[i])));
        }
        char *s = cJSON_PrintUnformatted(root);
        puts(s ? s : "{}");
        free(s);
        cJSON_Delete(root);
    } else {
        for (int i = 0; i < n; i++) {
            char bytes[128];
            int len = gt_token_to_bytes(tok, ids[i], bytes, sizeof bytes - 1);
            bytes[len < (int)sizeof bytes - 1 ? len : (int)sizeof bytes - 1] = '\0';
            printf("%6d  %-24s  \"", ids[i], gt_token_piece(tok, ids[i]));
            for (const unsigned char *p = (const unsigned char *)bytes; *p; p++)
                printf(*p < 0x20 || *p == '"' || *p == '\\' ? "\\x%02x" : "%c", *p);
            printf("\"\n");
        }
        printf("%d tokens\n", n);
    }
done:
    free(ids);
    gt_tokenizer_free(tok);
    gt_gguf_close(g);
    return rc;
}
