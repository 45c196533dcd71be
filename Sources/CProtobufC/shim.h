#ifndef GROUPD_CPROTOBUFC_SHIM_H
#define GROUPD_CPROTOBUFC_SHIM_H
/* The one module that owns protobuf-c.h. */
#include <protobuf-c/protobuf-c.h>
#endif
