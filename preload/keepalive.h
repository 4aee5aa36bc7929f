/*
 * preload/keepalive.h - the fused cycle of a kept-alive HTTP connection
 * (keepalive.c, ADR-531): the request's first write admits the call and
 * the answer's first read settles it, each in one pass with the fd record
 * in hand, behind one cheap test; everything else - and anything rare -
 * takes the call state machine's general steps (call.h), which these
 * decide exactly as.
 */
#ifndef RESILIX_PRELOAD_KEEPALIVE_H
#define RESILIX_PRELOAD_KEEPALIVE_H

#include <stddef.h>
#include <sys/types.h>

#include "fdtable.h"

/* Which wrapper a fast path stands in for. */
enum rx_ka_how { RX_KA_WRITE, RX_KA_SEND, RX_KA_READ, RX_KA_RECV };

/*
 * rx__ka_send - the whole of write(@fd, @buf, @len) (@how RX_KA_WRITE) or
 * send(..., @flags) (RX_KA_SEND) on @fd, whose record @e the caller saw
 * idle: on a kept-alive HTTP connection a request line is admitted in one
 * pass (clock, guard, record) before the real call; anything else takes
 * the general steps (rx__write_begin, the real call, rx__write_end). Same
 * result, errno and refusals as those.
 */
ssize_t rx__ka_send(enum rx_ka_how how, int fd, struct rx_fd *e,
		    const void *buf, size_t len, int flags);

/*
 * rx__ka_more - the whole of write(@fd, @buf, @len) (@how RX_KA_WRITE) or
 * send(..., @flags) (RX_KA_SEND) on @fd, whose record @e the caller saw
 * waiting for its answer: on a new connection the request line of its
 * first request goes on with the call its connect admitted (the think
 * time skipped, HTTP claimed: ADR-192, ADR-585) in one pass; more of an
 * HTTP request needs no lock at all; anything else takes the general
 * steps. Same result and errno as those.
 */
ssize_t rx__ka_more(enum rx_ka_how how, int fd, struct rx_fd *e,
		    const void *buf, size_t len, int flags);

/*
 * rx__ka_recv - the whole of read(@fd, @buf, @len) (@how RX_KA_READ) or
 * recv(..., 0) (RX_KA_RECV) on @fd, whose record @e the caller saw in
 * phase @ph, connecting or waiting for its answer: a whole final status line in the bytes read
 * settles the call in one pass; anything else takes the general steps
 * (rx__read_begin, the real call, rx__read_end). Same result and errno.
 */
ssize_t rx__ka_recv(enum rx_ka_how how, int fd, struct rx_fd *e,
		    enum rx_fd_phase ph, void *buf, size_t len);

#endif
