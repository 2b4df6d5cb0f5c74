/* SPDX-License-Identifier: BSD-2-Clause */
/*
 * paranicd's wire formats, parsed (daemon_proto.h): the daemon's side (requests on its
 * socket, HELLOs over the NIC) and the client's (replies). Pure functions, used by
 * userlib/daemon/ and daemon.c, fuzzed by tests/fuzz/fuzz_daemon.c.
 */
#include <errno.h>
#include <string.h>

#include "daemon_proto.h"
#include "paranic/pn_hal.h"

long pnd_take_request(const void *buf, size_t len, size_t cap, struct pnd_frame *f, const void **payload)
{
	if (len < sizeof(*f))
		return 0;
	memcpy(f, buf, sizeof(*f));
	if (f->magic != PND_MAGIC || f->version != PND_PROTO_VERSION || cap < sizeof(*f) || f->len > cap - sizeof(*f))
		return -EPROTO;
	if (len < sizeof(*f) + f->len)
		return 0;
	*payload = (const uint8_t *)buf + sizeof(*f);
	return (long)(sizeof(*f) + f->len);
}

int pnd_check_request(const struct pnd_frame *f, const void *payload)
{
	switch (f->type) {
	case PND_ATTACH:
		return f->len == sizeof(struct pnd_attach) ? 0 : -EPROTO;
	case PND_JOB_START:
		return f->len == sizeof(pn_daemon_job_t) ? 0 : -EPROTO;
	case PND_JOB_END:
		return f->len == PN_DAEMON_NAME_MAX && memchr(payload, 0, f->len) ? 0 : -EPROTO;
	case PND_DETACH:
	case PND_STATUS:
	case PND_PROCS:
	case PND_JOBS:
		return 0;
	default:
		return -ENOSYS;
	}
}

int pnd_check_reply(const struct pnd_frame *f, uint16_t type)
{
	if (f->magic != PND_MAGIC || f->version != PND_PROTO_VERSION || f->type != type || f->len > PND_MAX_PAYLOAD)
		return -EPROTO;
	if (f->status > 0 || f->status < -4095)
		return -EPROTO;
	return 0;
}

int pnd_check_records(const struct pnd_frame *f, size_t head, size_t rec)
{
	if (f->len < head)
		return -EPROTO;
	if (!rec)
		return f->len == head && !f->count ? 0 : -EPROTO;
	return (f->len - head) % rec == 0 && (f->len - head) / rec == f->count ? 0 : -EPROTO;
}

#define TERM(field) ((field)[sizeof(field) - 1] = 0)

void pnd_terminate_reply(uint16_t type, void *buf, size_t n, uint32_t count)
{
	uint8_t *p = buf;
	size_t rec, head = 0;

	if (!buf)
		return;
	switch (type) {
	case PND_STATUS: {
		pn_daemon_info_t *info = buf;
		if (n < sizeof(*info))
			return;
		TERM(info->cluster);
		TERM(info->backend);
		TERM(info->host);
		head = sizeof(*info);
		rec = sizeof(pn_daemon_node_t);
		break;
	}
	case PND_PROCS:
		rec = sizeof(pn_daemon_proc_t);
		break;
	case PND_JOBS:
		rec = sizeof(pn_daemon_job_t);
		break;
	default:
		return;
	}
	for (uint32_t i = 0; i < count && head + (size_t)(i + 1) * rec <= n; i++) {
		void *r = p + head + (size_t)i * rec;
		if (type == PND_STATUS) {
			TERM(((pn_daemon_node_t *)r)->host);
		} else if (type == PND_PROCS) {
			TERM(((pn_daemon_proc_t *)r)->job);
		} else {
			TERM(((pn_daemon_job_t *)r)->id);
			TERM(((pn_daemon_job_t *)r)->command);
		}
	}
}

int pnd_parse_hello(const struct pn_header *hd, const void *pl, int nodes, int daemon_ctx, struct pnd_hello *out)
{
	if (hd->tag != PND_TAG_HELLO || hd->src_ctx != daemon_ctx || nodes < 0 || hd->src_node >= nodes ||
	    hd->length != sizeof(*out) || !pl)
		return -1;
	memcpy(out, pl, sizeof(*out));
	if (out->magic != PND_HELLO_MAGIC)
		return -1;
	TERM(out->host);
	return 0;
}
