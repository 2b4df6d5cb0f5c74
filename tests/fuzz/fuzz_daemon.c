/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * paranicd's frames (daemon_proto.c): the daemon's side (pnd_take_request and
 * pnd_check_request over a byte stream, buffered as paranicd_clients.c buffers it; a
 * HELLO over the NIC, pnd_parse_hello) and the client's (pnd_check_reply,
 * pnd_check_records and pnd_terminate_reply on a reply, as daemon.c reads it).
 *
 * Input: [mode][bytes ...]. mode 0: a request stream; 1..3: a reply to STATUS, PROCS,
 * JOBS (frame, then payload); 4: a HELLO (src node, src ctx, tag selector, payload).
 */
#include "fuzz.h"
#include "daemon_proto.h"
#include "paranic/pn_hal.h"

/* The daemon's connection buffer (struct client.in in paranicd.h). */
#define IN_CAP (sizeof(struct pnd_frame) + sizeof(pn_daemon_job_t))

static void requests(const uint8_t *d, size_t n)
{
	uint8_t in[IN_CAP];
	size_t in_len = 0;
	while (n || in_len) {
		size_t k = IN_CAP - in_len < n ? IN_CAP - in_len : n;
		struct pnd_frame f;
		const void *pl = NULL;
		long got;
		memcpy(in + in_len, d, k);   /* as recv() fills it */
		in_len += k;
		d += k;
		n -= k;
		got = pnd_take_request(in, in_len, sizeof(in), &f, &pl);
		if (got < 0)
			return;   /* the daemon drops the connection */
		if (got == 0) {
			if (!k)
				return;   /* incomplete and nothing more comes */
			continue;
		}
		FUZZ_ASSERT((size_t)got == sizeof(f) + f.len && (size_t)got <= in_len);
		FUZZ_ASSERT((const uint8_t *)pl == in + sizeof(f));
		if (pnd_check_request(&f, pl) == 0) {
			if (f.type == PND_ATTACH)
				FUZZ_ASSERT(f.len == sizeof(struct pnd_attach));
			if (f.type == PND_JOB_START)
				FUZZ_ASSERT(f.len == sizeof(pn_daemon_job_t));
			if (f.type == PND_JOB_END)
				FUZZ_ASSERT(strlen(pl) < f.len);
		}
		memmove(in, in + got, in_len - (size_t)got);
		in_len -= (size_t)got;
	}
}

static void reply(unsigned mode, const uint8_t *d, size_t n)
{
	static const uint16_t types[] = {PND_STATUS, PND_PROCS, PND_JOBS};
	static const size_t heads[] = {sizeof(pn_daemon_info_t), 0, 0};
	static const size_t recs[] = {sizeof(pn_daemon_node_t), sizeof(pn_daemon_proc_t), sizeof(pn_daemon_job_t)};
	uint16_t type = types[mode - 1];
	struct pnd_frame f;
	uint8_t *buf;
	size_t keep;

	if (n < sizeof(f))
		return;
	memcpy(&f, d, sizeof(f));
	d += sizeof(f);
	n -= sizeof(f);
	if (pnd_check_reply(&f, type) < 0 || f.status < 0 || pnd_check_records(&f, heads[mode - 1], recs[mode - 1]) < 0)
		return;
	FUZZ_ASSERT(f.len >= heads[mode - 1] && f.len - heads[mode - 1] == (size_t)f.count * recs[mode - 1]);
	keep = f.len < n ? f.len : n;   /* what arrived of it (the caller's buffer may be smaller) */
	buf = fuzz_dup(d, keep);
	pnd_terminate_reply(type, buf, keep, f.count);
	if (mode == 1 && keep >= sizeof(pn_daemon_info_t)) {
		pn_daemon_info_t *info = (void *)buf;
		FUZZ_ASSERT(strlen(info->cluster) < sizeof(info->cluster) && strlen(info->host) < sizeof(info->host) &&
			    strlen(info->backend) < sizeof(info->backend));
	}
	for (size_t i = 0; heads[mode - 1] + (i + 1) * recs[mode - 1] <= keep; i++) {
		void *r = buf + heads[mode - 1] + i * recs[mode - 1];
		if (mode == 1)
			FUZZ_ASSERT(strlen(((pn_daemon_node_t *)r)->host) < PN_DAEMON_NAME_MAX);
		else if (mode == 2)
			FUZZ_ASSERT(strlen(((pn_daemon_proc_t *)r)->job) < PN_DAEMON_NAME_MAX);
		else
			FUZZ_ASSERT(strlen(((pn_daemon_job_t *)r)->id) < PN_DAEMON_NAME_MAX &&
				    strlen(((pn_daemon_job_t *)r)->command) < PN_DAEMON_CMD_MAX);
	}
	free(buf);
}

static void hello(const uint8_t *d, size_t n)
{
	pn_header_t hd;
	struct pnd_hello w;
	uint8_t *pl;
	memset(&hd, 0, sizeof(hd));
	hd.src_node = (uint16_t)fuzz_take(&d, &n, 2);
	hd.src_ctx = (uint8_t)fuzz_take(&d, &n, 1);
	hd.tag = fuzz_take(&d, &n, 1) & 1 ? PND_TAG_HELLO : fuzz_take(&d, &n, 8);
	hd.length = (uint32_t)n;
	pl = fuzz_dup(d, n);
	if (pnd_parse_hello(&hd, pl, 8, 15, &w) == 0) {
		FUZZ_ASSERT(hd.src_node < 8 && hd.src_ctx == 15 && n == sizeof(w) && w.magic == PND_HELLO_MAGIC);
		FUZZ_ASSERT(strlen(w.host) < sizeof(w.host));
	}
	free(pl);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	const uint8_t *d = data;
	size_t n = size;
	unsigned mode = (unsigned)fuzz_take(&d, &n, 1) % 5;
	if (mode == 0)
		requests(d, n);
	else if (mode <= 3)
		reply(mode, d, n);
	else
		hello(d, n);
	return 0;
}
