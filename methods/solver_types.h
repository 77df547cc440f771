/* solver_types.h — the choices a fixed-point solve takes (solvers.h):
 * which solver, how its residual is measured, where its stop rule looks;
 * with their key names. No dependencies, so option structs (deq.h) can
 * use them. */
#ifndef DQ_SOLVER_TYPES_H
#define DQ_SOLVER_TYPES_H

enum solver_kind { SOLVER_BROYDEN, SOLVER_ANDERSON, SOLVER_FIXED_POINT };
enum stop_mode { STOP_ABS, STOP_REL };
/* Where a solve's stopping rule looks: the residual over the whole batch
 * (the paper's rule), or every sample's own (finished samples frozen). */
enum stop_scope { SCOPE_BATCH, SCOPE_SAMPLE };

/* Parsers for the solver enum keys (-1 when unknown) and their names ("?"
 * out of range). */
int solver_kind_parse(const char *s);
int stop_mode_parse(const char *s);
int stop_scope_parse(const char *s);
const char *solver_kind_name(int k);
const char *stop_mode_name(int s);
const char *stop_scope_name(int s);

#endif
