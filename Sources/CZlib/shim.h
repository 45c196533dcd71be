#ifndef GROUPD_CZLIB_SHIM_H
#define GROUPD_CZLIB_SHIM_H
/*
 * zlib for gRPC message compression. `inflateInit2` and `deflateInit2` are macros (they pass
 * ZLIB_VERSION and sizeof(z_stream)), which Swift cannot call: these wrappers are the functions.
 * Window bits: 15 is the zlib format (gRPC's `deflate`, RFC 1950), 15 + 16 the gzip format
 * (`gzip`, RFC 1952), as grpc-core uses them.
 */
#include <zlib.h>

static inline int groupd_inflate_init(z_stream *stream, int window_bits) {
    return inflateInit2(stream, window_bits);
}

static inline int groupd_deflate_init(z_stream *stream, int level, int window_bits) {
    return deflateInit2(stream, level, Z_DEFLATED, window_bits, 8, Z_DEFAULT_STRATEGY);
}

#endif /* GROUPD_CZLIB_SHIM_H */
