/* Counters the tests read with dlsym. */
#ifndef POLICY_FIXTURE_BEHAVIORS_H
#define POLICY_FIXTURE_BEHAVIORS_H
__attribute__((visibility("default"))) long policy_fixture_live_instances(void);
__attribute__((visibility("default"))) long policy_fixture_destroyed_instances(void);
__attribute__((visibility("default"))) long policy_fixture_max_in_flight(void);
/* Statistics of the instances configured with tag=<tag>:
 * which = 0 live instances, 1 destroyed instances, 2 most calls in flight at once, 3 completed calls. */
__attribute__((visibility("default"))) long policy_fixture_stat(const char *tag, int which);
/* Blocks until statistic `which` of `tag` reaches `at_least` (woken by each change, not by
 * polling) or `timeout_ms` passed; returns its value then (-1: no room for the tag). */
__attribute__((visibility("default"))) long policy_fixture_wait_stat(const char *tag, int which, long at_least, long timeout_ms);
#endif
