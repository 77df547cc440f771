/* managed.h — the options of method=managed (managed.c). */
#ifndef DQ_MANAGED_H
#define DQ_MANAGED_H

struct method_config;

struct managed_config {
	int prefetch; /* 1: the backward prefetches the next tape it reads */
};

/* managed's options in c (its registry slot). Never NULL. */
struct managed_config *managed_config(const struct method_config *c);

#endif
