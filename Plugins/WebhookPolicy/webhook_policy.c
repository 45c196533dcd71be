/*
 * WebhookPolicy — a groupd policy plugin that forwards hooks to the app's HTTP endpoint,
 * Tencent-callback style (docs/PLUGINS.md, "HTTP webhooks").
 *
 *  - Before-hooks (and the validate/filter hooks, if configured on them) POST the request to
 *    the app's URL and wait for the answer, within the call's budget (`budget_ms`, ABI 1.1):
 *    allow, reject with error keys, reject invitees, rewrite fields, discard. Anything else
 *    (no answer in time, a non-2xx status, a body that is not the documented JSON) is
 *    GROUPD_DECISION_ERROR: the hook's failure mode, configured in groupd, applies.
 *  - AFTER_EVENT appends the event to a journal file in `queue_dir` and fsyncs it before
 *    returning; a thread of the instance delivers the journal in order, at least once, with
 *    exponential back-off, and records what was delivered in an offset file. Only one
 *    instance per app and directory delivers at a time (an flock'ed lock file), so a reload
 *    (which makes the new instance before it destroys the old one) never delivers twice in
 *    parallel, and a restart resumes at the offset.
 *  - after_event_position tells groupd the last event_id journaled: when groupd starts, it
 *    hands the instance again the events committed after it (a crash between a commit and
 *    the append), so the journal misses nothing the store committed.
 *  - Every request carries X-Groupd-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of
 *    "<t>.<body>" keyed with the app's secret>.
 *
 * on_hook runs on the host's threads, possibly several at once: the instance is immutable
 * after instance_new except for the queue state, which `mutex` guards. Each thread keeps
 * its own curl handle (and so its connections) in thread-local storage.
 */
#include "groupd_policy.h"

#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

static const groupd_host_api *host;

/* A journal that is fully delivered and at least this big is truncated to empty. */
#define COMPACT_BYTES (1024 * 1024)
/* An answer to a before-hook larger than this is refused. */
#define MAX_ANSWER_BYTES (1024 * 1024)
/* How often an instance that does not hold the delivery lock tries to take it. */
#define LOCK_RETRY_MS 200
/* How long an idle deliverer sleeps before it looks at the journal again even unwoken
 * (appends by another instance on the same directory do not wake it). */
#define IDLE_RECHECK_MS 1000

typedef struct webhook {
    char *app;
    char *url;
    char *secret;
    size_t secret_len;
    char *queue_dir;            /* NULL: no after-events */
    long retry_min_ms, retry_max_ms, delivery_timeout_ms;
    char **events;              /* after-event types to deliver; NULL = all */
    size_t event_count;

    /* The queue (only with queue_dir). */
    char *journal_path, *offset_path, *lock_path, *position_path;
    int journal_fd, offset_fd, lock_fd;
    pthread_mutex_t mutex;      /* appends, `appended`, `position`, `stopping` */
    long long position;         /* the highest event_id journaled (after_event_position) */
    pthread_cond_t wake;
    unsigned long appended;     /* bumped on every append: the deliverer's wake-up token */
    int stopping;               /* set once by instance_destroy; read by curl's progress callback */
    pthread_t thread;
    int thread_started;
} webhook;

static void webhook_release(webhook *self);

/* ---- small helpers ---- */

static groupd_str cstr(const char *s) { return groupd_str_from(s, strlen(s)); }

static void fail(groupd_call *call, const char *format, ...) {
    char message[512];
    va_list args;
    va_start(args, format);
    vsnprintf(message, sizeof message, format, args);
    va_end(args);
    host->set_error(call, 1, cstr(message));
}

/* The delivery thread has no groupd_call to log through: it writes to groupd's stderr. */
static void log_stderr(const webhook *self, const char *format, ...) {
    char message[768];
    va_list args;
    va_start(args, format);
    vsnprintf(message, sizeof message, format, args);
    va_end(args);
    fprintf(stderr, "webhook-policy [app %s]: %s\n", self->app, message);
}

static char *dup_n(const char *s, size_t n) {
    char *out = malloc(n + 1);
    if (!out) return NULL;
    memcpy(out, s, n);
    out[n] = 0;
    return out;
}

static struct timespec deadline_in(long ms) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    t.tv_sec += ms / 1000;
    t.tv_nsec += (ms % 1000) * 1000000L;
    if (t.tv_nsec >= 1000000000L) { t.tv_sec++; t.tv_nsec -= 1000000000L; }
    return t;
}

static int past(const struct timespec *deadline) {
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return now.tv_sec > deadline->tv_sec || (now.tv_sec == deadline->tv_sec && now.tv_nsec >= deadline->tv_nsec);
}

static json_t *json_str(groupd_str s) {
    json_t *value = json_stringn(s.ptr ? s.ptr : "", s.len);
    return value ? value : json_string("");  /* the host passes valid UTF-8; never NULL anyway */
}

/* ---- names ---- */

static const char *hook_name(int32_t hook) {
    switch (hook) {
    case GROUPD_HOOK_VALIDATE_GROUP_CUSTOM: return "validate_group_custom";
    case GROUPD_HOOK_VALIDATE_MEMBER_CUSTOM: return "validate_member_custom";
    case GROUPD_HOOK_FILTER_CUSTOM_ON_READ: return "filter_custom_on_read";
    case GROUPD_HOOK_BEFORE_CREATE_GROUP: return "before_create_group";
    case GROUPD_HOOK_BEFORE_UPDATE_PROFILE: return "before_update_profile";
    case GROUPD_HOOK_BEFORE_APPLY_TO_JOIN: return "before_apply_to_join";
    case GROUPD_HOOK_BEFORE_INVITE: return "before_invite";
    case GROUPD_HOOK_BEFORE_SET_MEMBER_INFO: return "before_set_member_info";
    case GROUPD_HOOK_BEFORE_SEND_GROUP_MESSAGE: return "before_send_group_message";
    case GROUPD_HOOK_AFTER_EVENT: return "after_event";
    default: return NULL;
    }
}

/* Tencent's CallbackCommand names where Tencent has one, the same pattern otherwise. */
static const char *before_callback(int32_t hook) {
    switch (hook) {
    case GROUPD_HOOK_VALIDATE_GROUP_CUSTOM: return "Group.CallbackValidateGroupCustom";
    case GROUPD_HOOK_VALIDATE_MEMBER_CUSTOM: return "Group.CallbackValidateMemberCustom";
    case GROUPD_HOOK_FILTER_CUSTOM_ON_READ: return "Group.CallbackFilterCustomOnRead";
    case GROUPD_HOOK_BEFORE_CREATE_GROUP: return "Group.CallbackBeforeCreateGroup";
    case GROUPD_HOOK_BEFORE_UPDATE_PROFILE: return "Group.CallbackBeforeModifyGroupInfo";
    case GROUPD_HOOK_BEFORE_APPLY_TO_JOIN: return "Group.CallbackBeforeApplyJoinGroup";
    case GROUPD_HOOK_BEFORE_INVITE: return "Group.CallbackBeforeInviteJoinGroup";
    case GROUPD_HOOK_BEFORE_SET_MEMBER_INFO: return "Group.CallbackBeforeModifyMemberInfo";
    case GROUPD_HOOK_BEFORE_SEND_GROUP_MESSAGE: return "Group.CallbackBeforeSendMsg";
    default: return NULL;
    }
}

/* After-event callback name into out: Tencent's for the events it has, else
 * "Group.CallbackAfter" + the event type in PascalCase (MEMBER_MUTED -> MemberMuted). */
static void after_callback(groupd_str type, char *out, size_t size) {
    static const struct { const char *type, *name; } tencent[] = {
        {"GROUP_CREATED", "Group.CallbackAfterCreateGroup"},
        {"MEMBER_JOINED", "Group.CallbackAfterNewMemberJoin"},
        {"MEMBER_QUIT", "Group.CallbackAfterMemberExit"},
        {"MEMBER_KICKED", "Group.CallbackAfterMemberExit"},
        {"GROUP_INFO_CHANGED", "Group.CallbackAfterGroupInfoChanged"},
        {"GROUP_DISMISSED", "Group.CallbackAfterGroupDestroyed"},
        {"GROUP_MESSAGE", "Group.CallbackAfterSendMsg"},
    };
    for (size_t i = 0; i < sizeof tencent / sizeof tencent[0]; i++)
        if (strlen(tencent[i].type) == type.len && memcmp(tencent[i].type, type.ptr, type.len) == 0) {
            snprintf(out, size, "%s", tencent[i].name);
            return;
        }
    size_t n = (size_t)snprintf(out, size, "Group.CallbackAfter");
    int upper = 1;
    for (size_t i = 0; i < type.len && n + 1 < size; i++) {
        char c = type.ptr[i];
        if (c == '_') { upper = 1; continue; }
        if (c >= 'A' && c <= 'Z' && !upper) c = (char)(c - 'A' + 'a');
        else if (c >= 'a' && c <= 'z' && upper) c = (char)(c - 'a' + 'A');
        out[n++] = c;
        upper = 0;
    }
    out[n] = 0;
}

/* ---- the request body ---- */

static json_t *request_json(const webhook *self, int32_t hook, const groupd_request *r, const char *callback) {
    json_t *body = json_object();
    json_object_set_new(body, "callback", json_string(callback));
    json_object_set_new(body, "hook", json_string(hook_name(hook)));
    json_object_set_new(body, "app_id", json_string(self->app));
    json_object_set_new(body, "operator_id", json_str(r->operator_id));
    json_object_set_new(body, "group_id", json_str(r->group_id));
    json_object_set_new(body, "group_type", json_str(r->group_type));
    if (hook == GROUPD_HOOK_FILTER_CUSTOM_ON_READ) json_object_set_new(body, "reader_role", json_str(r->reader_role));
    if (hook == GROUPD_HOOK_AFTER_EVENT) {
        json_object_set_new(body, "event_type", json_str(r->event_type));
        if (GROUPD_REQUEST_HAS(r, event_time_ms)) {
            json_object_set_new(body, "event_id", json_integer(r->event_id));
            json_object_set_new(body, "group_sequence", json_integer(r->group_sequence));
            json_object_set_new(body, "event_time", json_integer(r->event_time_ms));
        }
    }
    json_t *fields = json_object();
    for (size_t i = 0; i < r->field_count; i++) {
        char *key = dup_n(r->fields[i].key.ptr ? r->fields[i].key.ptr : "", r->fields[i].key.len);
        if (key) json_object_set_new(fields, key, json_str(r->fields[i].value));
        free(key);
    }
    json_object_set_new(body, "fields", fields);
    json_t *users = json_array();
    for (size_t i = 0; i < r->user_count; i++) json_array_append_new(users, json_str(r->users[i]));
    json_object_set_new(body, "users", users);
    return body;
}

/* ---- HTTP ---- */

static pthread_key_t curl_key;
static pthread_once_t curl_key_once = PTHREAD_ONCE_INIT;

static void curl_key_destroy(void *handle) { curl_easy_cleanup(handle); }
static void curl_key_make(void) { pthread_key_create(&curl_key, curl_key_destroy); }

/* This thread's curl handle, reset (its connection cache survives the reset). */
static CURL *thread_curl(void) {
    pthread_once(&curl_key_once, curl_key_make);
    CURL *curl = pthread_getspecific(curl_key);
    if (curl) {
        curl_easy_reset(curl);
        return curl;
    }
    curl = curl_easy_init();
    if (curl) pthread_setspecific(curl_key, curl);
    return curl;
}

typedef struct answer {
    char *data;
    size_t len;
    int too_big;
} answer;

static size_t on_answer_bytes(char *ptr, size_t size, size_t count, void *user) {
    answer *a = user;
    size_t n = size * count;
    if (a->len + n > MAX_ANSWER_BYTES) { a->too_big = 1; return 0; }
    char *grown = realloc(a->data, a->len + n + 1);
    if (!grown) return 0;
    memcpy(grown + a->len, ptr, n);
    a->data = grown;
    a->len += n;
    a->data[a->len] = 0;
    return n;
}

/* Abort a delivery in progress when the instance is being destroyed. */
static int on_progress(void *user, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow) {
    (void)dltotal; (void)dlnow; (void)ultotal; (void)ulnow;
    const webhook *self = user;
    return __atomic_load_n(&self->stopping, __ATOMIC_ACQUIRE) ? 1 : 0;
}

/* hex(HMAC-SHA256(secret, "<t>.<body>")) into out (65 bytes). */
static int sign(const webhook *self, long long t, const char *body, size_t len, char out[65]) {
    char prefix[32];
    int p = snprintf(prefix, sizeof prefix, "%lld.", t);
    unsigned char *message = malloc((size_t)p + len);
    if (!message) return -1;
    memcpy(message, prefix, (size_t)p);
    memcpy(message + p, body, len);
    unsigned char mac[EVP_MAX_MD_SIZE];
    unsigned int mac_len = 0;
    unsigned char *ok = HMAC(EVP_sha256(), self->secret, (int)self->secret_len, message, (size_t)p + len, mac, &mac_len);
    free(message);
    if (!ok || mac_len != 32) return -1;
    for (unsigned i = 0; i < 32; i++) snprintf(out + 2 * i, 3, "%02x", mac[i]);
    return 0;
}

/* POST body to the app's URL, signed. 0 on a 2xx answer (its body in *out, which the caller
 * frees); -1 otherwise, with why in err. `abortable`: stop when the instance is destroyed. */
static int post(const webhook *self, const char *callback, long long event_id, const char *body, size_t len,
                long timeout_ms, int abortable, answer *out, char *err, size_t err_size) {
    CURL *curl = thread_curl();
    if (!curl) { snprintf(err, err_size, "curl_easy_init failed"); return -1; }

    char *app = curl_easy_escape(curl, self->app, 0);
    size_t url_size = strlen(self->url) + strlen(callback) + (app ? strlen(app) : 0) + 64;
    char *url = malloc(url_size);
    long long t = (long long)time(NULL);
    char signature[65];
    if (!app || !url || sign(self, t, body, len, signature) != 0) {
        curl_free(app);
        free(url);
        snprintf(err, err_size, "out of memory or HMAC failure");
        return -1;
    }
    /* Tencent puts the command in the query string: so does this, besides the body. */
    snprintf(url, url_size, "%s%sCallbackCommand=%s&AppId=%s", self->url, strchr(self->url, '?') ? "&" : "?", callback, app);
    curl_free(app);

    char line[256];
    struct curl_slist *headers = NULL;
    headers = curl_slist_append(headers, "Content-Type: application/json");
    headers = curl_slist_append(headers, "Expect:");  /* no 100-continue round trip */
    snprintf(line, sizeof line, "X-Groupd-Signature: t=%lld,v1=%s", t, signature);
    headers = curl_slist_append(headers, line);
    snprintf(line, sizeof line, "X-Groupd-Callback: %s", callback);
    headers = curl_slist_append(headers, line);
    if (event_id > 0) {
        snprintf(line, sizeof line, "X-Groupd-Event-Id: %lld", event_id);
        headers = curl_slist_append(headers, line);
    }

    char curl_error[CURL_ERROR_SIZE] = {0};
    curl_easy_setopt(curl, CURLOPT_URL, url);
    curl_easy_setopt(curl, CURLOPT_POST, 1L);
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body);
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)len);
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(curl, CURLOPT_USERAGENT, "groupd-webhook/1");
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);  /* threads: no SIGALRM for DNS timeouts */
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, timeout_ms);
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms);
    curl_easy_setopt(curl, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(curl, CURLOPT_FOLLOWLOCATION, 0L);
    curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, curl_error);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, on_answer_bytes);
    curl_easy_setopt(curl, CURLOPT_WRITEDATA, out);
    if (abortable) {
        curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
        curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, on_progress);
        curl_easy_setopt(curl, CURLOPT_XFERINFODATA, (void *)self);
    }
    CURLcode rc = curl_easy_perform(curl);
    long status = 0;
    curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
    curl_easy_setopt(curl, CURLOPT_ERRORBUFFER, NULL);
    curl_slist_free_all(headers);
    free(url);

    if (rc != CURLE_OK) {
        if (out->too_big) snprintf(err, err_size, "answer larger than %d bytes", MAX_ANSWER_BYTES);
        else if (rc == CURLE_OPERATION_TIMEDOUT) snprintf(err, err_size, "no answer within %ld ms", timeout_ms);
        else snprintf(err, err_size, "%s", curl_error[0] ? curl_error : curl_easy_strerror(rc));
        return -1;
    }
    if (status < 200 || status > 299) {
        snprintf(err, err_size, "HTTP status %ld", status);
        return -1;
    }
    return 0;
}

/* ---- before-hooks: one synchronous call ---- */

static int32_t answer_hook(const webhook *self, int32_t hook, const groupd_request *r, groupd_call *call) {
    const char *callback = before_callback(hook);
    if (!callback) {
        fail(call, "webhook: hook %d is not supported", hook);
        return GROUPD_DECISION_ERROR;
    }
    long budget = GROUPD_REQUEST_HAS(r, budget_ms) && r->budget_ms > 0 ? (long)r->budget_ms : 200;
    /* Leave the host a tenth of the budget to read the answer: the plugin's own timeout, not
     * the host's, decides, so the failure says what happened. */
    long timeout = budget - budget / 10;
    if (timeout < 1) timeout = 1;

    json_t *request = request_json(self, hook, r, callback);
    char *body = json_dumps(request, JSON_COMPACT);
    json_decref(request);
    if (!body) { fail(call, "webhook %s: cannot encode the request", callback); return GROUPD_DECISION_ERROR; }

    answer got = {0};
    char err[256];
    int rc = post(self, callback, 0, body, strlen(body), timeout, 0, &got, err, sizeof err);
    free(body);
    if (rc != 0) {
        free(got.data);
        fail(call, "webhook %s: %s", callback, err);
        return GROUPD_DECISION_ERROR;
    }

    json_error_t parse_error;
    json_t *reply = json_loadb(got.data ? got.data : "", got.len, 0, &parse_error);
    free(got.data);
    if (!reply || !json_is_object(reply)) {
        json_decref(reply);
        fail(call, "webhook %s: the answer is not a JSON object", callback);
        return GROUPD_DECISION_ERROR;
    }
    json_t *code = json_object_get(reply, "ErrorCode");
    json_int_t error_code = code == NULL ? 0 : json_is_integer(code) ? json_integer_value(code) : -1;
    int32_t decision = GROUPD_DECISION_ERROR;
    const char *key;
    json_t *value;
    if (error_code == 0) {
        json_t *rewrite = json_object_get(reply, "rewrite");
        decision = GROUPD_DECISION_ALLOW;
        if (rewrite != NULL && !json_is_object(rewrite)) {
            fail(call, "webhook %s: \"rewrite\" must be an object of strings or nulls", callback);
            decision = GROUPD_DECISION_ERROR;
        } else if (rewrite != NULL) {
            json_object_foreach(rewrite, key, value) {
                if (json_is_null(value)) {
                    host->remove_field(call, cstr(key));
                } else if (json_is_string(value)) {
                    host->rewrite(call, cstr(key), groupd_str_from(json_string_value(value), json_string_length(value)));
                } else {
                    fail(call, "webhook %s: \"rewrite\" must be an object of strings or nulls", callback);
                    decision = GROUPD_DECISION_ERROR;
                    break;
                }
                decision = GROUPD_DECISION_REWRITE;
            }
        }
    } else if (error_code == 1) {
        json_t *fields = json_object_get(reply, "reject_fields"), *members = json_object_get(reply, "reject_members");
        json_t *info = json_object_get(reply, "ErrorInfo");
        json_object_foreach(fields, key, value)
            host->reject_field(call, cstr(key), cstr(json_is_string(value) ? json_string_value(value) : "rejected by the app"));
        json_object_foreach(members, key, value)
            host->reject_member(call, cstr(key), cstr(json_is_string(value) ? json_string_value(value) : "rejected by the app"));
        if (json_is_string(info) && json_string_length(info) > 0)
            host->set_error(call, 1, groupd_str_from(json_string_value(info), json_string_length(info)));
        decision = GROUPD_DECISION_REJECT;
    } else if (error_code == 2) {
        decision = GROUPD_DECISION_DISCARD;
    } else {
        fail(call, "webhook %s: \"ErrorCode\" must be 0 (allow), 1 (reject) or 2 (discard)", callback);
    }
    json_decref(reply);
    return decision;
}

/* ---- the journal ---- */

static int write_all(int fd, const char *data, size_t len) {
    while (len > 0) {
        ssize_t n = write(fd, data, len);
        if (n < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        data += n;
        len -= (size_t)n;
    }
    return 0;
}

static long long read_offset(const webhook *self) {
    char text[32] = {0};
    ssize_t n = pread(self->offset_fd, text, sizeof text - 1, 0);
    if (n <= 0) return 0;
    long long offset = strtoll(text, NULL, 10);
    struct stat st;
    /* Past the end only if the file was tampered with: deliver everything again rather than lose. */
    if (offset < 0 || fstat(self->journal_fd, &st) != 0 || offset > (long long)st.st_size) return 0;
    return offset;
}

static int write_offset(const webhook *self, long long offset) {
    char text[32];
    int n = snprintf(text, sizeof text, "%020lld\n", offset);
    /* Fixed width: one small write in place, always the same length. */
    if (pwrite(self->offset_fd, text, (size_t)n, 0) != n) return -1;
    return fdatasync(self->offset_fd);
}

/* Keep the position where an empty journal cannot: in "<app>.position". */
static int write_position(const webhook *self) {
    char text[32];
    int n = snprintf(text, sizeof text, "%020lld\n", self->position);
    int fd = open(self->position_path, O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) return -1;
    int rc = pwrite(fd, text, (size_t)n, 0) == n && fdatasync(fd) == 0 ? 0 : -1;
    close(fd);
    return rc;
}

/* The event_id of the journal's last entry, else the one "<app>.position" kept; 0 if none. */
static long long read_position(const webhook *self) {
    struct stat st;
    long long position = 0;
    if (fstat(self->journal_fd, &st) == 0 && st.st_size > 0) {
        /* After repair_journal the file ends with '\n': find the line before it. */
        off_t end = st.st_size - 1, start = end;
        char buffer[4096];
        while (start > 0) {
            off_t chunk = start > (off_t)sizeof buffer ? start - (off_t)sizeof buffer : 0;
            ssize_t n = pread(self->journal_fd, buffer, (size_t)(start - chunk), chunk);
            if (n != start - chunk) return 0;
            ssize_t i = n - 1;
            while (i >= 0 && buffer[i] != '\n') i--;
            if (i >= 0) { start = chunk + i + 1; break; }
            start = chunk;
        }
        char *line = malloc((size_t)(end - start) + 1);
        if (line && pread(self->journal_fd, line, (size_t)(end - start), start) == end - start) {
            json_error_t parse_error;
            json_t *entry = json_loadb(line, (size_t)(end - start), 0, &parse_error);
            position = (long long)json_integer_value(json_object_get(entry, "event_id"));
            json_decref(entry);
        }
        free(line);
        if (position > 0) return position;
    }
    int fd = open(self->position_path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    char text[32] = {0};
    if (pread(fd, text, sizeof text - 1, 0) > 0) position = strtoll(text, NULL, 10);
    close(fd);
    return position > 0 ? position : 0;
}

/* Cut a torn last entry (a crash in the middle of an append) so the next append starts a line. */
static int repair_journal(webhook *self) {
    if (flock(self->journal_fd, LOCK_EX) != 0) return -1;
    struct stat st;
    int rc = fstat(self->journal_fd, &st);
    off_t end = rc == 0 ? st.st_size : 0;
    char buffer[4096];
    off_t keep = end;
    while (rc == 0 && keep > 0) {
        off_t start = keep > (off_t)sizeof buffer ? keep - (off_t)sizeof buffer : 0;
        ssize_t n = pread(self->journal_fd, buffer, (size_t)(keep - start), start);
        if (n != keep - start) { rc = -1; break; }
        ssize_t i = n - 1;
        while (i >= 0 && buffer[i] != '\n') i--;
        if (i >= 0) { keep = start + i + 1; break; }
        keep = start;
    }
    if (rc == 0 && keep != end) {
        log_stderr(self, "dropping a torn journal entry (%lld bytes) left by a crash", (long long)(end - keep));
        rc = ftruncate(self->journal_fd, keep) == 0 && fsync(self->journal_fd) == 0 ? 0 : -1;
    }
    flock(self->journal_fd, LOCK_UN);
    return rc;
}

/* Append one entry and fsync it. Called with self->mutex held. */
static int append_entry(webhook *self, const char *line, size_t len) {
    if (flock(self->journal_fd, LOCK_EX) != 0) return -1;
    struct stat st;
    int rc = fstat(self->journal_fd, &st);
    if (rc == 0 && (write_all(self->journal_fd, line, len) != 0 || fdatasync(self->journal_fd) != 0)) {
        int saved = errno;
        /* A partial entry would glue itself to the next one: take it back. */
        if (ftruncate(self->journal_fd, st.st_size) != 0) { /* the repair at the next start cuts it */ }
        errno = saved;
        rc = -1;
    }
    flock(self->journal_fd, LOCK_UN);
    return rc;
}

/* The entry at offset: 1 and the line (without '\n') in *line, *len, the next offset in *next;
 * 0 when there is no complete entry there yet; -1 on a read error. */
static int read_entry(const webhook *self, long long offset, char **line, size_t *cap, size_t *len, long long *next) {
    size_t have = 0;
    for (;;) {
        if (*cap < have + 4096) {
            size_t grown_cap = (*cap ? *cap * 2 : 8192);
            while (grown_cap < have + 4096) grown_cap *= 2;
            char *grown = realloc(*line, grown_cap);
            if (!grown) return -1;
            *line = grown;
            *cap = grown_cap;
        }
        ssize_t n = pread(self->journal_fd, *line + have, 4096, (off_t)(offset + (long long)have));
        if (n < 0) {
            if (errno == EINTR) continue;
            return -1;
        }
        if (n == 0) return 0;
        char *newline = memchr(*line + have, '\n', (size_t)n);
        if (newline) {
            *len = (size_t)(newline - *line);
            (*line)[*len] = 0;
            *next = offset + (long long)*len + 1;
            return 1;
        }
        have += (size_t)n;
    }
}

/* Once everything was delivered, start the journal afresh (under both locks, so no append
 * runs meanwhile). The offset goes to 0 first: a crash in between re-sends, never loses. */
static void compact(webhook *self, long long *offset) {
    if (flock(self->journal_fd, LOCK_EX) != 0) return;
    struct stat st;
    if (fstat(self->journal_fd, &st) == 0 && st.st_size >= COMPACT_BYTES && (long long)st.st_size == *offset) {
        /* The position outlives the entries that carried it: written before they go. */
        if (write_position(self) == 0 && write_offset(self, 0) == 0 && ftruncate(self->journal_fd, 0) == 0 && fsync(self->journal_fd) == 0)
            *offset = 0;
        else
            log_stderr(self, "cannot compact %s: %s", self->journal_path, strerror(errno));
    }
    flock(self->journal_fd, LOCK_UN);
}

/* ---- the deliverer ---- */

/* Wait on wake until `deadline`, or until stopping; with `any_wake`, also until an append. */
static void wait_until(webhook *self, const struct timespec *deadline, int any_wake, unsigned long seen) {
    while (!self->stopping && !past(deadline)) {
        if (any_wake && self->appended != seen) return;
        pthread_cond_timedwait(&self->wake, &self->mutex, deadline);
    }
}

static void *deliver_main(void *argument) {
    webhook *self = argument;
    char *line = NULL;
    size_t cap = 0;
    long long offset = 0;
    int have_lock = 0, attempts = 0;

    pthread_mutex_lock(&self->mutex);
    while (!self->stopping) {
        if (!have_lock) {
            if (flock(self->lock_fd, LOCK_EX | LOCK_NB) == 0) {
                have_lock = 1;
                offset = read_offset(self);  /* where the previous holder stopped */
            } else {
                struct timespec deadline = deadline_in(LOCK_RETRY_MS);
                wait_until(self, &deadline, 0, 0);
                continue;
            }
        }
        unsigned long seen = self->appended;
        pthread_mutex_unlock(&self->mutex);

        size_t len = 0;
        long long next = 0;
        int got = read_entry(self, offset, &line, &cap, &len, &next);
        if (got <= 0) {
            if (got < 0) log_stderr(self, "cannot read %s: %s", self->journal_path, strerror(errno));
            pthread_mutex_lock(&self->mutex);
            if (got == 0) compact(self, &offset);
            struct timespec deadline = deadline_in(IDLE_RECHECK_MS);
            wait_until(self, &deadline, 1, seen);
            continue;
        }

        json_error_t parse_error;
        json_t *entry = json_loadb(line, len, 0, &parse_error);
        const char *callback = entry ? json_string_value(json_object_get(entry, "callback")) : NULL;
        if (!callback) {
            log_stderr(self, "skipping a journal entry that is not an event at offset %lld", offset);
            json_decref(entry);
            offset = next;
            write_offset(self, offset);
            pthread_mutex_lock(&self->mutex);
            continue;
        }
        long long event_id = (long long)json_integer_value(json_object_get(entry, "event_id"));
        answer got_answer = {0};
        char err[256];
        int rc = post(self, callback, event_id, line, len, self->delivery_timeout_ms, 1, &got_answer, err, sizeof err);
        free(got_answer.data);
        json_decref(entry);

        if (rc == 0) {
            if (attempts > 0) log_stderr(self, "delivery to %s works again after %d failed attempts", self->url, attempts);
            attempts = 0;
            offset = next;
            if (write_offset(self, offset) != 0)
                log_stderr(self, "cannot write %s: %s (the entry may be sent again)", self->offset_path, strerror(errno));
            pthread_mutex_lock(&self->mutex);
            continue;
        }
        attempts++;
        if (attempts == 1 && !__atomic_load_n(&self->stopping, __ATOMIC_ACQUIRE))
            log_stderr(self, "delivery of event %lld to %s failed (%s); retrying with back-off up to %ld ms",
                       event_id, self->url, err, self->retry_max_ms);
        long delay = self->retry_min_ms;
        for (int i = 1; i < attempts && delay < self->retry_max_ms; i++) delay *= 2;
        if (delay > self->retry_max_ms) delay = self->retry_max_ms;
        pthread_mutex_lock(&self->mutex);
        struct timespec deadline = deadline_in(delay);
        wait_until(self, &deadline, 0, 0);
    }
    pthread_mutex_unlock(&self->mutex);
    if (have_lock) flock(self->lock_fd, LOCK_UN);
    free(line);
    webhook_release(self);  /* instance_destroy handed the instance over to this thread */
    return NULL;
}

/* ---- instances ---- */

/* Free everything; the delivery thread, if any, has ended. */
static void webhook_release(webhook *self) {
    if (!self) return;
    if (self->queue_dir) {
        pthread_mutex_destroy(&self->mutex);
        pthread_cond_destroy(&self->wake);
    }
    if (self->journal_fd >= 0) close(self->journal_fd);
    if (self->offset_fd >= 0) close(self->offset_fd);
    if (self->lock_fd >= 0) close(self->lock_fd);
    for (size_t i = 0; i < self->event_count; i++) free(self->events[i]);
    free(self->events);
    free(self->journal_path);
    free(self->offset_path);
    free(self->lock_path);
    free(self->position_path);
    free(self->queue_dir);
    free(self->secret);
    free(self->url);
    free(self->app);
    free(self);
}

/* Stop the delivery thread and free the instance. instance_destroy must not hold the host's
 * thread while a delivery in progress notices the stop (curl calls the progress callback about
 * once a second when idle): the thread is detached and frees the instance as it ends, which
 * also releases the delivery lock for the next instance. */
static void webhook_free(webhook *self) {
    if (!self) return;
    if (!self->thread_started) {
        webhook_release(self);
        return;
    }
    pthread_t thread = self->thread;  /* self may be gone as soon as stopping is set */
    pthread_mutex_lock(&self->mutex);
    __atomic_store_n(&self->stopping, 1, __ATOMIC_RELEASE);
    pthread_cond_broadcast(&self->wake);
    pthread_mutex_unlock(&self->mutex);
    pthread_detach(thread);
}

/* mkdir -p */
static int make_directories(const char *path) {
    char *copy = strdup(path);
    if (!copy) return -1;
    for (char *p = copy + 1; *p; p++) {
        if (*p != '/') continue;
        *p = 0;
        if (mkdir(copy, 0700) != 0 && errno != EEXIST) { free(copy); return -1; }
        *p = '/';
    }
    int rc = mkdir(copy, 0700) != 0 && errno != EEXIST ? -1 : 0;
    free(copy);
    return rc;
}

/* "<dir>/<app><suffix>", the app id's bytes outside [A-Za-z0-9._-] as %XX. */
static char *queue_file(const webhook *self, const char *suffix) {
    size_t n = strlen(self->queue_dir) + 3 * strlen(self->app) + strlen(suffix) + 2;
    char *path = malloc(n), *out;
    if (!path) return NULL;
    out = path + sprintf(path, "%s/", self->queue_dir);
    for (const unsigned char *c = (const unsigned char *)self->app; *c; c++) {
        int plain = (*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') ||
                    *c == '-' || *c == '_' || (*c == '.' && c != (const unsigned char *)self->app);
        out += plain ? sprintf(out, "%c", *c) : sprintf(out, "%%%02X", *c);
    }
    strcpy(out, suffix);
    return path;
}

static int open_queue(webhook *self, groupd_call *call) {
    pthread_mutex_init(&self->mutex, NULL);
    pthread_condattr_t attributes;
    pthread_condattr_init(&attributes);
    pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC);
    pthread_cond_init(&self->wake, &attributes);
    pthread_condattr_destroy(&attributes);
    self->journal_fd = self->offset_fd = self->lock_fd = -1;

    if (make_directories(self->queue_dir) != 0) {
        fail(call, "webhook: cannot create queue_dir %s: %s", self->queue_dir, strerror(errno));
        return -1;
    }
    self->journal_path = queue_file(self, ".journal");
    self->offset_path = queue_file(self, ".offset");
    self->lock_path = queue_file(self, ".lock");
    self->position_path = queue_file(self, ".position");
    if (!self->journal_path || !self->offset_path || !self->lock_path || !self->position_path) { fail(call, "webhook: out of memory"); return -1; }
    const char *failed = NULL;
    if ((self->journal_fd = open(self->journal_path, O_RDWR | O_APPEND | O_CREAT | O_CLOEXEC, 0600)) < 0) failed = self->journal_path;
    else if ((self->offset_fd = open(self->offset_path, O_RDWR | O_CREAT | O_CLOEXEC, 0600)) < 0) failed = self->offset_path;
    else if ((self->lock_fd = open(self->lock_path, O_RDWR | O_CREAT | O_CLOEXEC, 0600)) < 0) failed = self->lock_path;
    else if (repair_journal(self) != 0) failed = self->journal_path;
    if (failed) {
        fail(call, "webhook: cannot open %s: %s", failed, strerror(errno));
        return -1;
    }
    self->position = read_position(self);
    if (pthread_create(&self->thread, NULL, deliver_main, self) != 0) {
        fail(call, "webhook: cannot start the delivery thread");
        return -1;
    }
    self->thread_started = 1;
    return 0;
}

/* `groupd check-config` makes instances with GROUPD_POLICY_CHECK=1 in its environment: such an
 * instance only checks its configuration, and leaves the disk and the network alone. */
static int checking_only(void) {
    const char *value = getenv("GROUPD_POLICY_CHECK");
    return value && strcmp(value, "1") == 0;
}

/* What open_queue would find, without creating or opening anything: `path` is a directory we
 * may write in, or the nearest part of it that exists is one (so that it can be created). */
static int check_queue_dir(const char *path, groupd_call *call) {
    char *copy = strdup(path);
    if (!copy) { fail(call, "webhook: out of memory"); return -1; }
    struct stat info;
    for (;;) {
        if (stat(copy, &info) == 0) break;
        if (errno != ENOENT) goto unusable;
        char *slash = strrchr(copy, '/');
        if (!slash) { strcpy(copy, "."); continue; }          /* a relative path: the working directory */
        if (slash == copy) { copy[1] = 0; continue; }          /* the root */
        *slash = 0;
    }
    if (!S_ISDIR(info.st_mode)) { errno = ENOTDIR; goto unusable; }
    if (access(copy, W_OK | X_OK) != 0) goto unusable;
    free(copy);
    return 0;
unusable:
    fail(call, "webhook: cannot create queue_dir %s: %s", path, strerror(errno));
    free(copy);
    return -1;
}

static int read_positive(json_t *config, const char *key, long fallback, long *out, groupd_call *call) {
    json_t *value = json_object_get(config, key);
    if (!value) { *out = fallback; return 0; }
    if (!json_is_integer(value) || json_integer_value(value) < 1 || json_integer_value(value) > 86400000) {
        fail(call, "webhook: \"%s\" must be an integer of milliseconds from 1 to 86400000", key);
        return -1;
    }
    *out = (long)json_integer_value(value);
    return 0;
}

static void *webhook_new(groupd_call *call, groupd_str app_id, groupd_str config_text) {
    static const char *known[] = {"url", "secret", "queue_dir", "retry_min_ms", "retry_max_ms", "delivery_timeout_ms", "events"};
    json_error_t parse_error;
    json_t *config = json_loadb(config_text.ptr ? config_text.ptr : "", config_text.len, 0, &parse_error);
    if (!config || !json_is_object(config)) {
        if (config) fail(call, "webhook: config must be a JSON object");
        else fail(call, "webhook: config is not JSON: %s (line %d, column %d)", parse_error.text, parse_error.line, parse_error.column);
        json_decref(config);
        return NULL;
    }
    webhook *self = calloc(1, sizeof *self);
    const char *key;
    json_t *value;
    self->journal_fd = self->offset_fd = self->lock_fd = -1;
    self->app = dup_n(app_id.ptr ? app_id.ptr : "", app_id.len);

    json_object_foreach(config, key, value) {
        size_t i = 0;
        while (i < sizeof known / sizeof known[0] && strcmp(known[i], key) != 0) i++;
        if (i == sizeof known / sizeof known[0]) {
            fail(call, "webhook: unknown config key \"%s\" (known: url, secret, queue_dir, retry_min_ms, retry_max_ms, delivery_timeout_ms, events)", key);
            goto refuse;
        }
    }
    json_t *url = json_object_get(config, "url"), *secret = json_object_get(config, "secret");
    json_t *queue_dir = json_object_get(config, "queue_dir"), *events = json_object_get(config, "events");
    if (!json_is_string(url) || (strncmp(json_string_value(url), "http://", 7) != 0 && strncmp(json_string_value(url), "https://", 8) != 0)) {
        fail(call, "webhook: \"url\" is required: an http:// or https:// URL");
        goto refuse;
    }
    if (!json_is_string(secret) || json_string_length(secret) == 0) {
        fail(call, "webhook: \"secret\" is required: a non-empty string (the HMAC key of the signatures)");
        goto refuse;
    }
    if (queue_dir && (!json_is_string(queue_dir) || json_string_length(queue_dir) == 0)) {
        fail(call, "webhook: \"queue_dir\" must be a directory path");
        goto refuse;
    }
    self->url = strdup(json_string_value(url));
    self->secret = dup_n(json_string_value(secret), json_string_length(secret));
    self->secret_len = json_string_length(secret);
    if (read_positive(config, "retry_min_ms", 500, &self->retry_min_ms, call) != 0 ||
        read_positive(config, "retry_max_ms", 60000, &self->retry_max_ms, call) != 0 ||
        read_positive(config, "delivery_timeout_ms", 10000, &self->delivery_timeout_ms, call) != 0)
        goto refuse;
    if (self->retry_max_ms < self->retry_min_ms) {
        fail(call, "webhook: \"retry_max_ms\" (%ld) is below \"retry_min_ms\" (%ld)", self->retry_max_ms, self->retry_min_ms);
        goto refuse;
    }
    if (events) {
        size_t i;
        if (!json_is_array(events)) { fail(call, "webhook: \"events\" must be an array of event types"); goto refuse; }
        self->events = calloc(json_array_size(events) + 1, sizeof(char *));
        json_array_foreach(events, i, value) {
            if (!json_is_string(value)) { fail(call, "webhook: \"events\" must be an array of event types"); goto refuse; }
            self->events[self->event_count++] = strdup(json_string_value(value));
        }
    }
    if (queue_dir && checking_only()) {
        if (check_queue_dir(json_string_value(queue_dir), call) != 0) goto refuse;
    } else if (queue_dir) {
        self->queue_dir = strdup(json_string_value(queue_dir));
        if (open_queue(self, call) != 0) goto refuse;
    }
    json_decref(config);
    return self;

refuse:
    json_decref(config);
    webhook_free(self);
    return NULL;
}

static void webhook_destroy(void *instance) { webhook_free(instance); }

static int wants_event(const webhook *self, groupd_str type) {
    if (!self->events) return 1;
    for (size_t i = 0; i < self->event_count; i++)
        if (strlen(self->events[i]) == type.len && memcmp(self->events[i], type.ptr, type.len) == 0) return 1;
    return 0;
}

static int32_t enqueue_event(webhook *self, const groupd_request *r, groupd_call *call) {
    if (!self->queue_dir) {
        fail(call, "webhook: after_event needs \"queue_dir\" in the plugin's config");
        return GROUPD_DECISION_ERROR;
    }
    if (!wants_event(self, r->event_type)) return GROUPD_DECISION_ALLOW;
    char callback[128];
    after_callback(r->event_type, callback, sizeof callback);
    json_t *event = request_json(self, GROUPD_HOOK_AFTER_EVENT, r, callback);
    char *body = json_dumps(event, JSON_COMPACT);  /* one line: JSON escapes every newline */
    json_decref(event);
    if (!body) { fail(call, "webhook: cannot encode the event"); return GROUPD_DECISION_ERROR; }
    size_t len = strlen(body);
    body[len] = '\n';  /* json_dumps leaves room only for the NUL: write it over with the separator */

    pthread_mutex_lock(&self->mutex);
    int rc = append_entry(self, body, len + 1);
    int saved = errno;
    if (rc == 0) {
        if (GROUPD_REQUEST_HAS(r, event_id) && r->event_id > self->position) self->position = r->event_id;
        self->appended++;
        pthread_cond_broadcast(&self->wake);
    }
    pthread_mutex_unlock(&self->mutex);
    free(body);
    if (rc != 0) {
        fail(call, "webhook: cannot append to %s: %s", self->journal_path, strerror(saved));
        return GROUPD_DECISION_ERROR;
    }
    return GROUPD_DECISION_ALLOW;
}

static int64_t webhook_position(void *instance) {
    webhook *self = instance;
    if (!self->queue_dir) return 0;
    pthread_mutex_lock(&self->mutex);
    long long position = self->position;
    pthread_mutex_unlock(&self->mutex);
    return position;
}

static int32_t webhook_on_hook(void *instance, int32_t hook, const groupd_request *request, groupd_call *call) {
    webhook *self = instance;
    if (hook == GROUPD_HOOK_AFTER_EVENT) return enqueue_event(self, request, call);
    return answer_hook(self, hook, request, call);
}

static const groupd_plugin_api table = {
    .struct_size = sizeof(groupd_plugin_api),
    .abi_major = GROUPD_POLICY_ABI_MAJOR,
    .abi_minor = GROUPD_POLICY_ABI_MINOR,
    .name = "webhook",
    .instance_new = webhook_new,
    .instance_destroy = webhook_destroy,
    .on_hook = webhook_on_hook,
    .after_event_position = webhook_position,
};

GROUPD_POLICY_EXPORT const groupd_plugin_api *groupd_policy_entry_v1(const groupd_host_api *h) {
    if (h == NULL || h->abi_major != GROUPD_POLICY_ABI_MAJOR ||
        h->struct_size < offsetof(groupd_host_api, log) + sizeof(h->log))
        return NULL;
    /* The host calls the entry once, under its lock: curl's global set-up runs once. */
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) return NULL;
    host = h;
    return &table;
}
