/* cmd_test_ops.c: `gauntlet test-ops`: op conformance of a backend against
 * the reference (the engine is opcheck.c). Without -b every available
 * backend except the reference is checked; backends that cannot be opened
 * are listed with the reason and skipped, unless asked for by name (then it
 * is a configuration error). A case ran when it was judged (OK or FAIL); an
 * unsupported one did not. Exit 1 on any FAIL, and when no case ran at all
 * (a filter that selects nothing: --op ADD --type q4_k) or a backend that
 * was checked ran none (it supports nothing the filter selects): zero
 * coverage is not a pass. 0 otherwise, 2 usage. */
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base.h"
#include "commands.h"
#include "opcheck.h"

static void help(FILE *f)
{
    fprintf(f,
            "usage: gauntlet test-ops [-b BACKEND] [--op OP] [--type T] [--seed S] [options]\n"
            "  -b, --backend NAME   backend to check (default: every available one but reference)\n"
            "      --op OP          only this op (GET_ROWS, RMS_NORM, MUL_MAT, ADD, MUL, ROPE,\n"
            "                       KV_STORE, ATTENTION, SILU_MUL, GELU_MUL, SCALE, TOPK,\n"
            "                       MOE_WEIGHTS, MUL_MAT_ID, MOE_SUM)\n"
            "      --type T         only this weight type for MUL_MAT/GET_ROWS (f32 f16 bf16\n"
            "                       q8_0 q4_0 q4_1 q5_0 q5_1 q2_k q3_k q4_k q5_k q6_k iq4_nl);\n"
            "                       the other ops run as f32\n"
            "      --seed S         input seed (default 1)\n"
            "  -t, --threads N      backend threads (default: the backend's)\n"
            "      --driver D       driver profile setting, e.g. blas=/path/libblas.so.3\n"
            "      --failures       print only failing cases\n"
            "prints one line per case: OP(params) type: OK nmse | FAIL (why) | unsupported (why)\n"
            "exit codes: 0 cases ran and all passed, 1 a case failed or none ran (\"0 cases\n"
            "  ran\": the filter selects no case, or a backend checked supports none of them),\n"
            "  2 usage or configuration error\n");
}

/* 0 ran (counts updated; *none, said, when no case ran on it), 1 not
 * available (skipped), -1 engine error. */
static int check_one(const char *name, const gt_backend_config *cfg, gt_backend *ref,
                     const opcheck_opts *o, bool explicit, opcheck_counts *total, bool *none)
{
    gt_backend *b = NULL;
    gt_err err = {{0}};
    if (gt_backend_open(name, cfg, &b, &err) != 0) {
        if (explicit) {
            fprintf(stderr, "gauntlet test-ops: %s\n", err.msg);
            return -1;
        }
        printf("backend %s: not available: %s\n", name, err.msg);
        return 1;
    }
    printf("backend %s: %s | %s %s | %s\n", name, b->info.name, b->info.driver,
           b->info.driver_version, b->info.extra);
    opcheck_counts c = {0};
    const int rc = opcheck_run(b, ref, o, &c, &err);
    gt_backend_close(b);
    if (rc != 0) {
        fprintf(stderr, "gauntlet test-ops: %s\n", err.msg);
        return -1;
    }
    printf("backend %s: %d ok, %d failed, %d unsupported\n", name, c.ok, c.fail, c.unsupported);
    /* A filter that selects nothing selects it on every backend (the total
     * says so); here, cases were selected and this backend supports none. */
    *none = c.ok + c.fail == 0 && c.unsupported > 0;
    if (*none)
        printf("FAIL: backend %s: 0 cases ran (it supports none of the %d cases selected)\n",
               name, c.unsupported);
    total->ok += c.ok, total->fail += c.fail, total->unsupported += c.unsupported;
    return 0;
}

int cmd_test_ops(int argc, char **argv)
{
    const char *backend = NULL, *driver = NULL;
    long threads = 0;
    opcheck_opts o = {.op = -1, .type = -1, .seed = 1, .out = stdout, .failures_only = false};
    enum { O_OP = 256, O_TYPE, O_SEED, O_DRIVER, O_FAIL };
    static const struct option opts[] = {
        {"backend", required_argument, 0, 'b'}, {"op", required_argument, 0, O_OP},
        {"type", required_argument, 0, O_TYPE}, {"seed", required_argument, 0, O_SEED},
        {"threads", required_argument, 0, 't'}, {"driver", required_argument, 0, O_DRIVER},
        {"failures", no_argument, 0, O_FAIL},   {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    optind = 1;
    int c;
    while ((c = getopt_long(argc, argv, "b:t:h", opts, NULL)) != -1) {
        switch (c) {
        case 'b': backend = optarg; break;
        case 't':
            if (gt_cli_int("test-ops", "-t", optarg, 0, 256, &threads))
                return GT_EXIT_USAGE;
            break;
        case O_OP: {
            gt_op op;
            if (gt_op_from_name(optarg, &op) != 0 || op == GT_OP_NONE) {
                fprintf(stderr, "gauntlet test-ops: --op %s: unknown op\n", optarg);
                return GT_EXIT_USAGE;
            }
            o.op = (int)op;
            break;
        }
        case O_TYPE: {
            gt_type t;
            if (gt_type_from_name(optarg, &t) != 0) {
                fprintf(stderr, "gauntlet test-ops: --type %s: unknown type\n", optarg);
                return GT_EXIT_USAGE;
            }
            o.type = (int)t;
            break;
        }
        case O_SEED:
            if (gt_cli_u64("test-ops", "--seed", optarg, &o.seed))
                return GT_EXIT_USAGE;
            break;
        case O_DRIVER: driver = optarg; break;
        case O_FAIL: o.failures_only = true; break;
        case 'h': help(stdout); return GT_EXIT_OK;
        default: help(stderr); return GT_EXIT_USAGE;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "gauntlet test-ops: unexpected argument '%s'\n", argv[optind]);
        return GT_EXIT_USAGE;
    }

    gt_backend *ref = NULL;
    gt_err err = {{0}};
    const gt_backend_config ref_cfg = {.device = 0, .n_threads = 0, .driver = NULL};
    if (gt_backend_open("reference", &ref_cfg, &ref, &err) != 0) {
        fprintf(stderr, "gauntlet test-ops: %s\n", err.msg);
        return GT_EXIT_USAGE;
    }
    const gt_backend_config cfg = {.device = 0, .n_threads = (int)threads, .driver = driver};
    opcheck_counts total = {0};
    int rc = 0, checked = 0;
    int idle = 0; /* backends checked that ran no case */
    bool none = false;
    if (backend) {
        rc = check_one(backend, &cfg, ref, &o, true, &total, &none);
        checked = rc == 0;
        idle += rc == 0 && none;
    } else {
        const gt_backend_entry *e;
        const int n = gt_backend_registry(&e);
        for (int i = 0; i < n && rc >= 0; i++) {
            if (strcmp(e[i].name, "reference") == 0)
                continue;
            if (!e[i].reg) {
                printf("backend %s: not available: %s\n", e[i].name, e[i].why);
                continue;
            }
            rc = check_one(e[i].name, &cfg, ref, &o, false, &total, &none);
            checked += rc == 0;
            idle += rc == 0 && none;
        }
    }
    gt_backend_close(ref);
    if (rc < 0)
        return GT_EXIT_USAGE;
    printf("total: %d backend(s), %d ok, %d failed, %d unsupported\n", checked, total.ok,
           total.fail, total.unsupported);
    /* Zero coverage is a failure: a filter that selects nothing, or a
     * backend that supports none of what it selects, checked nothing. */
    if (total.ok + total.fail == 0) {
        printf("FAIL: 0 cases ran: %s\n",
               checked == 0 ? "no backend could be checked"
               : total.unsupported ? "every case the filter selects is unsupported"
                                   : "no case matches the --op/--type filter (ops other than"
                                     " MUL_MAT and GET_ROWS run as f32 only)");
        return GT_EXIT_FAIL;
    }
    return total.fail || idle ? GT_EXIT_FAIL : GT_EXIT_OK;
}
