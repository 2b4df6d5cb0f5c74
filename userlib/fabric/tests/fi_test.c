/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * Functional tests of the "paranic" libfabric provider, written against libfabric's
 * public API only (no libparanic): one process per rank under pn_launch / paranic run
 * (PARANIC_RANK, PARANIC_NODES, PARANIC_PPN give the rank and the job's size).
 *
 *   fi_test CASE DIR      CASE: sizes | match | errors | all
 *
 * The ranks exchange their addresses (fi_getname) through files DIR/<rank>.addr, then
 * run the case; every check that fails prints "FAIL ..." and the exit status is 1.
 * "ok CASE ..." lines report what passed.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_atomic.h>
#include <rdma/fi_collective.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>

#include "paranic/pn_protocol.h"   /* facts only (PN_MAX_CONTEXTS), no libparanic call */

static int rank, nranks, fails;
static struct fi_info *info;
static struct fid_fabric *fabric;
static struct fid_domain *domain;
static struct fid_av *av;
static struct fid_cq *cq;
static struct fid_ep *ep;
static fi_addr_t *peers;

#define FAIL(...)                                                          \
	do {                                                               \
		printf("FAIL rank %d line %d: ", rank, __LINE__);        \
		printf(__VA_ARGS__);                                       \
		printf("\n");                                              \
		fflush(stdout);                                            \
		fails++;                                                   \
	} while (0)
#define CHECK(c, ...)              \
	do {                       \
		if (!(c))          \
			FAIL(__VA_ARGS__); \
	} while (0)
#define TRY(call)                                                                          \
	do {                                                                               \
		long _r = (long)(call);                                                    \
		if (_r < 0) {                                                              \
			FAIL("%s = %ld (%s)", #call, _r, fi_strerror((int)-_r));          \
			exit(1);                                                           \
		}                                                                          \
	} while (0)

/* ---- completions: each operation has a record; polling marks them ------------------------- */

struct rec {
	struct fi_context2 ctx;   /* FI_CONTEXT2 room, as Open MPI gives */
	int done, err;
	size_t olen;
	struct fi_cq_tagged_entry e;
	fi_addr_t src;
};

static void poll_cq(void)
{
	struct fi_cq_tagged_entry e[8];
	fi_addr_t src[8];
	ssize_t n = fi_cq_readfrom(cq, e, 8, src);
	if (n > 0) {
		for (ssize_t i = 0; i < n; i++) {
			struct rec *r = e[i].op_context;
			if (!r) {
				FAIL("completion without context");
				continue;
			}
			r->e = e[i];
			r->src = src[i];
			r->done = 1;
		}
	} else if (n == -FI_EAVAIL) {
		struct fi_cq_err_entry ee;
		memset(&ee, 0, sizeof(ee));
		if (fi_cq_readerr(cq, &ee, 0) == 1) {
			struct rec *r = ee.op_context;
			if (!r) {
				FAIL("error completion without context: %d", ee.err);
				return;
			}
			r->err = ee.err;
			r->olen = ee.olen;
			r->e.len = ee.len;
			r->e.tag = ee.tag;
			r->e.data = ee.data;
			r->e.flags = ee.flags;
			r->done = 1;
		}
	} else if (n != -FI_EAGAIN) {
		FAIL("fi_cq_read: %zd", n);
	}
}

static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec * 1e-9;
}

static void wait_rec(struct rec *r, const char *what)
{
	double t0 = now();
	while (!r->done) {
		poll_cq();
		if (now() - t0 > 60) {
			FAIL("timeout waiting for %s", what);
			exit(1);
		}
	}
}

/* Retry while the provider says -FI_EAGAIN (it never does today, but the API allows it). */
#define POST(call)                                             \
	do {                                                   \
		ssize_t _r;                                    \
		while ((_r = (call)) == -FI_EAGAIN)            \
			poll_cq();                             \
		if (_r < 0) {                                  \
			FAIL("%s = %zd (%s)", #call, _r, fi_strerror((int)-_r)); \
			exit(1);                               \
		}                                              \
	} while (0)

/* ---- barrier over the provider (tag space 0xB...) ----------------------------------------- */

#define TAG_BARRIER 0xB000000000000000ull
static void barrier(void)
{
	static unsigned epoch;
	uint64_t tag = TAG_BARRIER | ++epoch;
	if (rank == 0) {
		for (int i = 1; i < nranks; i++) {
			struct rec r = {0};
			POST(fi_trecv(ep, NULL, 0, NULL, peers[i], tag, 0, &r));
			wait_rec(&r, "barrier in");
		}
		for (int i = 1; i < nranks; i++)
			POST(fi_tinject(ep, NULL, 0, peers[i], tag));
	} else {
		struct rec r = {0};
		POST(fi_tinject(ep, NULL, 0, peers[0], tag));
		POST(fi_trecv(ep, NULL, 0, NULL, peers[0], tag, 0, &r));
		wait_rec(&r, "barrier out");
	}
}

/* ---- set-up -------------------------------------------------------------------------------- */

static int env_int(const char *n, int dflt)
{
	const char *v = getenv(n);
	return v && *v ? atoi(v) : dflt;
}

static void setup(const char *dir, enum fi_av_type avt)
{
	struct fi_info *hints = fi_allocinfo();
	char name[64], path[4096], tmp[4100];
	size_t len = sizeof(name);

	hints->caps = FI_TAGGED | FI_MSG | FI_DIRECTED_RECV | FI_SOURCE | FI_REMOTE_CQ_DATA;
	hints->mode = FI_CONTEXT | FI_CONTEXT2;
	hints->ep_attr->type = FI_EP_RDM;
	hints->domain_attr->av_type = avt;
	hints->domain_attr->cq_data_size = 4;
	hints->domain_attr->threading = FI_THREAD_DOMAIN;
	hints->tx_attr->msg_order = FI_ORDER_SAS;
	hints->rx_attr->msg_order = FI_ORDER_SAS;
	hints->tx_attr->op_flags = FI_COMPLETION;
	hints->rx_attr->op_flags = FI_COMPLETION;
	hints->fabric_attr->prov_name = strdup("paranic");
	TRY(fi_getinfo(FI_VERSION(1, 5), NULL, NULL, 0, hints, &info));
	fi_freeinfo(hints);
	TRY(fi_fabric(info->fabric_attr, &fabric, NULL));
	TRY(fi_domain(fabric, info, &domain, NULL));
	struct fi_av_attr aa = {.type = avt};
	TRY(fi_av_open(domain, &aa, &av, NULL));
	struct fi_cq_attr ca = {.format = FI_CQ_FORMAT_TAGGED, .wait_obj = FI_WAIT_NONE};
	TRY(fi_cq_open(domain, &ca, &cq, NULL));
	TRY(fi_endpoint(domain, info, &ep, NULL));
	TRY(fi_ep_bind(ep, &av->fid, 0));
	TRY(fi_ep_bind(ep, &cq->fid, FI_TRANSMIT | FI_RECV | FI_SELECTIVE_COMPLETION));
	TRY(fi_enable(ep));
	TRY(fi_getname(&ep->fid, name, &len));

	snprintf(tmp, sizeof(tmp), "%s/%d.tmp", dir, rank);
	snprintf(path, sizeof(path), "%s/%d.addr", dir, rank);
	FILE *f = fopen(tmp, "wb");
	if (!f || fwrite(name, 1, len, f) != len || fclose(f) || rename(tmp, path)) {
		FAIL("cannot write %s", path);
		exit(1);
	}
	peers = calloc((size_t)nranks, sizeof(*peers));
	for (int i = 0; i < nranks; i++) {
		char a[64];
		size_t n = 0;
		double t0 = now();
		snprintf(path, sizeof(path), "%s/%d.addr", dir, i);
		for (;;) {
			f = fopen(path, "rb");
			if (f) {
				n = fread(a, 1, sizeof(a), f);
				fclose(f);
				break;
			}
			if (now() - t0 > 60) {
				FAIL("no address from rank %d", i);
				exit(1);
			}
			usleep(1000);
		}
		CHECK(n == len, "address of rank %d: %zu bytes", i, n);
		int k = fi_av_insert(av, a, 1, &peers[i], 0, NULL);
		CHECK(k == 1, "fi_av_insert(rank %d) = %d", i, k);
	}
	barrier();
}

static void teardown(void)
{
	barrier();
	/* Exactly once: every message sent to this rank has been received by now (a sender's
	 * messages come before its barrier message), so a peek at any tag finds nothing; a
	 * message delivered twice, or a truncated one left queued, would be found. (No barrier
	 * after it: a barrier message could come before another rank's peek.) */
	struct rec p = {0};
	struct fi_msg_tagged m = {0};
	m.addr = FI_ADDR_UNSPEC;
	m.ignore = ~0ull;
	m.context = &p;
	POST(fi_trecvmsg(ep, &m, FI_PEEK | FI_COMPLETION));
	wait_rec(&p, "final peek");
	CHECK(p.err == FI_ENOMSG, "a message left over: tag %llx, %zu bytes", (unsigned long long)p.e.tag, p.e.len);
	TRY(fi_close(&ep->fid));
	TRY(fi_close(&cq->fid));
	TRY(fi_close(&av->fid));
	TRY(fi_close(&domain->fid));
	TRY(fi_close(&fabric->fid));
	fi_freeinfo(info);
	free(peers);
}

/* ---- data patterns ------------------------------------------------------------------------- */

static void fill(uint8_t *b, size_t n, uint64_t seed)
{
	uint64_t x = seed * 0x9e3779b97f4a7c15ull + 1;
	for (size_t i = 0; i < n; i++) {
		x ^= x << 13, x ^= x >> 7, x ^= x << 17;
		b[i] = (uint8_t)x;
	}
}

static int same(const uint8_t *b, size_t n, uint64_t seed)
{
	uint8_t *w = malloc(n ? n : 1);
	fill(w, n, seed);
	int ok = !memcmp(w, b, n);
	free(w);
	return ok;
}

/* ---- case sizes: every rank sends every size to every rank (itself too) -------------------- */

static const size_t SIZES[] = {0, 1, 7, 8, 63, 64, 255, 256, 1000, 1023, 1024, 1025, 4095, 4096, 12345,
			       16384, 16385, 65536, 100003, 262144, 1 << 20, 3000001, 16u << 20};
#define NSIZES (sizeof(SIZES) / sizeof(SIZES[0]))

static void case_sizes(void)
{
	/* Half the sizes are received by receives posted before the sends (expected), half by
	 * receives posted after everything was sent (unexpected: eager data queued, rendezvous
	 * RTS waiting). Tag: size index and direction, content seeded by (src, dst, size). */
	for (int pass = 0; pass < 2; pass++) {
		int n = 0;
		for (size_t i = 0; i < NSIZES; i++)
			n += (int)(i % 2 == (size_t)pass);
		struct rec *rr = calloc((size_t)(nranks * n), sizeof(*rr));
		struct rec *sr = calloc((size_t)(nranks * n), sizeof(*sr));
		uint8_t **rb = calloc((size_t)(nranks * n), sizeof(*rb));
		uint8_t **sb = calloc((size_t)(nranks * n), sizeof(*sb));
		int k;
		if (pass == 0) {   /* receives first */
			k = 0;
			for (int src = 0; src < nranks; src++)
				for (size_t i = pass; i < NSIZES; i += 2, k++) {
					rb[k] = malloc(SIZES[i] + 1);
					POST(fi_trecv(ep, rb[k], SIZES[i], NULL, peers[src], 0x5000 + i, 0, &rr[k]));
				}
			barrier();
		}
		k = 0;
		for (int dst = 0; dst < nranks; dst++)
			for (size_t i = pass; i < NSIZES; i += 2, k++) {
				sb[k] = malloc(SIZES[i] + 1);
				fill(sb[k], SIZES[i], ((uint64_t)rank << 40) | ((uint64_t)dst << 32) | SIZES[i]);
				POST(fi_tsend(ep, sb[k], SIZES[i], NULL, peers[dst], 0x5000 + i, &sr[k]));
			}
		if (pass == 1) {   /* everything sent (eager ones arrive unexpected), then receives */
			barrier();
			k = 0;
			for (int src = 0; src < nranks; src++)
				for (size_t i = pass; i < NSIZES; i += 2, k++) {
					rb[k] = malloc(SIZES[i] + 1);
					POST(fi_trecv(ep, rb[k], SIZES[i], NULL, peers[src], 0x5000 + i, 0, &rr[k]));
				}
		}
		k = 0;
		for (int src = 0; src < nranks; src++)
			for (size_t i = pass; i < NSIZES; i += 2, k++) {
				wait_rec(&rr[k], "receive");
				CHECK(!rr[k].err, "recv %zu from %d: err %d", SIZES[i], src, rr[k].err);
				CHECK(rr[k].e.len == SIZES[i], "recv len %zu != %zu", rr[k].e.len, SIZES[i]);
				CHECK(rr[k].e.tag == 0x5000 + i, "tag %llx", (unsigned long long)rr[k].e.tag);
				CHECK(rr[k].e.flags == (FI_RECV | FI_TAGGED), "flags %llx",
				      (unsigned long long)rr[k].e.flags);
				CHECK(rr[k].src == peers[src], "source %llx != %llx", (unsigned long long)rr[k].src,
				      (unsigned long long)peers[src]);
				CHECK(same(rb[k], SIZES[i], ((uint64_t)src << 40) | ((uint64_t)rank << 32) | SIZES[i]),
				      "content of %zu bytes from %d", SIZES[i], src);
				free(rb[k]);
			}
		for (k = 0; k < nranks * n; k++) {
			wait_rec(&sr[k], "send");
			CHECK(!sr[k].err && sr[k].e.flags == (FI_SEND | FI_TAGGED), "send err %d flags %llx", sr[k].err,
			      (unsigned long long)sr[k].e.flags);
			free(sb[k]);
		}
		free(rr), free(sr), free(rb), free(sb);
		barrier();
	}
	printf("ok sizes rank %d: %zu sizes (0 .. %zu) to and from %d ranks\n", rank, NSIZES, SIZES[NSIZES - 1],
	       nranks);
}

/* ---- case match: masks, directed receive, data, truncation, cancel, peek/claim, inject, msg -- */

static void case_match(void)
{
	int peer = (rank + 1) % nranks, from = (rank + nranks - 1) % nranks;
	uint8_t buf[8192], big[2000];
	struct rec r[8], s[8];

	/* Masks: tags 0x3300, 0x1234, 0x12ff sent; a receive for 0x12?? (ignore 0xff) gets
	 * 0x1234 then 0x12ff, an exact one gets 0x3300. */
	memset(r, 0, sizeof(r));
	memset(s, 0, sizeof(s));
	uint64_t tags[3] = {0x7733000000000000ull | 0x3300, 0x7700000000001234ull, 0x77000000000012ffull};
	for (int i = 0; i < 3; i++) {
		fill(buf, 100, tags[i]);
		POST(fi_tsend(ep, buf, 100, NULL, peers[peer], tags[i], &s[i]));
		wait_rec(&s[i], "mask send");   /* eager: the buffer is reusable at once */
	}
	barrier();
	POST(fi_trecv(ep, buf, 100, NULL, FI_ADDR_UNSPEC, 0x7700000000001200ull, 0xff, &r[0]));
	POST(fi_trecv(ep, buf + 100, 100, NULL, FI_ADDR_UNSPEC, 0x7700000000001200ull, 0xff, &r[1]));
	POST(fi_trecv(ep, buf + 200, 100, NULL, FI_ADDR_UNSPEC, tags[0], 0, &r[2]));
	for (int i = 0; i < 3; i++)
		wait_rec(&r[i], "mask recv");
	CHECK(r[0].e.tag == tags[1] && same(buf, 100, tags[1]), "ignore bits: got %llx", (unsigned long long)r[0].e.tag);
	CHECK(r[1].e.tag == tags[2] && same(buf + 100, 100, tags[2]), "ignore bits 2: got %llx",
	      (unsigned long long)r[1].e.tag);
	CHECK(r[2].e.tag == tags[0] && same(buf + 200, 100, tags[0]), "exact: %llx", (unsigned long long)r[2].e.tag);
	CHECK(r[0].src == peers[from], "source of a wildcard receive");
	printf("ok match rank %d: tag masks\n", rank);

	/* Directed receive: every rank sends tag T to every rank (itself too); a receive from
	 * rank j gets j's message whatever order they came in. */
	memset(r, 0, sizeof(r));
	struct rec *dr = calloc((size_t)nranks, sizeof(*dr)), *ds = calloc((size_t)nranks, sizeof(*ds));
	uint8_t(*db)[64] = calloc((size_t)nranks, 64), (*dsb)[64] = calloc((size_t)nranks, 64);
	for (int j = 0; j < nranks; j++) {
		fill(dsb[j], 64, 1000 + rank);
		POST(fi_tsend(ep, dsb[j], 64, NULL, peers[j], 0xD1D1, &ds[j]));
	}
	barrier();
	for (int j = nranks - 1; j >= 0; j--)
		POST(fi_trecv(ep, db[j], 64, NULL, peers[j], 0xD1D1, 0, &dr[j]));
	for (int j = 0; j < nranks; j++) {
		wait_rec(&dr[j], "directed recv");
		wait_rec(&ds[j], "directed send");
		CHECK(!dr[j].err && dr[j].src == peers[j] && same(db[j], 64, 1000 + j), "directed receive from %d", j);
	}
	free(dr), free(ds), free(db), free(dsb);
	printf("ok match rank %d: directed receive from %d ranks\n", rank, nranks);

	/* Remote CQ data, inject (the buffer changed right after the call), injectdata. The
	 * senddata's buffer is its own: it belongs to the provider until the completion (a
	 * send still queued behind its connection copies it later). */
	uint8_t sd[300];
	memset(r, 0, sizeof(r));
	memset(s, 0, sizeof(s));
	fill(sd, 300, 77);
	fill(buf, 300, 77);
	POST(fi_tsenddata(ep, sd, 300, NULL, 0xDEADBEEF, peers[peer], 0xDA7A, &s[0]));
	POST(fi_tinject(ep, buf, 200, peers[peer], 0x1A1A));
	memset(buf, 0, 300);
	POST(fi_tinjectdata(ep, NULL, 0, 0x12345678, peers[peer], 0x1A1B));
	uint8_t rb[3][300];
	POST(fi_trecv(ep, rb[0], 300, NULL, peers[from], 0xDA7A, 0, &r[0]));
	POST(fi_trecv(ep, rb[1], 300, NULL, peers[from], 0x1A1A, 0, &r[1]));
	POST(fi_trecv(ep, rb[2], 300, NULL, peers[from], 0x1A1B, 0, &r[2]));
	wait_rec(&s[0], "senddata");
	for (int i = 0; i < 3; i++)
		wait_rec(&r[i], "data/inject recv");
	CHECK((r[0].e.flags & FI_REMOTE_CQ_DATA) && r[0].e.data == 0xDEADBEEF && same(rb[0], 300, 77),
	      "remote CQ data: flags %llx data %llx", (unsigned long long)r[0].e.flags, (unsigned long long)r[0].e.data);
	CHECK(!(r[1].e.flags & FI_REMOTE_CQ_DATA) && r[1].e.len == 200 && same(rb[1], 200, 77),
	      "inject: len %zu, content", r[1].e.len);
	CHECK((r[2].e.flags & FI_REMOTE_CQ_DATA) && r[2].e.data == 0x12345678 && r[2].e.len == 0, "injectdata");
	printf("ok match rank %d: remote CQ data, inject\n", rank);

	/* Truncation: 2000 bytes into 100 (eager) and 3 MiB into 1 MiB (rendezvous): FI_ETRUNC,
	 * the message consumed (the next one with the same tag is received whole). */
	memset(r, 0, sizeof(r));
	memset(s, 0, sizeof(s));
	/* (FI_TEST_BIG: a smaller rendezvous message for the simulator) */
	size_t bigsz = (size_t)env_int("FI_TEST_BIG", 3 << 20), cut = bigsz / 3;
	uint8_t *b3 = malloc(bigsz), *r3 = malloc(cut);
	fill(big, sizeof(big), 5);
	fill(b3, bigsz, 6);
	POST(fi_tsend(ep, big, sizeof(big), NULL, peers[peer], 0x7C, &s[0]));
	POST(fi_tsend(ep, big, 10, NULL, peers[peer], 0x7C, &s[1]));
	POST(fi_tsend(ep, b3, bigsz, NULL, peers[peer], 0x7D, &s[2]));
	POST(fi_trecv(ep, buf, 100, NULL, peers[from], 0x7C, 0, &r[0]));
	POST(fi_trecv(ep, buf + 100, 100, NULL, peers[from], 0x7C, 0, &r[1]));
	POST(fi_trecv(ep, r3, cut, NULL, peers[from], 0x7D, 0, &r[2]));
	for (int i = 0; i < 3; i++) {
		wait_rec(&r[i], "trunc recv");
		wait_rec(&s[i], "trunc send");
	}
	CHECK(r[0].err == FI_ETRUNC && r[0].olen == 1900 && r[0].e.len == 100 && same(buf, 100, 5),
	      "eager truncation: err %d olen %zu len %zu", r[0].err, r[0].olen, r[0].e.len);
	CHECK(!r[1].err && r[1].e.len == 10 && same(buf + 100, 10, 5), "after truncation: err %d len %zu", r[1].err,
	      r[1].e.len);
	CHECK(r[2].err == FI_ETRUNC && r[2].olen == bigsz - cut && same(r3, cut, 6),
	      "rendezvous truncation: err %d olen %zu", r[2].err, r[2].olen);
	free(b3), free(r3);
	printf("ok match rank %d: truncation reported as FI_ETRUNC\n", rank);

	/* Cancel: a receive nobody sends to ends in the error CQ with FI_ECANCELED. */
	memset(r, 0, sizeof(r));
	POST(fi_trecv(ep, buf, 10, NULL, FI_ADDR_UNSPEC, 0xCA9CE1, 0, &r[0]));
	ssize_t c = fi_cancel(&ep->fid, &r[0]);
	CHECK(c == 0, "fi_cancel = %zd", c);
	wait_rec(&r[0], "cancelled recv");
	CHECK(r[0].err == FI_ECANCELED, "cancelled: err %d", r[0].err);
	c = fi_cancel(&ep->fid, &r[0]);
	CHECK(c == -FI_ENOENT, "second fi_cancel = %zd", c);
	printf("ok match rank %d: cancel\n", rank);

	/* Peek, claim, discard: P (5000 bytes, rendezvous size: 5000 > inject, eager or not),
	 * Q, D1 and D2 (same tag); peek until P is there (FI_ENOMSG before), peek|claim Q and
	 * receive it with FI_CLAIM, peek|discard D1 so the receive gets D2. */
	memset(r, 0, sizeof(r));
	memset(s, 0, sizeof(s));
	static uint8_t pb[5000], qb[40000], d1[50], d2[50];
	fill(pb, sizeof(pb), 11), fill(qb, sizeof(qb), 12), fill(d1, 50, 13), fill(d2, 50, 14);
	barrier();   /* nothing of this round sent before the first peek */
	{
		struct rec p0 = {0};
		struct fi_msg_tagged m = {0};
		m.addr = peers[from];
		m.tag = 0x9E;
		m.context = &p0;
		POST(fi_trecvmsg(ep, &m, FI_PEEK | FI_COMPLETION));
		wait_rec(&p0, "empty peek");
		CHECK(p0.err == FI_ENOMSG, "peek of nothing: err %d", p0.err);
	}
	barrier();
	POST(fi_tsend(ep, pb, sizeof(pb), NULL, peers[peer], 0x9E, &s[0]));
	POST(fi_tsenddata(ep, qb, sizeof(qb), NULL, 42, peers[peer], 0x9F, &s[1]));
	POST(fi_tsend(ep, d1, 50, NULL, peers[peer], 0xD0, &s[2]));
	POST(fi_tsend(ep, d2, 50, NULL, peers[peer], 0xD0, &s[3]));
	int tries = 0;
	for (;;) {
		struct rec p = {0};
		struct fi_msg_tagged m = {0};
		m.addr = FI_ADDR_UNSPEC;
		m.tag = 0x9E;
		m.context = &p;
		POST(fi_trecvmsg(ep, &m, FI_PEEK | FI_COMPLETION));
		wait_rec(&p, "peek");
		tries++;
		if (p.err == FI_ENOMSG)
			continue;
		CHECK(!p.err && p.e.len == sizeof(pb) && p.e.tag == 0x9E && p.src == peers[from],
		      "peek found: err %d len %zu", p.err, p.e.len);
		break;
	}
	{
		struct rec pc = {0};
		struct fi_msg_tagged m = {0};
		static uint8_t qr[40000];
		struct iovec iov = {qr, sizeof(qr)};
		m.addr = peers[from];
		m.tag = 0x9F;
		m.context = &pc;
		do {   /* Q may still be on its way */
			memset(&pc, 0, sizeof(pc));
			POST(fi_trecvmsg(ep, &m, FI_PEEK | FI_CLAIM | FI_COMPLETION));
			wait_rec(&pc, "peek|claim");
		} while (pc.err == FI_ENOMSG);
		CHECK(!pc.err && pc.e.len == sizeof(qb) && (pc.e.flags & FI_REMOTE_CQ_DATA) && pc.e.data == 42,
		      "peek|claim: err %d len %zu", pc.err, pc.e.len);
		/* A plain receive for Q's tag posted now must not get the claimed message. */
		struct rec other = {0};
		POST(fi_trecv(ep, buf, 100, NULL, FI_ADDR_UNSPEC, 0x9F, 0, &other));
		memset(&pc, 0, sizeof(pc));
		m.msg_iov = &iov;
		m.iov_count = 1;
		POST(fi_trecvmsg(ep, &m, FI_CLAIM | FI_COMPLETION));
		wait_rec(&pc, "claim");
		CHECK(!pc.err && pc.e.len == sizeof(qb) && same(qr, sizeof(qr), 12) && pc.e.data == 42,
		      "claimed receive: err %d len %zu", pc.err, pc.e.len);
		for (int i = 0; i < 1000; i++)
			poll_cq();
		CHECK(!other.done, "a receive got a claimed message");
		CHECK(fi_cancel(&ep->fid, &other) == 0, "cancel the other receive");
		wait_rec(&other, "cancel other");
		/* claim with a context nothing was claimed with */
		struct rec bogus = {0};
		m.context = &bogus;
		CHECK(fi_trecvmsg(ep, &m, FI_CLAIM) == -FI_EINVAL, "claim of nothing");
	}
	{
		struct rec pd = {0}, rd = {0};
		struct fi_msg_tagged m = {0};
		m.addr = peers[from];
		m.tag = 0xD0;
		m.context = &pd;
		do {
			memset(&pd, 0, sizeof(pd));
			POST(fi_trecvmsg(ep, &m, FI_PEEK | FI_DISCARD | FI_COMPLETION));
			wait_rec(&pd, "peek|discard");
		} while (pd.err == FI_ENOMSG);
		CHECK(!pd.err && pd.e.len == 50, "peek|discard: err %d", pd.err);
		POST(fi_trecv(ep, buf, 50, NULL, peers[from], 0xD0, 0, &rd));
		wait_rec(&rd, "after discard");
		CHECK(!rd.err && same(buf, 50, 14), "the receive after a discard got D2");
	}
	struct rec pr = {0};
	POST(fi_trecv(ep, buf, sizeof(pb), NULL, peers[from], 0x9E, 0, &pr));
	wait_rec(&pr, "P");
	CHECK(!pr.err && same(buf, sizeof(pb), 11), "peeked message received");
	for (int i = 0; i < 4; i++)
		wait_rec(&s[i], "peek sends");
	printf("ok match rank %d: peek (%d tries), claim, discard\n", rank, tries);

	/* FI_MSG: untagged, never mixed with tagged messages. */
	memset(r, 0, sizeof(r));
	memset(s, 0, sizeof(s));
	static uint8_t mb[100000], mr[100000];
	fill(mb, sizeof(mb), 21);
	POST(fi_tsend(ep, mb, 10, NULL, peers[peer], 0, &s[0]));   /* tagged, tag 0 */
	POST(fi_send(ep, mb, sizeof(mb), NULL, peers[peer], &s[1]));
	POST(fi_send(ep, mb, 0, NULL, peers[peer], &s[2]));
	POST(fi_inject(ep, mb, 33, peers[peer]));
	POST(fi_recv(ep, mr, sizeof(mr), NULL, peers[from], &r[1]));
	POST(fi_recv(ep, buf, 100, NULL, FI_ADDR_UNSPEC, &r[2]));
	POST(fi_recv(ep, buf + 100, 100, NULL, FI_ADDR_UNSPEC, &r[3]));
	POST(fi_trecv(ep, buf + 200, 10, NULL, peers[from], 0, 0, &r[0]));
	for (int i = 0; i < 4; i++)
		wait_rec(&r[i], "msg recv");
	for (int i = 0; i < 3; i++)
		wait_rec(&s[i], "msg send");
	CHECK(r[1].e.flags == (FI_RECV | FI_MSG) && r[1].e.len == sizeof(mb) && same(mr, sizeof(mr), 21), "fi_recv big");
	CHECK(r[2].e.len == 0 && r[3].e.len == 33 && same(buf + 100, 33, 21), "fi_recv order: %zu %zu", r[2].e.len,
	      r[3].e.len);
	CHECK(r[0].e.flags == (FI_RECV | FI_TAGGED) && r[0].e.len == 10, "the tagged one stayed tagged");
	CHECK(s[1].e.flags == (FI_SEND | FI_MSG), "send flags");
	printf("ok match rank %d: FI_MSG\n", rank);
	barrier();
}

/* ---- case errors: bad input gives errors, not crashes ----------------------------------------- */

static void case_errors(void)
{
	uint8_t buf[8192];
	char name[8];
	size_t len = 4;
	CHECK(fi_getname(&ep->fid, name, &len) == -FI_ETOOSMALL && len == 16, "getname too small: %zu", len);
	CHECK(fi_tsend(ep, buf, 10, NULL, (fi_addr_t)0x123456789ull, 1, NULL) == -FI_EINVAL, "bad fi_addr");
	CHECK(fi_tsend(ep, NULL, 10, NULL, peers[0], 1, NULL) == -FI_EINVAL, "NULL buffer");
	CHECK(fi_tinject(ep, buf, 8192, peers[0], 1) == -FI_EMSGSIZE, "inject too long");
	char junk[16] = "not an address";
	fi_addr_t fa = 0;
	CHECK(fi_av_insert(av, junk, 1, &fa, 0, NULL) == 0 && fa == FI_ADDR_NOTAVAIL, "junk address inserted");
	struct fi_msg_tagged m = {0};
	struct iovec iov[2] = {{buf, 10}, {buf + 10, 10}};
	m.msg_iov = iov;
	m.iov_count = 2;
	CHECK(fi_trecvmsg(ep, &m, 0) == -FI_EINVAL, "two iovecs");
	CHECK(fi_close(&domain->fid) == -FI_EBUSY, "domain closed under its endpoint");
	/* capabilities not offered: an error, never a call through a missing table */
	CHECK(fi_write(ep, buf, 8, NULL, peers[0], 0, 0, NULL) == -FI_ENOSYS, "fi_write");
	CHECK(fi_read(ep, buf, 8, NULL, peers[0], 0, 0, NULL) == -FI_ENOSYS, "fi_read");
	CHECK(fi_atomic(ep, buf, 1, NULL, peers[0], 0, 0, FI_UINT64, FI_SUM, NULL) == -FI_ENOSYS, "fi_atomic");
	CHECK(fi_barrier(ep, 0, NULL) == -FI_ENOSYS, "fi_barrier");
	/* a node beyond the job: the send fails in the CQ (or at once) */
	char a[16];
	len = sizeof(a);
	TRY(fi_getname(&ep->fid, a, &len));
	((uint16_t *)a)[5] = PN_MAX_CONTEXTS;   /* ctx field (struct pfi_addr: magic, cluster, node, ctx) */
	CHECK(fi_av_insert(av, a, 1, &fa, 0, NULL) == 0 && fa == FI_ADDR_NOTAVAIL, "context beyond the NIC's inserted");
	((uint16_t *)a)[5] = 0;
	((uint16_t *)a)[4] = 4000;   /* node field */
	TRY(fi_av_insert(av, a, 1, &fa, 0, NULL));
	struct rec r = {0};
	ssize_t rc = fi_tsend(ep, buf, 8, NULL, fa, 1, &r);
	if (rc == 0) {
		wait_rec(&r, "send to nowhere");
		CHECK(r.err == FI_EHOSTUNREACH, "send to a node beyond the job: err %d", r.err);
	} else {
		CHECK(rc == -FI_EHOSTUNREACH, "send to a node beyond the job: %zd", rc);
	}
	printf("ok errors rank %d\n", rank);
}

/* ---- case bench: ping-pong between ranks 0 and 1 (one-way latency, fastest and median) ---- */

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static void case_bench(void)
{
	static const size_t bs[] = {8, 1024, 16384, 65536, 1 << 20};
	int iters = env_int("FI_TEST_ITERS", 2000);
	double *t = calloc((size_t)iters, sizeof(*t));
	uint8_t *buf = malloc(1 << 20);
	memset(buf, 1, 1 << 20);
	if (rank > 1)
		return;
	for (size_t k = 0; k < sizeof(bs) / sizeof(bs[0]); k++) {
		size_t n = bs[k];
		int it = n >= 65536 ? iters / 10 : iters;
		for (int i = -10; i < it; i++) {
			struct rec s = {0}, r = {0};
			double t0 = now();
			if (rank == 0) {
				POST(fi_tsend(ep, buf, n, NULL, peers[1], 0xBE, &s));
				POST(fi_trecv(ep, buf, n, NULL, peers[1], 0xBE, 0, &r));
			} else {
				POST(fi_trecv(ep, buf, n, NULL, peers[0], 0xBE, 0, &r));
				wait_rec(&r, "bench recv");
				POST(fi_tsend(ep, buf, n, NULL, peers[0], 0xBE, &s));
			}
			wait_rec(&r, "bench recv");
			wait_rec(&s, "bench send");
			if (i >= 0)
				t[i] = (now() - t0) / 2;
		}
		qsort(t, (size_t)it, sizeof(*t), cmp_d);
		if (rank == 0)
			printf("bench %zu bytes: one-way fastest %.0f ns median %.0f ns (%d iterations)\n", n, t[0] * 1e9,
			       t[it / 2] * 1e9, it);
	}
	free(t);
	free(buf);
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: fi_test sizes|match|errors|all|table|bench DIR\n");
		return 2;
	}
	const char *c = argv[1];
	int all = !strcmp(c, "all");
	if (!all && strcmp(c, "sizes") && strcmp(c, "match") && strcmp(c, "errors") && strcmp(c, "table") &&
	    strcmp(c, "bench")) {
		fprintf(stderr, "fi_test: unknown case %s\n", c);
		return 2;
	}
	rank = env_int("PARANIC_RANK", 0);
	nranks = env_int("PARANIC_NODES", 1) * env_int("PARANIC_PPN", 1);
	setup(argv[2], !strcmp(c, "table") ? FI_AV_TABLE : FI_AV_MAP);
	if (all || !strcmp(c, "match") || !strcmp(c, "table"))
		case_match();
	if (all || !strcmp(c, "sizes"))
		case_sizes();
	if (all || !strcmp(c, "errors"))
		case_errors();
	if (!strcmp(c, "bench"))
		case_bench();
	teardown();
	if (!fails)
		printf("ok fi_test %s rank %d of %d\n", c, rank, nranks);
	return fails ? 1 : 0;
}
