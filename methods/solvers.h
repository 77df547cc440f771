/* solvers.h — private to methods/: fixed-point solvers for x = F(x) on
 * backend vectors of n elements, shared by the DEQ forward solve
 * (F(z) = f(z; u), Bai, Kolter, Koltun 2019 §3.1.1) and the IFT backward
 * solve (F(y) = y J_f(z*) + ḡ: the linear system of §3.1.3, eq. (11),
 * whose solution Theorem 1 of §3.1.2 needs).
 *
 * Every solve starts from x₀ = 0, counts every evaluation of F (the first,
 * at x₀, included) against max_iter and checks the residual after each
 * evaluation:
 *   abs: r(x) = ‖F(x) − x‖₂            rel: r(x) = ‖F(x) − x‖₂ / ‖F(x)‖₂
 *
 * Samples. The vector is S independent problems (the batch: F acts on each
 * sample alone, so its Jacobian is block-diagonal). Sample s's elements are
 * P contiguous segments of len = n / (S P), segment p at (p S + s) len
 * (P = model state_parts). With S > 1 (solver_batching=per_sample, as the
 * locuslab DEQ code and torchdeq) Broyden and Anderson keep one estimate
 * per sample; S = 1 (global) is one estimate for the whole batch, the
 * same arithmetic as before per-sample solvers existed. Each sample keeps
 * its own lowest-residual iterate; the returned iterate is made of them.
 * Its whole-batch residual is exact, since each sample's residual depends
 * on that sample alone: r_abs = √(Σ_s ‖g_s‖²), r_rel = r_abs / √(Σ_s ‖F_s‖²).
 *
 * Stop: scope batch (the paper's rule) when that composite residual is
 * <= tol; scope sample when every sample's own residual is <= tol
 * (finished samples are frozen: their iterate no longer moves). Also after
 * max_iter evaluations, at the first non-finite residual (reported in
 * solve_stats.nonfinite; the returned iterate is then the best finite one,
 * or x₀ when there is none), and at the DEQ code's breaks when enabled:
 * protect (the current iterate's batch residual > protect × the first)
 * and stall (the last `stall` batch residuals within a factor 1.3).
 *
 * Solvers:
 *   fixed_point  x ← F(x).
 *   broyden      good Broyden on g(x) = F(x) − x with an inverse-Jacobian
 *                estimate B = −I + Σᵢ uᵢ vᵢᵀ per sample (Bai et al. 2019
 *                §3.1.3; Broyden 1965): Δx = −B g, x ← x + Δx (unit step,
 *                no line search), then the rank-1 update
 *                  v = Bᵀ Δx,  u = (Δx − B Δg) / (vᵀ Δg).
 *                At most `history` pairs are kept; when full, the oldest
 *                pair is dropped before the new one is formed (limited
 *                memory Broyden; torchdeq's LBFGS_thres keeps it in the
 *                sum, a minor difference). A sample whose denominator is
 *                0 or not finite gets a zero pair (no update) in the slot;
 *                when every sample's is, the update is skipped.
 *   anderson     Anderson acceleration, type II (Anderson 1965; Walker &
 *                Ni 2011) over the last m iterates, per sample: with
 *                G = [F(xᵢ) − xᵢ], α = argmin ‖G α‖² + λ‖α‖² s.t. Σα = 1
 *                (the bordered (m+1)² system on the host, in double),
 *                then x ← Σ αᵢ xᵢ + β Σ αᵢ Gᵢ.
 *
 * Where it runs (kernels/solve_ctl.h): every number the decisions need
 * stays on the device. After each evaluation the backend's dot_segments
 * puts the per-segment ‖g‖² and ‖F‖² into a control block in device
 * memory, solve_check makes the stop test, the per-sample bests, the trace
 * and the breaks there, and copy_masked moves the improved samples into the
 * best iterate. Broyden's denominators (scale_recip) and Anderson's
 * bordered solves (anderson_weights) are device ops too. The host issues
 * the iterations blindly and reads the decision (8 bytes) every sync_every
 * evaluations; once per solve it reads the head and the trace. A solve of
 * k evaluations thus makes at most ⌈k / sync_every⌉ + 1 host reads
 * (the read after the max_iter-th evaluation is skipped), where a
 * per-iteration
 * read of norms made two or three per evaluation. With sync_every > 1 up
 * to sync_every − 1 evaluations may run after the device stopped; the
 * device ignores them (the result, iters and the trace are those of a
 * sync_every = 1 solve) and solve_stats.evals counts them.
 *
 * Since the host cannot see Broyden's denominators, a sample whose vᵀ Δg
 * is 0 or not finite gets a zero pair in its slot, and the slot counts as
 * used even when every sample's is (before, that update was skipped).
 *
 * Memory (all MEM_SOLVER, allocated once by solver_create and shared by
 * every solve of the method), S samples, P segments each, elements of the
 * backend type:
 *   fixed_point  4 n                          (x, F(x), g, best)
 *   broyden      6 n + 2 h n + S h            (x, g, F(x), Δx, Δg, best;
 *                                               U, Vᵀ; coefficients)
 *   anderson     3 n + 2 m n + S m            (x_next, F(x), best; X, G;
 *                                               coefficients)
 * rounded up to 8 bytes, then the control block in doubles:
 *   16 + 256 + 1 + W + 3 S P + 5 S [+ S m² + S ((m+1)² + m+1)]
 * (head, trace, first residual and a ring of the last W = max(1, stall);
 * per-segment dots; per-sample bests and flags; for Anderson only, the
 * Gram matrices and bordered systems): flat in max_iter. Fused solves
 * (fused = 1) add 8 + S q + 2 S doubles (the ring's counters, each
 * sample's dots and coefficients) and S P ⌈len / 4096⌉ q (the chunk
 * partials), q = 4 + 3h for a fused Broyden of history h, 2 + m for a
 * fused Anderson, the larger of the two when the sets have both.
 *
 * Fused Broyden and Anderson (fused = 1, kernels/solve_fused.h,
 * solvers_fused.c): the same algorithms as two passes per evaluation (a
 * reduction forming every dot product, then one element-wise pass for the
 * pair and the step, or the mix), the ring's counters on the device, so
 * that every iteration is the same ops: a host loop that polls as above,
 * or with graphs one WHILE loop recorded once. Iterates agree with the
 * ops path's to rounding (the sums' order).
 */
#ifndef DQ_SOLVERS_H
#define DQ_SOLVERS_H

#include <stddef.h>

#include "../kernels/backend.h"
#include "solver_types.h"

/* out = F(in); out never aliases in. key: the pointers apply reads
 * besides ctx's fixed buffers (deq: u, or ḡ), NULL where unused; a
 * recorded solve (solver_graphs) is replayed only for the same apply,
 * ctx and key. */
struct fp_map {
	void (*apply)(void *ctx, void *out, const void *in);
	void *ctx;
	const void *key[2];
};

/* Recorded solves a solver keeps (solver_graphs): a forward and a
 * backward parameter set, and room for an evaluation's. */
#define SOLVER_GRAPHS 4

struct solver_params {
	enum solver_kind kind;
	double tol;   /* > 0 */
	int max_iter; /* >= 1: evaluations of F, x₀'s included */
	enum stop_mode stop;
	int history;	/* broyden: pairs kept, >= 1 */
	int anderson_m; /* >= 1 */
	double lambda;	/* anderson regularisation, >= 0 */
	double beta;	/* anderson mixing, > 0 */
	int samples;	/* S >= 1, dividing n / parts */
	int parts;	/* P >= 1: segments per sample */
	enum stop_scope scope;
	double protect; /* 0 = off, else >= 1 */
	int stall;	/* 0 = off, else >= 2 */
	int sync_every; /* evaluations between host reads of the stop
			 * decision; 0 means 1 */
	int fused;	/* broyden, anderson: 1 = kernels/solve_fused.h's two
		    * passes an evaluation (history, anderson_m <=
		    * DQ_FUSED_MAX_H), 0 = the ops */
};

struct solver;

/* Bytes solver_create allocates for p[0..np) on vectors of n elements of
 * elem bytes (formulas above); SIZE_MAX when the vectors would pass 2^62
 * elements. */
size_t solver_mem_bytes(const struct solver_params *p, int np, size_t n,
			size_t elem);

/* Elements one solve with p needs on vectors of n elements (formulas
 * above); SIZE_MAX when that would pass 2^62 (never wraps). */
size_t solver_elems(const struct solver_params *p, size_t n);

/* Allocates (MEM_SOLVER) a solver able to run every parameter set in
 * p[0..np) on vectors of n elements: the buffer is the largest of their
 * needs. Every set must have the same samples and parts, and n must be a
 * multiple of samples × parts. Returns 0, or -1 with one line in err when
 * out of memory or when the sample layout does not fit n. */
int solver_create(struct solver **out, struct backend *be, size_t n,
		  const struct solver_params *p, int np, char *err,
		  size_t errlen);
void solver_destroy(struct solver *s);

/* Solves of s as device-side loops (on = 1) where the backend has graphs
 * (be_has_graphs: cuda): the first solve with a given parameter set and
 * map is recorded, every evaluation up to max_iter a segment that runs
 * only while the device's stop decision says go (graph_loop_next), and
 * replayed by later ones. Such a solve reads the host once (the head and
 * trace at its end), never runs an evaluation after the device stopped,
 * and gives a sync_every = 1 solve's result, iterations and trace;
 * solve_stats.evals is then its iterations. sync_every does not apply.
 * Returns whether graphs are now on. */
int solver_graphs(struct solver *s, int on);

/* Solves x = F(x) from x₀ = 0 with p (which must fit what the solver was
 * created for). Fills st (iters and evals as described above; solver, tol
 * and stop from p); appends the residual after each evaluation to
 * trace[*trace_len...] up to METHOD_TRACE_MAX (trace may be NULL); adds the
 * host reads made to *host_reads. Returns the lowest-residual iterate,
 * which lives in the solver's memory until the next solve. */
const void *solver_solve(struct solver *s, const struct solver_params *p,
			 const struct fp_map *F, struct solve_stats *st,
			 double *trace, int *trace_len, long *host_reads);

#endif
