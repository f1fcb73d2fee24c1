/* cmd_serve.c: `gauntlet serve`: one model over an OpenAI-compatible API.
 *
 * Opens the model, backend and session with the shared CLI options, starts
 * the server (serve_http.c) and then only waits for SIGTERM or SIGINT.
 * The signals are blocked in every thread and taken with sigwait here, so
 * shutdown runs as ordinary code (no async-signal-safety puzzles): stop
 * accepting, finish what was received, free, exit 0. */
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "commands.h"
#include "serve.h"

static void help(FILE *f)
{
    fprintf(f,
            "usage: gauntlet serve -m MODEL [-b BACKEND] [options]\n"
            "Serves POST /v1/completions (OpenAI-compatible: prompt, max_tokens, temperature,\n"
            "top_p, top_k, seed, stop, logprobs, echo, stream), POST /v1/chat/completions\n"
            "(messages, rendered with the GGUF's tokenizer.chat_template; logprobs with\n"
            "top_logprobs, stream), GET /v1/models, GET /health. A \"model\" other than\n"
            "the one GET /v1/models lists is a 404 (model_not_found), as OpenAI answers.\n"
            "Both take response_format: {\"type\": \"json_schema\", \"json_schema\": {\"name\",\n"
            "\"schema\"}} (the subset in runtime/include/gt/constraint.h) or {\"type\":\n"
            "\"json_object\"}: the answer is decoded under that constraint (finish_reason\n"
            "\"length\" when max_tokens ends it first); a schema it cannot compile is a 400.\n"
            "  -m, --model FILE     GGUF model\n"
            "  -b, --backend NAME   reference (default), cpu, opencl, cuda\n"
            "      --host ADDR      numeric address to bind (default 127.0.0.1)\n"
            "      --port P         TCP port; 0 picks a free one (default 8080)\n"
            "      --parallel N     requests decoded together (default 1: one at a time).\n"
            "                       N > 1: N sequences of -c positions each in one session;\n"
            "                       every step is one batch with a token of each running\n"
            "                       request (a new request's prompt prefilled in it), and a\n"
            "                       finished request frees its place at once. Each request\n"
            "                       keeps its own sampling, stop, timeout and stream.\n"
            "      --queue N        requests that may wait while the running ones run\n"
            "                       (default 32); beyond that: 503 with Retry-After\n"
            "      --timeout S      per-request limit, queueing included (default 120): 504\n"
            "      --max-body N     request body limit in bytes (default 1048576): 413\n"
            "  -t, --threads N      backend threads (default: all cores)\n"
            "      --driver D       driver profile setting, e.g. blas=/path/libblas.so.3\n"
            "  -c, --ctx N          context size (default: model's, at most 2048), per request\n"
            "                       with --parallel; a request whose prompt, or prompt plus\n"
            "                       max_tokens, passes it gets a 400 naming the token counts\n"
            "      --chat-template NAME  chatml, gemma, llama3 or phi3: the chat format to use instead\n"
            "                       of the one recognized in tokenizer.chat_template (without\n"
            "                       either, chat requests get a 400 that says why)\n"
            "  -q, --quiet          no per-request log lines\n"
            "Prints \"listening on http://HOST:PORT\" on stderr when ready. SIGTERM or SIGINT\n"
            "stops it after the requests in flight finish (exit 0).\n");
}

int cmd_serve(int argc, char **argv)
{
    const char *model = NULL, *backend = "reference", *driver = NULL, *chat_name = NULL;
    gt_server_opts so = {.host = "127.0.0.1", .port = 8080, .queue = 32, .max_body = 1 << 20,
                         .timeout_s = 120};
    long v, threads = 0, n_ctx = 0, parallel = 1;
    enum { O_HOST = 256, O_PORT, O_QUEUE, O_TIMEOUT, O_BODY, O_DRIVER, O_CHAT, O_PARALLEL };
    static const struct option opts[] = {
        {"model", required_argument, 0, 'm'},      {"backend", required_argument, 0, 'b'},
        {"host", required_argument, 0, O_HOST},    {"port", required_argument, 0, O_PORT},
        {"queue", required_argument, 0, O_QUEUE},  {"timeout", required_argument, 0, O_TIMEOUT},
        {"max-body", required_argument, 0, O_BODY}, {"threads", required_argument, 0, 't'},
        {"driver", required_argument, 0, O_DRIVER}, {"ctx", required_argument, 0, 'c'},
        {"quiet", no_argument, 0, 'q'},            {"help", no_argument, 0, 'h'},
        {"chat-template", required_argument, 0, O_CHAT},
        {"parallel", required_argument, 0, O_PARALLEL},
        {0, 0, 0, 0}};
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, "m:b:t:c:qh", opts, NULL)) != -1) {
        switch (c) {
        case 'm': model = optarg; break;
        case 'b': backend = optarg; break;
        case O_HOST: so.host = optarg; break;
        case O_PORT:
            if (gt_cli_int("serve", "--port", optarg, 0, 65535, &v)) return GT_EXIT_USAGE;
            so.port = (int)v;
            break;
        case O_QUEUE:
            if (gt_cli_int("serve", "--queue", optarg, 1, 100000, &v)) return GT_EXIT_USAGE;
            so.queue = (int)v;
            break;
        case O_TIMEOUT:
            if (gt_cli_double("serve", "--timeout", optarg, &so.timeout_s)) return GT_EXIT_USAGE;
            if (so.timeout_s <= 0) {
                fprintf(stderr, "gauntlet serve: --timeout must be > 0\n");
                return GT_EXIT_USAGE;
            }
            break;
        case O_BODY:
            if (gt_cli_int("serve", "--max-body", optarg, 64, 1L << 30, &v)) return GT_EXIT_USAGE;
            so.max_body = (size_t)v;
            break;
        case 't': if (gt_cli_int("serve", "-t", optarg, 0, 1024, &threads)) return GT_EXIT_USAGE; break;
        case 'c': if (gt_cli_int("serve", "-c", optarg, 1, 1 << 20, &n_ctx)) return GT_EXIT_USAGE; break;
        case O_DRIVER: driver = optarg; break;
        case O_CHAT: chat_name = optarg; break;
        case O_PARALLEL:
            if (gt_cli_int("serve", "--parallel", optarg, 1, 256, &parallel)) return GT_EXIT_USAGE;
            break;
        case 'q': so.quiet = true; break;
        case 'h': help(stdout); return GT_EXIT_OK;
        default: help(stderr); return GT_EXIT_USAGE;
        }
    }
    if (optind < argc || !model) {
        fprintf(stderr, "gauntlet serve: %s\n",
                optind < argc ? "unexpected argument" : "-m MODEL is required");
        help(stderr);
        return GT_EXIT_USAGE;
    }

    /* Blocked before any thread exists, so every thread inherits the mask
     * and only sigwait below ever sees these. */
    sigset_t stop_set;
    sigemptyset(&stop_set);
    sigaddset(&stop_set, SIGTERM);
    sigaddset(&stop_set, SIGINT);
    pthread_sigmask(SIG_BLOCK, &stop_set, NULL);
    signal(SIGPIPE, SIG_IGN);

    gt_cli_run run;
    /* --parallel 1 keeps the one-sequence session (and the serial worker):
     * exactly what serve did before there was a --parallel. */
    if (gt_cli_open_seqs("serve", model, backend, (int)threads, driver, (int)n_ctx,
                         parallel > 1 ? (int)parallel : 0, &run) != 0)
        return GT_EXIT_USAGE;
    gt_chat_template chat;
    if (gt_chat_template_init(&chat, gt_gguf_get_str(gt_model_gguf(run.model),
                                                     "tokenizer.chat_template"),
                              chat_name, gt_model_tokenizer(run.model)) != 0) {
        fprintf(stderr, "gauntlet serve: --chat-template: %s\n", chat.why);
        gt_cli_close(&run);
        return GT_EXIT_USAGE;
    }
    const char *slash = strrchr(model, '/');
    gt_serve_ctx ctx = {.session = run.session, .model = run.model,
                        .model_id = slash ? slash + 1 : model, .chat = &chat};
    gt_server *srv = NULL;
    gt_err err = {{0}};
    if (gt_server_start(&ctx, &so, &srv, &err) != 0) {
        fprintf(stderr, "gauntlet serve: %s\n", err.msg);
        gt_chat_template_free(&chat);
        gt_cli_close(&run);
        return GT_EXIT_USAGE;
    }
    const bool v6 = strchr(so.host, ':') != NULL;
    fprintf(stderr, "gauntlet serve: %s on %s, context %d, loaded in %.2f s\n", ctx.model_id,
            backend, gt_session_n_ctx(run.session), run.load_seconds);
    if (parallel > 1)
        fprintf(stderr, "gauntlet serve: %ld requests decoded together, %d positions each\n",
                parallel, gt_session_n_ctx(run.session));
    if (chat.family != GT_CHAT_NONE)
        fprintf(stderr, "gauntlet serve: chat template %s%s%s\n", gt_chat_family_name(chat.family),
                chat_name ? " (--chat-template)" : "",
                chat.default_system ? ", with the template's default system message" : "");
    else
        fprintf(stderr, "gauntlet serve: no chat: %s\n", chat.why);
    fprintf(stderr, "listening on http://%s%s%s:%d\n", v6 ? "[" : "", so.host, v6 ? "]" : "",
            gt_server_port(srv));
    fflush(stderr);

    int sig = 0;
    sigwait(&stop_set, &sig);
    fprintf(stderr, "gauntlet serve: %s: finishing requests in flight\n",
            sig == SIGINT ? "SIGINT" : "SIGTERM");
    gt_server_stop(srv);
    gt_chat_template_free(&chat);
    gt_cli_close(&run);
    fprintf(stderr, "gauntlet serve: stopped\n");
    return GT_EXIT_OK;
}
