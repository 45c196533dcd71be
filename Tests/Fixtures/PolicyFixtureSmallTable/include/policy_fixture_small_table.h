/* PolicyFixtureSmallTable exports only groupd_policy_entry_v1 (see groupd_policy.h); nothing else is public. */
