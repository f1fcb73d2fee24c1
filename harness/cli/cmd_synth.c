/* cmd_synth.c: `gauntlet synth`: write a synthetic model (seeded random
 * weights, working tokenizer) of one architecture, for tests and CI, where no
 * real model may be downloaded. All the work is gt_synth_write; this is
 * argument handling. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "base.h"
#include "commands.h"
#include "gt/synth.h"

static void help(FILE *f)
{
    fprintf(f, "usage: gauntlet synth OUT [--arch ARCH] [--preset NAME] [--seed S] [--type T]\n"
               "  writes a GGUF of the preset's architecture with seeded random weights and\n"
               "  a SentencePiece-style tokenizer; the same arguments give the same bytes.\n"
               "  --arch ARCH    the architecture: checks that the preset has it, and\n"
               "                 without --preset picks its first preset below\n"
               "  --preset NAME  model shape (default tiny), by architecture:\n");
    for (int i = 0; gt_synth_preset_at(i); i++) {
        const gt_synth_shape *p = gt_synth_preset_at(i);
        const char *arch = gt_synth_arch(p);
        int first = 1;
        for (int j = 0; j < i; j++)
            first &= strcmp(gt_synth_arch(gt_synth_preset_at(j)), arch) != 0;
        if (!first)
            continue;
        fprintf(f, "    %s:\n", arch);
        for (int j = i; gt_synth_preset_at(j); j++) {
            const gt_synth_shape *q = gt_synth_preset_at(j);
            if (strcmp(gt_synth_arch(q), arch) != 0)
                continue;
            char hd[32] = "";
            if (q->head_dim)
                snprintf(hd, sizeof hd, " of %d", q->head_dim);
            fprintf(f, "                   %-13s n_embd %d, %d layers, %d/%d heads%s, ffn %d, "
                       "vocab %d%s", q->name, q->n_embd, q->n_layer, q->n_head, q->n_head_kv,
                    hd, q->n_ff, q->n_vocab, q->tied_output ? ", tied output" : "");
            if (q->rope_orig_ctx > 0)
                fputs(", rope factors", f);
            if (q->n_expert > 0)
                fprintf(f, ", %d experts (%d used) of ffn %d", q->n_expert, q->n_expert_used,
                        q->n_ff_exp);
            fputc('\n', f);
        }
    }
    fprintf(f, "  --arch A       fail unless the preset is of architecture A (llama, phi3, qwen3moe)\n"
               "  --seed S       weight seed (default 1)\n"
               "  --type T       type of the weight matrices: f32 (default), f16, bf16,\n"
               "                 q8_0, q4_0, q4_1; norms are always f32\n");
}

int cmd_synth(int argc, char **argv)
{
    const char *preset = NULL, *type_name = "f32", *arch = NULL;
    uint64_t seed = 1;
    static const struct option opts[] = {{"preset", required_argument, 0, 'p'},
                                         {"arch", required_argument, 0, 'a'},
                                         {"seed", required_argument, 0, 's'},
                                         {"type", required_argument, 0, 't'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'p': preset = optarg; break;
        case 'a': arch = optarg; break;
        case 's':
            if (gt_cli_u64("synth", "--seed", optarg, &seed) != 0)
                return GT_EXIT_USAGE;
            break;
        case 't': type_name = optarg; break;
        case 'h': help(stdout); return GT_EXIT_OK;
        default: help(stderr); return GT_EXIT_USAGE;
        }
    }
    if (optind != argc - 1) {
        fprintf(stderr, "gauntlet synth: exactly one OUT path is required\n");
        help(stderr);
        return GT_EXIT_USAGE;
    }
    const char *out = argv[optind];
    for (int i = 0; !preset && arch && gt_synth_preset_at(i); i++)
        if (strcmp(gt_synth_arch(gt_synth_preset_at(i)), arch) == 0)
            preset = gt_synth_preset_at(i)->name;
    if (arch && !preset) {
        fprintf(stderr, "gauntlet synth: no preset has architecture '%s' (see --help)\n", arch);
        return GT_EXIT_USAGE;
    }
    if (!preset)
        preset = "tiny";
    const gt_synth_shape *shape = gt_synth_preset(preset);
    if (!shape) {
        fprintf(stderr, "gauntlet synth: unknown preset '%s' (see --help)\n", preset);
        return GT_EXIT_USAGE;
    }
    if (arch && strcmp(gt_synth_arch(shape), arch) != 0) {
        fprintf(stderr, "gauntlet synth: preset '%s' is %s, not %s (see --help)\n", preset,
                gt_synth_arch(shape), arch);
        return GT_EXIT_USAGE;
    }
    gt_type type;
    if (gt_type_from_name(type_name, &type) != 0 ||
        !(type == GT_TYPE_F32 || type == GT_TYPE_F16 || type == GT_TYPE_BF16 ||
          type == GT_TYPE_Q8_0 || type == GT_TYPE_Q4_0 || type == GT_TYPE_Q4_1)) {
        fprintf(stderr, "gauntlet synth: --type must be one of f32, f16, bf16, q8_0, q4_0, "
                        "q4_1, got '%s'\n", type_name);
        return GT_EXIT_USAGE;
    }
    gt_err err = {{0}};
    double t0 = gt_now();
    if (gt_synth_write(out, preset, seed, type, &err) != 0) {
        fprintf(stderr, "gauntlet synth: %s\n", err.msg);
        return GT_EXIT_USAGE;
    }
    struct stat st;
    long long size = stat(out, &st) == 0 ? (long long)st.st_size : -1;
    printf("wrote %s: synth-%s (%s), seed %llu, %s weights, %lld bytes (%.1f s)\n", out, preset,
           gt_synth_arch(shape), (unsigned long long)seed, gt_type_name(type), size, gt_now() - t0);
    return GT_EXIT_OK;
}
