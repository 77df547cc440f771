/* checkpoint.h — the options of method=checkpoint (checkpoint.c). */
#ifndef DQ_CHECKPOINT_H
#define DQ_CHECKPOINT_H

struct method_config;

struct checkpoint_config {
	int k; /* checkpoint interval; 0 = auto: round(sqrt(layers)) */
};

/* checkpoint's options in c (its registry slot). Never NULL. */
struct checkpoint_config *checkpoint_config(const struct method_config *c);
/* The registry index of checkpoint. */
int checkpoint_kind(void);

#endif
