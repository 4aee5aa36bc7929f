/*
 * preload/proto_framed.h - the framed wire modules, PostgreSQL protocol 3
 * (proto_pg.c) and RESP2/RESP3 (proto_redis.c), as modules of the protocol
 * interface (proto.h): thin adapters from proto_wire.h's shape - claim,
 * write, read - to recognise, starts, reply, next and wrote (ADR-408,
 * ADR-409).
 *
 * Each function takes the connection's rx_proto_state and keeps the
 * module's 32-byte state in the record's wide slot (fdtable.h). Out of
 * line: a database call costs a function call more than an HTTP one, and
 * the HTTP path (protocols.h) stays inline. Pure like the modules: no
 * clock, no I/O, no lock; the caller holds the record's stripe lock where
 * the state is written (open, reply, next, wrote). Stack: at most 512
 * bytes (recognise's gathering of a split first write).
 */
#ifndef RESILIX_PRELOAD_PROTO_FRAMED_H
#define RESILIX_PRELOAD_PROTO_FRAMED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "proto.h"

/*
 * rx__pg_recognise, rx__redis_recognise - are a connection's first bytes
 * written (@iov, @iovcnt; NULL: unseen) the protocol's opening: a
 * PostgreSQL StartupMessage, SSLRequest, GSSENCRequest or CancelRequest;
 * a RESP array or an inline command line (ADR-400)? A first write too
 * short to tell (MORE) is not recognised. Reads at most 512 bytes.
 */
bool rx__pg_recognise(const struct iovec *iov, int iovcnt);
bool rx__redis_recognise(const struct iovec *iov, int iovcnt);

/* rx__pg_cancel_request - the key (backend process ID << 32 | secret)
 * that a whole PostgreSQL CancelRequest in @iov's first buffer names, 0
 * for any other bytes; the caller notes it before the request goes out,
 * since the server's answer on the cancelled connection can be read
 * before the cancel's write returns (ADR-676). Reads 16 bytes. */
uint64_t rx__pg_cancel_request(const struct iovec *iov, int iovcnt);

/* rx__pg_open, rx__redis_open - the connection is claimed: a fresh state
 * in its wide slot. O(1). */
void rx__pg_open(struct rx_proto_state *st);
void rx__redis_open(struct rx_proto_state *st);

/*
 * rx__pg_starts, rx__redis_starts - on an answered connection, does a
 * call start in the bytes @iov (ADR-401, ADR-404: a Query, the first
 * extended-query message after a Sync, a command)? The module's write
 * run on a copy of the state: the record's is not written (asked without
 * the lock). NULL @iov: no. O(bytes up to the call's first byte).
 */
bool rx__pg_starts(struct rx_proto_state *st, const struct iovec *iov,
		   int iovcnt);
bool rx__redis_starts(struct rx_proto_state *st, const struct iovec *iov,
		      int iovcnt);

/*
 * rx__pg_wrote, rx__redis_wrote - the @n bytes a write sent (proto.h's
 * fifth function): fed to the module's client side. UNFRAMED when the
 * bytes were unseen (@iov NULL) or are not the protocol's; NO_CALL for a
 * CancelRequest. O(n), bodies skipped by their lengths.
 */
enum rx_proto_wrote rx__pg_wrote(struct rx_proto_state *st,
				 const struct iovec *iov, int iovcnt, size_t n);
enum rx_proto_wrote rx__redis_wrote(struct rx_proto_state *st,
				    const struct iovec *iov, int iovcnt,
				    size_t n);

/*
 * rx__pg_reply, rx__redis_reply - the next @len response bytes of the
 * waiting call. REPLY with the verdict when the module decides (the
 * answer began in these bytes: out->began), NOT_MINE when the bytes are
 * not the protocol's, MORE otherwise. PostgreSQL's 'S' or 'G' to an
 * SSLRequest or GSSENCRequest is REPLY, a success: the server is up and
 * answered the connection's first exchange; the module then starts over
 * with a fresh state, so that a TLS layer's plaintext start-up is read as
 * a new connection's, and the socket layer's next bytes, ciphertext, stop
 * the tracking (ADR-410).
 */
void rx__pg_reply(struct rx_proto_state *st, const void *buf, size_t len,
		  struct rx_proto_reply *out);
void rx__redis_reply(struct rx_proto_state *st, const void *buf, size_t len,
		     struct rx_proto_reply *out);

/*
 * rx__pg_cancels - the key a CancelRequest written on the connection
 * names, after rx__pg_wrote said NO_CALL (pid << 32 | secret, ADR-676);
 * 0 when none. Stripe lock held. O(1).
 */
uint64_t rx__pg_cancels(struct rx_proto_state *st);

/*
 * rx__pg_cancel_key - after a call's verdict: when its answer was a 57014
 * query_canceled, the connection's backend key (pid << 32 | secret), which
 * a CancelRequest of the program's own would have named; 0 otherwise or
 * when the key is not known (ADR-676). Read without the lock, as the
 * judge reads it after the verdict. O(1).
 */
uint64_t rx__pg_cancel_key(const struct rx_proto_state *st);

/* rx__pg_next, rx__redis_next - a call starts: the server's side is at a
 * message boundary (rx__pg_resync, rx__redis_resync; ADR-408). O(1). */
void rx__pg_next(struct rx_proto_state *st);
void rx__redis_next(struct rx_proto_state *st);

/* rx__redis_untimed - does the connection's current call wait on purpose
 * (a blocking command, rx__redis_blocking; ADR-650)? Read without the
 * lock: a byte the call's own writes set. O(1). */
bool rx__redis_untimed(const struct rx_proto_state *st);

#endif
