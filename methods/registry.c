/* registry.c — the methods deqbench knows, one line each, in the order of
 * `deqbench run --help` and of the `method` key's indices. Adding a
 * method: docs/ARCHITECTURE.md §Adding a method. */
#include "method_impl.h"

extern const struct method_desc method_unroll, method_checkpoint, method_deq,
    method_revolve, method_offload, method_managed, method_selective;

const struct method_desc *const method_registry[] = {
    &method_unroll,  &method_checkpoint, &method_deq,	    &method_revolve,
    &method_offload, &method_managed,	 &method_selective, NULL,
};
