/* registry.c — the model kinds deqbench knows: one line each, pointing at
 * the struct model_def that the kind's own file defines. Entry i is kind i
 * (enum model_kind, model.h): the three named there keep their places, and
 * a kind appended here needs no enumerator. model.c reads names, checks,
 * parameter tables and the block from these entries only. Adding a model:
 * docs/ARCHITECTURE.md §Adding a model / method / backend. */
#include "model_impl.h"

extern const struct model_def model_transformer;
extern const struct model_def model_tanh_cell;
extern const struct model_def model_trellisnet;

const struct model_def *const model_registry[] = {
    [MODEL_TRANSFORMER] = &model_transformer,
    [MODEL_TANH_CELL] = &model_tanh_cell,
    [MODEL_TRELLISNET] = &model_trellisnet,
};

const int model_registry_len =
    (int)(sizeof(model_registry) / sizeof(model_registry[0]));
