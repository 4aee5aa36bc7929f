/*
 * test_proto_redis.c - the Redis protocol module (preload/proto_redis.c)
 * against real server bytes: recognising a connection (and not an HTTP
 * request), where calls start, which reply answers them, the error table
 * (ADR-404 to ADR-406), RESP3 maps and pushes, pipelines, any chunking,
 * and random bytes.
 *
 * The conversations below were recorded on loopback from redis-server
 * 7.0.15 (Debian's redis-server) started by tests/support/redis_server.sh,
 * through tests/support/wirecap.py:
 *     wirecap.py --target 127.0.0.1:PORT --log F.log -- CLIENT ARGS...
 *     wirecap.py --c-chunks NAME --log F.log [--conn N]
 * Each comment gives CLIENT ARGS ("{port}" is the proxy's port) and how
 * the server was brought to answer so. Replies no server on this machine
 * gives on demand (TRYAGAIN, CLUSTERDOWN, MOVED, RESP3 bulk errors and
 * attributes) are written from the Redis serialization protocol
 * specification and its error list.
 */
#include <stdlib.h>
#include <string.h>

#include "../support/cunit_main.h"
#include "../support/wire_replay.h"
#include "proto_redis.h"

/*
 * redis-cli -h 127.0.0.1 -p {port} ping
 */
static const uint8_t rd_ping_0[] = {
    0x2a, 0x31, 0x0d, 0x0a, 0x24, 0x34, 0x0d,
    0x0a, 0x70, 0x69, 0x6e, 0x67, 0x0d, 0x0a,
};
static const uint8_t rd_ping_1[] = {
    0x2b, 0x50, 0x4f, 0x4e, 0x47, 0x0d, 0x0a,
};
static const struct wire_chunk rd_ping[] = {{'c', rd_ping_0, sizeof(rd_ping_0)},
					    {'s', rd_ping_1, sizeof(rd_ping_1)},
					    {0, NULL, 0}};
/*
 * redis-cli -h 127.0.0.1 -p {port} nosuchcommand x
 */
static const uint8_t rd_unknown_0[] = {
    0x2a, 0x32, 0x0d, 0x0a, 0x24, 0x31, 0x33, 0x0d, 0x0a, 0x6e, 0x6f,
    0x73, 0x75, 0x63, 0x68, 0x63, 0x6f, 0x6d, 0x6d, 0x61, 0x6e, 0x64,
    0x0d, 0x0a, 0x24, 0x31, 0x0d, 0x0a, 0x78, 0x0d, 0x0a,
};
static const uint8_t rd_unknown_1[] = {
    0x2d, 0x45, 0x52, 0x52, 0x20, 0x75, 0x6e, 0x6b, 0x6e, 0x6f, 0x77, 0x6e,
    0x20, 0x63, 0x6f, 0x6d, 0x6d, 0x61, 0x6e, 0x64, 0x20, 0x27, 0x6e, 0x6f,
    0x73, 0x75, 0x63, 0x68, 0x63, 0x6f, 0x6d, 0x6d, 0x61, 0x6e, 0x64, 0x27,
    0x2c, 0x20, 0x77, 0x69, 0x74, 0x68, 0x20, 0x61, 0x72, 0x67, 0x73, 0x20,
    0x62, 0x65, 0x67, 0x69, 0x6e, 0x6e, 0x69, 0x6e, 0x67, 0x20, 0x77, 0x69,
    0x74, 0x68, 0x3a, 0x20, 0x27, 0x78, 0x27, 0x20, 0x0d, 0x0a,
};
static const struct wire_chunk rd_unknown[] = {
    {'c', rd_unknown_0, sizeof(rd_unknown_0)},
    {'s', rd_unknown_1, sizeof(rd_unknown_1)},
    {0, NULL, 0}};
/*
 * redis-cli -h 127.0.0.1 -p {port} lpush k x  (after SET k v)
 */
static const uint8_t rd_wrongtype_0[] = {
    0x2a, 0x33, 0x0d, 0x0a, 0x24, 0x35, 0x0d, 0x0a, 0x6c, 0x70,
    0x75, 0x73, 0x68, 0x0d, 0x0a, 0x24, 0x31, 0x0d, 0x0a, 0x6b,
    0x0d, 0x0a, 0x24, 0x31, 0x0d, 0x0a, 0x78, 0x0d, 0x0a,
};
static const uint8_t rd_wrongtype_1[] = {
    0x2d, 0x57, 0x52, 0x4f, 0x4e, 0x47, 0x54, 0x59, 0x50, 0x45, 0x20, 0x4f,
    0x70, 0x65, 0x72, 0x61, 0x74, 0x69, 0x6f, 0x6e, 0x20, 0x61, 0x67, 0x61,
    0x69, 0x6e, 0x73, 0x74, 0x20, 0x61, 0x20, 0x6b, 0x65, 0x79, 0x20, 0x68,
    0x6f, 0x6c, 0x64, 0x69, 0x6e, 0x67, 0x20, 0x74, 0x68, 0x65, 0x20, 0x77,
    0x72, 0x6f, 0x6e, 0x67, 0x20, 0x6b, 0x69, 0x6e, 0x64, 0x20, 0x6f, 0x66,
    0x20, 0x76, 0x61, 0x6c, 0x75, 0x65, 0x0d, 0x0a,
};
static const struct wire_chunk rd_wrongtype[] = {
    {'c', rd_wrongtype_0, sizeof(rd_wrongtype_0)},
    {'s', rd_wrongtype_1, sizeof(rd_wrongtype_1)},
    {0, NULL, 0}};
/*
 * redis-cli -h 127.0.0.1 -p {port} set a b  (after CONFIG SET maxmemory 1)
 */
static const uint8_t rd_oom_0[] = {
    0x2a, 0x33, 0x0d, 0x0a, 0x24, 0x33, 0x0d, 0x0a, 0x73,
    0x65, 0x74, 0x0d, 0x0a, 0x24, 0x31, 0x0d, 0x0a, 0x61,
    0x0d, 0x0a, 0x24, 0x31, 0x0d, 0x0a, 0x62, 0x0d, 0x0a,
};
static const uint8_t rd_oom_1[] = {
    0x2d, 0x4f, 0x4f, 0x4d, 0x20, 0x63, 0x6f, 0x6d, 0x6d, 0x61, 0x6e, 0x64,
    0x20, 0x6e, 0x6f, 0x74, 0x20, 0x61, 0x6c, 0x6c, 0x6f, 0x77, 0x65, 0x64,
    0x20, 0x77, 0x68, 0x65, 0x6e, 0x20, 0x75, 0x73, 0x65, 0x64, 0x20, 0x6d,
    0x65, 0x6d, 0x6f, 0x72, 0x79, 0x20, 0x3e, 0x20, 0x27, 0x6d, 0x61, 0x78,
    0x6d, 0x65, 0x6d, 0x6f, 0x72, 0x79, 0x27, 0x2e, 0x0d, 0x0a,
};
static const struct wire_chunk rd_oom[] = {{'c', rd_oom_0, sizeof(rd_oom_0)},
					   {'s', rd_oom_1, sizeof(rd_oom_1)},
					   {0, NULL, 0}};
/*
 * redis-cli -h 127.0.0.1 -p {port} ping  (redis_server.sh: rx_redis_start
 * --requirepass pw)
 */
static const uint8_t rd_noauth_0[] = {
    0x2a, 0x31, 0x0d, 0x0a, 0x24, 0x34, 0x0d,
    0x0a, 0x70, 0x69, 0x6e, 0x67, 0x0d, 0x0a,
};
static const uint8_t rd_noauth_1[] = {
    0x2d, 0x4e, 0x4f, 0x41, 0x55, 0x54, 0x48, 0x20, 0x41, 0x75, 0x74, 0x68,
    0x65, 0x6e, 0x74, 0x69, 0x63, 0x61, 0x74, 0x69, 0x6f, 0x6e, 0x20, 0x72,
    0x65, 0x71, 0x75, 0x69, 0x72, 0x65, 0x64, 0x2e, 0x0d, 0x0a,
};
static const struct wire_chunk rd_noauth[] = {
    {'c', rd_noauth_0, sizeof(rd_noauth_0)},
    {'s', rd_noauth_1, sizeof(rd_noauth_1)},
    {0, NULL, 0}};
/*
 * redis-cli -h 127.0.0.1 -p {port} --user default --pass nope ping
 * (--requirepass pw)
 */
static const uint8_t rd_wrongpass_0[] = {
    0x2a, 0x33, 0x0d, 0x0a, 0x24, 0x34, 0x0d, 0x0a, 0x41, 0x55,
    0x54, 0x48, 0x0d, 0x0a, 0x24, 0x37, 0x0d, 0x0a, 0x64, 0x65,
    0x66, 0x61, 0x75, 0x6c, 0x74, 0x0d, 0x0a, 0x24, 0x34, 0x0d,
    0x0a, 0x6e, 0x6f, 0x70, 0x65, 0x0d, 0x0a,
};
static const uint8_t rd_wrongpass_1[] = {
    0x2d, 0x57, 0x52, 0x4f, 0x4e, 0x47, 0x50, 0x41, 0x53, 0x53, 0x20,
    0x69, 0x6e, 0x76, 0x61, 0x6c, 0x69, 0x64, 0x20, 0x75, 0x73, 0x65,
    0x72, 0x6e, 0x61, 0x6d, 0x65, 0x2d, 0x70, 0x61, 0x73, 0x73, 0x77,
    0x6f, 0x72, 0x64, 0x20, 0x70, 0x61, 0x69, 0x72, 0x20, 0x6f, 0x72,
    0x20, 0x75, 0x73, 0x65, 0x72, 0x20, 0x69, 0x73, 0x20, 0x64, 0x69,
    0x73, 0x61, 0x62, 0x6c, 0x65, 0x64, 0x2e, 0x0d, 0x0a,
};
static const uint8_t rd_wrongpass_2[] = {
    0x2a, 0x31, 0x0d, 0x0a, 0x24, 0x34, 0x0d,
    0x0a, 0x70, 0x69, 0x6e, 0x67, 0x0d, 0x0a,
};
static const uint8_t rd_wrongpass_3[] = {
    0x2d, 0x4e, 0x4f, 0x41, 0x55, 0x54, 0x48, 0x20, 0x41, 0x75, 0x74, 0x68,
    0x65, 0x6e, 0x74, 0x69, 0x63, 0x61, 0x74, 0x69, 0x6f, 0x6e, 0x20, 0x72,
    0x65, 0x71, 0x75, 0x69, 0x72, 0x65, 0x64, 0x2e, 0x0d, 0x0a,
};
static const struct wire_chunk rd_wrongpass[] = {
    {'c', rd_wrongpass_0, sizeof(rd_wrongpass_0)},
    {'s', rd_wrongpass_1, sizeof(rd_wrongpass_1)},
    {'c', rd_wrongpass_2, sizeof(rd_wrongpass_2)},
    {'s', rd_wrongpass_3, sizeof(rd_wrongpass_3)},
    {0, NULL, 0}};
/*
 * redis-cli -h 127.0.0.1 -p {port} ping  (CONFIG SET busy-reply-threshold 100;
 * another client runs EVAL 'while true do end' 0)
 */
static const uint8_t rd_busy_0[] = {
    0x2a, 0x31, 0x0d, 0x0a, 0x24, 0x34, 0x0d,
    0x0a, 0x70, 0x69, 0x6e, 0x67, 0x0d, 0x0a,
};
static const uint8_t rd_busy_1[] = {
    0x2d, 0x42, 0x55, 0x53, 0x59, 0x20, 0x52, 0x65, 0x64, 0x69, 0x73, 0x20,
    0x69, 0x73, 0x20, 0x62, 0x75, 0x73, 0x79, 0x20, 0x72, 0x75, 0x6e, 0x6e,
    0x69, 0x6e, 0x67, 0x20, 0x61, 0x20, 0x73, 0x63, 0x72, 0x69, 0x70, 0x74,
    0x2e, 0x20, 0x59, 0x6f, 0x75, 0x20, 0x63, 0x61, 0x6e, 0x20, 0x6f, 0x6e,
    0x6c, 0x79, 0x20, 0x63, 0x61, 0x6c, 0x6c, 0x20, 0x53, 0x43, 0x52, 0x49,
    0x50, 0x54, 0x20, 0x4b, 0x49, 0x4c, 0x4c, 0x20, 0x6f, 0x72, 0x20, 0x53,
    0x48, 0x55, 0x54, 0x44, 0x4f, 0x57, 0x4e, 0x20, 0x4e, 0x4f, 0x53, 0x41,
    0x56, 0x45, 0x2e, 0x0d, 0x0a,
};
static const struct wire_chunk rd_busy[] = {{'c', rd_busy_0, sizeof(rd_busy_0)},
					    {'s', rd_busy_1, sizeof(rd_busy_1)},
					    {0, NULL, 0}};
/*
 * redis-cli -h 127.0.0.1 -p {port} ping  (a 7 MB dump.rdb of DEBUG POPULATE
 * 300000, the server started with --key-load-delay 20)
 */
static const uint8_t rd_loading_0[] = {
    0x2a, 0x31, 0x0d, 0x0a, 0x24, 0x34, 0x0d,
    0x0a, 0x70, 0x69, 0x6e, 0x67, 0x0d, 0x0a,
};
static const uint8_t rd_loading_1[] = {
    0x2d, 0x4c, 0x4f, 0x41, 0x44, 0x49, 0x4e, 0x47, 0x20, 0x52,
    0x65, 0x64, 0x69, 0x73, 0x20, 0x69, 0x73, 0x20, 0x6c, 0x6f,
    0x61, 0x64, 0x69, 0x6e, 0x67, 0x20, 0x74, 0x68, 0x65, 0x20,
    0x64, 0x61, 0x74, 0x61, 0x73, 0x65, 0x74, 0x20, 0x69, 0x6e,
    0x20, 0x6d, 0x65, 0x6d, 0x6f, 0x72, 0x79, 0x0d, 0x0a,
};
static const struct wire_chunk rd_loading[] = {
    {'c', rd_loading_0, sizeof(rd_loading_0)},
    {'s', rd_loading_1, sizeof(rd_loading_1)},
    {0, NULL, 0}};
/*
 * redis-cli -h 127.0.0.1 -p {port} set x 1  (a replica: --replicaof 127.0.0.1
 * PRIMARY_PORT)
 */
static const uint8_t rd_readonly_0[] = {
    0x2a, 0x33, 0x0d, 0x0a, 0x24, 0x33, 0x0d, 0x0a, 0x73,
    0x65, 0x74, 0x0d, 0x0a, 0x24, 0x31, 0x0d, 0x0a, 0x78,
    0x0d, 0x0a, 0x24, 0x31, 0x0d, 0x0a, 0x31, 0x0d, 0x0a,
};
static const uint8_t rd_readonly_1[] = {
    0x2d, 0x52, 0x45, 0x41, 0x44, 0x4f, 0x4e, 0x4c, 0x59, 0x20, 0x59, 0x6f,
    0x75, 0x20, 0x63, 0x61, 0x6e, 0x27, 0x74, 0x20, 0x77, 0x72, 0x69, 0x74,
    0x65, 0x20, 0x61, 0x67, 0x61, 0x69, 0x6e, 0x73, 0x74, 0x20, 0x61, 0x20,
    0x72, 0x65, 0x61, 0x64, 0x20, 0x6f, 0x6e, 0x6c, 0x79, 0x20, 0x72, 0x65,
    0x70, 0x6c, 0x69, 0x63, 0x61, 0x2e, 0x0d, 0x0a,
};
static const struct wire_chunk rd_readonly[] = {
    {'c', rd_readonly_0, sizeof(rd_readonly_0)},
    {'s', rd_readonly_1, sizeof(rd_readonly_1)},
    {0, NULL, 0}};
/*
 * redis-cli -h 127.0.0.1 -p {port} get x  (--replicaof 127.0.0.1 DEAD_PORT
 *     --replica-serve-stale-data no)
 */
static const uint8_t rd_masterdown_0[] = {
    0x2a, 0x32, 0x0d, 0x0a, 0x24, 0x33, 0x0d, 0x0a, 0x67, 0x65,
    0x74, 0x0d, 0x0a, 0x24, 0x31, 0x0d, 0x0a, 0x78, 0x0d, 0x0a,
};
static const uint8_t rd_masterdown_1[] = {
    0x2d, 0x4d, 0x41, 0x53, 0x54, 0x45, 0x52, 0x44, 0x4f, 0x57, 0x4e, 0x20,
    0x4c, 0x69, 0x6e, 0x6b, 0x20, 0x77, 0x69, 0x74, 0x68, 0x20, 0x4d, 0x41,
    0x53, 0x54, 0x45, 0x52, 0x20, 0x69, 0x73, 0x20, 0x64, 0x6f, 0x77, 0x6e,
    0x20, 0x61, 0x6e, 0x64, 0x20, 0x72, 0x65, 0x70, 0x6c, 0x69, 0x63, 0x61,
    0x2d, 0x73, 0x65, 0x72, 0x76, 0x65, 0x2d, 0x73, 0x74, 0x61, 0x6c, 0x65,
    0x2d, 0x64, 0x61, 0x74, 0x61, 0x20, 0x69, 0x73, 0x20, 0x73, 0x65, 0x74,
    0x20, 0x74, 0x6f, 0x20, 0x27, 0x6e, 0x6f, 0x27, 0x2e, 0x0d, 0x0a,
};
static const struct wire_chunk rd_masterdown[] = {
    {'c', rd_masterdown_0, sizeof(rd_masterdown_0)},
    {'s', rd_masterdown_1, sizeof(rd_masterdown_1)},
    {0, NULL, 0}};
/*
 * redis-cli -h 127.0.0.1 -p {port} ping  (--maxclients 2, two other clients
 * connected)
 */
static const uint8_t rd_maxclients_0[] = {
    0x2a, 0x31, 0x0d, 0x0a, 0x24, 0x34, 0x0d,
    0x0a, 0x70, 0x69, 0x6e, 0x67, 0x0d, 0x0a,
};
static const uint8_t rd_maxclients_1[] = {
    0x2d, 0x45, 0x52, 0x52, 0x20, 0x6d, 0x61, 0x78, 0x20, 0x6e, 0x75, 0x6d,
    0x62, 0x65, 0x72, 0x20, 0x6f, 0x66, 0x20, 0x63, 0x6c, 0x69, 0x65, 0x6e,
    0x74, 0x73, 0x20, 0x72, 0x65, 0x61, 0x63, 0x68, 0x65, 0x64, 0x0d, 0x0a,
};
static const struct wire_chunk rd_maxclients[] = {
    {'c', rd_maxclients_0, sizeof(rd_maxclients_0)},
    {'s', rd_maxclients_1, sizeof(rd_maxclients_1)},
    {0, NULL, 0}};
/*
 * redis-cli -3 -h 127.0.0.1 -p {port} hello 3  (redis-cli sends HELLO 3 itself
 *     first: two calls, each answered by a RESP3 map)
 */
static const uint8_t rd_resp3_0[] = {
    0x2a, 0x32, 0x0d, 0x0a, 0x24, 0x35, 0x0d, 0x0a, 0x48, 0x45, 0x4c,
    0x4c, 0x4f, 0x0d, 0x0a, 0x24, 0x31, 0x0d, 0x0a, 0x33, 0x0d, 0x0a,
};
static const uint8_t rd_resp3_1[] = {
    0x25, 0x37, 0x0d, 0x0a, 0x24, 0x36, 0x0d, 0x0a, 0x73, 0x65, 0x72, 0x76,
    0x65, 0x72, 0x0d, 0x0a, 0x24, 0x35, 0x0d, 0x0a, 0x72, 0x65, 0x64, 0x69,
    0x73, 0x0d, 0x0a, 0x24, 0x37, 0x0d, 0x0a, 0x76, 0x65, 0x72, 0x73, 0x69,
    0x6f, 0x6e, 0x0d, 0x0a, 0x24, 0x36, 0x0d, 0x0a, 0x37, 0x2e, 0x30, 0x2e,
    0x31, 0x35, 0x0d, 0x0a, 0x24, 0x35, 0x0d, 0x0a, 0x70, 0x72, 0x6f, 0x74,
    0x6f, 0x0d, 0x0a, 0x3a, 0x33, 0x0d, 0x0a, 0x24, 0x32, 0x0d, 0x0a, 0x69,
    0x64, 0x0d, 0x0a, 0x3a, 0x38, 0x0d, 0x0a, 0x24, 0x34, 0x0d, 0x0a, 0x6d,
    0x6f, 0x64, 0x65, 0x0d, 0x0a, 0x24, 0x31, 0x30, 0x0d, 0x0a, 0x73, 0x74,
    0x61, 0x6e, 0x64, 0x61, 0x6c, 0x6f, 0x6e, 0x65, 0x0d, 0x0a, 0x24, 0x34,
    0x0d, 0x0a, 0x72, 0x6f, 0x6c, 0x65, 0x0d, 0x0a, 0x24, 0x36, 0x0d, 0x0a,
    0x6d, 0x61, 0x73, 0x74, 0x65, 0x72, 0x0d, 0x0a, 0x24, 0x37, 0x0d, 0x0a,
    0x6d, 0x6f, 0x64, 0x75, 0x6c, 0x65, 0x73, 0x0d, 0x0a, 0x2a, 0x30, 0x0d,
    0x0a,
};
static const uint8_t rd_resp3_2[] = {
    0x2a, 0x32, 0x0d, 0x0a, 0x24, 0x35, 0x0d, 0x0a, 0x68, 0x65, 0x6c,
    0x6c, 0x6f, 0x0d, 0x0a, 0x24, 0x31, 0x0d, 0x0a, 0x33, 0x0d, 0x0a,
};
static const uint8_t rd_resp3_3[] = {
    0x25, 0x37, 0x0d, 0x0a, 0x24, 0x36, 0x0d, 0x0a, 0x73, 0x65, 0x72, 0x76,
    0x65, 0x72, 0x0d, 0x0a, 0x24, 0x35, 0x0d, 0x0a, 0x72, 0x65, 0x64, 0x69,
    0x73, 0x0d, 0x0a, 0x24, 0x37, 0x0d, 0x0a, 0x76, 0x65, 0x72, 0x73, 0x69,
    0x6f, 0x6e, 0x0d, 0x0a, 0x24, 0x36, 0x0d, 0x0a, 0x37, 0x2e, 0x30, 0x2e,
    0x31, 0x35, 0x0d, 0x0a, 0x24, 0x35, 0x0d, 0x0a, 0x70, 0x72, 0x6f, 0x74,
    0x6f, 0x0d, 0x0a, 0x3a, 0x33, 0x0d, 0x0a, 0x24, 0x32, 0x0d, 0x0a, 0x69,
    0x64, 0x0d, 0x0a, 0x3a, 0x38, 0x0d, 0x0a, 0x24, 0x34, 0x0d, 0x0a, 0x6d,
    0x6f, 0x64, 0x65, 0x0d, 0x0a, 0x24, 0x31, 0x30, 0x0d, 0x0a, 0x73, 0x74,
    0x61, 0x6e, 0x64, 0x61, 0x6c, 0x6f, 0x6e, 0x65, 0x0d, 0x0a, 0x24, 0x34,
    0x0d, 0x0a, 0x72, 0x6f, 0x6c, 0x65, 0x0d, 0x0a, 0x24, 0x36, 0x0d, 0x0a,
    0x6d, 0x61, 0x73, 0x74, 0x65, 0x72, 0x0d, 0x0a, 0x24, 0x37, 0x0d, 0x0a,
    0x6d, 0x6f, 0x64, 0x75, 0x6c, 0x65, 0x73, 0x0d, 0x0a, 0x2a, 0x30, 0x0d,
    0x0a,
};
static const struct wire_chunk rd_resp3[] = {
    {'c', rd_resp3_0, sizeof(rd_resp3_0)},
    {'s', rd_resp3_1, sizeof(rd_resp3_1)},
    {'c', rd_resp3_2, sizeof(rd_resp3_2)},
    {'s', rd_resp3_3, sizeof(rd_resp3_3)},
    {0, NULL, 0}};
/*
 * python3, RESP arrays on one connection: HELLO 3; CLIENT TRACKING on; GET k;
 *     (another connection: SET k w -> an invalidation push); PING;
 *     SUBSCRIBE ch ch2 (two confirmation pushes); (PUBLISH ch hello -> a
 *     message push); PING
 */
static const uint8_t rd_push_0[] = {
    0x2a, 0x32, 0x0d, 0x0a, 0x24, 0x35, 0x0d, 0x0a, 0x48, 0x45, 0x4c,
    0x4c, 0x4f, 0x0d, 0x0a, 0x24, 0x31, 0x0d, 0x0a, 0x33, 0x0d, 0x0a,
};
static const uint8_t rd_push_1[] = {
    0x25, 0x37, 0x0d, 0x0a, 0x24, 0x36, 0x0d, 0x0a, 0x73, 0x65, 0x72, 0x76,
    0x65, 0x72, 0x0d, 0x0a, 0x24, 0x35, 0x0d, 0x0a, 0x72, 0x65, 0x64, 0x69,
    0x73, 0x0d, 0x0a, 0x24, 0x37, 0x0d, 0x0a, 0x76, 0x65, 0x72, 0x73, 0x69,
    0x6f, 0x6e, 0x0d, 0x0a, 0x24, 0x36, 0x0d, 0x0a, 0x37, 0x2e, 0x30, 0x2e,
    0x31, 0x35, 0x0d, 0x0a, 0x24, 0x35, 0x0d, 0x0a, 0x70, 0x72, 0x6f, 0x74,
    0x6f, 0x0d, 0x0a, 0x3a, 0x33, 0x0d, 0x0a, 0x24, 0x32, 0x0d, 0x0a, 0x69,
    0x64, 0x0d, 0x0a, 0x3a, 0x31, 0x30, 0x0d, 0x0a, 0x24, 0x34, 0x0d, 0x0a,
    0x6d, 0x6f, 0x64, 0x65, 0x0d, 0x0a, 0x24, 0x31, 0x30, 0x0d, 0x0a, 0x73,
    0x74, 0x61, 0x6e, 0x64, 0x61, 0x6c, 0x6f, 0x6e, 0x65, 0x0d, 0x0a, 0x24,
    0x34, 0x0d, 0x0a, 0x72, 0x6f, 0x6c, 0x65, 0x0d, 0x0a, 0x24, 0x36, 0x0d,
    0x0a, 0x6d, 0x61, 0x73, 0x74, 0x65, 0x72, 0x0d, 0x0a, 0x24, 0x37, 0x0d,
    0x0a, 0x6d, 0x6f, 0x64, 0x75, 0x6c, 0x65, 0x73, 0x0d, 0x0a, 0x2a, 0x30,
    0x0d, 0x0a,
};
static const uint8_t rd_push_2[] = {
    0x2a, 0x33, 0x0d, 0x0a, 0x24, 0x36, 0x0d, 0x0a, 0x43, 0x4c,
    0x49, 0x45, 0x4e, 0x54, 0x0d, 0x0a, 0x24, 0x38, 0x0d, 0x0a,
    0x54, 0x52, 0x41, 0x43, 0x4b, 0x49, 0x4e, 0x47, 0x0d, 0x0a,
    0x24, 0x32, 0x0d, 0x0a, 0x6f, 0x6e, 0x0d, 0x0a,
};
static const uint8_t rd_push_3[] = {
    0x2b, 0x4f, 0x4b, 0x0d, 0x0a,
};
static const uint8_t rd_push_4[] = {
    0x2a, 0x32, 0x0d, 0x0a, 0x24, 0x33, 0x0d, 0x0a, 0x47, 0x45,
    0x54, 0x0d, 0x0a, 0x24, 0x31, 0x0d, 0x0a, 0x6b, 0x0d, 0x0a,
};
static const uint8_t rd_push_5[] = {
    0x24, 0x31, 0x0d, 0x0a, 0x76, 0x0d, 0x0a,
};
static const uint8_t rd_push_6[] = {
    0x3e, 0x32, 0x0d, 0x0a, 0x24, 0x31, 0x30, 0x0d, 0x0a, 0x69, 0x6e,
    0x76, 0x61, 0x6c, 0x69, 0x64, 0x61, 0x74, 0x65, 0x0d, 0x0a, 0x2a,
    0x31, 0x0d, 0x0a, 0x24, 0x31, 0x0d, 0x0a, 0x6b, 0x0d, 0x0a,
};
static const uint8_t rd_push_7[] = {
    0x2a, 0x31, 0x0d, 0x0a, 0x24, 0x34, 0x0d,
    0x0a, 0x50, 0x49, 0x4e, 0x47, 0x0d, 0x0a,
};
static const uint8_t rd_push_8[] = {
    0x2b, 0x50, 0x4f, 0x4e, 0x47, 0x0d, 0x0a,
};
static const uint8_t rd_push_9[] = {
    0x2a, 0x33, 0x0d, 0x0a, 0x24, 0x39, 0x0d, 0x0a, 0x53, 0x55, 0x42, 0x53,
    0x43, 0x52, 0x49, 0x42, 0x45, 0x0d, 0x0a, 0x24, 0x32, 0x0d, 0x0a, 0x63,
    0x68, 0x0d, 0x0a, 0x24, 0x33, 0x0d, 0x0a, 0x63, 0x68, 0x32, 0x0d, 0x0a,
};
static const uint8_t rd_push_10[] = {
    0x3e, 0x33, 0x0d, 0x0a, 0x24, 0x39, 0x0d, 0x0a, 0x73, 0x75, 0x62,
    0x73, 0x63, 0x72, 0x69, 0x62, 0x65, 0x0d, 0x0a, 0x24, 0x32, 0x0d,
    0x0a, 0x63, 0x68, 0x0d, 0x0a, 0x3a, 0x31, 0x0d, 0x0a, 0x3e, 0x33,
    0x0d, 0x0a, 0x24, 0x39, 0x0d, 0x0a, 0x73, 0x75, 0x62, 0x73, 0x63,
    0x72, 0x69, 0x62, 0x65, 0x0d, 0x0a, 0x24, 0x33, 0x0d, 0x0a, 0x63,
    0x68, 0x32, 0x0d, 0x0a, 0x3a, 0x32, 0x0d, 0x0a,
};
static const uint8_t rd_push_11[] = {
    0x3e, 0x33, 0x0d, 0x0a, 0x24, 0x37, 0x0d, 0x0a, 0x6d, 0x65, 0x73, 0x73,
    0x61, 0x67, 0x65, 0x0d, 0x0a, 0x24, 0x32, 0x0d, 0x0a, 0x63, 0x68, 0x0d,
    0x0a, 0x24, 0x35, 0x0d, 0x0a, 0x68, 0x65, 0x6c, 0x6c, 0x6f, 0x0d, 0x0a,
};
static const uint8_t rd_push_12[] = {
    0x2a, 0x31, 0x0d, 0x0a, 0x24, 0x34, 0x0d,
    0x0a, 0x50, 0x49, 0x4e, 0x47, 0x0d, 0x0a,
};
static const uint8_t rd_push_13[] = {
    0x2b, 0x50, 0x4f, 0x4e, 0x47, 0x0d, 0x0a,
};
static const struct wire_chunk rd_push[] = {
    {'c', rd_push_0, sizeof(rd_push_0)},
    {'s', rd_push_1, sizeof(rd_push_1)},
    {'c', rd_push_2, sizeof(rd_push_2)},
    {'s', rd_push_3, sizeof(rd_push_3)},
    {'c', rd_push_4, sizeof(rd_push_4)},
    {'s', rd_push_5, sizeof(rd_push_5)},
    {'s', rd_push_6, sizeof(rd_push_6)},
    {'c', rd_push_7, sizeof(rd_push_7)},
    {'s', rd_push_8, sizeof(rd_push_8)},
    {'c', rd_push_9, sizeof(rd_push_9)},
    {'s', rd_push_10, sizeof(rd_push_10)},
    {'s', rd_push_11, sizeof(rd_push_11)},
    {'c', rd_push_12, sizeof(rd_push_12)},
    {'s', rd_push_13, sizeof(rd_push_13)},
    {0, NULL, 0}};
/*
 * printf 'SET a 1\r\nGET a\r\nINCR a\r\nINCR k\r\n' | redis-cli -h 127.0.0.1 -p
 * {port} --pipe (inline commands and redis-cli's ECHO sentinel in one write; k
 * holds a string, so the fourth reply is an error)
 */
static const uint8_t rd_pipe_0[] = {
    0x53, 0x45, 0x54, 0x20, 0x61, 0x20, 0x31, 0x0d, 0x0a, 0x47, 0x45,
    0x54, 0x20, 0x61, 0x0d, 0x0a, 0x49, 0x4e, 0x43, 0x52, 0x20, 0x61,
    0x0d, 0x0a, 0x49, 0x4e, 0x43, 0x52, 0x20, 0x6b, 0x0d, 0x0a, 0x0d,
    0x0a, 0x2a, 0x32, 0x0d, 0x0a, 0x24, 0x34, 0x0d, 0x0a, 0x45, 0x43,
    0x48, 0x4f, 0x0d, 0x0a, 0x24, 0x32, 0x30, 0x0d, 0x0a, 0xac, 0xf8,
    0xae, 0x1f, 0xe7, 0x78, 0x16, 0x36, 0xf4, 0xf5, 0xb2, 0xed, 0x77,
    0x6c, 0x5a, 0xcc, 0x90, 0x03, 0x38, 0x05, 0x0d, 0x0a,
};
static const uint8_t rd_pipe_1[] = {
    0x2b, 0x4f, 0x4b, 0x0d, 0x0a, 0x24, 0x31, 0x0d, 0x0a, 0x31, 0x0d, 0x0a,
    0x3a, 0x32, 0x0d, 0x0a, 0x2d, 0x45, 0x52, 0x52, 0x20, 0x76, 0x61, 0x6c,
    0x75, 0x65, 0x20, 0x69, 0x73, 0x20, 0x6e, 0x6f, 0x74, 0x20, 0x61, 0x6e,
    0x20, 0x69, 0x6e, 0x74, 0x65, 0x67, 0x65, 0x72, 0x20, 0x6f, 0x72, 0x20,
    0x6f, 0x75, 0x74, 0x20, 0x6f, 0x66, 0x20, 0x72, 0x61, 0x6e, 0x67, 0x65,
    0x0d, 0x0a, 0x24, 0x32, 0x30, 0x0d, 0x0a, 0xac, 0xf8, 0xae, 0x1f, 0xe7,
    0x78, 0x16, 0x36, 0xf4, 0xf5, 0xb2, 0xed, 0x77, 0x6c, 0x5a, 0xcc, 0x90,
    0x03, 0x38, 0x05, 0x0d, 0x0a,
};
static const struct wire_chunk rd_pipe[] = {{'c', rd_pipe_0, sizeof(rd_pipe_0)},
					    {'s', rd_pipe_1, sizeof(rd_pipe_1)},
					    {0, NULL, 0}};
/*
 * python3: 'AUTH pw\r\n\r\nPING\r\n' in one write, as telnet users type it
 *     (--requirepass pw)
 */
static const uint8_t rd_inline_0[] = {
    0x41, 0x55, 0x54, 0x48, 0x20, 0x70, 0x77, 0x0d, 0x0a,
    0x0d, 0x0a, 0x50, 0x49, 0x4e, 0x47, 0x0d, 0x0a,
};
static const uint8_t rd_inline_1[] = {
    0x2b, 0x4f, 0x4b, 0x0d, 0x0a, 0x2b, 0x50, 0x4f, 0x4e, 0x47, 0x0d, 0x0a,
};
static const struct wire_chunk rd_inline[] = {
    {'c', rd_inline_0, sizeof(rd_inline_0)},
    {'s', rd_inline_1, sizeof(rd_inline_1)},
    {0, NULL, 0}};

static void op_init(void *st)
{
	rx__redis_init(st);
}

static size_t op_write(void *st, const uint8_t *b, size_t n,
		       enum rx_wire_event *ev)
{
	return rx__redis_write(st, b, n, ev);
}

static size_t op_read(void *st, const uint8_t *b, size_t n,
		      enum rx_wire_event *ev, enum rx_verdict *v)
{
	return rx__redis_read(st, b, n, ev, v);
}

static const struct wire_ops redis_ops = {op_init, op_write, op_read};

/* The events of @conv, the same for whole chunks and for pieces of 1, 2,
 * 3, 5, 7, 13 and 64 bytes. */
static void expect(const struct wire_chunk *conv, const char *want)
{
	static const size_t steps[] = {0, 1, 2, 3, 5, 7, 13, 64};
	struct rx_redis st;
	char got[64];
	size_t i;

	for (i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		wire_replay(&redis_ops, &st, conv, steps[i], got, sizeof(got));
		if (strcmp(got, want) != 0)
			fprintf(stderr, "step %zu: got \"%s\", want \"%s\"\n",
				steps[i], got, want);
		CU_ASSERT_STRING_EQUAL(got, want);
	}
	CU_ASSERT_EQUAL(wire_breaches, 0);
}

/* A command, then @reply (text) from the server: the events. */
static void expect_reply(const char *reply, const char *want)
{
	static const uint8_t ping[] = "*1\r\n$4\r\nPING\r\n";
	const struct wire_chunk conv[] = {
	    {'c', ping, sizeof(ping) - 1},
	    {'s', (const uint8_t *)reply, strlen(reply)},
	    {0, NULL, 0}};

	expect(conv, want);
}

static void test_state_size(void)
{
	/* The framed adapter's wide slot holds it and one byte more. */
	CU_ASSERT(sizeof(struct rx_redis) <= 40);
}

static enum rx_wire_claim claim(const char *s)
{
	return rx__redis_claim((const uint8_t *)s, strlen(s));
}

static void test_claim(void)
{
	static const uint8_t startup[] = {0, 0, 0, 8, 4, 0xd2, 0x16, 0x2f};
	char longline[600];

	CU_ASSERT_EQUAL(claim("*1\r\n$4\r\nPING\r\n"), RX_WIRE_CLAIM_YES);
	CU_ASSERT_EQUAL(claim("*3\r\n"), RX_WIRE_CLAIM_YES);
	CU_ASSERT_EQUAL(claim("*"), RX_WIRE_CLAIM_MORE);
	CU_ASSERT_EQUAL(claim("*0\r\n"), RX_WIRE_CLAIM_NO);
	CU_ASSERT_EQUAL(claim("*x"), RX_WIRE_CLAIM_NO);
	CU_ASSERT_EQUAL(claim("PING\r\n"), RX_WIRE_CLAIM_YES);
	CU_ASSERT_EQUAL(claim("ping\n"), RX_WIRE_CLAIM_YES);
	CU_ASSERT_EQUAL(claim("GET key\r\n"), RX_WIRE_CLAIM_YES);
	CU_ASSERT_EQUAL(claim("JSON.GET doc $\r\n"), RX_WIRE_CLAIM_YES);
	CU_ASSERT_EQUAL(claim("PIN"), RX_WIRE_CLAIM_MORE);
	CU_ASSERT_EQUAL(claim("SET k v"), RX_WIRE_CLAIM_MORE);
	/* HTTP request lines: never Redis, whole or in pieces. */
	CU_ASSERT_EQUAL(claim("GET / HTTP/1.1\r\nHost: a\r\n\r\n"),
			RX_WIRE_CLAIM_NO);
	CU_ASSERT_EQUAL(claim("GET / HTTP/1."), RX_WIRE_CLAIM_NO);
	CU_ASSERT_EQUAL(claim("POST /x HTTP/1.0\r\n"), RX_WIRE_CLAIM_NO);
	CU_ASSERT_EQUAL(claim("GET http://a/ HTTP/1.1\r\n"), RX_WIRE_CLAIM_NO);
	CU_ASSERT_EQUAL(claim("GET / HT"), RX_WIRE_CLAIM_MORE);
	/* Not a command name. */
	CU_ASSERT_EQUAL(claim("{\"a\":1}\n"), RX_WIRE_CLAIM_NO);
	CU_ASSERT_EQUAL(claim("1PING\r\n"), RX_WIRE_CLAIM_NO);
	CU_ASSERT_EQUAL(claim("PI/NG\r\n"), RX_WIRE_CLAIM_NO);
	CU_ASSERT_EQUAL(claim("\x16\x03\x01"), RX_WIRE_CLAIM_NO);
	CU_ASSERT_EQUAL(rx__redis_claim(startup, 8), RX_WIRE_CLAIM_NO);
	CU_ASSERT_EQUAL(claim("ABCDEFGHIJKLMNOPQRSTUVWXYZABCDEFGH x\r\n"),
			RX_WIRE_CLAIM_NO);
	/* A line that never ends within 512 bytes. */
	memset(longline, 'a', sizeof(longline) - 1);
	longline[3] = ' ';
	longline[sizeof(longline) - 1] = 0;
	CU_ASSERT_EQUAL(claim(longline), RX_WIRE_CLAIM_NO);
	CU_ASSERT_EQUAL(rx__redis_claim(NULL, 0), RX_WIRE_CLAIM_MORE);
	/* Every recorded client's first write is claimed. */
	CU_ASSERT_EQUAL(rx__redis_claim(rd_ping[0].bytes, rd_ping[0].len),
			RX_WIRE_CLAIM_YES);
	CU_ASSERT_EQUAL(rx__redis_claim(rd_pipe[0].bytes, rd_pipe[0].len),
			RX_WIRE_CLAIM_YES);
	CU_ASSERT_EQUAL(rx__redis_claim(rd_inline[0].bytes, rd_inline[0].len),
			RX_WIRE_CLAIM_YES);
}

static void test_error_table(void)
{
	static const struct {
		const char *text;
		enum rx_verdict v;
	} t[] = {
	    {"ERR unknown command 'x'", RX_ANSWERED},
	    {"WRONGTYPE Operation against a key", RX_ANSWERED},
	    {"NOAUTH Authentication required.", RX_ANSWERED},
	    {"WRONGPASS invalid username-password pair", RX_ANSWERED},
	    {"NOPERM this user has no permissions", RX_ANSWERED},
	    {"NOSCRIPT No matching script.", RX_ANSWERED},
	    {"EXECABORT Transaction discarded", RX_ANSWERED},
	    {"MOVED 3999 127.0.0.1:6381", RX_ANSWERED},
	    {"ASK 3999 127.0.0.1:6381", RX_ANSWERED},
	    {"CROSSSLOT Keys in request don't hash", RX_ANSWERED},
	    {"BUSYGROUP Consumer Group name already exists", RX_ANSWERED},
	    {"BUSYKEY Target key name already exists.", RX_ANSWERED},
	    {"NOPROTO unsupported protocol version", RX_ANSWERED},
	    {"SOMENEWWORD x", RX_ANSWERED},
	    {"", RX_ANSWERED},
	    {"LOADING Redis is loading the dataset in memory", RX_TRANSIENT},
	    {"MASTERDOWN Link with MASTER is down", RX_TRANSIENT},
	    {"TRYAGAIN Multiple keys request during rehashing", RX_TRANSIENT},
	    {"CLUSTERDOWN The cluster is down", RX_TRANSIENT},
	    {"READONLY You can't write against a read only replica.",
	     RX_TRANSIENT},
	    {"NOREPLICAS Not enough good replicas to write.", RX_TRANSIENT},
	    {"MISCONF Redis is configured to save RDB snapshots", RX_TRANSIENT},
	    {"BUSY Redis is busy running a script.", RX_OVERLOAD},
	    {"BUSY", RX_OVERLOAD},
	    {"OOM command not allowed when used memory > 'maxmemory'.",
	     RX_OVERLOAD},
	    {"ERR max number of clients reached", RX_OVERLOAD},
	    {"ERR max number of clients", RX_ANSWERED},
	    {"ERR max number of clients reachedX", RX_ANSWERED},
	    {"OOMX", RX_ANSWERED},
	    {"oom lower case", RX_ANSWERED},
	};
	size_t i;

	for (i = 0; i < sizeof(t) / sizeof(t[0]); i++) {
		if (rx__redis_error_verdict(t[i].text, strlen(t[i].text)) !=
		    t[i].v)
			fprintf(stderr, "%s\n", t[i].text);
		CU_ASSERT_EQUAL(
		    rx__redis_error_verdict(t[i].text, strlen(t[i].text)),
		    t[i].v);
	}
}

static void test_real_errors(void)
{
	expect(rd_ping, ">s");
	expect(rd_unknown, ">a");
	expect(rd_wrongtype, ">a");
	expect(rd_noauth, ">a");
	expect(rd_wrongpass, ">a>a");
	expect(rd_oom, ">o");
	expect(rd_busy, ">o");
	expect(rd_maxclients, ">o");
	expect(rd_loading, ">t");
	expect(rd_readonly, ">t");
	expect(rd_masterdown, ">t");
}

static void test_resp3_and_pushes(void)
{
	/* HELLO 3 answered by a map. */
	expect(rd_resp3, ">s>s");
	/* The invalidation and message pushes arrive while no call is
	 * open and are skipped; SUBSCRIBE is answered by its confirmation
	 * push; every call is decided by its own reply. */
	expect(rd_push, ">s>s>s>s>s>s");
	/* A push (nested aggregate) before the reply is skipped whole: the
	 * error after it decides. */
	expect_reply(">2\r\n$10\r\ninvalidate\r\n*1\r\n$1\r\nk\r\n"
		     "-LOADING Redis is loading the dataset in memory\r\n",
		     ">t");
	expect_reply(">3\r\n$7\r\nmessage\r\n$2\r\nch\r\n$5\r\nhello\r\n"
		     "+PONG\r\n",
		     ">s");
	expect_reply(">0\r\n-OOM command not allowed\r\n", ">o");
	/* RESP3 bulk errors: the word is in the payload. */
	expect_reply("!21\r\nSYNTAX invalid syntax\r\n", ">a");
	expect_reply("!41\r\nCLUSTERDOWN The cluster is down right now\r\n",
		     ">t");
	expect_reply("!4\r\nBUSY\r\n", ">o");
	expect_reply("!0\r\n\r\n", ">a");
	/* An attribute decorates the reply after it: skipped whole (the
	 * specification's example), the reply decides. */
	expect_reply("|1\r\n+key-popularity\r\n%2\r\n$1\r\na\r\n,0.1923\r\n"
		     "$1\r\nb\r\n,0.0012\r\n*2\r\n:2039123\r\n:9543892\r\n",
		     ">s");
	expect_reply("|1\r\n+a\r\n+b\r\n-TRYAGAIN Multiple keys\r\n", ">t");
	/* Other RESP3 types are successes. */
	expect_reply("_\r\n", ">s");
	expect_reply("#t\r\n", ">s");
	expect_reply(",1.23\r\n", ">s");
	expect_reply("(3492890328409238509324850943850943825024385\r\n", ">s");
	expect_reply("=15\r\ntxt:Some string\r\n", ">s");
	expect_reply("~2\r\n+a\r\n+b\r\n", ">s");
	expect_reply("$-1\r\n", ">s");
	expect_reply("*-1\r\n", ">s");
	/* Documented replies of a cluster. */
	expect_reply("-MOVED 3999 127.0.0.1:6381\r\n", ">a");
	expect_reply("-ASK 3999 127.0.0.1:6381\r\n", ">a");
	expect_reply("-CLUSTERDOWN The cluster is down\r\n", ">t");
	/* Not RESP: a stray byte; a streamed string, whose type byte has
	 * already decided the call when its "?" stops the module. */
	expect_reply("$?\r\n;4\r\nHell\r\n;0\r\n", ">s?");
	expect_reply("HTTP/1.1 200 OK\r\n", ">?");
}

static void test_pipelines(void)
{
	/* Five inline commands in one write (redis-cli --pipe): one call,
	 * decided by the first reply; the error of the fourth is in the
	 * same batch and not judged (ADR-404). */
	expect(rd_pipe, ">s");
	/* A blank line is no command: AUTH opens the call, PING joins. */
	expect(rd_inline, ">s");
	/* The rest of a batch read after the next command was written is
	 * skipped only in so far as it began before: here the client
	 * writes a second command after the first reply's first bytes. */
	{
		static const uint8_t c1[] = "*1\r\n$4\r\nPING\r\n";
		static const uint8_t s1[] = "$5\r\nhel";
		static const uint8_t s2[] = "lo\r\n-LOADING x\r\n";
		const struct wire_chunk conv[] = {{'c', c1, sizeof(c1) - 1},
						  {'s', s1, sizeof(s1) - 1},
						  {'c', c1, sizeof(c1) - 1},
						  {'s', s2, sizeof(s2) - 1},
						  {0, NULL, 0}};

		expect(conv, ">s>t");
	}
}

static void test_what_starts_a_call(void)
{
	struct rx_redis st;
	enum rx_wire_event ev;
	static const char big[] = "*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$10\r\n";
	static const char payload[] = "*1\r\n$4\r\nX\r\n";

	rx__redis_init(&st);
	/* An empty array and blank lines are no command. */
	CU_ASSERT_EQUAL(
	    rx__redis_write(&st, (const uint8_t *)"*0\r\n\r\n  \r\n", 10, &ev),
	    10);
	CU_ASSERT_EQUAL(ev, RX_WIRE_MORE);
	CU_ASSERT_FALSE(rx__redis_call_open(&st));
	/* START at the end of the header. */
	CU_ASSERT_EQUAL(
	    rx__redis_write(&st, (const uint8_t *)big, sizeof(big) - 1, &ev),
	    4);
	CU_ASSERT_EQUAL(ev, RX_WIRE_START);
	CU_ASSERT_EQUAL(rx__redis_write(&st, (const uint8_t *)big + 4,
					sizeof(big) - 5, &ev),
			sizeof(big) - 5);
	CU_ASSERT_EQUAL(ev, RX_WIRE_MORE);
	/* A payload that looks like a command is a payload: the framer
	 * knows its length. */
	CU_ASSERT_EQUAL(rx__redis_write(&st, (const uint8_t *)payload, 10, &ev),
			10);
	CU_ASSERT_EQUAL(ev, RX_WIRE_MORE);
	CU_ASSERT_EQUAL(rx__redis_write(&st, (const uint8_t *)"\r\n", 2, &ev),
			2);
	CU_ASSERT_TRUE(rx__redis_call_open(&st));
}

/* @cmd written in pieces of @step bytes (0: whole) on a fresh
 * connection: does its call block on purpose (ADR-650)? */
static bool blocks(const char *cmd, size_t step)
{
	struct rx_redis st;
	enum rx_wire_event ev;
	const uint8_t *p = (const uint8_t *)cmd;
	size_t left = strlen(cmd), k;

	rx__redis_init(&st);
	while (left > 0) {
		size_t n = step == 0 || step > left ? left : step;

		k = rx__redis_write(&st, p, n, &ev);
		CU_ASSERT(k > 0 && k <= n);
		CU_ASSERT(ev == RX_WIRE_MORE || ev == RX_WIRE_START);
		p += k;
		left -= k;
	}
	return rx__redis_blocking(&st);
}

static void expect_blocks(const char *cmd, bool want)
{
	static const size_t steps[] = {0, 1, 2, 3, 5, 7, 13, 64};
	size_t i;

	for (i = 0; i < sizeof(steps) / sizeof(steps[0]); i++) {
		bool got = blocks(cmd, steps[i]);

		if (got != want)
			fprintf(stderr, "step %zu: \"%s\" blocks=%d\n", steps[i],
				cmd, got);
		CU_ASSERT_EQUAL(got, want);
	}
}

static void test_blocking_commands(void)
{
	/* As redis-py and redis-cli write them (any case). */
	expect_blocks("*3\r\n$5\r\nBLPOP\r\n$1\r\nq\r\n$1\r\n1\r\n", true);
	expect_blocks("*3\r\n$5\r\nblpop\r\n$1\r\nq\r\n$1\r\n0\r\n", true);
	expect_blocks("*3\r\n$5\r\nBRPOP\r\n$1\r\nq\r\n$1\r\n1\r\n", true);
	expect_blocks("*4\r\n$10\r\nBRPOPLPUSH\r\n$1\r\na\r\n$1\r\nb\r\n"
		      "$1\r\n1\r\n",
		      true);
	expect_blocks("*3\r\n$8\r\nBZPOPMIN\r\n$1\r\nz\r\n$1\r\n1\r\n", true);
	expect_blocks("*3\r\n$4\r\nWAIT\r\n$1\r\n1\r\n$3\r\n100\r\n", true);
	expect_blocks("BLPOP q 1\r\n", true);
	expect_blocks("  brpop q 1\n", true);
	/* XREAD only with BLOCK. */
	expect_blocks("*6\r\n$5\r\nXREAD\r\n$5\r\nblock\r\n$4\r\n1000\r\n"
		      "$7\r\nSTREAMS\r\n$1\r\ns\r\n$1\r\n$\r\n",
		      true);
	expect_blocks("*4\r\n$5\r\nXREAD\r\n$7\r\nSTREAMS\r\n$1\r\ns\r\n"
		      "$1\r\n0\r\n",
		      false);
	/* Names that only begin or end like one, and other commands. */
	expect_blocks("*2\r\n$4\r\nBLPO\r\n$1\r\nq\r\n", false);
	expect_blocks("*2\r\n$6\r\nBLPOPX\r\n$1\r\nq\r\n", false);
	expect_blocks("*2\r\n$4\r\nLPOP\r\n$1\r\nq\r\n", false);
	expect_blocks("*3\r\n$3\r\nSET\r\n$5\r\nBLPOP\r\n$5\r\nBLOCK\r\n",
		      false);
	expect_blocks("WAITING\r\n", false);
	expect_blocks("PING\r\n", false);
	/* Only the command that opens the call: a BLPOP that joins a
	 * batch waits after the batch's first answer, which decides. */
	expect_blocks("*1\r\n$4\r\nPING\r\n*3\r\n$5\r\nBLPOP\r\n$1\r\nq\r\n"
		      "$1\r\n1\r\n",
		      false);
	/* The next call forgets it. */
	{
		struct rx_redis st;
		enum rx_wire_event ev;
		enum rx_verdict v;
		static const char c1[] = "*3\r\n$5\r\nBLPOP\r\n$1\r\nq\r\n$1\r\n1\r\n";
		static const char c2[] = "*1\r\n$4\r\nPING\r\n";
		size_t k;

		rx__redis_init(&st);
		for (k = 0; k < sizeof(c1) - 1;)
			k += rx__redis_write(&st, (const uint8_t *)c1 + k,
					     sizeof(c1) - 1 - k, &ev);
		CU_ASSERT_TRUE(rx__redis_blocking(&st));
		rx__redis_read(&st, (const uint8_t *)"*-1\r\n", 5, &ev, &v);
		CU_ASSERT_EQUAL(ev, RX_WIRE_VERDICT);
		CU_ASSERT_TRUE(rx__redis_blocking(&st)); /* judged after */
		for (k = 0; k < sizeof(c2) - 1;)
			k += rx__redis_write(&st, (const uint8_t *)c2 + k,
					     sizeof(c2) - 1 - k, &ev);
		CU_ASSERT_FALSE(rx__redis_blocking(&st));
	}
}

/* The @n commands of @cmds written on @st, whole. */
static void write_all(struct rx_redis *st, const char *cmds)
{
	enum rx_wire_event ev;
	size_t k, len = strlen(cmds);

	for (k = 0; k < len;)
		k += rx__redis_write(st, (const uint8_t *)cmds + k, len - k,
				     &ev);
}

/* A batch whose later command blocks is answered before that wait; the
 * call that opens next is answered after it, so it waits on purpose too
 * - the one after that does not (ADR-661). */
static void test_blocking_behind(void)
{
	static const char *const batches[] = {
	    "*3\r\n$3\r\nSET\r\n$1\r\na\r\n$1\r\n1\r\n"
	    "*3\r\n$5\r\nBLPOP\r\n$1\r\nq\r\n$1\r\n1\r\n",
	    "SET a 1\r\nblpop q 1\r\n",
	    "*1\r\n$4\r\nPING\r\n*4\r\n$5\r\nXREAD\r\n$5\r\nBLOCK\r\n"
	    "$1\r\n0\r\n$7\r\nSTREAMS\r\n",
	};
	static const char get[] = "*2\r\n$3\r\nGET\r\n$1\r\na\r\n";
	struct rx_redis st;
	enum rx_wire_event ev;
	enum rx_verdict v;
	size_t i;

	for (i = 0; i < sizeof(batches) / sizeof(batches[0]); i++) {
		rx__redis_init(&st);
		write_all(&st, batches[i]);
		CU_ASSERT_FALSE(
		    rx__redis_blocking(&st)); /* its first decides */
		rx__redis_read(&st, (const uint8_t *)"+OK\r\n", 5, &ev, &v);
		CU_ASSERT_EQUAL(ev, RX_WIRE_VERDICT);
		rx__redis_resync(
		    &st);	     /* as at a call's start (proto_framed.c) */
		write_all(&st, get); /* written while the BLPOP may wait */
		CU_ASSERT_TRUE(rx__redis_call_open(&st));
		CU_ASSERT_TRUE(rx__redis_blocking(&st));
		rx__redis_read(&st, (const uint8_t *)"*-1\r\n", 5, &ev, &v);
		CU_ASSERT_EQUAL(ev, RX_WIRE_VERDICT);
		rx__redis_resync(&st);
		write_all(&st, get);
		CU_ASSERT_FALSE(rx__redis_blocking(&st));
	}
}

/* Random bytes and mutated conversations: no crash, no out-of-bounds
 * read (the sanitizer build), no broken contract. */
static uint64_t rng_state = 0x2545f4914f6cdd1du; /* fixed seed */

static uint32_t rnd(void)
{
	rng_state ^= rng_state << 13;
	rng_state ^= rng_state >> 7;
	rng_state ^= rng_state << 17;
	return (uint32_t)(rng_state >> 11);
}

static const struct wire_chunk *const recorded[] = {
    rd_ping,	   rd_unknown, rd_wrongtype, rd_oom,	  rd_noauth,
    rd_wrongpass,  rd_busy,    rd_loading,   rd_readonly, rd_masterdown,
    rd_maxclients, rd_resp3,   rd_push,	     rd_pipe,	  rd_inline};

static void test_random_bytes(void)
{
	enum { RUNS = 3000, MAXC = 24, MAXB = 600 };
	static const char alphabet[] = "+-:$*_,#!=(|~%>?\r\n0123456789-ERR ";
	static uint8_t bytes[MAXC][MAXB];
	struct wire_chunk conv[MAXC + 1];
	struct rx_redis st;
	char got[64];
	size_t run, i, j;

	wire_breaches = 0;
	for (run = 0; run < RUNS; run++) {
		const struct wire_chunk *base =
		    recorded[rnd() % (sizeof(recorded) / sizeof(recorded[0]))];
		size_t nc = 0;

		for (i = 0; base[i].bytes && nc < MAXC; i++, nc++) {
			size_t len = base[i].len < MAXB ? base[i].len : MAXB;

			memcpy(bytes[nc], base[i].bytes, len);
			if (run % 2 == 0) {
				for (j = 0; j < 1 + rnd() % 4; j++)
					bytes[nc][rnd() % len] =
					    run % 4
						? (uint8_t)rnd()
						: (uint8_t)alphabet
						      [rnd() %
						       (sizeof(alphabet) - 1)];
			} else if (i > 0) {
				len = 1 + rnd() % (MAXB - 1);
				for (j = 0; j < len; j++)
					bytes[nc][j] =
					    run % 3
						? (uint8_t)alphabet
						      [rnd() %
						       (sizeof(alphabet) - 1)]
						: (uint8_t)rnd();
			}
			conv[nc] = (struct wire_chunk){
			    run % 5 ? base[i].dir : (rnd() & 1 ? 'c' : 's'),
			    bytes[nc], len};
		}
		conv[nc] = (struct wire_chunk){0, NULL, 0};
		wire_replay(&redis_ops, &st, conv, rnd() % 9, got, sizeof(got));
	}
	CU_ASSERT_EQUAL(wire_breaches, 0);
}

int main(void)
{
	static const struct rx_test tests[] = {
	    {"state fits the fd record", test_state_size},
	    {"claim from the first bytes, not HTTP", test_claim},
	    {"error words to verdicts", test_error_table},
	    {"real error replies", test_real_errors},
	    {"RESP3 types, pushes, attributes", test_resp3_and_pushes},
	    {"pipelines and inline commands", test_pipelines},
	    {"what starts a call", test_what_starts_a_call},
	    {"commands that block on purpose", test_blocking_commands},
	    {"a blocking command behind a batch's answer",
	     test_blocking_behind},
	    {"random bytes", test_random_bytes},
	    {NULL, NULL}};

	return rx_run_suite("proto_redis", tests);
}
