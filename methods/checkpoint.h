/* checkpoint.h — the options of method=checkpoint (checkpoint.c). */
#ifndef DQ_CHECKPOINT_H
#define DQ_CHECKPOINT_H

struct method_config;

struct checkpoint_config {
	int k; /* checkpoint interval; 0 = auto: round(sqrt(layers)) */
	/* 1: every segment keeps selective tapes (model.h §Selective tapes;
	 * method=selective's), so a segment's tape peak leaves out its
	 * attention probabilities and each VJP recomputes them */
	int selective;
};

/* checkpoint's options in c (its registry slot). Never NULL. */
struct checkpoint_config *checkpoint_config(const struct method_config *c);
/* The registry index of checkpoint. */
int checkpoint_kind(void);

#endif
