#ifndef GROUPD_CNGHTTP2_SHIM_H
#define GROUPD_CNGHTTP2_SHIM_H
/*
 * The one place that knows which nghttp2 this is. Debian 12 ships 1.52; the `*2` APIs
 * (mem_recv2, mem_send2, nghttp2_ssize) arrived in 1.60 and the old ones are deprecated
 * there, so the shim picks by NGHTTP2_VERSION_NUM and Swift sees one stable signature.
 */
#include <stdint.h>
#include <stddef.h>
#include <nghttp2/nghttp2.h>

/* Feeds `len` bytes to the session. Returns bytes consumed or a negative nghttp2 error. */
static inline int64_t groupd_nghttp2_mem_recv(nghttp2_session *session, const uint8_t *data, size_t len) {
#if NGHTTP2_VERSION_NUM >= 0x013c00
    return (int64_t)nghttp2_session_mem_recv2(session, data, len);
#else
    return (int64_t)nghttp2_session_mem_recv(session, data, len);
#endif
}

/* Serialises the next chunk of outgoing frames. `*out` stays valid until the next call. */
static inline int64_t groupd_nghttp2_mem_send(nghttp2_session *session, const uint8_t **out) {
#if NGHTTP2_VERSION_NUM >= 0x013c00
    return (int64_t)nghttp2_session_mem_send2(session, out);
#else
    return (int64_t)nghttp2_session_mem_send(session, out);
#endif
}

/* Inflates header block bytes with a standalone HPACK inflater (tests check what nghttp2 decodes).
   Returns bytes consumed or a negative nghttp2 error; `*flags` gets NGHTTP2_HD_INFLATE_*. */
static inline int64_t groupd_nghttp2_hd_inflate(nghttp2_hd_inflater *inflater, nghttp2_nv *nv, int *flags,
                                                const uint8_t *in, size_t len, int final) {
#if NGHTTP2_VERSION_NUM >= 0x013c00
    return (int64_t)nghttp2_hd_inflate_hd3(inflater, nv, flags, in, len, final);
#else
    return (int64_t)nghttp2_hd_inflate_hd2(inflater, nv, flags, in, len, final);
#endif
}

/*
 * Sets nghttp2's own limit on incoming RST_STREAM (the CVE-2023-44487 fix: upstream 1.57, backported by
 * Debian to 1.52.0-1+deb12u1), whose presence NGHTTP2_VERSION_NUM does not tell. The symbol is
 * weak: against a libnghttp2 without it this returns 0 and does nothing.
 */
#pragma weak nghttp2_option_set_stream_reset_rate_limit
static inline int groupd_nghttp2_option_set_stream_reset_rate_limit(nghttp2_option *option, uint64_t burst, uint64_t rate) {
    void (*setter)(nghttp2_option *, uint64_t, uint64_t) = nghttp2_option_set_stream_reset_rate_limit;
    if (setter == NULL) return 0;
    setter(option, burst, rate);
    return 1;
}

/* The frame header fields Swift needs, without reaching into the frame union. */
static inline uint8_t groupd_nghttp2_frame_type(const nghttp2_frame *frame) { return frame->hd.type; }
static inline uint8_t groupd_nghttp2_frame_flags(const nghttp2_frame *frame) { return frame->hd.flags; }
static inline int32_t groupd_nghttp2_frame_stream_id(const nghttp2_frame *frame) { return frame->hd.stream_id; }
static inline int groupd_nghttp2_frame_headers_category(const nghttp2_frame *frame) { return (int)frame->headers.cat; }

#endif
