/* cmd_generate.c: `gauntlet generate`: stream a continuation to stdout.
 * Text goes to stdout as it is produced (flushed per token); timings and
 * diagnostics to stderr, so `gauntlet generate ... > out.txt` keeps only
 * the text. With --json-schema or --json-object the sampler draws only
 * from the tokens gt/constraint.h allows, stdout gets the document alone
 * (no prompt echo, so it parses as JSON), generation stops at the first end
 * token once the document is complete, and an incomplete document after
 * -n tokens exits 1. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "commands.h"
#include "gt/sampler.h"

static void help(FILE *f)
{
    fprintf(f,
            "usage: gauntlet generate -m MODEL [-b BACKEND] -p PROMPT [-n N] [options]\n"
            "  -m, --model FILE     GGUF model\n"
            "  -b, --backend NAME   reference (default), cpu, opencl, cuda\n"
            "  -p, --prompt TEXT    prompt (may be empty; BOS is added as the model says)\n"
            "  -n, --tokens N       tokens to generate (default 64)\n"
            "      --temp T         temperature; 0 = greedy, ties to the lowest id (default 0)\n"
            "      --top-k K        keep the K most likely tokens (0 = off, default 40)\n"
            "      --top-p P        nucleus sampling threshold (1 = off, default 0.95)\n"
            "      --seed S         sampler seed (default 1)\n"
            "  -t, --threads N      backend threads (default: all cores)\n"
            "      --driver D       driver profile setting, e.g. blas=/path/libblas.so.3\n"
            "  -c, --ctx N          context size (default: model's, at most 2048); the prompt's\n"
            "                       tokens plus -n must fit in it, else generate refuses before\n"
            "                       it starts, naming the three numbers (exit 2)\n"
            "      --no-bos         do not prepend BOS\n"
            "      --stop-at-eos    stop when the model emits EOS (default: on)\n"
            "      --ignore-eos     keep generating past EOS (not past a complete JSON document)\n"
            "      --json-schema FILE  constrain the output to JSON that FILE's JSON Schema\n"
            "                       validates (the subset in runtime/include/gt/constraint.h;\n"
            "                       any other keyword is refused by name); prints only the JSON\n"
            "      --json-object    constrain the output to any JSON object\n"
            "  -q, --quiet          no timing line on stderr\n");
}

int cmd_generate(int argc, char **argv)
{
    const char *model = NULL, *backend = "reference", *prompt = NULL, *driver = NULL;
    const char *schema = NULL;
    bool json_object = false;
    long n_gen = 64, threads = 0, n_ctx = 0, top_k = 40;
    double temp = 0.0, top_p = 0.95;
    uint64_t seed = 1;
    bool no_bos = false, ignore_eos = false, quiet = false;
    enum { O_TEMP = 256, O_TOPK, O_TOPP, O_SEED, O_DRIVER, O_NOBOS, O_EOS, O_IGNEOS, O_SCHEMA,
           O_JSONOBJ };
    static const struct option opts[] = {
        {"model", required_argument, 0, 'm'},   {"backend", required_argument, 0, 'b'},
        {"prompt", required_argument, 0, 'p'},  {"tokens", required_argument, 0, 'n'},
        {"temp", required_argument, 0, O_TEMP}, {"top-k", required_argument, 0, O_TOPK},
        {"top-p", required_argument, 0, O_TOPP}, {"seed", required_argument, 0, O_SEED},
        {"threads", required_argument, 0, 't'}, {"driver", required_argument, 0, O_DRIVER},
        {"ctx", required_argument, 0, 'c'},     {"no-bos", no_argument, 0, O_NOBOS},
        {"stop-at-eos", no_argument, 0, O_EOS}, {"ignore-eos", no_argument, 0, O_IGNEOS},
        {"quiet", no_argument, 0, 'q'},         {"help", no_argument, 0, 'h'},
        {"json-schema", required_argument, 0, O_SCHEMA},
        {"json-object", no_argument, 0, O_JSONOBJ},
        {0, 0, 0, 0}};
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, "m:b:p:n:t:c:qh", opts, NULL)) != -1) {
        switch (c) {
        case 'm': model = optarg; break;
        case 'b': backend = optarg; break;
        case 'p': prompt = optarg; break;
        case 'n': if (gt_cli_int("generate", "-n", optarg, 0, 1 << 20, &n_gen)) return GT_EXIT_USAGE; break;
        case 't': if (gt_cli_int("generate", "-t", optarg, 0, 1024, &threads)) return GT_EXIT_USAGE; break;
        case 'c': if (gt_cli_int("generate", "-c", optarg, 1, 1 << 20, &n_ctx)) return GT_EXIT_USAGE; break;
        case O_TEMP: if (gt_cli_double("generate", "--temp", optarg, &temp)) return GT_EXIT_USAGE; break;
        case O_TOPK: if (gt_cli_int("generate", "--top-k", optarg, 0, 1 << 24, &top_k)) return GT_EXIT_USAGE; break;
        case O_TOPP: if (gt_cli_double("generate", "--top-p", optarg, &top_p)) return GT_EXIT_USAGE; break;
        case O_SEED: if (gt_cli_u64("generate", "--seed", optarg, &seed)) return GT_EXIT_USAGE; break;
        case O_DRIVER: driver = optarg; break;
        case O_NOBOS: no_bos = true; break;
        case O_EOS: ignore_eos = false; break;
        case O_IGNEOS: ignore_eos = true; break;
        case O_SCHEMA: schema = optarg; break;
        case O_JSONOBJ: json_object = true; break;
        case 'q': quiet = true; break;
        case 'h': help(stdout); return GT_EXIT_OK;
        default: help(stderr); return GT_EXIT_USAGE;
        }
    }
    if (optind < argc || !model || !prompt) {
        fprintf(stderr, "gauntlet generate: %s\n",
                optind < argc ? "unexpected argument" : "-m MODEL and -p PROMPT are required");
        help(stderr);
        return GT_EXIT_USAGE;
    }
    if (temp < 0 || top_p <= 0 || top_p > 1) {
        fprintf(stderr, "gauntlet generate: --temp must be >= 0 and --top-p in (0, 1]\n");
        return GT_EXIT_USAGE;
    }

    gt_cli_run run;
    if (gt_cli_open("generate", model, backend, (int)threads, driver, (int)n_ctx, &run) != 0)
        return GT_EXIT_USAGE;
    gt_constraint *con = NULL;
    if (gt_cli_constraint("generate", run.model, schema, json_object, &con) != 0) {
        gt_cli_close(&run);
        return GT_EXIT_USAGE;
    }
    const gt_tokenizer *tok = gt_model_tokenizer(run.model);
    const int n_vocab = gt_model_hparams(run.model)->n_vocab;
    int rc = GT_EXIT_OK, n_prompt = 0;
    int32_t *ids = gt_cli_tokenize("generate", run.model, prompt, no_bos, &n_prompt);
    float *logits = malloc(sizeof(float) * (size_t)n_vocab);
    gt_sampler_params sp = {(float)temp, (int)top_k, (float)top_p, seed};
    gt_sampler *smp = gt_sampler_new(&sp, n_vocab);
    gt_err err = {{0}};
    if (!ids || !logits || !smp) {
        rc = GT_EXIT_USAGE;
        goto done;
    }
    if (n_prompt == 0) {
        fprintf(stderr, "gauntlet generate: the prompt is empty and the model adds no BOS: "
                        "nothing to condition on\n");
        rc = GT_EXIT_USAGE;
        goto done;
    }
    /* Overflow is refused up front, as OpenAI's API answers a request whose
     * prompt plus max_tokens passes the context: never a generation that
     * stops wherever the cache happens to run out. */
    const int ctx = gt_session_n_ctx(run.session);
    if ((long)n_prompt + n_gen > ctx) {
        if (n_prompt > ctx)
            fprintf(stderr, "gauntlet generate: the prompt is %d tokens, longer than the context "
                            "of %d (-c)\n", n_prompt, ctx);
        else
            fprintf(stderr, "gauntlet generate: the prompt is %d tokens and -n asks for %ld more: "
                            "%ld positions, more than the context of %d (-c); lower -n to %d or "
                            "raise -c\n", n_prompt, n_gen, n_prompt + n_gen, ctx, ctx - n_prompt);
        rc = GT_EXIT_USAGE;
        goto done;
    }
    const double t0 = gt_now();
    if (gt_session_eval(run.session, ids, n_prompt, false, logits, &err) != 0) {
        fprintf(stderr, "gauntlet generate: %s\n", err.msg);
        rc = GT_EXIT_FAIL;
        goto done;
    }
    const double t_prompt = gt_now() - t0;
    if (!con)
        fwrite(prompt, 1, strlen(prompt), stdout);
    fflush(stdout);
    int n_done = 0; /* tokens printed */
    double t_con = 0; /* seconds in mask + accept */
    int n_mask = 0;
    const double t1 = gt_now();
    while (n_done < n_gen) {
        const double tc = gt_now();
        if (con && gt_constraint_mask(con, logits) == 0) {
            fprintf(stderr, "\ngauntlet generate: the constraint allows no token\n");
            rc = GT_EXIT_FAIL;
            goto done;
        }
        t_con += gt_now() - tc;
        n_mask += con != NULL;
        int32_t next = gt_sampler_sample(smp, logits);
        if (con && gt_constraint_is_end(con, next))
            break;
        if (!ignore_eos && next == gt_tokenizer_eos(tok))
            break;
        const double ta = gt_now();
        if (con && gt_constraint_accept(con, next, &err) != 0) {
            fprintf(stderr, "\ngauntlet generate: %s\n", err.msg);
            rc = GT_EXIT_FAIL;
            goto done;
        }
        t_con += gt_now() - ta;
        char piece[256];
        int len = gt_token_to_bytes(tok, next, piece, sizeof piece);
        fwrite(piece, 1, (size_t)(len < (int)sizeof piece ? len : (int)sizeof piece), stdout);
        fflush(stdout);
        if (++n_done == n_gen)
            break; /* no need to evaluate a token nobody samples after */
        if (gt_session_eval(run.session, &next, 1, false, logits, &err) != 0) {
            fprintf(stderr, "\ngauntlet generate: %s\n", err.msg);
            rc = GT_EXIT_FAIL;
            goto done;
        }
    }
    printf("\n");
    const double t_gen = gt_now() - t1;
    if (!quiet)
        fprintf(stderr, "[%s] load %.3f s | prompt %d tok, %.1f tok/s | generated %d tok, %.1f tok/s",
                backend, run.load_seconds, n_prompt, n_prompt / (t_prompt > 0 ? t_prompt : 1e-9),
                n_done, n_done / (t_gen > 0 ? t_gen : 1e-9));
    if (!quiet && con)
        fprintf(stderr, " | constraint %.3f ms/token", 1e3 * t_con / (n_mask ? n_mask : 1));
    if (!quiet)
        fprintf(stderr, "\n");
    if (con && !gt_constraint_done(con)) {
        fprintf(stderr, "gauntlet generate: the JSON document is incomplete after %d tokens "
                        "(raise -n)\n", n_done);
        rc = GT_EXIT_FAIL;
    }
done:
    gt_constraint_free(con);
    gt_sampler_free(smp);
    free(logits);
    free(ids);
    gt_cli_close(&run);
    return rc;
}
