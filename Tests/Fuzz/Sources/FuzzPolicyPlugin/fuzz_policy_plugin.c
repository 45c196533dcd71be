/* A policy plugin that answers whatever the fuzzer scripts: the host's side of the ABI (what
 * it does with the strings, lengths, decisions and calls a plugin hands back) fed anything a
 * plugin may legally do.
 *
 * instance_new's config is "<n><script>": n names the request field "script<n>" whose value
 * is this instance's on_hook script; <script> is run by instance_new itself (set_error, log,
 * then NULL for a failure or an instance). A script is a sequence of operations, each one byte
 * (its value modulo 8) followed by its operands; a string operand is a length byte and that
 * many bytes (cut at the script's end):
 *   0 reject_field(str, str)     1 reject_member(str, str)   2 rewrite(str, str)
 *   3 remove_field(str)          4 set_error(4-byte code, str)
 *   5 log(level byte, str)       6 return the 4-byte decision that follows (any value)
 *   7 an answer with a NULL pointer and the length byte that follows, and one with a NULL call
 *     (both to be ignored or read as empty by the host)
 * A script that ends without 6 returns ALLOW (instance_new: an instance). */
#include "groupd_policy.h"
#include "fuzz_policy_plugin.h"
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static const groupd_host_api *host;

typedef struct cursor {
    const unsigned char *bytes;
    size_t len, at;
} cursor;

static int more(const cursor *c) { return c->at < c->len; }

static unsigned char byte(cursor *c) { return more(c) ? c->bytes[c->at++] : 0; }

static int32_t word(cursor *c) {
    uint32_t value = 0;
    for (int i = 0; i < 4; i++) value = value << 8 | byte(c);
    return (int32_t)value;
}

static groupd_str str(cursor *c) {
    size_t want = byte(c);
    size_t have = c->len - c->at;
    size_t len = want < have ? want : have;
    groupd_str s = groupd_str_from((const char *)c->bytes + c->at, len);
    c->at += len;
    return s;
}

/* Runs a script; returns its decision and sets *decided when it ended with one. */
static int32_t run(cursor *c, groupd_call *call, int *decided) {
    *decided = 0;
    while (more(c)) {
        switch (byte(c) % 8) {
        case 0: { groupd_str key = str(c); host->reject_field(call, key, str(c)); break; }
        case 1: { groupd_str user = str(c); host->reject_member(call, user, str(c)); break; }
        case 2: { groupd_str key = str(c); host->rewrite(call, key, str(c)); break; }
        case 3: host->remove_field(call, str(c)); break;
        case 4: { int32_t code = word(c); host->set_error(call, code, str(c)); break; }
        case 5: { int32_t level = (int8_t)byte(c); host->log(call, level, str(c)); break; }
        case 6: *decided = 1; return word(c);
        case 7: {
            groupd_str null_str = groupd_str_from(NULL, byte(c));
            host->rewrite(call, null_str, null_str);
            host->reject_field(NULL, null_str, null_str);
            break;
        }
        }
    }
    return GROUPD_DECISION_ALLOW;
}

typedef struct instance {
    char field[16];
} instance;

static void *instance_new(groupd_call *call, groupd_str app_id, groupd_str config) {
    (void)app_id;
    cursor c = { (const unsigned char *)config.ptr, config.ptr ? config.len : 0, 0 };
    unsigned n = byte(&c) % 4;
    int decided;
    int32_t decision = run(&c, call, &decided);
    if (decided && decision != GROUPD_DECISION_ALLOW) return NULL;
    instance *made = calloc(1, sizeof *made);
    if (made) {
        memcpy(made->field, "script0", 8);
        made->field[6] = (char)('0' + n);
    }
    return made;
}

static void instance_destroy(void *made) { free(made); }

static int32_t on_hook(void *opaque, int32_t hook, const groupd_request *request, groupd_call *call) {
    (void)hook;
    const instance *self = opaque;
    size_t name_len = strlen(self->field);
    for (size_t i = 0; i < request->field_count; i++) {
        groupd_str key = request->fields[i].key;
        if (key.len == name_len && memcmp(key.ptr, self->field, name_len) == 0) {
            cursor c = { (const unsigned char *)request->fields[i].value.ptr, request->fields[i].value.len, 0 };
            int decided;
            return run(&c, call, &decided);
        }
    }
    /* Read every string lent to us, so a bad length or pointer shows under the sanitizers. */
    volatile unsigned sum = 0;
    const groupd_str lent[] = { request->app_id, request->operator_id, request->group_id,
                                request->group_type, request->reader_role, request->event_type };
    for (size_t i = 0; i < sizeof lent / sizeof lent[0]; i++)
        for (size_t j = 0; j < lent[i].len; j++) sum += (unsigned char)lent[i].ptr[j];
    for (size_t i = 0; i < request->user_count; i++)
        for (size_t j = 0; j < request->users[i].len; j++) sum += (unsigned char)request->users[i].ptr[j];
    return GROUPD_DECISION_ALLOW;
}

static const groupd_plugin_api table = {
    .struct_size = sizeof(groupd_plugin_api),
    .abi_major = GROUPD_POLICY_ABI_MAJOR,
    .abi_minor = GROUPD_POLICY_ABI_MINOR,
    .name = "fuzz-policy",
    .instance_new = instance_new,
    .instance_destroy = instance_destroy,
    .on_hook = on_hook,
};

GROUPD_POLICY_EXPORT const groupd_plugin_api *groupd_policy_entry_v1(const groupd_host_api *h) {
    host = h;
    return &table;
}
