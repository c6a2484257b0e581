/*
 * auth_failures.h - the failed authentications (RESP AUTH, native HELLO)
 * of each source address, and how long the answer to each must wait: a
 * delay that doubles with every failure in a row, from NET_AUTH_DELAY_MIN_MS
 * to NET_AUTH_DELAY_MAX_MS, answers from one source going out one after the
 * other (several connections from one address wait in turn, so opening
 * more connections does not buy more guesses a second). A success from
 * the address forgets it; so does NET_AUTH_FORGET_MS without a failure.
 *
 * A source is an IPv4 address, or an IPv6 address's /64 (one host is
 * commonly given a whole /64: its addresses are one source), or any
 * other text as it is (its first NET_AUTH_KEY_MAX bytes).
 *
 * Memory is fixed whatever the number of addresses: NET_AUTH_FAILURES_SETS
 * sets of NET_AUTH_FAILURES_WAYS entries, an address hashed to one set; a new
 * address in a full set takes the place of the one that failed least
 * recently (counted: evictions). A client with many addresses can make
 * the node forget some, never make it hold more.
 *
 * Pure: no clock (time is an argument, monotonic ms), no I/O, so
 * tests/unit/check_auth_failures.c runs it on a fake clock. node/'s
 * servers use it through auth_delay.h.
 */
#ifndef RK_NET_AUTH_FAILURES_H
#define RK_NET_AUTH_FAILURES_H

#include <stddef.h>
#include <stdint.h>

#define NET_AUTH_DELAY_MIN_MS  10u   /* the first failure's answer waits this */
#define NET_AUTH_DELAY_MAX_MS  5000u /* ... doubling up to this */
#define NET_AUTH_FORGET_MS     600000u /* no failure for this long: forgotten */
#define NET_AUTH_FAILURES_SETS 256u
#define NET_AUTH_FAILURES_WAYS 4u
#define NET_AUTH_FAILURES_SLOTS \
    (NET_AUTH_FAILURES_SETS * NET_AUTH_FAILURES_WAYS)
#define NET_AUTH_KEY_MAX 46u /* bytes of a source's key */

struct auth_source {
    uint8_t key[NET_AUTH_KEY_MAX]; /* the source (see above) */
    uint8_t klen;                  /* 0: a free entry */
    uint32_t fails;                /* in a row */
    uint64_t last_ms;              /* the last failure */
    uint64_t next_ms; /* the last answer given a time goes out then */
};

struct net_auth_failures {
    uint32_t max_ms; /* the delay's cap */
    struct auth_source e[NET_AUTH_FAILURES_SLOTS];
    uint64_t evictions; /* addresses forgotten to make room */
};

/* An empty table whose delays double up to max_ms (below
 * NET_AUTH_DELAY_MIN_MS: every one is max_ms; 0: no delay). */
void net_auth_failures_init(struct net_auth_failures *t, uint32_t max_ms);

/* A failed authentication from addr (an address without its port) at
 * now: how many ms from now its answer goes out. The k-th failure in a
 * row waits its own delay (net_auth_failures_delay) after the answer to the
 * one before. */
uint32_t net_auth_failures_fail(struct net_auth_failures *t,
                                const char *addr,
                                uint64_t now);

/* A successful authentication from addr at now: how many ms from now its
 * answer goes out (0 unless answers to failures from addr are still
 * waiting: it goes after them). addr is forgotten. */
uint32_t net_auth_failures_ok(struct net_auth_failures *t,
                              const char *addr,
                              uint64_t now);

/* The failures in a row of addr remembered at now (0: none). */
uint32_t net_auth_failures_count(const struct net_auth_failures *t,
                                 const char *addr,
                                 uint64_t now);

/* Addresses remembered at now (at most NET_AUTH_FAILURES_SLOTS). */
size_t net_auth_failures_sources(const struct net_auth_failures *t,
                                 uint64_t now);

/* The delay of the k-th failure in a row (k >= 1):
 * NET_AUTH_DELAY_MIN_MS << (k - 1), at most t's max_ms. */
uint32_t net_auth_failures_delay(const struct net_auth_failures *t, uint32_t k);

#endif
