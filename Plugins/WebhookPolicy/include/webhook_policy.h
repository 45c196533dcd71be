/* WebhookPolicy exports only groupd_policy_entry_v1 (see groupd_policy.h); nothing else is public.
 * How it works, its configuration and its HTTP bodies: docs/PLUGINS.md, "HTTP webhooks". */
