#ifndef GROUPD_BUILD_INFO_API_H
#define GROUPD_BUILD_INFO_API_H
/*
 * What `groupd --version` prints: the release version and the git commit of the build.
 * SwiftPM cannot stamp a build, so `make build` and `make release` write the commit into
 * groupd_build_info.h next to build_info.c (gitignored, rewritten only when the commit
 * changes); a build without it (a bare `swift build`) reports the commit as "unknown".
 */

/* The release version, e.g. "1.0.0" (the latest release in CHANGELOG.md). */
const char *_Nonnull groupd_build_version(void);

/* The short git commit the binary was built from, or "unknown". */
const char *_Nonnull groupd_build_commit(void);

#endif
