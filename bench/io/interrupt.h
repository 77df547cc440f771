/* interrupt.h — clean interruption by SIGINT or SIGTERM (docs/commands.md, Exit
 * status): the first signal only sets a flag that the training loop and the
 * evaluation read after each step or batch, so the run ends after the
 * current step and its record says `interrupted` with the statistics so
 * far; a second signal of either kind ends the process at once (the default
 * action). A suite's parent process reads the same flag between runs and
 * stops there.
 *
 * The handlers are installed without SA_RESTART, so the first signal also
 * ends a call that blocks (waiting for a lock on out=, a read of a pipe):
 * it fails with EINTR, and the code that retries such calls stops there
 * (fileio_append) or goes on where the call is only a wait for a child
 * that is itself being interrupted (a suite's parent reading its run's
 * record). */
#ifndef DQ_BENCH_INTERRUPT_H
#define DQ_BENCH_INTERRUPT_H

/* Installs the handlers for SIGINT and SIGTERM (sigaction, without
 * SA_RESTART). A forked child inherits them and its own copy of the flag. */
void interrupt_install(void);

/* The first signal received (SIGINT or SIGTERM), or 0. */
int interrupt_signal(void);

/* "SIGINT" or "SIGTERM" for interrupt_signal()'s signal (messages). */
const char *interrupt_name(void);

/* Exit status of a process ended by interruption: 128 + the signal
 * (130 for SIGINT, 143 for SIGTERM), as a shell reports a process killed by
 * it. */
int interrupt_exit_status(void);

#endif
