/*
 * preload/proto_pg.h - the PostgreSQL frontend/backend protocol 3 module:
 * recognise a connection, frame its messages both ways, say where a call
 * starts and what verdict its first answer gives (ADR-400 to ADR-403).
 *
 * Source: the PostgreSQL manual, "Frontend/Backend Protocol" ("Message
 * Flow", "Message Formats", "Error and Notice Message Fields") and
 * Appendix A "PostgreSQL Error Codes". Pure: no clock, no I/O, no
 * allocation; includes only the standard headers and resilix/verdict.h.
 * Not thread-safe per state: the caller serialises calls on one state
 * (the fd record's lock).
 */
#ifndef RESILIX_PROTO_PG_H
#define RESILIX_PROTO_PG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto_wire.h"
#include "resilix/verdict.h"

/*
 * The state of one connection, both directions: 40 bytes, no pointers,
 * all zero after rx__pg_init (so a zeroed fd record is a valid initial
 * state). Fields are private to proto_pg.c.
 */
struct rx_pg {
	uint32_t c_left;  /* client: body bytes still to skip */
	uint32_t c_word;  /* client: header being read (length, code) */
	uint32_t s_left;  /* server: body bytes still to read */
	uint32_t s_word;  /* server: length, or an Authentication code */
	uint8_t c_state;  /* client framing state */
	uint8_t c_pos;	  /* client: header bytes read */
	uint8_t s_state;  /* server framing state */
	uint8_t s_pos;	  /* server: header bytes read */
	uint8_t s_type;	  /* server: type byte of the current message */
	uint8_t flags;	  /* call open, batch, start-up done, waits */
	uint8_t e_field;  /* ErrorResponse: field code being read, 0 between */
	uint8_t e_len;	  /* ErrorResponse: SQLSTATE characters kept */
	char sqlstate[5]; /* ErrorResponse: the C field so far */
	uint8_t end;	  /* terminal enum rx_wire_event, 0 while judging */
	uint8_t spare[2];
	/* The backend's key (BackendKeyData at start-up), or on a
	 * CancelRequest's connection the key it names (ADR-676). */
	uint32_t key_pid;
	uint32_t key_secret;
};

/* rx__pg_init - the state of a new connection (all zero). O(1). */
void rx__pg_init(struct rx_pg *s);

/*
 * rx__pg_claim - are a connection's first written bytes PostgreSQL's?
 * @buf, @n: the bytes written first (NULL only with n == 0).
 * YES for the opening packets of protocol 3, which have no type byte: a
 * StartupMessage (int32 length 9..10000, int32 version 3.x, 196608 for
 * 3.0), an SSLRequest (8, 80877103), a GSSENCRequest (8, 80877104) or a
 * CancelRequest (16, 80877102); MORE while fewer than 8 bytes all fit one
 * of them; NO otherwise (an HTTP method, a RESP array and a TLS
 * ClientHello all fail at the first byte). Reads at most 8 bytes. O(1).
 */
enum rx_wire_claim rx__pg_claim(const uint8_t *buf, size_t n);

/*
 * rx__pg_write - feed bytes the program wrote (ADR-401).
 * @s: the connection's state. @buf, @n: the bytes (n may be 0).
 * @ev: set to MORE, START (a call starts), OTHER (not a frontend message
 *      stream), NO_CALL (a CancelRequest, at its 16th byte: the key it
 *      names is then rx__pg_key's) or TLS (after the server accepted
 *      encryption). Never NULL.
 * Returns the bytes consumed: n for MORE; for START, up to and including
 * the byte that opened the call; 0 for a terminal event seen before.
 * A call starts at the first byte of: the StartupMessage, SSLRequest or
 * GSSENCRequest (the connection's start-up call), a PasswordMessage
 * ('p', answered by the next Authentication or ErrorResponse), a Query
 * ('Q'), a FunctionCall ('F'), or the first extended-query message
 * (Parse, Bind, Describe, Execute, Close or a lone Sync) after the last
 * Sync - each only while no call is open. Terminate ('X'), Flush ('H')
 * and COPY data ('d', 'c', 'f') never start one. O(n).
 */
size_t rx__pg_write(struct rx_pg *s, const uint8_t *buf, size_t n,
		    enum rx_wire_event *ev);

/*
 * rx__pg_read - feed bytes the program read (ADR-401, ADR-402).
 * @s: the connection's state. @buf, @n: the bytes (n may be 0).
 * @ev: set to MORE, VERDICT (the open call is decided), OTHER (not a
 *      backend message stream) or TLS ('S'/'G' after an SSLRequest or
 *      GSSENCRequest). Never NULL.
 * @verdict: set with VERDICT only. Never NULL.
 * Returns the bytes consumed (n for MORE, through the deciding byte for
 * VERDICT, 0 for a terminal event seen before). At the start-up's
 * VERDICT the rest of @buf is scanned, whole messages, for the
 * BackendKeyData and the first ReadyForQuery (ADR-676).
 * The answer of the open call is its first backend message that reports
 * an outcome: an ErrorResponse decides by its SQLSTATE
 * (rx__pg_sqlstate_verdict), anything else - DataRow, CommandComplete,
 * EmptyQueryResponse, CopyIn/CopyOut, FunctionCallResponse,
 * PortalSuspended, ReadyForQuery - is a success. Not answers: the one
 * byte 'N' answering an SSLRequest or GSSENCRequest, NoticeResponse,
 * NotificationResponse, ParameterStatus after start-up, and the messages
 * the server sends before it executes anything (RowDescription,
 * ParseComplete, BindComplete, CloseComplete, ParameterDescription,
 * NoData). During start-up, AuthenticationOk is not an answer either (a
 * FATAL may follow it: an unknown database, too many clients), while an
 * authentication request, ParameterStatus, BackendKeyData or
 * ReadyForQuery ends the start-up call as a success. Messages read while
 * no call is open are framed and ignored; the BackendKeyData's key is kept
 * (rx__pg_key) when it comes in the read that answers the start-up. O(n).
 */
size_t rx__pg_read(struct rx_pg *s, const uint8_t *buf, size_t n,
		   enum rx_wire_event *ev, enum rx_verdict *verdict);

/*
 * rx__pg_key - the connection's backend key: the process ID and secret key
 * of its BackendKeyData (a 4-byte secret, protocol 3.0), or, on a
 * CancelRequest's connection once its 16 bytes were written, the key the
 * request names; as (pid << 32 | secret). 0 when not known (no
 * BackendKeyData seen, a longer secret of protocol 3.2). O(1).
 */
uint64_t rx__pg_key(const struct rx_pg *s);

/*
 * rx__pg_cancelled - was the last ErrorResponse judged a 57014
 * query_canceled? Then the caller may ask whether the program cancelled
 * the call itself (ADR-676). O(1).
 */
bool rx__pg_cancelled(const struct rx_pg *s);

/*
 * rx__pg_call_open - whether a call started and has no verdict yet. O(1).
 */
bool rx__pg_call_open(const struct rx_pg *s);

/*
 * rx__pg_resync - a call starts on a connection whose server bytes since
 * the last verdict were not all fed (the shim reads only what a waiting
 * call reads, ADR-408): the server's side restarts at a message boundary,
 * as it is when the client read the last answer whole. The client's side
 * and the flags are untouched. O(1).
 */
void rx__pg_resync(struct rx_pg *s);

/*
 * rx__pg_sqlstate_verdict - the verdict of an ErrorResponse's SQLSTATE
 * (ADR-402, ADR-652, ADR-676).
 * @code: the five characters of the C field (not NUL-terminated; NULL
 *        gives TRANSIENT, as does a code that is not 5 of [0-9A-Z]).
 * TRANSIENT: class 08 connection exception, 57000 and 57P01-57P03
 * (operator intervention, admin/crash shutdown, cannot_connect_now),
 * class 58 system error, class XX internal error, class F0 configuration
 * file error, 40003 statement_completion_unknown. OVERLOAD: class 53
 * insufficient resources. TIMEOUT: 57014 query_canceled (the shim makes
 * it an abandonment when the program cancelled the query itself,
 * ADR-676). ANSWERED:
 * everything else - the server worked and the caller was wrong (22, 23,
 * 28, 3D, 42, P0, ...) or lost a race the database refereed (40001
 * serialization_failure, 40P01 deadlock_detected, 55P03
 * lock_not_available: ADR-652), including classes this table does not
 * know. Thread-safe, O(1).
 */
enum rx_verdict rx__pg_sqlstate_verdict(const char *code);

#endif
