/*
 * ExampleCPolicy — a groupd policy plugin in plain C: a banned-word list and a maximum length.
 *
 * Config (JSON): {"words": ["spam", "scam"], "mode": "reject" | "mask", "max_length": 64}
 *  - every named field the hook passes is checked;
 *  - a field containing a word (ASCII case-insensitive) is rejected with that field's key,
 *    or, with "mode": "mask", each occurrence is replaced by "***" (leftmost, longest first);
 *  - a field longer than max_length characters (UTF-8 code points; 0 = no limit) is rejected.
 *
 * It shows the whole ABI from C: the entry symbol, the tables, instance_new's error path,
 * borrowed inputs and the copying callbacks. The parser is deliberately tiny: real plugins
 * should use a real JSON library.
 */
#include "groupd_policy.h"
#include <ctype.h>
#include <stdlib.h>
#include <string.h>

static const groupd_host_api *host;

typedef struct policy {
    char **words;
    size_t *lengths;
    size_t count;
    int mask;
    size_t max_length;
} policy;

static groupd_str cstr(const char *s) { return groupd_str_from(s, strlen(s)); }

/* ---- a tiny JSON reader: enough for strings, an array of strings and an integer ---- */

static const char *skip_ws(const char *p, const char *end) {
    while (p < end && isspace((unsigned char)*p)) p++;
    return p;
}

/* Find `"key"` followed by ':' at the top level of the object; return the value's start. */
static const char *find_key(const char *p, const char *end, const char *key) {
    size_t n = strlen(key);
    for (; p + n + 2 <= end; p++) {
        if (*p == '"' && memcmp(p + 1, key, n) == 0 && p[n + 1] == '"') {
            const char *q = skip_ws(p + n + 2, end);
            if (q < end && *q == ':') return skip_ws(q + 1, end);
        }
    }
    return NULL;
}

/* Read a JSON string at p (which points at '"') into a new buffer; set *next past it. */
static char *read_string(const char *p, const char *end, const char **next, size_t *out_len) {
    if (p >= end || *p != '"') return NULL;
    p++;
    char *out = malloc((size_t)(end - p) + 1);
    size_t n = 0;
    while (p < end && *p != '"') {
        if (*p == '\\' && p + 1 < end) p++; /* \" and \\ ; other escapes are taken literally */
        out[n++] = *p++;
    }
    if (p >= end) { free(out); return NULL; }
    out[n] = 0;
    *next = p + 1;
    *out_len = n;
    return out;
}

static void policy_free(policy *self) {
    for (size_t i = 0; i < self->count; i++) free(self->words[i]);
    free(self->words);
    free(self->lengths);
    free(self);
}

static void *policy_new(groupd_call *call, groupd_str app_id, groupd_str config) {
    (void)app_id;
    const char *p = config.ptr, *end = config.ptr + config.len;
    policy *self = calloc(1, sizeof(policy));
    const char *value;
    if (config.len == 0 || *skip_ws(p, end) != '{') {
        host->set_error(call, 1, cstr("example-c: config must be a JSON object"));
        policy_free(self);
        return NULL;
    }
    if ((value = find_key(p, end, "words")) != NULL) {
        if (*value != '[') {
            host->set_error(call, 1, cstr("example-c: \"words\" must be an array of strings"));
            policy_free(self);
            return NULL;
        }
        value = skip_ws(value + 1, end);
        while (value < end && *value != ']') {
            size_t len;
            char *word = read_string(value, end, &value, &len);
            if (!word) {
                host->set_error(call, 1, cstr("example-c: \"words\" must be an array of strings"));
                policy_free(self);
                return NULL;
            }
            if (len > 0) {
                for (size_t i = 0; i < len; i++) word[i] = (char)tolower((unsigned char)word[i]);
                self->words = realloc(self->words, (self->count + 1) * sizeof(char *));
                self->lengths = realloc(self->lengths, (self->count + 1) * sizeof(size_t));
                self->words[self->count] = word;
                self->lengths[self->count] = len;
                self->count++;
            } else {
                free(word);
            }
            value = skip_ws(value, end);
            if (value < end && *value == ',') value = skip_ws(value + 1, end);
        }
    }
    if ((value = find_key(p, end, "mode")) != NULL) {
        size_t len;
        const char *next;
        char *mode = read_string(value, end, &next, &len);
        if (!mode || (strcmp(mode, "reject") != 0 && strcmp(mode, "mask") != 0)) {
            free(mode);
            host->set_error(call, 1, cstr("example-c: \"mode\" must be \"reject\" or \"mask\""));
            policy_free(self);
            return NULL;
        }
        self->mask = strcmp(mode, "mask") == 0;
        free(mode);
    }
    if ((value = find_key(p, end, "max_length")) != NULL) self->max_length = (size_t)strtoul(value, NULL, 10);
    return self;
}

static void policy_destroy(void *instance) { policy_free(instance); }

/* The length of the longest word matching at text[i], or 0. */
static size_t match_at(const policy *self, const char *text, size_t len, size_t i) {
    size_t best = 0;
    for (size_t w = 0; w < self->count; w++) {
        size_t n = self->lengths[w];
        if (n <= best || i + n > len) continue;
        size_t k = 0;
        while (k < n && tolower((unsigned char)text[i + k]) == self->words[w][k]) k++;
        if (k == n) best = n;
    }
    return best;
}

static size_t utf8_length(groupd_str s) {
    size_t n = 0;
    for (size_t i = 0; i < s.len; i++)
        if (((unsigned char)s.ptr[i] & 0xC0) != 0x80) n++;
    return n;
}

static int32_t policy_on_hook(void *instance, int32_t hook, const groupd_request *request, groupd_call *call) {
    const policy *self = instance;
    int rejected = 0, rewritten = 0;
    if (hook == GROUPD_HOOK_AFTER_EVENT || hook == GROUPD_HOOK_FILTER_CUSTOM_ON_READ) return GROUPD_DECISION_ALLOW;
    for (size_t f = 0; f < request->field_count; f++) {
        const groupd_field *field = &request->fields[f];
        if (self->max_length && utf8_length(field->value) > self->max_length) {
            host->reject_field(call, field->key, cstr("longer than max_length"));
            rejected = 1;
            continue;
        }
        if (self->count == 0) continue;
        /* Worst case every byte starts a one-byte word: 3 bytes out per byte in. */
        char *out = self->mask ? malloc(field->value.len * 3 + 1) : NULL;
        size_t o = 0, hits = 0;
        for (size_t i = 0; i < field->value.len;) {
            size_t n = match_at(self, field->value.ptr, field->value.len, i);
            if (n) {
                hits++;
                if (!self->mask) break;
                memcpy(out + o, "***", 3);
                o += 3;
                i += n;
            } else {
                if (out) out[o++] = field->value.ptr[i];
                i++;
            }
        }
        if (hits && !self->mask) {
            host->reject_field(call, field->key, cstr("contains a banned word"));
            rejected = 1;
        } else if (hits) {
            host->rewrite(call, field->key, groupd_str_from(out, o));
            rewritten = 1;
        }
        free(out);
    }
    if (rejected) return GROUPD_DECISION_REJECT;
    return rewritten ? GROUPD_DECISION_REWRITE : GROUPD_DECISION_ALLOW;
}

static const groupd_plugin_api table = {
    .struct_size = sizeof(groupd_plugin_api),
    .abi_major = GROUPD_POLICY_ABI_MAJOR,
    .abi_minor = GROUPD_POLICY_ABI_MINOR,
    .name = "example-c",
    .instance_new = policy_new,
    .instance_destroy = policy_destroy,
    .on_hook = policy_on_hook,
};

GROUPD_POLICY_EXPORT const groupd_plugin_api *groupd_policy_entry_v1(const groupd_host_api *h) {
    /* Refuse a host older than the fields this plugin calls. */
    if (h == NULL || h->abi_major != GROUPD_POLICY_ABI_MAJOR ||
        h->struct_size < offsetof(groupd_host_api, log) + sizeof(h->log))
        return NULL;
    host = h;
    return &table;
}
