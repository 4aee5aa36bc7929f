/*
 * preload/proto.h - the protocol interface: what a protocol module tells
 * the call state machine (call.c) about the bytes of a connection.
 *
 * The call state machine knows when a call starts and ends, never what
 * the bytes mean. A protocol module knows what the bytes mean, never
 * sockets, clocks or policies. Between them, three questions (ADR-310):
 *
 *   1. Whose is this connection? From the first request bytes written,
 *      a module may recognise it as its own (a PostgreSQL startup packet,
 *      an HTTP request line). A connection nobody recognised is offered
 *      to the modules again at its first response bytes; one that no
 *      module claims then follows the default rule: its first response
 *      byte is a success and the connection stops being tracked, since
 *      without framing every later write would start a call (ADR-147).
 *   2. Where does a new request start in the bytes written? Asked of
 *      each write on a connection whose last call was answered. Only a
 *      write that begins a request starts (and may have refused) a new
 *      call; any other continues the exchange, never refused (ADR-191).
 *   3. What do the first response bytes say? Fed each piece the program
 *      reads, in order, a module answers: more bytes needed, a reply
 *      with its verdict (the connection stays framed: the next request
 *      starts a call), a last reply with its verdict (the connection
 *      stops being framed: an upgrade), or not mine.
 *
 * The verdict a module gives is evidence about the reply only. The
 * verdict the call settles with is decided in one place, judge.h's
 * rx__judge, which also weighs deadlines, abandonment and stale fds.
 *
 * How a module is written. It lives in preload/proto_<name>.c with its
 * header proto_<name>.h, and provides, with <name> for m:
 *
 *   bool rx__m_recognise(const struct iovec *iov, int iovcnt)
 *       The first request bytes of a connection (the first write's
 *       buffers, @iov NULL when the shim cannot see them, as for
 *       sendfile): are they this protocol's? Pure; reads at most a few
 *       dozen bytes. Asked once per connection.
 *   bool rx__m_starts(const <state> *s, const struct iovec *iov,
 *                     int iovcnt)
 *       A write on an answered connection of this protocol (@iov as
 *       above): does a new request begin in these bytes? Pure: reads the
 *       state, never writes it (it is asked without the record's lock,
 *       before the admission it may lead to).
 *   void rx__m_reply(<state> *s, const void *buf, size_t len,
 *                    struct rx_proto_reply *out)
 *       The next @len response bytes. Sets out->kind (and out->verdict
 *       for RX_PROTO_REPLY and RX_PROTO_LAST) and out->began: a reply
 *       message (possibly the answering one) began in these bytes, so
 *       the call's time to first byte restarts there - a 100 Continue,
 *       or PostgreSQL's 1-byte 'S'/'N' answer to an SSLRequest, is not
 *       the answer. After a kind other than RX_PROTO_MORE the state is
 *       not fed again until rx__m_next.
 *   void rx__m_next(<state> *s)
 *       A new call starts on the connection: forget the last reply.
 *
 * and adds one case per function to protocols.h, the dispatch. Its state
 * lives in struct rx_proto_state, inside the fd record (fdtable.h): at
 * most RX_PROTO_STATE_BYTES bytes, no pointers, no allocation, zero
 * meaning "a fresh connection". Every function is pure: no clock, no
 * I/O, no lock; the caller holds the record's stripe lock wherever the
 * state is written (recognition's claim, rx__m_reply, rx__m_next).
 * O(bytes fed).
 *
 * Made for the modules to come (ADR-310). A message-framed binary
 * protocol (PostgreSQL protocol 3: a type byte and an int32 length; an
 * 8-byte SSLRequest whose 1-byte answer is no verdict; a call from Query
 * or Sync to the first response message, whose ErrorResponse SQLSTATE
 * decides) needs the lengths of the messages it writes: it gets a fifth
 * function, rx__m_wrote(<state> *s, const struct iovec *iov, int iovcnt,
 * size_t n), fed every write's bytes under the stripe lock, which the
 * state machine calls from its write end step when the connection's
 * module has one. The same hook counts requests written before their
 * replies (Redis pipelining: the state machine keeps one call per
 * connection; the module tells which reply answers it). A protocol seen
 * through a TLS library (SSL_read/SSL_write) is fed plaintext by that
 * layer through the same entry points of call.c, for the same record;
 * rx_proto_state.layer then says which layer feeds it, and the socket
 * layer stops feeding ciphertext.
 *
 * The framed modules (proto_framed.c: PostgreSQL, Redis, ADR-408) frame
 * both directions, so they have that fifth function:
 *
 *   enum rx_proto_wrote rx__m_wrote(struct rx_proto_state *st,
 *                                   const struct iovec *iov, int iovcnt,
 *                                   size_t n)
 *       The @n bytes a write sent, from the start of @iov (NULL: bytes
 *       the shim cannot see - sendfile, splice, sendmmsg), for every
 *       write of a tracked connection that is not done, including those
 *       that start no call. Stripe lock held. Returns RX_PROTO_WROTE_OK,
 *       _UNFRAMED (the module lost or gave up the framing: a call in
 *       flight is left to the default rule, an answered connection stops
 *       being tracked) or _NO_CALL (the connection carries no call, as a
 *       PostgreSQL CancelRequest's: the call is released, no evidence).
 *
 * Their state (32 bytes) outgrows RX_PROTO_STATE_BYTES: it lives in the
 * record's wide slot, RX_PROTO_WIDE_BYTES in a table beside the records
 * at the same index (fdtable.h, rx__fd_proto_wide), mapped at start-up
 * with them and touched only by connections such a module claimed, so
 * the record keeps its 256 bytes and the HTTP path its cache lines. Their
 * functions take the rx_proto_state and find the slot; the claim zeroes
 * it. They are not fed the response bytes read while no call waits (the
 * read fast path stays a load and a branch): rx__m_next takes the
 * server's side to be at a message boundary, as it is for a client that
 * reads each answer whole before its next request (docs/limits.md).
 */
#ifndef RESILIX_PRELOAD_PROTO_H
#define RESILIX_PRELOAD_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "resilix/verdict.h"

/* The modules. 0: no module claimed the connection (yet). */
enum rx_proto_id {
	RX_PROTO_UNKNOWN = 0,
	RX_PROTO_HTTP,	/* HTTP/1.x: proto_http.c */
	RX_PROTO_PG,	/* PostgreSQL protocol 3: proto_framed.c, proto_pg.c */
	RX_PROTO_REDIS	/* RESP2/RESP3: proto_framed.c, proto_redis.c */
};

/* Which layer feeds the record's bytes (the TLS layer: tls.c, ADR-440). */
enum rx_proto_layer {
	RX_PROTO_LAYER_SOCKET = 0, /* the socket calls (io.c) */
	RX_PROTO_LAYER_TLS	   /* a TLS library's plaintext calls */
};

/* A module's per-connection state, in bytes (see the manual above). */
#define RX_PROTO_STATE_BYTES 12

/* A framed module's state, in the record's wide slot (see above). */
#define RX_PROTO_WIDE_BYTES 64

/* What a framed module says of bytes written (rx__m_wrote). */
enum rx_proto_wrote {
	RX_PROTO_WROTE_OK = 0,	 /* framed: go on */
	RX_PROTO_WROTE_UNFRAMED, /* not framed any more: the default rule */
	RX_PROTO_WROTE_NO_CALL	 /* the connection carries no call */
};

/* Set in rx_proto_state.flags. */
#define RX_PROTO_ASKED 1 /* recognition was asked (once per connection) */

struct rx_proto_state {
	uint8_t id;    /* enum rx_proto_id */
	uint8_t layer; /* enum rx_proto_layer */
	uint8_t flags; /* RX_PROTO_* flags */
	uint8_t spare;
	union {
		uint8_t bytes[RX_PROTO_STATE_BYTES];
		uint32_t align;
	} u;
};

/* What the response bytes so far say (rx__m_reply). */
enum rx_proto_reply_kind {
	RX_PROTO_MORE = 0, /* undecided: feed the next bytes */
	RX_PROTO_REPLY,	   /* the answer: verdict set; stays framed */
	RX_PROTO_LAST,	   /* the answer, and the end of framing on this
			      connection (an upgrade): verdict set */
	RX_PROTO_NOT_MINE  /* not this protocol: the default rule */
};

struct rx_proto_reply {
	enum rx_proto_reply_kind kind;
	enum rx_verdict verdict; /* RX_PROTO_REPLY, RX_PROTO_LAST */
	bool began;		 /* a reply message began in these bytes */
};

/* A module's view of its bytes of the state. Declare the module's state
 * type with RX_PROTO_STATE_TYPE (it may alias the bytes) and check its
 * size with RX_PROTO_STATE_FITS. */
#define RX_PROTO_STATE_TYPE __attribute__((may_alias))
#define RX_PROTO_STATE_FITS(type)                                              \
	_Static_assert(sizeof(type) <= RX_PROTO_STATE_BYTES,                   \
		       #type " outgrew struct rx_proto_state")

#endif
