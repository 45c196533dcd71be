#include "GroupdBuildInfo.h"

#if __has_include("groupd_build_info.h")
#include "groupd_build_info.h"
#endif

#ifndef GROUPD_GIT_COMMIT
#define GROUPD_GIT_COMMIT "unknown"
#endif

/* Keep in step with the latest release in CHANGELOG.md (tests/test_packaging.py checks it). */
#define GROUPD_VERSION "1.0.0"

const char *groupd_build_version(void) { return GROUPD_VERSION; }

const char *groupd_build_commit(void) { return GROUPD_GIT_COMMIT; }
