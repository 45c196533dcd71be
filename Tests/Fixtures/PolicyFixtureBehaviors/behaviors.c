/* A test plugin whose behaviour is chosen by its config string, "mode=<m>;delay_ms=<n>;tag=<t>;key=<k>":
 * allow, reject, discard, error, unknown, slow (sleep delay_ms then allow), init_fail,
 * tag (append tag to the `name` field), remove (remove field `key`), invite (refuse users
 * starting with "bad"), echo (rewrite `echo` to "<operator_id>:<message.text>"), edits (discard
 * a message edit, one with `message.edit_of`, whose `message.text` holds `key`; allow the rest),
 * replies (likewise a reply, one with `message.reply_to`). */
#define _POSIX_C_SOURCE 200809L
#include "groupd_policy.h"
#include "policy_fixture_behaviors.h"
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <pthread.h>

/* Per-tag statistics, so tests running in parallel in one process do not see each other. */
typedef struct tag_stats {
    char tag[64];
    long live, destroyed, in_flight, max_in_flight, completed;
} tag_stats;
static tag_stats registry[256];
static size_t registry_count;
static pthread_mutex_t registry_lock = PTHREAD_MUTEX_INITIALIZER;
/* Broadcast on every change of a statistic, for policy_fixture_wait_stat. */
static pthread_cond_t registry_changed = PTHREAD_COND_INITIALIZER;

static tag_stats *stats_for(const char *tag) {
    pthread_mutex_lock(&registry_lock);
    tag_stats *found = NULL;
    for (size_t i = 0; i < registry_count; i++)
        if (strcmp(registry[i].tag, tag) == 0) { found = &registry[i]; break; }
    if (!found && registry_count < 256) {
        found = &registry[registry_count++];
        strncpy(found->tag, tag, sizeof found->tag - 1);
    }
    pthread_mutex_unlock(&registry_lock);
    return found;
}

static void stats_update(const char *tag, long live, long destroyed, long in_flight, long completed) {
    tag_stats *s = stats_for(tag);
    if (!s) return;
    pthread_mutex_lock(&registry_lock);
    s->live += live;
    s->destroyed += destroyed;
    s->in_flight += in_flight;
    s->completed += completed;
    if (s->in_flight > s->max_in_flight) s->max_in_flight = s->in_flight;
    pthread_cond_broadcast(&registry_changed);
    pthread_mutex_unlock(&registry_lock);
}

static long stat_locked(const tag_stats *s, int which) {
    return which == 0 ? s->live : which == 1 ? s->destroyed : which == 2 ? s->max_in_flight : s->completed;
}

long policy_fixture_stat(const char *tag, int which) {
    tag_stats *s = stats_for(tag);
    if (!s) return -1;
    pthread_mutex_lock(&registry_lock);
    long v = stat_locked(s, which);
    pthread_mutex_unlock(&registry_lock);
    return v;
}

long policy_fixture_wait_stat(const char *tag, int which, long at_least, long timeout_ms) {
    tag_stats *s = stats_for(tag);
    if (!s) return -1;
    struct timespec deadline;
    clock_gettime(CLOCK_REALTIME, &deadline);
    deadline.tv_sec += timeout_ms / 1000;
    deadline.tv_nsec += (timeout_ms % 1000) * 1000000L;
    if (deadline.tv_nsec >= 1000000000L) { deadline.tv_sec += 1; deadline.tv_nsec -= 1000000000L; }
    pthread_mutex_lock(&registry_lock);
    long v = stat_locked(s, which);
    while (v < at_least) {
        if (pthread_cond_timedwait(&registry_changed, &registry_lock, &deadline) != 0) { v = stat_locked(s, which); break; }
        v = stat_locked(s, which);
    }
    pthread_mutex_unlock(&registry_lock);
    return v;
}

static const groupd_host_api *host;
static atomic_long live_instances;
static atomic_long destroyed_instances;
static atomic_long calls_in_flight;
static atomic_long max_in_flight;

typedef struct instance {
    char mode[32];
    char tag[64];
    char key[64];
    long delay_ms;
} instance;

static groupd_str cstr(const char *s) { return groupd_str_from(s, strlen(s)); }

/* Copy the value of `name=` from a ";"-separated config into out (empty when absent). */
static void config_value(groupd_str config, const char *name, char *out, size_t cap) {
    out[0] = 0;
    size_t name_len = strlen(name);
    size_t i = 0;
    while (i < config.len) {
        size_t end = i;
        while (end < config.len && config.ptr[end] != ';') end++;
        if (end - i > name_len && memcmp(config.ptr + i, name, name_len) == 0 && config.ptr[i + name_len] == '=') {
            size_t n = end - i - name_len - 1;
            if (n >= cap) n = cap - 1;
            memcpy(out, config.ptr + i + name_len + 1, n);
            out[n] = 0;
            return;
        }
        i = end + 1;
    }
}

static void *fixture_new(groupd_call *call, groupd_str app_id, groupd_str config) {
    (void)app_id;
    instance *self = calloc(1, sizeof(instance));
    char delay[32];
    config_value(config, "mode", self->mode, sizeof self->mode);
    config_value(config, "tag", self->tag, sizeof self->tag);
    config_value(config, "key", self->key, sizeof self->key);
    config_value(config, "delay_ms", delay, sizeof delay);
    self->delay_ms = atol(delay);
    if (strcmp(self->mode, "init_fail") == 0) {
        free(self);
        host->set_error(call, 3, cstr("fixture: init_fail requested by config"));
        return NULL;
    }
    atomic_fetch_add(&live_instances, 1);
    stats_update(self->tag, 1, 0, 0, 0);
    return self;
}

static void fixture_destroy(void *p) {
    stats_update(((instance *)p)->tag, -1, 1, 0, 0);
    free(p);
    atomic_fetch_sub(&live_instances, 1);
    atomic_fetch_add(&destroyed_instances, 1);
}

static const groupd_str *field(const groupd_request *r, const char *key) {
    size_t n = strlen(key);
    for (size_t i = 0; i < r->field_count; i++)
        if (r->fields[i].key.len == n && memcmp(r->fields[i].key.ptr, key, n) == 0) return &r->fields[i].value;
    return NULL;
}

static void sleep_ms(long ms) {
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    while (nanosleep(&ts, &ts) != 0) {}
}

static int32_t fixture_on_hook(void *p, int32_t hook, const groupd_request *r, groupd_call *call) {
    (void)hook;
    instance *self = p;
    long now = atomic_fetch_add(&calls_in_flight, 1) + 1;
    long seen = atomic_load(&max_in_flight);
    while (now > seen && !atomic_compare_exchange_weak(&max_in_flight, &seen, now)) {}
    int32_t decision = GROUPD_DECISION_ALLOW;
    stats_update(self->tag, 0, 0, 1, 0);
    if (self->delay_ms > 0) sleep_ms(self->delay_ms);
    if (strcmp(self->mode, "reject") == 0) {
        host->reject_field(call, cstr("name"), cstr("fixture rejects everything"));
        decision = GROUPD_DECISION_REJECT;
    } else if (strcmp(self->mode, "discard") == 0) {
        decision = GROUPD_DECISION_DISCARD;
    } else if (strcmp(self->mode, "error") == 0) {
        host->set_error(call, 7, cstr("fixture: error requested"));
        decision = GROUPD_DECISION_ERROR;
    } else if (strcmp(self->mode, "unknown") == 0) {
        decision = 42;
    } else if (strcmp(self->mode, "tag") == 0) {
        const groupd_str *name = field(r, "name");
        char buf[512];
        size_t n = name ? (name->len < 256 ? name->len : 256) : 0;
        if (n) memcpy(buf, name->ptr, n);
        size_t t = strlen(self->tag);
        memcpy(buf + n, self->tag, t);
        host->rewrite(call, cstr("name"), groupd_str_from(buf, n + t));
        decision = GROUPD_DECISION_REWRITE;
    } else if (strcmp(self->mode, "remove") == 0) {
        host->remove_field(call, cstr(self->key));
        decision = GROUPD_DECISION_REWRITE;
    } else if (strcmp(self->mode, "invite") == 0) {
        for (size_t i = 0; i < r->user_count; i++)
            if (r->users[i].len >= 3 && memcmp(r->users[i].ptr, "bad", 3) == 0) {
                host->reject_member(call, r->users[i], cstr("fixture refuses bad users"));
                decision = GROUPD_DECISION_REJECT;
            }
    } else if (strcmp(self->mode, "edits") == 0 || strcmp(self->mode, "replies") == 0) {
        const groupd_str *edit_of =
            field(r, strcmp(self->mode, "edits") == 0 ? "message.edit_of" : "message.reply_to");
        const groupd_str *text = field(r, "message.text");
        size_t k = strlen(self->key);
        if (edit_of && text && k > 0 && text->len >= k)
            for (size_t i = 0; i + k <= text->len; i++)
                if (memcmp(text->ptr + i, self->key, k) == 0) { decision = GROUPD_DECISION_DISCARD; break; }
    } else if (strcmp(self->mode, "echo") == 0) {
        const groupd_str *text = field(r, "message.text");
        size_t n = r->operator_id.len + 1 + (text ? text->len : 0);
        char *buf = malloc(n);
        memcpy(buf, r->operator_id.ptr, r->operator_id.len);
        buf[r->operator_id.len] = ':';
        if (text) memcpy(buf + r->operator_id.len + 1, text->ptr, text->len);
        host->rewrite(call, cstr("echo"), groupd_str_from(buf, n));
        free(buf); /* the host copied it */
        decision = GROUPD_DECISION_REWRITE;
    }
    atomic_fetch_sub(&calls_in_flight, 1);
    stats_update(self->tag, 0, 0, -1, 1);
    return decision;
}

static const groupd_plugin_api table = {
    .struct_size = sizeof(groupd_plugin_api),
    .abi_major = GROUPD_POLICY_ABI_MAJOR,
    .abi_minor = GROUPD_POLICY_ABI_MINOR,
    .name = "fixture-behaviors",
    .instance_new = fixture_new,
    .instance_destroy = fixture_destroy,
    .on_hook = fixture_on_hook,
};

GROUPD_POLICY_EXPORT const groupd_plugin_api *groupd_policy_entry_v1(const groupd_host_api *h) {
    if (h->struct_size < sizeof(groupd_host_api) || h->abi_major != GROUPD_POLICY_ABI_MAJOR) return NULL;
    host = h;
    return &table;
}

long policy_fixture_live_instances(void) { return atomic_load(&live_instances); }
long policy_fixture_destroyed_instances(void) { return atomic_load(&destroyed_instances); }
long policy_fixture_max_in_flight(void) { return atomic_load(&max_in_flight); }
