/* revolve.h — the options of method=revolve (revolve.c). */
#ifndef DQ_REVOLVE_H
#define DQ_REVOLVE_H

struct method_config;

struct revolve_config {
	int slots; /* checkpoint slots s; 0 = auto: max(1, round(log2 L)) */
};

/* revolve's options in c (its registry slot). Never NULL. */
struct revolve_config *revolve_config(const struct method_config *c);
/* The registry index of revolve. */
int revolve_kind(void);

#endif
