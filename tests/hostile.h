/* hostile: a scripted hostile HTTP server for tests, on raw sockets and an
 * ev loop. It reads whatever a client sends (and discards it: no parsing
 * beyond finding the end of the first request head), then answers every
 * connection with one endless attack, as fast as the client reads (or, for
 * HOSTILE_DRIBBLE, one byte every 10 ms), until the client closes or
 * hostile_stop(). Listens on 127.0.0.1, port 0.
 *
 * Ownership: hostile_start() returns a server the caller frees with
 * hostile_stop(). Threading: the loop's thread only. */
#ifndef TEST_HOSTILE_H
#define TEST_HOSTILE_H

#include <stdint.h>

#include "ev.h"

typedef enum {
    HOSTILE_TRAILERS,   /* a chunked body, then trailer lines without end */
    HOSTILE_EXTENSIONS, /* 1-byte chunks, each with a 1000-byte extension */
    HOSTILE_HEADERS,    /* a status line, then header lines without end */
    HOSTILE_CONTINUE,   /* "100 Continue" heads without end */
    HOSTILE_DRIBBLE,    /* a head that never ends, one byte every 10 ms */
    HOSTILE_ENDLESS,    /* a close-delimited body that never ends */
    HOSTILE_NMODES
} hostile_mode;

typedef struct hostile hostile;

const char *hostile_mode_name(hostile_mode m);
hostile *hostile_start(ev_loop *loop, hostile_mode mode);
int hostile_port(const hostile *h);
unsigned hostile_accepts(const hostile *h);
/* Bytes of attack written so far, over all connections. */
unsigned long long hostile_sent(const hostile *h);
/* ev_now_ms() when the first request head was complete; 0: none yet. */
uint64_t hostile_first_request_ms(const hostile *h);
/* Stops writing (connections stay open until hostile_stop). */
void hostile_pause(hostile *h);
void hostile_stop(hostile *h);

#endif
