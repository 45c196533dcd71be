/* Returns a table whose struct_size is too small to hold on_hook. */
#include "groupd_policy.h"
static groupd_plugin_api table = { .struct_size = 12, .abi_major = GROUPD_POLICY_ABI_MAJOR, .abi_minor = 0 };
GROUPD_POLICY_EXPORT const groupd_plugin_api *groupd_policy_entry_v1(const groupd_host_api *h) { (void)h; return &table; }
