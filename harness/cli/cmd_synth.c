/* cmd_synth.c: `gauntlet synth`: write a synthetic model (seeded random
 * weights, working tokenizer) for tests and CI, where no real model may be
 * downloaded. All the work is gt_synth_write; this is argument handling. */
#include <getopt.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "base.h"
#include "commands.h"
#include "gt/synth.h"

static void help(FILE *f)
{
    fprintf(f, "usage: gauntlet synth OUT [--arch A] [--preset NAME] [--seed S] [--type T]\n"
               "  writes a GGUF of the preset's architecture with seeded random weights and a\n"
               "  SentencePiece-style tokenizer; the same arguments give the same bytes.\n"
               "  --preset NAME  model shape (default tiny):\n");
    for (int i = 0; gt_synth_preset_at(i); i++) {
        const gt_synth_shape *p = gt_synth_preset_at(i);
        fprintf(f, "                   %-13s %s, n_embd %d, %d layers, %d/%d heads, ffn %d, "
                   "vocab %d%s%s", p->name, p->arch ? p->arch : "llama", p->n_embd, p->n_layer,
                p->n_head, p->n_head_kv, p->n_ff, p->n_vocab,
                p->tied_output ? ", tied output" : "", p->rope_orig_ctx > 0 ? ", rope factors" : "");
        if (p->n_expert > 0)
            fprintf(f, ", head %d, %d experts (%d used) of ffn %d", p->head_dim, p->n_expert,
                    p->n_expert_used, p->n_ff_exp);
        fputc('\n', f);
    }
    fprintf(f, "  --arch A       fail unless the preset is of architecture A (llama, phi3, qwen3moe)\n"
               "  --seed S       weight seed (default 1)\n"
               "  --type T       type of the weight matrices: f32 (default), f16, bf16,\n"
               "                 q8_0, q4_0, q4_1; norms are always f32\n");
}

int cmd_synth(int argc, char **argv)
{
    const char *preset = "tiny", *type_name = "f32", *arch = NULL;
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
    if (!gt_synth_preset(preset)) {
        fprintf(stderr, "gauntlet synth: unknown preset '%s' (see --help)\n", preset);
        return GT_EXIT_USAGE;
    }
    const char *parch = gt_synth_preset(preset)->arch ? gt_synth_preset(preset)->arch : "llama";
    if (arch && strcmp(arch, parch) != 0) {
        fprintf(stderr, "gauntlet synth: preset '%s' is %s, not %s\n", preset, parch, arch);
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
    printf("wrote %s: synth-%s, seed %llu, %s weights, %lld bytes (%.1f s)\n", out, preset,
           (unsigned long long)seed, gt_type_name(type), size, gt_now() - t0);
    return GT_EXIT_OK;
}
