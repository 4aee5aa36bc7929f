/*
 * preload/protocols.h - the protocol modules the shim knows, behind the
 * interface of proto.h: the one file that names them. The call state
 * machine (call.c) asks these functions and never a module directly; a
 * new module adds its case to each (ADR-310).
 *
 * Dispatch is a switch on the record's module id, inline, rather than a
 * table of function pointers: the modules are compiled in, and the
 * common case of the data path - a whole HTTP status line, a request
 * line - stays a few compares without an indirect call (ADR-187). Pure
 * like the modules: no clock, no I/O, no lock; the caller holds the
 * record's stripe lock wherever the state is written.
 */
#ifndef RESILIX_PRELOAD_PROTOCOLS_H
#define RESILIX_PRELOAD_PROTOCOLS_H

#include <string.h>

#include "proto.h"
#include "proto_framed.h"
#include "proto_http.h"

static inline struct rx_sniff_http *rx__proto_http(struct rx_proto_state *st)
{
	return (struct rx_sniff_http *)(void *)st->u.bytes;
}

/* The module id, read without the stripe lock (relaxed): it changes only
 * under the lock, at a connection's start and at its claim. */
static inline enum rx_proto_id rx__proto_id(const struct rx_proto_state *st)
{
	return (enum rx_proto_id)__atomic_load_n(&st->id, __ATOMIC_RELAXED);
}

/* rx__proto_open - a new connection: nobody's yet (stripe lock held; the
 * id and flags are stored atomically, as they are read without it). */
static inline void rx__proto_open(struct rx_proto_state *st)
{
	__atomic_store_n(&st->id, (uint8_t)RX_PROTO_UNKNOWN, __ATOMIC_RELAXED);
	__atomic_store_n(&st->flags, (uint8_t)0, __ATOMIC_RELAXED);
	__atomic_store_n(&st->layer, (uint8_t)RX_PROTO_LAYER_SOCKET,
			 __ATOMIC_RELAXED);
	st->spare = 0;
	memset(st->u.bytes, 0, sizeof(st->u.bytes));
}

/* rx__proto_layer - which layer feeds the connection's protocol module:
 * the socket layer, or a TLS library's plaintext (ADR-440). Read without
 * the stripe lock; rx__proto_open and the TLS layer store it atomically. */
static inline enum rx_proto_layer
rx__proto_layer(const struct rx_proto_state *st)
{
	return (enum rx_proto_layer)__atomic_load_n(&st->layer,
						    __ATOMIC_RELAXED);
}

/* rx__proto_set_layer - from now on @layer feeds the connection. */
static inline void rx__proto_set_layer(struct rx_proto_state *st,
				       enum rx_proto_layer layer)
{
	if (rx__proto_layer(st) != layer)
		__atomic_store_n(&st->layer, (uint8_t)layer, __ATOMIC_RELAXED);
}

/* rx__proto_next - a new call on the connection: its module forgets the
 * last reply. O(1). */
static inline void rx__proto_next(struct rx_proto_state *st)
{
	enum rx_proto_id id = rx__proto_id(st);

	/* HTTP first, in a compare: the data path (ADR-187). */
	if (__builtin_expect(id == RX_PROTO_HTTP, 1))
		rx__http_next(rx__proto_http(st));
	else if (id == RX_PROTO_PG)
		rx__pg_next(st);
	else if (id == RX_PROTO_REDIS)
		rx__redis_next(st);
	else
		memset(st->u.bytes, 0, sizeof(st->u.bytes));
}

/* rx__proto_untimed - does the connection's current call wait on purpose,
 * so that its duration is no latency (ADR-650)? Only Redis's blocking
 * commands do. Read without the lock. O(1). */
static inline bool rx__proto_untimed(const struct rx_proto_state *st)
{
	return rx__proto_id(st) == RX_PROTO_REDIS && rx__redis_untimed(st);
}

/* rx__proto_asked - was recognition asked on this connection already?
 * (Read without the lock; rx__proto_claim sets it under the lock.) */
static inline bool rx__proto_asked(const struct rx_proto_state *st)
{
	return __atomic_load_n(&st->flags, __ATOMIC_RELAXED) & RX_PROTO_ASKED;
}

/* rx__proto_recognise - whose are a connection's first request bytes?
 * RX_PROTO_UNKNOWN when no module's. Pure. */
static inline enum rx_proto_id rx__proto_recognise(const struct iovec *iov,
						   int iovcnt)
{
	if (rx__http_recognise(iov, iovcnt))
		return RX_PROTO_HTTP;
	/* A port is no evidence (ADR-400): the bytes decide. */
	if (rx__pg_recognise(iov, iovcnt))
		return RX_PROTO_PG;
	if (rx__redis_recognise(iov, iovcnt))
		return RX_PROTO_REDIS;
	return RX_PROTO_UNKNOWN;
}

/* rx__proto_claim - record what rx__proto_recognise said, once per
 * connection (stripe lock held). */
static inline void rx__proto_claim(struct rx_proto_state *st,
				   enum rx_proto_id id)
{
	if (rx__proto_asked(st))
		return;
	__atomic_store_n(&st->flags, (uint8_t)(st->flags | RX_PROTO_ASKED),
			 __ATOMIC_RELAXED);
	if (id == RX_PROTO_UNKNOWN || rx__proto_id(st) != RX_PROTO_UNKNOWN)
		return;
	/* A framed module's state is fresh before its id is seen. */
	if (id == RX_PROTO_PG)
		rx__pg_open(st);
	else if (id == RX_PROTO_REDIS)
		rx__redis_open(st);
	__atomic_store_n(&st->id, (uint8_t)id, __ATOMIC_RELAXED);
}

/* rx__proto_frames_writes - does the connection's module read every byte
 * written, the writes that start no call included (proto.h, ADR-408)?
 * Read without the lock. O(1). */
static inline bool rx__proto_frames_writes(const struct rx_proto_state *st)
{
	enum rx_proto_id id = rx__proto_id(st);

	return id == RX_PROTO_PG || id == RX_PROTO_REDIS;
}

/* rx__proto_refusal_ends_reads - must a request refused on this answered
 * connection also end its reading side? PostgreSQL's: libpq reads on after
 * a failed write, for the server's reason, and would wait for ever for an
 * answer to a query never sent (ADR-411). Read without the lock. */
static inline bool
rx__proto_refusal_ends_reads(const struct rx_proto_state *st)
{
	return rx__proto_id(st) == RX_PROTO_PG;
}

/* rx__proto_wrote - the @n bytes a write sent (@iov NULL: unseen), for a
 * module that frames writes (stripe lock held). */
static inline enum rx_proto_wrote
rx__proto_wrote(struct rx_proto_state *st, const struct iovec *iov,
		int iovcnt, size_t n)
{
	switch (rx__proto_id(st)) {
	case RX_PROTO_PG:
		return rx__pg_wrote(st, iov, iovcnt, n);
	case RX_PROTO_REDIS:
		return rx__redis_wrote(st, iov, iovcnt, n);
	default:
		return RX_PROTO_WROTE_OK;
	}
}

/* rx__proto_cancels - after rx__proto_wrote said NO_CALL: the key of the
 * call the connection's request cancels (a PostgreSQL CancelRequest's),
 * 0 when it cancels none (stripe lock held; ADR-676). */
static inline uint64_t rx__proto_cancels(struct rx_proto_state *st)
{
	return rx__proto_id(st) == RX_PROTO_PG ? rx__pg_cancels(st) : 0;
}

/* rx__proto_cancel_key - after the verdict of the connection's call: the
 * key a cancel of the program's own names when the answer said the call
 * was cancelled (PostgreSQL's 57014: the backend's key), 0 otherwise
 * (ADR-676). Read without the lock. O(1). */
static inline uint64_t rx__proto_cancel_key(const struct rx_proto_state *st)
{
	return rx__proto_id(st) == RX_PROTO_PG ? rx__pg_cancel_key(st) : 0;
}

/* rx__proto_starts - on an answered connection, does a new request begin
 * in these bytes? Only a module that frames the connection can say; a
 * connection without one has no answered state to be in. Pure. */
static inline bool rx__proto_starts(const struct rx_proto_state *st,
				    const struct iovec *iov, int iovcnt)
{
	switch (rx__proto_id(st)) {
	case RX_PROTO_HTTP:
		return rx__http_starts(
		    (const struct rx_sniff_http *)(const void *)st->u.bytes,
		    iov, iovcnt);
	case RX_PROTO_PG:
		return rx__pg_starts((struct rx_proto_state *)st, iov, iovcnt);
	case RX_PROTO_REDIS:
		return rx__redis_starts((struct rx_proto_state *)st, iov,
					iovcnt);
	case RX_PROTO_UNKNOWN:
	default:
		return false;
	}
}

/*
 * The default rule (docs/design.md section 3): response bytes no module
 * claims are a success at their first byte, and with no framing to find
 * calls in, the connection stops being tracked, as after an upgrade
 * (ADR-147). So are bytes the shim could not see (spliced to a pipe).
 */
static inline void rx__proto_unframed(struct rx_proto_reply *out)
{
	out->kind = RX_PROTO_LAST;
	out->verdict = RX_SUCCESS;
}

/*
 * rx__proto_reply - the next @len response bytes of the current call
 * (stripe lock held). A connection nobody recognised is offered to the
 * modules that can tell their replies by their first bytes - HTTP's
 * status line - and claimed by the first that does not say "not mine";
 * the framed modules need the request too, so they never claim here.
 * Sets out->kind (never RX_PROTO_NOT_MINE: the default rule answers for
 * it), out->verdict, out->began.
 */
static inline void rx__proto_reply(struct rx_proto_state *st, const void *buf,
				   size_t len, struct rx_proto_reply *out)
{
	enum rx_proto_id id = rx__proto_id(st);

	out->began = false;
	if (__builtin_expect(id == RX_PROTO_PG, 0)) {
		rx__pg_reply(st, buf, len, out);
	} else if (__builtin_expect(id == RX_PROTO_REDIS, 0)) {
		rx__redis_reply(st, buf, len, out);
	} else {
		if (id == RX_PROTO_UNKNOWN)
			__atomic_store_n(&st->id, (uint8_t)RX_PROTO_HTTP,
					 __ATOMIC_RELAXED);
		rx__http_reply(rx__proto_http(st), buf, len, out);
	}
	if (out->kind == RX_PROTO_NOT_MINE)
		rx__proto_unframed(out);
}

#endif
