/* serve_format.c: OpenAI's response_format: which document an answer must
 * be, parsed from the request and compiled into a gt/constraint.h
 * constraint for the model.
 *
 * Strict as the rest of the request: a type we do not know, a json_schema
 * without its schema, or a schema the constraint cannot compile (an
 * unsupported keyword, a malformed schema) is a 400 naming the problem,
 * never an answer computed without the constraint the client asked for. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve.h"

static int format_bad(gt_serve_error *e, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static int format_bad(gt_serve_error *e, const char *fmt, ...)
{
    /* Filled here rather than by gt_serve_fail: serve_request.c calls this
     * file, so calling back into it would be a loop between the two. */
    *e = (gt_serve_error){
        .status = 400, .type = "invalid_request_error", .param = "response_format"};
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->message, sizeof e->message, fmt, ap);
    va_end(ap);
    return -1;
}

int gt_serve_parse_format(const cJSON *o, gt_serve_req *r, gt_serve_error *e)
{
    r->format = GT_SERVE_FORMAT_TEXT;
    const cJSON *rf = cJSON_GetObjectItemCaseSensitive(o, "response_format");
    if (!rf || cJSON_IsNull(rf))
        return 0;
    if (!cJSON_IsObject(rf))
        return format_bad(e, "'response_format' must be an object with a \"type\"");
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(rf, "type");
    if (!cJSON_IsString(type))
        return format_bad(e,
                          "'response_format.type' must be a string: \"text\", \"json_object\" or "
                          "\"json_schema\"");
    if (!strcmp(type->valuestring, "text"))
        return 0;
    if (!strcmp(type->valuestring, "json_object")) {
        r->format = GT_SERVE_FORMAT_JSON_OBJECT;
        return 0;
    }
    if (strcmp(type->valuestring, "json_schema") != 0)
        return format_bad(
            e,
            "unknown response_format type '%s' (expected \"text\", \"json_object\" or "
            "\"json_schema\")",
            type->valuestring);
    const cJSON *js = cJSON_GetObjectItemCaseSensitive(rf, "json_schema");
    if (!cJSON_IsObject(js))
        return format_bad(e,
                          "response_format of type \"json_schema\" needs a \"json_schema\" object "
                          "with the \"schema\"");
    const cJSON *name = cJSON_GetObjectItemCaseSensitive(js, "name");
    if (name && !cJSON_IsNull(name) && !cJSON_IsString(name))
        return format_bad(e, "'response_format.json_schema.name' must be a string");
    const cJSON *strict = cJSON_GetObjectItemCaseSensitive(js, "strict");
    /* strict or not, the constraint is enforced: the subset it compiles is
     * always followed exactly. */
    if (strict && !cJSON_IsNull(strict) && !cJSON_IsBool(strict))
        return format_bad(e, "'response_format.json_schema.strict' must be a boolean");
    const cJSON *schema = cJSON_GetObjectItemCaseSensitive(js, "schema");
    if (!schema || cJSON_IsNull(schema))
        return format_bad(e,
                          "'response_format.json_schema.schema' is required (the JSON Schema the "
                          "answer must satisfy)");
    if (!cJSON_IsObject(schema) && !cJSON_IsBool(schema))
        return format_bad(e, "'response_format.json_schema.schema' must be a JSON Schema object");
    r->schema = cJSON_PrintUnformatted(schema);
    if (!r->schema) {
        *e = (gt_serve_error){.status = 500, .type = "server_error", .message = "out of memory"};
        return -1;
    }
    r->format = GT_SERVE_FORMAT_JSON_SCHEMA;
    return 0;
}

int gt_serve_compile_format(const gt_serve_ctx *c, gt_serve_req *r, gt_serve_error *e)
{
    if (r->format == GT_SERVE_FORMAT_TEXT)
        return 0;
    gt_err err = {{0}};
    const int rc = r->format == GT_SERVE_FORMAT_JSON_OBJECT
                       ? gt_constraint_json_object(c->model, &r->con, &err)
                       : gt_constraint_from_schema(c->model, r->schema, &r->con, &err);
    if (rc != 0) {
        r->con = NULL;
        return format_bad(e, "response_format: %s", err.msg);
    }
    return 0;
}
