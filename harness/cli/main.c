/* main.c: the gauntlet program's entry point: finds the verb and runs it.
 * This is the only place that exits; every verb returns its exit code. */
#include <stdio.h>
#include <string.h>

#include "commands.h"

typedef struct verb {
    const char *name;
    int (*fn)(int, char **);
    const char *summary;
} verb;

static const verb VERBS[] = {
    {"qualify", cmd_qualify, "run a matrix's suites, record results, gate the release"},
    {"plan", cmd_plan, "show the cells a matrix expands to, without running them"},
    {"report", cmd_report, "write HTML / JUnit / Markdown / JSON from a results DB"},
    {"compare", cmd_compare, "compare two backends on a prompt set, or two runs"},
    {"generate", cmd_generate, "generate text from a prompt"},
    {"tokenize", cmd_tokenize, "print token ids and pieces for a text"},
    {"logits", cmd_logits, "print the logits at every prompt position"},
    {"inspect", cmd_inspect, "print a GGUF file's metadata and tensors"},
    {"quantize", cmd_quantize, "convert a GGUF model's weights to another type"},
    {"synth", cmd_synth, "write a model with seeded random weights"},
    {"devices", cmd_devices, "list backends and devices"},
    {"test-ops", cmd_test_ops, "check every op of a backend against the reference"},
    {"bench", cmd_bench, "measure prefill/decode speed against the machine's limits"},
    {"fetch", cmd_fetch, "download model artifacts, verified by sha256"},
    {"serve", cmd_serve, "serve a model over an OpenAI-compatible HTTP API"},
    {"db", cmd_db, "check a results database"},
    {"merge", cmd_merge, "merge results databases from shards or hosts"},
    {"anchors", cmd_anchors, "measure a model's anchors with llama.cpp (perplexity, greedy text)"},
    {"tolerances", cmd_tolerances, "derive bounds and baselines from a recorded run"},
    {"worker", cmd_worker, NULL}, /* internal: one cell in a child process */
};
#define N_VERBS (sizeof VERBS / sizeof VERBS[0])

static void usage(FILE *f)
{
    fprintf(f, "usage: gauntlet VERB [options]   (gauntlet VERB --help for each)\n\n");
    for (size_t i = 0; i < N_VERBS; i++)
        if (VERBS[i].summary)
            fprintf(f, "  %-10s %s\n", VERBS[i].name, VERBS[i].summary);
    fprintf(f, "\nexit codes: 0 ok, 1 check failed, 2 usage or configuration error\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return GT_EXIT_USAGE;
    }
    if (!strcmp(argv[1], "--help") || !strcmp(argv[1], "-h") || !strcmp(argv[1], "help")) {
        usage(stdout);
        return GT_EXIT_OK;
    }
    if (!strcmp(argv[1], "--version")) {
        printf("gauntlet %s (%s)\n", GT_VERSION, GT_GIT_SHA);
        return GT_EXIT_OK;
    }
    for (size_t i = 0; i < N_VERBS; i++) {
        if (strcmp(argv[1], VERBS[i].name) == 0) {
            return VERBS[i].fn(argc - 1, argv + 1);
        }
    }
    fprintf(stderr, "gauntlet: unknown verb '%s'\n\n", argv[1]);
    usage(stderr);
    return GT_EXIT_USAGE;
}
