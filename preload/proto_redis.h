/*
 * preload/proto_redis.h - the Redis protocol module (RESP2 and RESP3):
 * recognise a connection, frame commands and replies, say where a call
 * starts and what verdict its first reply gives (ADR-404 to ADR-406).
 *
 * Source: the Redis serialization protocol specification (RESP2, RESP3:
 * types, inline commands, pipelining, pushes) and the Redis manual's
 * error replies. Pure: no clock, no I/O, no allocation; includes only
 * the standard headers and resilix/verdict.h. Not thread-safe per state:
 * the caller serialises calls on one state (the fd record's lock).
 */
#ifndef RESILIX_PROTO_REDIS_H
#define RESILIX_PROTO_REDIS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto_wire.h"
#include "resilix/verdict.h"

/*
 * The state of one connection, both directions: 40 bytes, no pointers,
 * all zero after rx__redis_init. Fields are private to proto_redis.c.
 */
/* The word matcher of an error reply or a push's kind: which words of a
 * table can still match the text seen so far. */
struct rx_redis_match {
	uint32_t alive; /* candidates still alive, one bit per word */
	uint8_t table;	/* which table, 0 when idle */
	uint8_t pos;	/* characters seen */
	uint8_t best;	/* longest complete word + 1, or 0 */
};

struct rx_redis {
	uint32_t c_pending; /* client: values still to read in this command */
	uint32_t c_n;	    /* client: number being read, or bulk bytes left */
	uint32_t s_pending; /* server: values still to read in this reply */
	uint32_t s_n;	    /* server: likewise */
	struct rx_redis_match m;
	struct rx_redis_match cm; /* client: the call's command name */
	uint8_t c_state, c_flags;
	uint8_t s_state, s_flags;
	uint8_t flags; /* call open */
	uint8_t end;   /* terminal enum rx_wire_event, 0 while judging */
	uint8_t cmd;   /* what the call's first command is (ADR-650) */
};

/* rx__redis_init - the state of a new connection (all zero). O(1). */
void rx__redis_init(struct rx_redis *r);

/*
 * rx__redis_claim - are a connection's first written bytes a Redis
 * command (ADR-404)?
 * @buf, @n: the bytes written first (NULL only with n == 0).
 * YES for a RESP array header: '*', then a digit 1-9. YES for an inline
 * command line: a command name of 1-32 characters, a letter then
 * letters, digits, '.', '_' or '-' (module commands are "JSON.GET"),
 * then a space or the line's end, the line ending in "\n" within its
 * first 512 bytes and containing no "HTTP/" anywhere: "GET / HTTP/1.1" is
 * an HTTP request, "GET key" and "PING" are Redis. MORE while the bytes
 * fit one of the two and neither is complete; NO otherwise. The HTTP
 * module is asked first; a claim by an inline line is confirmed only by
 * the first reply byte (a RESP type, else rx__redis_read says OTHER).
 * Reads at most 512 bytes. O(min(n, 512)).
 */
enum rx_wire_claim rx__redis_claim(const uint8_t *buf, size_t n);

/*
 * rx__redis_write - feed bytes the program wrote (ADR-404).
 * @r: the connection's state. @buf, @n: the bytes (n may be 0).
 * @ev: set to MORE, START (a command begins while no call is open),
 *      OTHER (not RESP) or NO_CALL (a SYNC or PSYNC was written: the
 *      connection is a replication link from here on, ADR-667). Never
 *      NULL.
 * Returns the bytes consumed: n for MORE; for START, through the byte
 * that made the command certain - the end of a "*N\r\n" header with
 * N >= 1, or the first non-blank byte of an inline line (blank lines
 * and empty arrays are no command: Redis answers neither). Commands
 * written while a call is open join its batch. O(n).
 */
size_t rx__redis_write(struct rx_redis *r, const uint8_t *buf, size_t n,
		       enum rx_wire_event *ev);

/*
 * rx__redis_read - feed bytes the program read (ADR-404, ADR-405).
 * @r: the connection's state. @buf, @n: the bytes (n may be 0).
 * @ev: set to MORE, VERDICT (the open call is decided) or OTHER (not
 *      RESP). Never NULL. @verdict: set with VERDICT only. Never NULL.
 * Returns the bytes consumed (n for MORE, through the deciding byte for
 * VERDICT, 0 after a terminal event).
 * The open call's answer is the first top-level reply that begins after
 * it opened. Its type byte decides: an error ('-', or RESP3's '!' bulk
 * error) by its first word (rx__redis_error_verdict), every other RESP2
 * or RESP3 type is a success. Not replies, framed whole and skipped: a
 * push ('>') - except one whose kind is a subscribe or unsubscribe
 * confirmation, which in RESP3 is how SUBSCRIBE is answered - and an
 * attribute ('|'), after which the reply it decorates decides. Replies
 * read while no call is open (the rest of a pipelined batch, pub/sub
 * messages in RESP2) are framed and ignored. Streamed RESP3 strings and
 * aggregates ("$?"), which Redis does not send, are OTHER. O(n).
 */
size_t rx__redis_read(struct rx_redis *r, const uint8_t *buf, size_t n,
		      enum rx_wire_event *ev, enum rx_verdict *verdict);

/* rx__redis_call_open - whether a call started and has no verdict yet. */
bool rx__redis_call_open(const struct rx_redis *r);

/*
 * rx__redis_blocking - does the command that opened the last call block
 * on purpose until data comes or its own timeout ends (ADR-650)? BLPOP,
 * BRPOP, BRPOPLPUSH, BLMOVE, BLMPOP, BZPOPMIN, BZPOPMAX, BZMPOP, WAIT,
 * WAITAOF, and XREAD or XREADGROUP with a BLOCK argument, in any case;
 * read from the first command of the batch (a RESP array's first bulk,
 * an inline line's first word; an inline XREAD's arguments are not read).
 * Also true for the call that opens after a batch one of whose later
 * commands blocks: its answer comes after that wait (ADR-661). Set as
 * the command's bytes are written, kept until the next call starts.
 * O(1).
 */
bool rx__redis_blocking(const struct rx_redis *r);

/*
 * rx__redis_resync - a call starts on a connection whose server bytes since
 * the last verdict were not all fed (the shim reads only what a waiting
 * call reads, ADR-408): the server's side restarts at a message boundary,
 * as it is when the client read the last answer whole. The client's side
 * and the flags are untouched. O(1).
 */
void rx__redis_resync(struct rx_redis *r);

/*
 * rx__redis_error_verdict - the verdict of an error reply's text (ADR-405).
 * @text, @len: the error after its '-' (or a bulk error's payload), e.g.
 *              "OOM command not allowed ...". NULL only with len == 0.
 * TRANSIENT: LOADING, MASTERDOWN, TRYAGAIN, CLUSTERDOWN, READONLY,
 * NOREPLICAS, MISCONF. OVERLOAD: BUSY, OOM, and "ERR max number of
 * clients reached" (maxclients). ANSWERED: every other word - ERR,
 * WRONGTYPE, NOAUTH, WRONGPASS, NOPERM, NOSCRIPT, EXECABORT, MOVED, ASK,
 * CROSSSLOT, BUSYGROUP, BUSYKEY, NOPROTO, unknown words. The word is the
 * text up to a space or the line's end: BUSYGROUP is not BUSY.
 * Thread-safe, O(len). The incremental reader decides the same way
 * however the reply is split.
 */
enum rx_verdict rx__redis_error_verdict(const char *text, size_t len);

#endif
