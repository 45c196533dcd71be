/* Compile-time checks of the ABI's layout; the target has no functions of its own. */
#include "groupd_policy.h"

_Static_assert(offsetof(groupd_host_api, struct_size) == 0, "struct_size comes first");
_Static_assert(offsetof(groupd_plugin_api, struct_size) == 0, "struct_size comes first");
_Static_assert(offsetof(groupd_request, struct_size) == 0, "struct_size comes first");
_Static_assert(GROUPD_PLUGIN_API_V1_MIN_SIZE <= sizeof(groupd_plugin_api), "minimum fits");
_Static_assert(offsetof(groupd_request, budget_ms) == offsetof(groupd_request, user_count) + sizeof(size_t),
               "ABI 1.1 members follow the 1.0 request");
