/* A library built for a future ABI: exports groupd_policy_entry_v2 and no v1 entry. */
#include "groupd_policy.h"
GROUPD_POLICY_EXPORT const void *groupd_policy_entry_v2(const void *host) { return host; }
