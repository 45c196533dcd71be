/*
 * groupd_policy.h — the groupd policy plugin ABI, version 1.
 *
 * This is the only header a plugin includes. A plugin is a shared library that exports
 *
 *     const groupd_plugin_api *groupd_policy_entry_v1(const groupd_host_api *host);
 *
 * The symbol name carries the ABI major version: an incompatible ABI gets a new symbol
 * (groupd_policy_entry_v2) and a new major number. Within a major version both tables
 * below only ever grow at the end; each starts with `struct_size` and the ABI version so
 * either side can tell which fields the other knows about.
 *
 * The host opens a library and calls its entry once per process (under a lock), keeps the
 * returned table and the host table for the life of the process, and never unloads it.
 *
 * Rules of the boundary:
 *  - Every string is a pointer + length (groupd_str), UTF-8, not NUL-terminated.
 *    Inputs are borrowed: valid only during the call that passes them.
 *  - A plugin answers through host callbacks (reject_field, rewrite, ...), which copy
 *    their arguments: the plugin may free its buffers as soon as a callback returns.
 *  - on_hook may be called concurrently on one instance from several threads.
 *    Plugins never run on an event loop, but they do run inside groupd's process:
 *    they are trusted code. A crash in a plugin takes groupd down.
 *  - Nothing may unwind across the boundary (no C++ exception, no longjmp, no Swift
 *    error): report failure with set_error and return GROUPD_DECISION_ERROR.
 */
#ifndef GROUPD_POLICY_H
#define GROUPD_POLICY_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/** The ABI major version. Changes only with the entry symbol's name. */
#define GROUPD_POLICY_ABI_MAJOR 1
/** The ABI minor version: bumped when a table grows at its end. */
#define GROUPD_POLICY_ABI_MINOR 1
/** The name of the entry symbol for this major version, for dlsym. */
#define GROUPD_POLICY_ENTRY_SYMBOL "groupd_policy_entry_v1"

/** A borrowed UTF-8 string: `len` bytes at `ptr` (no terminating NUL required). */
typedef struct groupd_str {
    const char *ptr;
    size_t len;
} groupd_str;

/** The hook points. Numbers are part of the ABI: new hooks get new numbers. */
typedef enum groupd_hook {
    /** Validate (and normalise with rewrite) `custom.group.<key>` fields on write. */
    GROUPD_HOOK_VALIDATE_GROUP_CUSTOM = 1,
    /** Validate (and normalise with rewrite) `custom.member.<key>` fields on write. */
    GROUPD_HOOK_VALIDATE_MEMBER_CUSTOM = 2,
    /** Filter custom fields on read: `reader_role` says who reads; remove_field hides one. */
    GROUPD_HOOK_FILTER_CUSTOM_ON_READ = 3,
    /** Before a group is created: `name`, `introduction`, `notification`, `face_url`, custom fields. */
    GROUPD_HOOK_BEFORE_CREATE_GROUP = 4,
    /** Before a group's profile is updated: the changed fields only. */
    GROUPD_HOOK_BEFORE_UPDATE_PROFILE = 5,
    /** Before a user applies to join: `apply_message`. */
    GROUPD_HOOK_BEFORE_APPLY_TO_JOIN = 6,
    /** Before an invitation: `users` are the invitees; reject_member refuses one. */
    GROUPD_HOOK_BEFORE_INVITE = 7,
    /** Before a member's info changes: `users[0]` is the member; `name_card`, `custom.member.<key>`. */
    GROUPD_HOOK_BEFORE_SET_MEMBER_INFO = 8,
    /** Before a group message is sent or edited: `message.text`, `message.payload`; an edit also
     *  `message.edit_of` (the edited message's sequence), a reply `message.reply_to` (the
     *  sequence it answers). Discard drops it silently. */
    GROUPD_HOOK_BEFORE_SEND_GROUP_MESSAGE = 9,
    /** After an event committed (`event_type`). The decision is ignored; never blocks the call. */
    GROUPD_HOOK_AFTER_EVENT = 10
} groupd_hook;

/** What a plugin decides. Anything else is treated as an error by the host. */
typedef enum groupd_decision {
    /** Let the operation go on unchanged. */
    GROUPD_DECISION_ALLOW = 0,
    /** Refuse: the keys given with reject_field / users with reject_member say what. */
    GROUPD_DECISION_REJECT = 1,
    /** Go on with the fields changed by rewrite / remove_field. */
    GROUPD_DECISION_REWRITE = 2,
    /** Answer success to the caller and do nothing (messages: deliver nothing). */
    GROUPD_DECISION_DISCARD = 3,
    /** The plugin failed (say why with set_error): the hook's failure mode applies. */
    GROUPD_DECISION_ERROR = 4
} groupd_decision;

/** Log levels for host->log. */
typedef enum groupd_log_level {
    GROUPD_LOG_DEBUG = 0,
    GROUPD_LOG_INFO = 1,
    GROUPD_LOG_WARNING = 2,
    GROUPD_LOG_ERROR = 3
} groupd_log_level;

/** One named field: `name`, `introduction`, `notification`, `face_url`, `name_card`,
 *  `apply_message`, `message.text`, `message.payload`, `message.edit_of`, `message.reply_to`,
 *  `custom.group.<key>`, `custom.member.<key>`. */
typedef struct groupd_field {
    groupd_str key;
    groupd_str value;
} groupd_field;

/** The request a hook sees. Every member is borrowed for the duration of on_hook.
 *  Grows only at the end: check `struct_size` before reading a member added later. */
typedef struct groupd_request {
    size_t struct_size;
    groupd_str app_id;
    /** The user on whose behalf the call is made (empty for an admin/system call). */
    groupd_str operator_id;
    /** The group (empty before it exists, e.g. before create with a generated id). */
    groupd_str group_id;
    /** The group type (`work`, `public`, `meeting`, `community`, ...). */
    groupd_str group_type;
    /** For GROUPD_HOOK_FILTER_CUSTOM_ON_READ: `owner`, `admin`, `member` or `none`. */
    groupd_str reader_role;
    /** For GROUPD_HOOK_AFTER_EVENT: the event's type. */
    groupd_str event_type;
    const groupd_field *fields;
    size_t field_count;
    /** Invitees (before invite), the target member (before set member info). */
    const groupd_str *users;
    size_t user_count;
    /* ---- ABI 1.1: read these only when GROUPD_REQUEST_HAS(request, member) ---- */
    /** The time budget of this call in milliseconds (0: none known). A plugin that waits on
     *  something remote (a webhook) bounds its wait by it. */
    int64_t budget_ms;
    /** For GROUPD_HOOK_AFTER_EVENT: the event's id in the event log, unique in the store and
     *  increasing in commit order; a receiver drops duplicates by it. 0 when unknown. */
    int64_t event_id;
    /** For GROUPD_HOOK_AFTER_EVENT: the event's number in its group's sequence (1, 2, 3, ...). */
    int64_t group_sequence;
    /** For GROUPD_HOOK_AFTER_EVENT: when the event was committed, milliseconds since the Unix epoch. */
    int64_t event_time_ms;
} groupd_request;

/** Whether `request` (a `const groupd_request *`) has `member`: the host that built it knew
 *  that member (its `struct_size` covers it). */
#define GROUPD_REQUEST_HAS(request, member) \
    ((request)->struct_size >= offsetof(groupd_request, member) + sizeof((request)->member))

/** The host's per-call handle, passed to every callback. Opaque; valid during the call. */
typedef struct groupd_call groupd_call;

/** The host's functions. Valid for the life of the process (the host never unloads). */
typedef struct groupd_host_api {
    /** sizeof(groupd_host_api) as the host was built. */
    uint32_t struct_size;
    uint32_t abi_major;
    uint32_t abi_minor;
    /** Reject the field `key` with a human-readable reason (becomes an error key). */
    void (*reject_field)(groupd_call *call, groupd_str key, groupd_str reason);
    /** Refuse one user (before invite: that invitee fails, the others go on). */
    void (*reject_member)(groupd_call *call, groupd_str user_id, groupd_str reason);
    /** Replace (or add) the field `key` with `value`. Later plugins see the new value. */
    void (*rewrite)(groupd_call *call, groupd_str key, groupd_str value);
    /** Remove the field `key` (on read: hide it from this reader). */
    void (*remove_field)(groupd_call *call, groupd_str key);
    /** Say why the call failed: with instance_new returning NULL, or with DECISION_ERROR;
     *  with DECISION_REJECT it becomes the rejection's message. */
    void (*set_error)(groupd_call *call, int32_t code, groupd_str message);
    /** Write a line to groupd's log, tagged with the plugin and app. */
    void (*log)(groupd_call *call, int32_t level, groupd_str message);
} groupd_host_api;

/** The plugin's functions, returned by the entry symbol. Must stay valid forever. */
typedef struct groupd_plugin_api {
    /** sizeof(groupd_plugin_api) as the plugin was built. */
    uint32_t struct_size;
    /** Must be GROUPD_POLICY_ABI_MAJOR. */
    uint32_t abi_major;
    uint32_t abi_minor;
    /** A short NUL-terminated name for logs and metrics (e.g. "keyword-moderation"). */
    const char *name;
    /** Make an instance for one app and configuration (an opaque string, JSON in the
     *  shipped plugins). On failure call host->set_error(call, ...) and return NULL. */
    void *(*instance_new)(groupd_call *call, groupd_str app_id, groupd_str config);
    /** Free an instance. Called once, after the last on_hook on it has returned. */
    void (*instance_destroy)(void *instance);
    /** Run one hook. May be called concurrently on one instance from several threads. */
    int32_t (*on_hook)(void *instance, int32_t hook, const groupd_request *request,
                       groupd_call *call);
    /* ---- ABI 1.1: the host reads these only when struct_size covers them ---- */
    /** Optional (NULL: none). For a plugin that keeps after-events durably: the highest
     *  `event_id` it has accepted for good (0: none, start from now). When groupd starts, it
     *  hands the instance again, in order and before any new event, every committed event of
     *  the app after that id: the events a crash caught between the commit and the plugin. */
    int64_t (*after_event_position)(void *instance);
} groupd_plugin_api;

/** The entry symbol's type. Return NULL if `host` is unusable (e.g. too old). */
typedef const groupd_plugin_api *(*groupd_policy_entry_fn)(const groupd_host_api *host);

/** Put before a C plugin's entry definition so it is exported even with
 *  -fvisibility=hidden:
 *      GROUPD_POLICY_EXPORT const groupd_plugin_api *groupd_policy_entry_v1(const groupd_host_api *host) { ... }
 *  (The prototype is not declared here, so Swift plugins can define it with @_cdecl.) */
#define GROUPD_POLICY_EXPORT __attribute__((visibility("default")))

/** The smallest plugin table a v1 host accepts (through on_hook). */
#define GROUPD_PLUGIN_API_V1_MIN_SIZE \
    (offsetof(groupd_plugin_api, on_hook) + sizeof(void *))

/** Helpers for C plugins. */
static inline groupd_str groupd_str_from(const char *ptr, size_t len) {
    groupd_str s; s.ptr = ptr; s.len = len; return s;
}

#ifdef __cplusplus
}
#endif
#endif /* GROUPD_POLICY_H */
