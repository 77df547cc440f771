/* block_units.c — see block_units.h. */
#include "block_units.h"

#include <stdint.h>
#include <stdlib.h>

void block_fill_host(double *x, size_t n)
{
	uint64_t s = 12345;
	for (size_t i = 0; i < n; i++) {
		s = s * 6364136223846793005ull + 1442695040888963407ull;
		x[i] = (double)(s >> 11) * 0x1.0p-53 - 0.5;
	}
}

int block_bufs_alloc(struct backend *be, struct model *m, struct block_bufs *b)
{
	double *host;
	b->nd = m->n_state;
	b->z = backend_alloc(be, b->nd, MEM_DEPTH);
	b->zo = backend_alloc(be, b->nd, MEM_DEPTH);
	b->g = backend_alloc(be, b->nd, MEM_DEPTH);
	b->gi = backend_alloc(be, b->nd, MEM_DEPTH);
	b->tape = backend_alloc_bytes(be, model_tape_bytes(m), MEM_DEPTH);
	host = malloc(sizeof(double) * (b->nd + 1));
	if (!b->z || !b->zo || !b->g || !b->gi || !b->tape || !host) {
		free(host);
		return -1;
	}
	block_fill_host(host, b->nd + 1);
	be_upload(be, b->z, host, b->nd);
	be_upload(be, b->g, host + 1, b->nd);
	free(host);
	model_inject_forward(m); /* u from token 0 rows: any values do */
	block_unit_run(m, b, BLOCK_FWD_TAPED);
	be_sync(be);
	return 0;
}

void block_bufs_free(struct backend *be, struct block_bufs *b)
{
	void *dev[] = {b->z, b->zo, b->g, b->gi, b->tape};
	for (size_t i = 0; i < sizeof(dev) / sizeof(dev[0]); i++)
		backend_free(be, dev[i]);
	b->z = b->zo = b->g = b->gi = b->tape = NULL;
}

void block_unit_run(struct model *m, struct block_bufs *b, enum block_unit u)
{
	switch (u) {
	case BLOCK_FWD_TAPED:
		model_block_forward(m, b->zo, b->z, m->u, b->tape);
		break;
	case BLOCK_FWD:
		model_block_forward(m, b->zo, b->z, m->u, NULL);
		break;
	case BLOCK_VJP:
		model_block_vjp(m, b->gi, m->gu, b->g, b->tape, 1);
		break;
	case BLOCK_VJP_INPUT:
		model_block_vjp(m, b->gi, NULL, b->g, b->tape, 0);
		break;
	}
}
