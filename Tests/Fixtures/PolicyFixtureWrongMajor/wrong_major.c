/* Exports the v1 entry but claims ABI major 2: the host must refuse it. */
#include "groupd_policy.h"
#include <stddef.h>
static void *fixture_new(groupd_call *c, groupd_str a, groupd_str b) { (void)c; (void)a; (void)b; return (void *)1; }
static int32_t fixture_on_hook(void *i, int32_t h, const groupd_request *r, groupd_call *c) { (void)i; (void)h; (void)r; (void)c; return 0; }
static const groupd_plugin_api table = {
    .struct_size = sizeof(groupd_plugin_api), .abi_major = 2, .abi_minor = 0, .name = "fixture-wrong-major",
    .instance_new = fixture_new, .instance_destroy = NULL, .on_hook = fixture_on_hook,
};
GROUPD_POLICY_EXPORT const groupd_plugin_api *groupd_policy_entry_v1(const groupd_host_api *h) { (void)h; return &table; }
