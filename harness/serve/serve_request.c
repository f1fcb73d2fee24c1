/* serve_request.c: a /v1/completions or /v1/chat/completions body -> a
 * validated gt_serve_req.
 *
 * The rule is OpenAI's own: lenient on fields we do not know (SDKs send
 * extras such as "user" or "stream_options"), strict on the ones we do: a
 * wrong type or range is a 400 naming the parameter, never a silent
 * default. null means "use the default", as the SDKs send it that way.
 * Parameters we know but do not implement (n > 1, penalties, logit_bias,
 * suffix) are rejected when set to anything but their no-op value, so a
 * client never gets an answer computed differently from what it asked. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve.h"

int gt_serve_fail(gt_serve_error *e, int status, const char *type, const char *param,
                  const char *fmt, ...)
{
    e->status = status;
    e->type = type;
    e->param = param;
    e->code = NULL;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
    return -1;
}

char *gt_serve_error_json(const gt_serve_error *e)
{
    cJSON *root = cJSON_CreateObject();
    cJSON *err = cJSON_AddObjectToObject(root, "error");
    cJSON_AddStringToObject(err, "message", e->message);
    cJSON_AddStringToObject(err, "type", e->type ? e->type : "invalid_request_error");
    if (e->param)
        cJSON_AddStringToObject(err, "param", e->param);
    else
        cJSON_AddNullToObject(err, "param");
    if (e->code)
        cJSON_AddStringToObject(err, "code", e->code);
    else
        cJSON_AddNullToObject(err, "code");
    char *s = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return s;
}

static int bad(gt_serve_error *e, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static int bad(gt_serve_error *e, const char *param, const char *fmt, ...)
{
    char msg[400];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return gt_serve_fail(e, 400, "invalid_request_error", param, "%s", msg);
}

/* The field, or NULL when absent or null. */
static const cJSON *field(const cJSON *o, const char *name)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, name);
    return v && !cJSON_IsNull(v) ? v : NULL;
}

static int get_int(const cJSON *o, const char *name, long lo, long hi, long *out,
                   gt_serve_error *e)
{
    const cJSON *v = field(o, name);
    if (!v)
        return 0;
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || !isfinite(v->valuedouble))
        return bad(e, name, "'%s' must be an integer", name);
    if (v->valuedouble < (double)lo || v->valuedouble > (double)hi)
        return bad(e, name, "'%s' must be between %ld and %ld, got %.17g", name, lo, hi,
                   v->valuedouble);
    *out = (long)v->valuedouble;
    return 0;
}

static int get_num(const cJSON *o, const char *name, double lo, double hi, double *out,
                   gt_serve_error *e)
{
    const cJSON *v = field(o, name);
    if (!v)
        return 0;
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble))
        return bad(e, name, "'%s' must be a number", name);
    if (v->valuedouble < lo || v->valuedouble > hi)
        return bad(e, name, "'%s' must be between %g and %g, got %g", name, lo, hi,
                   v->valuedouble);
    *out = v->valuedouble;
    return 0;
}

static int get_bool(const cJSON *o, const char *name, bool *out, gt_serve_error *e)
{
    const cJSON *v = field(o, name);
    if (!v)
        return 0;
    if (!cJSON_IsBool(v))
        return bad(e, name, "'%s' must be a boolean", name);
    *out = cJSON_IsTrue(v);
    return 0;
}

static int add_stop(gt_serve_req *r, const cJSON *s, gt_serve_error *e)
{
    if (!cJSON_IsString(s))
        return bad(e, "stop", "'stop' must be a string or an array of strings");
    size_t n = strlen(s->valuestring);
    if (n == 0 || n > GT_SERVE_MAX_STOP_LEN)
        return bad(e, "stop", "each stop sequence must be 1 to %d bytes", GT_SERVE_MAX_STOP_LEN);
    if (r->n_stop == GT_SERVE_MAX_STOP)
        return bad(e, "stop", "at most %d stop sequences", GT_SERVE_MAX_STOP);
    r->stop[r->n_stop] = strdup(s->valuestring);
    if (!r->stop[r->n_stop])
        return gt_serve_fail(e, 500, "server_error", NULL, "out of memory");
    r->n_stop++;
    return 0;
}

/* A message's content: a string, or an array of {"type": "text", "text"}
 * parts, joined. */
static int message_content(const cJSON *c, int i, char **out, gt_serve_error *e)
{
    if (cJSON_IsString(c)) {
        *out = strdup(c->valuestring);
        return *out ? 0 : gt_serve_fail(e, 500, "server_error", NULL, "out of memory");
    }
    if (!cJSON_IsArray(c))
        return bad(e, "messages", "messages[%d].content must be a string or an array of text "
                                  "parts", i);
    size_t len = 0;
    const cJSON *part;
    cJSON_ArrayForEach(part, c) {
        const cJSON *type = cJSON_GetObjectItemCaseSensitive(part, "type");
        const cJSON *text = cJSON_GetObjectItemCaseSensitive(part, "text");
        if (!cJSON_IsString(type) || strcmp(type->valuestring, "text") || !cJSON_IsString(text))
            return bad(e, "messages", "messages[%d].content: only parts of type \"text\" with "
                                      "a string \"text\" are supported", i);
        len += strlen(text->valuestring);
    }
    char *s = malloc(len + 1);
    if (!s)
        return gt_serve_fail(e, 500, "server_error", NULL, "out of memory");
    s[0] = '\0';
    cJSON_ArrayForEach(part, c) strcat(s, cJSON_GetObjectItemCaseSensitive(part, "text")->valuestring);
    *out = s;
    return 0;
}

static int parse_messages(const cJSON *o, gt_serve_req *r, gt_serve_error *e)
{
    const cJSON *ms = cJSON_GetObjectItemCaseSensitive(o, "messages");
    if (!ms)
        return bad(e, "messages", "'messages' is required");
    if (!cJSON_IsArray(ms) || cJSON_GetArraySize(ms) == 0)
        return bad(e, "messages", "'messages' must be a non-empty array of {role, content}");
    const int n = cJSON_GetArraySize(ms);
    r->messages = calloc((size_t)n, sizeof *r->messages);
    if (!r->messages)
        return gt_serve_fail(e, 500, "server_error", NULL, "out of memory");
    const cJSON *m;
    int i = 0;
    cJSON_ArrayForEach(m, ms) {
        if (!cJSON_IsObject(m))
            return bad(e, "messages", "messages[%d] must be an object", i);
        const cJSON *role = cJSON_GetObjectItemCaseSensitive(m, "role");
        if (!cJSON_IsString(role))
            return bad(e, "messages", "messages[%d].role must be a string", i);
        const cJSON *content = field(m, "content");
        if (!content)
            return bad(e, "messages", "messages[%d].content is required (tool calls are not "
                                      "supported)", i);
        r->messages[i].role = strdup(role->valuestring);
        r->n_messages = i + 1;
        if (!r->messages[i].role)
            return gt_serve_fail(e, 500, "server_error", NULL, "out of memory");
        if (message_content(content, i, &r->messages[i].content, e))
            return -1;
        i++;
    }
    return 0;
}

static int parse_prompt(const cJSON *o, gt_serve_req *r, gt_serve_error *e)
{
    const cJSON *p = cJSON_GetObjectItemCaseSensitive(o, "prompt");
    if (!p)
        return bad(e, "prompt", "'prompt' is required");
    /* A one-element array of strings is what SDKs send for a batch of one. */
    if (cJSON_IsArray(p) && cJSON_GetArraySize(p) == 1 && cJSON_IsString(cJSON_GetArrayItem(p, 0)))
        p = cJSON_GetArrayItem(p, 0);
    else if (cJSON_IsArray(p))
        return bad(e, "prompt", "'prompt' must be a string (batches of prompts and token arrays "
                                "are not supported)");
    if (!cJSON_IsString(p))
        return bad(e, "prompt", "'prompt' must be a string");
    r->prompt = strdup(p->valuestring);
    if (!r->prompt)
        return gt_serve_fail(e, 500, "server_error", NULL, "out of memory");
    return 0;
}

/* Chat: "logprobs" is a boolean and "top_logprobs" the count. */
static int chat_logprobs(const cJSON *o, gt_serve_req *r, gt_serve_error *e)
{
    bool on = false;
    if (get_bool(o, "logprobs", &on, e))
        return -1;
    long v = 0;
    if (get_int(o, "top_logprobs", 0, GT_SERVE_MAX_LOGPROBS, &v, e))
        return -1;
    if (field(o, "top_logprobs") && !on)
        return bad(e, "top_logprobs", "'top_logprobs' needs 'logprobs': true");
    r->logprobs = on ? (int)v : -1;
    return 0;
}

static int parse_fields(const cJSON *o, int cap, gt_serve_req *r, gt_serve_error *e)
{
    if (r->chat ? parse_messages(o, r, e) : parse_prompt(o, r, e))
        return -1;

    const cJSON *model = field(o, "model");
    if (model && !cJSON_IsString(model))
        return bad(e, "model", "'model' must be a string");
    if (model && !(r->model = strdup(model->valuestring)))
        return gt_serve_fail(e, 500, "server_error", NULL, "out of memory");
    long v = r->max_tokens;
    if (get_int(o, "max_tokens", 0, cap, &v, e) ||
        (r->chat && get_int(o, "max_completion_tokens", 0, cap, &v, e)))
        return -1;
    r->max_tokens = (int)v;
    double d = r->temperature;
    if (get_num(o, "temperature", 0, 2, &d, e))
        return -1;
    r->temperature = (float)d;
    d = r->top_p;
    if (get_num(o, "top_p", 0, 1, &d, e))
        return -1;
    r->top_p = (float)d;
    if (r->top_p <= 0) /* nothing but the most likely token survives */
        r->temperature = 0;
    v = 0;
    if (get_int(o, "top_k", 0, 1L << 30, &v, e))
        return -1;
    r->top_k = (int)v;
    const cJSON *seed = field(o, "seed");
    if (seed) {
        if (!cJSON_IsNumber(seed) || seed->valuedouble != floor(seed->valuedouble) ||
            fabs(seed->valuedouble) > 9007199254740992.0)
            return bad(e, "seed", "'seed' must be an integer");
        r->seed = (uint64_t)(int64_t)seed->valuedouble;
        r->has_seed = true;
    }
    const cJSON *stop = field(o, "stop");
    if (stop) {
        if (cJSON_IsArray(stop)) {
            const cJSON *s;
            cJSON_ArrayForEach(s, stop) if (add_stop(r, s, e)) return -1;
        } else if (add_stop(r, stop, e)) {
            return -1;
        }
    }
    if (r->chat) {
        if (chat_logprobs(o, r, e) || get_bool(o, "stream", &r->stream, e))
            return -1;
    } else {
        const cJSON *lp = field(o, "logprobs");
        if (lp) {
            if (!cJSON_IsNumber(lp)) /* booleans are the chat API's */
                return bad(e, "logprobs",
                           "'logprobs' must be an integer (top alternatives per token)");
            v = 0;
            if (get_int(o, "logprobs", 0, GT_SERVE_MAX_LOGPROBS, &v, e))
                return -1;
            r->logprobs = (int)v;
        }
        if (get_bool(o, "echo", &r->echo, e) || get_bool(o, "stream", &r->stream, e))
            return -1;
    }
    const cJSON *so = field(o, "stream_options");
    if (so) {
        if (!cJSON_IsObject(so))
            return bad(e, "stream_options", "'stream_options' must be an object");
        if (get_bool(so, "include_usage", &r->include_usage, e))
            return -1;
    }

    if (gt_serve_parse_format(o, r, e))
        return -1;

    /* Known, not implemented: only their no-op values are accepted. */
    v = 1;
    if (get_int(o, "n", 1, 1, &v, e) || (!r->chat && get_int(o, "best_of", 1, 1, &v, e)))
        return -1;
    d = 0;
    if (get_num(o, "presence_penalty", 0, 0, &d, e) || get_num(o, "frequency_penalty", 0, 0, &d, e))
        return -1;
    const cJSON *lb = field(o, "logit_bias");
    if (lb && (!cJSON_IsObject(lb) || lb->child))
        return bad(e, "logit_bias", "'logit_bias' is not supported");
    const cJSON *suffix = r->chat ? NULL : field(o, "suffix");
    if (suffix && (!cJSON_IsString(suffix) || suffix->valuestring[0]))
        return bad(e, "suffix", "'suffix' is not supported");
    const cJSON *user = field(o, "user");
    if (user && !cJSON_IsString(user))
        return bad(e, "user", "'user' must be a string");
    return 0;
}

static int parse_body(const char *body, size_t len, int cap, bool chat, gt_serve_req *r,
                      gt_serve_error *e)
{
    memset(r, 0, sizeof *r);
    r->chat = chat;
    r->max_tokens = 16;
    r->temperature = 1.0f;
    r->top_p = 1.0f;
    r->logprobs = -1;
    if (len == 0)
        return bad(e, NULL, "the request body is empty; expected a JSON object");
    const char *end = NULL;
    cJSON *o = cJSON_ParseWithLengthOpts(body, len, &end, false);
    if (!o) {
        size_t at = end && end >= body ? (size_t)(end - body) : 0;
        return bad(e, NULL, "the request body is not valid JSON (error near byte %zu)", at);
    }
    /* Trailing garbage after the object is malformed too. */
    size_t used = (size_t)(end - body);
    while (used < len && strchr(" \t\r\n", body[used]))
        used++;
    int rc;
    if (used < len && body[used] != '\0')
        rc = bad(e, NULL, "the request body is not valid JSON (trailing data at byte %zu)", used);
    else if (!cJSON_IsObject(o))
        rc = bad(e, NULL, "the request body must be a JSON object");
    else
        rc = parse_fields(o, cap, r, e);
    cJSON_Delete(o);
    if (rc)
        gt_serve_req_free(r);
    return rc;
}

int gt_serve_parse(const char *body, size_t len, int cap, gt_serve_req *r, gt_serve_error *e)
{
    return parse_body(body, len, cap, false, r, e);
}

int gt_serve_parse_chat(const char *body, size_t len, int cap, gt_serve_req *r,
                        gt_serve_error *e)
{
    return parse_body(body, len, cap, true, r, e);
}

void gt_serve_req_free(gt_serve_req *r)
{
    free(r->prompt);
    r->prompt = NULL;
    free(r->model);
    r->model = NULL;
    for (int i = 0; i < r->n_messages; i++) {
        free(r->messages[i].role);
        free(r->messages[i].content);
    }
    free(r->messages);
    r->messages = NULL;
    r->n_messages = 0;
    for (int i = 0; i < r->n_stop; i++)
        free(r->stop[i]);
    r->n_stop = 0;
    free(r->schema);
    r->schema = NULL;
    gt_constraint_free(r->con);
    r->con = NULL;
}
